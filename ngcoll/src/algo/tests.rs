//! Every algorithm on 1–9 ranks (threads over `fake`), against the
//! sequential result: odd sizes, roots other than 0, sizes that leave blocks
//! empty, one-byte and zero-byte messages.

use super::*;
use crate::fake::{self, Fake, BAND, BYTE, F64, I32, MAX, SUM};

fn cx(m: &Fake) -> Cx<'_, Fake> {
    Cx {
        m,
        comm: 7,
        rank: m.rank,
        size: m.size,
        polite: false,
    }
}

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 31 + seed * 7 + 3) % 251) as u8)
        .collect()
}

#[test]
fn broadcasts_deliver_the_roots_bytes() {
    type Bcast = unsafe fn(&Cx<Fake>, *mut u8, usize, usize) -> Result<(), MpiError>;
    let algs: [(&str, Bcast); 3] = [
        ("binomial", bcast::binomial::<Fake>),
        ("scatter_ring", |cx, b, n, r| unsafe {
            bcast::scatter_allgather(cx, b, n, r, false)
        }),
        ("scatter_rd", |cx, b, n, r| unsafe {
            bcast::scatter_allgather(cx, b, n, r, true)
        }),
    ];
    for p in 1..=9usize {
        for n in [0usize, 1, 5, 64, 1000, 4099] {
            for root in [0, p - 1, p / 2] {
                for (name, f) in algs {
                    let out = fake::run(p, move |m| {
                        let mut buf = if m.rank == root {
                            pattern(n, 1)
                        } else {
                            vec![0u8; n]
                        };
                        // SAFETY: buf holds n bytes.
                        unsafe { f(&cx(m), buf.as_mut_ptr(), n, root) }.unwrap();
                        buf
                    });
                    for (r, b) in out.iter().enumerate() {
                        assert_eq!(*b, pattern(n, 1), "{name} p={p} n={n} root={root} rank {r}");
                    }
                }
                for seg in [0usize, 1, 7, 64, n.max(1)] {
                    let out = fake::run(p, move |m| {
                        let mut buf = if m.rank == root {
                            pattern(n, 2)
                        } else {
                            vec![0u8; n]
                        };
                        // SAFETY: buf holds n bytes.
                        unsafe { bcast::chain(&cx(m), buf.as_mut_ptr(), n, root, seg) }.unwrap();
                        buf
                    });
                    for (r, b) in out.iter().enumerate() {
                        assert_eq!(
                            *b,
                            pattern(n, 2),
                            "chain seg {seg} p={p} n={n} root={root} rank {r}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_chain_without_a_segment_size_sends_the_message_whole() {
    use std::sync::atomic::Ordering;
    // Segment 0 (a forced chain with no size given): one message per link,
    // not one per byte.
    for (seg, per_link) in [(0usize, 1usize), (250, 4)] {
        let sends = fake::run(4, move |m| {
            let mut buf = if m.rank == 1 {
                pattern(1000, 3)
            } else {
                vec![0u8; 1000]
            };
            // SAFETY: buf holds 1000 bytes.
            unsafe { bcast::chain(&cx(m), buf.as_mut_ptr(), 1000, 1, seg) }.unwrap();
            assert_eq!(buf, pattern(1000, 3));
            m.sends.load(Ordering::Relaxed)
        });
        // The chain 1 → 2 → 3 → 0: every rank but the last (0) forwards.
        assert_eq!(
            sends,
            vec![0, per_link, per_link, per_link],
            "segment {seg}"
        );
    }
}

fn ints(count: usize, rank: usize) -> Vec<i32> {
    (0..count)
        .map(|i| ((i * 7919 + rank * 104_729) % 65_521) as i32 - 30_000)
        .collect()
}

fn reference(p: usize, count: usize, op: Raw) -> Vec<i32> {
    let mut acc = ints(count, 0);
    for r in 1..p {
        for (a, b) in acc.iter_mut().zip(ints(count, r)) {
            *a = match op {
                SUM => a.wrapping_add(b),
                MAX => (*a).max(b),
                _ => *a & b,
            };
        }
    }
    acc
}

fn elems(v: &mut [i32]) -> Elems {
    Elems {
        base: v.as_mut_ptr() as *mut u8,
        extent: 4,
        dt: I32,
    }
}

/// Operands over two vectors of ints of one length.
fn operands(acc: &mut [i32], tmp: &mut [i32], op: Raw) -> Operands {
    Operands {
        count: acc.len(),
        dense_bytes: Some(acc.len() * 4),
        either_order: true,
        acc: elems(acc),
        tmp: elems(tmp),
        op,
    }
}

#[test]
fn reductions_to_a_root_combine_everything_once() {
    type Reduce = unsafe fn(&Cx<Fake>, Operands, usize) -> Result<(), MpiError>;
    // The binomial tree reads its contribution from a separate buffer (the
    // entry point's send buffer) and never copies it first.
    unsafe fn binomial(cx: &Cx<Fake>, v: Operands, root: usize) -> Result<(), MpiError> {
        // SAFETY: acc holds count ints (the caller's).
        let own: Vec<u8> = unsafe { std::slice::from_raw_parts(v.acc.base, v.count * 4) }.to_vec();
        // SAFETY: own holds count ints; acc and tmp count ints each.
        unsafe { reduce::binomial(cx, own.as_ptr(), false, v, root) }
    }
    let algs: [(&str, Reduce); 2] = [
        ("binomial", binomial),
        ("rabenseifner", reduce::rabenseifner::<Fake>),
    ];
    for p in 1..=9usize {
        for count in [1usize, 3, 17, 1000] {
            for op in [SUM, MAX, BAND] {
                for root in [0, p - 1, p / 2] {
                    for (name, f) in algs {
                        let out = fake::run(p, move |m| {
                            let mut acc = ints(count, m.rank);
                            let mut tmp = vec![0i32; count];
                            // SAFETY: both hold count ints.
                            unsafe { f(&cx(m), operands(&mut acc, &mut tmp, op), root) }.unwrap();
                            acc
                        });
                        assert_eq!(
                            out[root],
                            reference(p, count, op),
                            "{name} p={p} count={count} op={op} root={root}"
                        );
                    }
                }
            }
        }
    }
}

/// The linear allreduce with the span of its vector (elements without
/// holes).
unsafe fn linear_allreduce(cx: &Cx<Fake>, v: Operands) -> Result<(), MpiError> {
    // SAFETY: forwarded; the elements are contiguous.
    unsafe { allreduce::linear(cx, v, v.count * v.acc.extent) }
}

type Allreduce = unsafe fn(&Cx<Fake>, Operands) -> Result<(), MpiError>;

/// Every allreduce of ours, by name.
const ALLREDUCES: [(&str, Allreduce); 4] = [
    ("recursive_doubling", allreduce::recursive_doubling::<Fake>),
    ("rabenseifner", allreduce::rabenseifner::<Fake>),
    ("ring", allreduce::ring::<Fake>),
    ("linear", linear_allreduce),
];

#[test]
fn allreductions_give_every_rank_the_same_result() {
    let algs = ALLREDUCES;
    for p in 1..=9usize {
        for count in [1usize, 3, 17, 1000] {
            for op in [SUM, MAX, BAND] {
                for (name, f) in algs {
                    let out = fake::run(p, move |m| {
                        let mut acc = ints(count, m.rank);
                        let mut tmp = vec![0i32; p * count];
                        // SAFETY: acc holds count ints, tmp p·count.
                        unsafe { f(&cx(m), operands(&mut acc, &mut tmp, op)) }.unwrap();
                        acc
                    });
                    let want = reference(p, count, op);
                    for (r, got) in out.iter().enumerate() {
                        assert_eq!(*got, want, "{name} p={p} count={count} op={op} rank {r}");
                    }
                }
            }
        }
    }
}

#[test]
fn floating_point_allreduce_is_bitwise_equal_on_every_rank() {
    // Values whose sums round: the result may depend on the order of
    // combining, but every rank must end with the same bits.
    let algs = ALLREDUCES;
    // MAX of a NaN and a number, or of −0 and +0, depends on the order of
    // its operands (as Open MPI's does): partners must combine in one order.
    let value = |op: crate::mpi::Raw, i: usize, r: usize| match (op, (i + r) % 7, (i * 3 + r) % 5) {
        (MAX, 0, _) => f64::NAN,
        (MAX, _, 0) => {
            if r % 2 == 0 {
                -0.0
            } else {
                0.0
            }
        }
        _ => 0.1 * (i + 1) as f64 / (r + 3) as f64,
    };
    for (p, op) in (2..=9usize).flat_map(|p| [(p, SUM), (p, MAX)]) {
        for (name, f) in algs {
            let count = 101;
            let out = fake::run(p, move |m| {
                let mut acc: Vec<f64> = (0..count).map(|i| value(op, i, m.rank)).collect();
                let mut tmp = vec![0f64; p * count];
                let e = |v: &mut [f64]| Elems {
                    base: v.as_mut_ptr() as *mut u8,
                    extent: 8,
                    dt: F64,
                };
                // SAFETY: acc holds count doubles, tmp p·count.
                // Results moved by a plain copy (dense) on even sizes, by
                // the datatype on odd ones.
                let v = Operands {
                    acc: e(&mut acc),
                    tmp: e(&mut tmp),
                    count,
                    op,
                    dense_bytes: (p % 2 == 0).then_some(count * 8),
                    either_order: false,
                };
                unsafe { f(&cx(m), v) }.unwrap();
                acc.iter().map(|x| x.to_bits()).collect::<Vec<u64>>()
            });
            for r in 1..p {
                assert_eq!(
                    out[r], out[0],
                    "{name} p={p} op {op}: rank {r} differs from rank 0"
                );
            }
        }
    }
}

#[test]
fn allgathers_collect_every_block() {
    for p in 1..=9usize {
        for c in [1usize, 13, 100] {
            for name in ["ring", "recursive_doubling", "linear"] {
                let out = fake::run(p, move |m| {
                    let mut buf = vec![0u8; p * c];
                    buf[m.rank * c..(m.rank + 1) * c].copy_from_slice(&pattern(c, m.rank));
                    let (cx, at) = (cx(m), buf.as_mut_ptr());
                    // SAFETY: buf holds p·c bytes.
                    unsafe {
                        match name {
                            "linear" => allgather::linear(&cx, at, c),
                            _ => allgather::allgather(&cx, at, c, name == "recursive_doubling"),
                        }
                    }
                    .unwrap();
                    buf
                });
                let want: Vec<u8> = (0..p).flat_map(|r| pattern(c, r)).collect();
                for (r, got) in out.iter().enumerate() {
                    assert_eq!(*got, want, "{name} p={p} c={c} rank {r}");
                }
            }
        }
    }
}

#[test]
fn alltoalls_transpose_the_blocks() {
    for p in 1..=9usize {
        for c in [1usize, 13, 100] {
            for (name, linear) in [("pairwise", false), ("linear", true)] {
                let out = fake::run(p, move |m| {
                    // Block j of rank r: pattern(c, r * 16 + j).
                    let send: Vec<u8> = (0..p).flat_map(|j| pattern(c, m.rank * 16 + j)).collect();
                    let mut recv = vec![0u8; p * c];
                    // SAFETY: both hold p·c bytes.
                    unsafe {
                        alltoall::alltoall(&cx(m), send.as_ptr(), recv.as_mut_ptr(), c, linear)
                    }
                    .unwrap();
                    recv
                });
                for (r, got) in out.iter().enumerate() {
                    let want: Vec<u8> = (0..p).flat_map(|i| pattern(c, i * 16 + r)).collect();
                    assert_eq!(*got, want, "{name} p={p} c={c} rank {r}");
                }
            }
        }
    }
}

#[test]
fn barriers_complete() {
    for p in 1..=9usize {
        fake::run(p, |m| barrier::dissemination(&cx(m)).unwrap());
        fake::run(p, |m| barrier::tree(&cx(m)).unwrap());
    }
    let _ = BYTE;
}
