//! A communicator's set-up at its first intercepted collective: its
//! shadow, placement and plan (offered by its rank 0, decided in shares by
//! every rank, agreed), and the duplicates for the library's other
//! algorithms.

use super::*;

pub(super) fn setup<M: Mpi + ?Sized>(
    m: &M,
    rt: &'static Runtime,
    comm: Raw,
) -> Option<Arc<CommState>> {
    let id = rt.next_comm.fetch_add(1, Ordering::Relaxed);
    let size = m.comm_size(comm).ok()?;
    let rank = m.comm_rank(comm).ok()?;
    let mut wr = vec![0i32; size];
    let inter = m.comm_is_inter(comm).ok()?;
    let placed = !inter && m.world_ranks(comm, &mut wr).is_ok();
    // A rank of another job (a communicator merged with a spawned or
    // connected job): that job may run without libngcoll, and a collective
    // of ours against its library's own would never match. Every member
    // of ours sees the other job's ranks as foreign, so all pass through.
    let foreign = placed && wr.iter().any(|&w| w < 0);
    // Shadows take communicators (context ids: MPICH has 2048 a process)
    // from the program: past MAX_SHADOWS open on any of its ranks (agreed
    // in one allreduce on the communicator, whose ranks are all in this
    // collective), a communicator passes through, once and for all; so
    // does one whose duplicate the library refuses on any rank (a second
    // allreduce agrees).
    let shadow = if inter || size <= 1 || foreign {
        None
    } else {
        let room = i32::from(SHADOWS_OPEN.load(Ordering::Relaxed) < MAX_SHADOWS);
        match m.allreduce_min(room, comm) {
            Ok(1) => {
                let dup = m.comm_dup(comm).ok();
                // A duplicate made on some ranks only (a failure local to
                // one, as of memory) is let go on every rank: all pass
                // through alike.
                agreed(m, dup, dup.is_some(), comm)
            }
            _ => None,
        }
    };
    if shadow.is_some() {
        SHADOWS_OPEN.fetch_add(1, Ordering::Relaxed);
    }
    let st = if let Some(shadow) = shadow {
        let node_of = |r: usize| -> u32 {
            usize::try_from(wr[r])
                .ok()
                .and_then(|w| rt.world_node.get(w).copied())
                .unwrap_or(u32::MAX)
        };
        let mut nodes: Vec<u32> = (0..size).map(node_of).collect();
        let here = nodes.iter().filter(|&&n| n == rt.my_node).count();
        nodes.sort_unstable();
        nodes.dedup();
        let n_nodes = if placed { nodes.len() } else { 2 };
        // Rank 0 offers the plan (built before for this shape, or what to
        // build it from); every rank takes it, building its share.
        let offer = (rank == 0).then(|| {
            offer(
                rt,
                size,
                node_of(0),
                (1..size).map(node_of).find(|&n| n != node_of(0)),
                here,
            )
        });
        let Received {
            plan: received,
            mut source,
            built,
        } = receive_plan(m, shadow, rank, size, offer);
        // Whether the source says already why there is no plan.
        let mut why_none = false;
        if let Some(key) = built {
            let plan = match &received {
                Some(p) => Arc::new(p.clone()),
                None => {
                    warn_no_plan(size, "a rank could not decide its share");
                    source = "none: a rank could not decide its share of the plan".into();
                    why_none = true;
                    Arc::new(Plan::library())
                }
            };
            if let Ok(mut cache) = rt.plans.lock() {
                cache_plan(&mut cache, (key, plan, source.clone()));
            }
        }
        // Every rank must count a class's trial alike: the least of the
        // ranks' trial lengths (none under a forced choice), agreed by every
        // rank in one allreduce at set-up; a failure: no trials. The same
        // allreduce carries whether every rank has rank 0's plan (-1: one
        // has not): if not, every rank takes the library's.
        let mine = match (&received, &rt.cfg.force) {
            (None, _) => -1,
            (Some(_), Force::None) => rt.cfg.trial as i32,
            (Some(_), _) => 0,
        };
        let agreed = m.allreduce_min(mine, shadow).ok();
        let plan = match (received, agreed) {
            (Some(p), Some(c)) if c >= 0 => p,
            _ => {
                if !source.is_empty() && !why_none {
                    source = "none: a rank did not receive the plan (the library's own)".into();
                }
                Plan::library()
            }
        };
        let plan = library_algorithms(rt, size, plan);
        let alt_comms = plan
            .alts()
            .iter()
            .map(|_| AtomicUsize::new(ALT_NOT_MADE))
            .collect();
        let calls = agreed.map_or(0, |c| c.max(0) as usize);
        let trials = Trials::new(&plan, calls);
        CommState {
            id,
            size,
            rank,
            shadow: Some(shadow),
            closed: AtomicBool::new(false),
            freed: AtomicBool::new(false),
            polite: rt.polite,
            nodes: n_nodes,
            alt_comms,
            library: library_masks(&plan, &rt.cfg.force),
            plan: Arc::new(plan),
            source,
            scratch: Mutex::new(Vec::new()),
            calls: if rt.cfg.mode == Mode::Log {
                (0..COLLECTIVES * CLASSES)
                    .map(|_| AtomicU64::new(0))
                    .collect()
            } else {
                Vec::new()
            },
            trials,
            cycle: AtomicU64::new(0),
            log: rt.cfg.mode == Mode::Log,
            force: rt.cfg.force.clone(),
        }
    } else {
        CommState::passthrough(id, size, rank)
    };
    let st = Arc::new(st);
    if let Ok(mut list) = rt.comms.lock() {
        // Kept: states still logged, and shadows whose communicators were
        // freed past libngcoll (still open: `finalize` frees them).
        list.retain(|s| {
            !s.freed.load(Ordering::Relaxed) || s.log || (s.shadow.is_some() && !s.is_closed())
        });
        list.push(st.clone());
    }
    let raw = Arc::into_raw(st.clone());
    if m.attr_set(comm, rt.keyval, raw as *mut c_void).is_err() {
        // SAFETY: the attribute did not take it: release its reference.
        drop(unsafe { Arc::from_raw(raw) });
        return None;
    }
    Some(st)
}

