use super::*;
use crate::types::Params;

fn send(to: usize) -> Op {
    Op::Send {
        to,
        bytes: 8,
        exchange: false,
    }
}

#[test]
fn peers_in_flight_count_the_posted_and_those_up_to_the_next_wait_once_each() {
    let p = 6;
    let mut st = Rank {
        sent_to: PeerSet::new(p),
        received_from: PeerSet::new(p),
        ..Rank::default()
    };
    let mut ahead = PeerSet::new(p);
    // Sends to 1 and 2 posted and not waited for (a chain's after its
    // receives were waited for), then sends to 3 and 1, a wait, a send
    // to 4 and a receive from 5.
    for to in [1, 2, 2] {
        st.sends.push((to, 0));
        st.sent_to.insert(to);
    }
    st.ops = vec![
        send(3),
        send(1),
        Op::Wait,
        send(4),
        Op::Recv { from: 5, bytes: 8 },
    ];
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 3, "1, 2, 3");
    assert_eq!(in_flight_peers(&mut st, &mut ahead, false), 1, "none: one");
    // Posting the send to 3 changes nothing: kept.
    st.sends.push((3, 0));
    st.sent_to.insert(3);
    st.pc = 1;
    assert_eq!(st.flows, [Some(3), Some(1)]);
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 3);
    // Past the wait: counted again from what is ahead.
    st.sends.clear();
    st.sent_to.clear();
    st.flows = [None, None];
    st.pc = 3;
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 1, "4");
    assert_eq!(in_flight_peers(&mut st, &mut ahead, false), 1, "5");
    assert_eq!(st.sent_to.len(), 0);
}

#[test]
fn a_peer_set_counts_each_rank_once() {
    let mut s = PeerSet::new(130);
    for r in [0, 64, 129, 64, 0] {
        s.insert(r);
    }
    assert_eq!(s.len(), 3);
    assert!(s.contains(129) && s.contains(64) && !s.contains(1));
    s.clear();
    assert_eq!(s.len(), 0);
    assert!(!s.contains(129));
}

/// Every bit a run returns.
fn bits(r: &Run) -> Vec<u64> {
    let mut v: Vec<u64> = r.finish.iter().flatten().map(|t| t.to_bits()).collect();
    v.extend(r.cpu_ns.iter().map(|t| t.to_bits()));
    v.extend(r.blocked.iter().map(|&b| u64::from(b)));
    v.push(r.lane_ns.to_bits());
    v
}

#[test]
fn a_run_gives_the_same_bits_whatever_the_thread_ran_before() {
    // With rendezvous from 16 KiB: its sends wait for their receives.
    let net = Params {
        S_bytes: 16384,
        ..crate::select::tests::net(1000.0, 400.0, 300.0, 0.3)
    };
    let back_to_back = Issue::BackToBack {
        calls: 4,
        rotate: true,
    };
    // Runs of different sizes: a larger one leaves pairs and messages
    // behind that a smaller one must not see.
    let cases = [
        (Schedule::AlltoallLinear, 9, 70_000),
        (Schedule::BcastChain { seg: 8192 }, 5, 1 << 20),
        (Schedule::AllreduceRing, 16, 4096),
        (Schedule::BarrierDissemination, 3, 0),
    ];
    let go = |&(sched, p, m): &(Schedule, usize, u64)| {
        bits(&run(&net, sched, p, m, Work::default(), back_to_back).unwrap())
    };
    let fresh: Vec<Vec<u64>> = cases
        .iter()
        .map(|c| {
            release_scratch();
            go(c)
        })
        .collect();
    for round in 0..2 {
        for (c, want) in cases.iter().zip(&fresh) {
            assert!(go(c) == *want, "{c:?} after other runs (round {round})");
        }
        for (c, want) in cases.iter().zip(&fresh).rev() {
            assert!(go(c) == *want, "{c:?} after other runs, reversed");
        }
    }
}