/// A communicator's plan with the library's other algorithms that
/// `NETGAUGE_COLL_FORCE` names written into it, or without any where the
/// library takes no forced algorithm (their classes go to the library's
/// own choice). Their communicators are made at their first calls
/// ([`CommState::alt_comm`]).
fn library_algorithms(rt: &Runtime, size: usize, plan: Plan) -> Plan {
    let mut plan = plan;
    if let Force::Fixed(list) = &rt.cfg.force {
        let forced: Vec<Alt> = list
            .iter()
            .filter_map(|(coll, f)| match *f {
                Forced::LibraryAlg {
                    number,
                    faninout,
                    segsize,
                } => Some(Alt::forced(*coll, size, number, faninout, segsize)),
                _ => None,
            })
            .collect();
        plan.force_alts(&forced);
    }
    if rt.library_algs {
        plan
    } else {
        plan.without_alts()
    }
}

/// The duplicate of `shadow` with `alt` forced, if every rank made it
/// (one allreduce on the shadow agrees; a rank past [`MAX_ALTS_OPEN`]
/// takes part in the duplicate and votes no).
pub(super) fn make_alt<M: Mpi + ?Sized>(m: &M, shadow: Raw, alt: &Alt) -> Option<Raw> {
    let room = ALTS_OPEN.load(Ordering::Relaxed) < MAX_ALTS_OPEN;
    let (dup, forced) = m.comm_dup_forced(shadow, &alt.cvars());
    let ok = room && forced.is_ok() && dup.is_some_and(|d| d > ALT_FREED);
    let made = agreed(m, dup, ok, shadow);
    if made.is_some() {
        ALTS_OPEN.fetch_add(1, Ordering::Relaxed);
        ALTS_MADE.fetch_add(1, Ordering::Relaxed);
    }
    made
}

/// `dup`, a duplicate of `comm` (None: not made here), kept where every rank
/// says `ok` (one allreduce on `comm`); otherwise freed on every rank that
/// made it, and None.
fn agreed<M: Mpi + ?Sized>(m: &M, dup: Option<Raw>, ok: bool, comm: Raw) -> Option<Raw> {
    if m.allreduce_min(i32::from(ok), comm).ok() == Some(1) {
        return dup;
    }
    if let Some(d) = dup {
        let _ = m.comm_free(d);
    }
    None
}

/// How rank 0 offers a communicator its plan.
pub(super) enum Offer {
    /// Built before for the same shape (or none could be: the library's
    /// own), sent whole.
    Whole(Arc<Plan>, String),
    /// To be built by every rank from `inputs`, then cached under `key`.
    Shared {
        inputs: Box<Inputs>,
        key: PlanKey,
        source: String,
    },
}

/// The plan offered for a communicator of `size` ranks, `first` the node
/// of its rank 0 and `other` that of its first rank elsewhere (None: all
/// on one node); `here` of its ranks on this node. Built once per shape
/// and cached.
fn offer(rt: &Runtime, size: usize, first: u32, other: Option<u32>, here: usize) -> Offer {
    let one_node = other.is_none();
    let peer_node = other.unwrap_or(first);
    let peer = rt
        .hosts
        .get(peer_node as usize)
        .cloned()
        .unwrap_or_default();
    // Ranks sharing this node's cores: the communicator gets its share.
    let cores = if rt.ranks_here > rt.cores {
        ((rt.cores * here) / rt.ranks_here).max(1)
    } else {
        0
    };
    let key = PlanKey {
        ranks: size,
        one_node,
        peer: peer.clone(),
        cores,
    };
    if let Ok(cache) = rt.plans.lock() {
        if let Some((_, p, source)) = cache.iter().find(|(k, ..)| *k == key) {
            return Offer::Whole(p.clone(), format!("{source} (cached plan)"));
        }
    }
    match plan_inputs(rt, size, one_node, &peer, cores) {
        Ok((inputs, source)) => Offer::Shared {
            inputs: Box::new(inputs),
            key,
            source,
        },
        Err(why) => {
            warn_no_plan(size, &why);
            let plan = Arc::new(Plan::library());
            if let Ok(mut cache) = rt.plans.lock() {
                cache_plan(&mut cache, (key, plan.clone(), why.clone()));
            }
            Offer::Whole(plan, why)
        }
    }
}

/// The one warning a communicator shape gets when it has no plan.
fn warn_no_plan(size: usize, why: &str) {
    warn(&format!(
        "no plan for {size} ranks ({why}); this communicator's collectives pass through"
    ));
}

/// A plan as [`receive_plan`] took it.
pub(super) struct Received {
    /// None: this rank has no plan (every rank then takes the library's
    /// own, agreed in the allreduce that follows).
    pub plan: Option<Plan>,
    /// Where rank 0's plan came from (empty elsewhere).
    pub source: String,
    /// Rank 0, where the ranks built the plan: the key to cache it under.
    pub built: Option<PlanKey>,
}

/// The header rank 0 broadcasts: how the plan comes ([`WHOLE`] or
/// [`SHARED`]), the bytes that follow, and the bytes of each rank's share.
const HEAD_BYTES: usize = 9;
const WHOLE: u8 = 1;
const SHARED: u8 = 2;

/// Takes the plan rank 0 offers (`offer`, Some on rank 0 only) on `comm`:
/// a header, which every rank agrees it holds (one allreduce), then the
/// plan or its inputs in one broadcast; for inputs, every rank decides its
/// share ([`plan::share`]) and one allgather brings every rank every
/// share. Which calls follow the agreement depends on the header alone,
/// which every rank then holds alike: a rank whose body did not arrive or
/// does not decode still gathers, with a failed share that turns every
/// rank's plan to the library's own.
pub(super) fn receive_plan<M: Mpi + ?Sized>(
    m: &M,
    comm: Raw,
    rank: usize,
    size: usize,
    offer: Option<Offer>,
) -> Received {
    let mut head = [0u8; HEAD_BYTES];
    let mut body = Vec::new();
    let mut source = String::new();
    let mut built = None;
    match offer {
        Some(Offer::Whole(p, s)) => {
            head[0] = WHOLE;
            body = p.encode();
            source = s;
        }
        Some(Offer::Shared {
            inputs,
            key,
            source: s,
        }) => {
            let share = share::share_bytes(&inputs.setup, size);
            match (inputs.encode(), u32::try_from(share)) {
                (Some(b), Ok(n)) => {
                    head[0] = SHARED;
                    head[5..9].copy_from_slice(&n.to_le_bytes());
                    body = b;
                    source = format!("{s}, decided by {size} ranks");
                    built = Some(key);
                }
                _ => {
                    let why = "the plan's inputs do not fit a message";
                    warn_no_plan(size, why);
                    head[0] = WHOLE;
                    body = Plan::library().encode();
                    source = format!("none: {why}");
                }
            }
        }
        None => {}
    }
    let none = |source: String| Received {
        plan: None,
        source,
        built: None,
    };
    head[1..5].copy_from_slice(&(body.len() as u32).to_le_bytes());
    let got_head = m.bcast_bytes(&mut head, 0, comm).is_ok();
    if m.allreduce_min(i32::from(got_head), comm).ok() != Some(1) {
        return none(source);
    }
    let word = |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let (body_len, share_len) = (word(1) as usize, word(5) as usize);
    // Every rank holds the same header: they all go on, or none does.
    let body_max = share::MAX_INPUT_BYTES.max(plan::PLAN_BYTES as u64);
    let all_len = share_len.checked_mul(size);
    if body_len as u64 > body_max || share_len > share::MAX_SHARE_BYTES || all_len.is_none() {
        return none(source);
    }
    body.resize(body_len, 0);
    let got = m.bcast_bytes(&mut body, 0, comm).is_ok();
    let plan = match head[0] {
        WHOLE => got.then(|| Plan::decode(&body)).flatten(),
        SHARED => {
            let inputs = got
                .then(|| share::Inputs::decode(&body))
                .flatten()
                .filter(|i| i.setup.ranks == size && i.setup.max_bytes <= PLAN_MAX_BYTES);
            let mine = match &inputs {
                Some(i) => share::decide_share(&i.network(), &i.setup, rank, size),
                None => Vec::new(),
            };
            // A share of another length (inputs that are not the ones
            // rank 0 sized) counts as failed: zeros.
            let mine = if mine.len() == share_len {
                mine
            } else {
                vec![0; share_len]
            };
            let mut all = vec![0u8; all_len.unwrap_or(0)];
            let gathered = m.allgather_bytes(&mine, &mut all, comm).is_ok();
            inputs
                .filter(|_| gathered)
                .and_then(|i| share::assemble_shares(&i.setup, &all, size))
        }
        _ => None,
    };
    Received {
        plan,
        source,
        built,
    }
}

/// What rank 0 builds the plan of a communicator of `size` ranks from:
/// its segment's entry for `peer` (with the all-ranks exchange and the
/// contention record beside it) and this process's setup.
fn plan_inputs(
    rt: &Runtime,
    size: usize,
    one_node: bool,
    peer: &str,
    cores: usize,
) -> Result<(Inputs, String), String> {
    if size > rt.cfg.max_ranks {
        return Err(format!(
            "above NETGAUGE_COLL_MAX_RANKS, {}: a plan for it would keep its ranks waiting too long",
            rt.cfg.max_ranks
        ));
    }
    let reader = rt.reader.as_ref().ok_or("no segment")?;
    let entries: Vec<EntryData> = reader
        .snapshot()
        .map_err(|e| format!("cannot read the segment: {e}"))?;
    let usable = |e: &&EntryData| {
        e.peer == peer && e.flags & netgauge::flags::STALE == 0 && !e.ranges.is_empty()
    };
    let order: Vec<&str> = if one_node {
        vec![rt.cfg.transport.as_str()]
    } else {
        let mut v = vec![rt.cfg.transport.as_str()];
        v.extend(
            ["mpi", "rdma", "msg", "raw", "udp"]
                .iter()
                .filter(|t| **t != rt.cfg.transport),
        );
        v
    };
    let entry = order
        .iter()
        .find_map(|t| entries.iter().filter(usable).find(|e| e.transport == *t))
        .ok_or_else(|| {
            format!(
                "no entry for {peer} over {} in the segment",
                order.join("/")
            )
        })?;
    let pair = entry.params();
    let exchange = plan::exchange_ranges(&entries, entry, size);
    // The transport's contention penalties, if the segment has them.
    let contention = reader.transport_ext(&entry.transport).ok();
    let gamma = *rt.gamma.get_or_init(measure_gamma);
    let fresh = *rt
        .fresh
        .get_or_init(netgauge::select::measure_fresh_ns_per_byte);
    let setup = Setup {
        lib: rt.lib,
        ranks: size,
        one_node,
        view: ViewOptions {
            gamma_ns_per_byte: gamma,
            cores,
            spin_slice_ns: rt.spin_slice_ns,
            fresh_ns_per_byte: fresh,
            ours_run_by: None,
            path_ns: rt.cfg.path_ns.unwrap_or(if rt.ranks_here > rt.cores {
                crate::config::PATH_COLD_NS
            } else {
                crate::config::PATH_WARM_NS
            }),
        },
        margin: rt.cfg.margin,
        max_bytes: PLAN_MAX_BYTES,
        library_algorithms: rt.library_algs,
    };
    let what = if exchange.is_empty() {
        ""
    } else {
        " and its all-ranks exchange"
    };
    let source = format!("{peer}/{}{what}", entry.transport);
    let inputs = Inputs {
        setup,
        pair,
        exchange,
        contention,
    };
    Ok((inputs, source))
}
