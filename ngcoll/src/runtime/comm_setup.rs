//! A communicator's set-up at its first intercepted collective: its
//! shadow, placement and plan (built by its rank 0, broadcast, agreed), and
//! the duplicates for the library's other algorithms.

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
        // Rank 0 plans, everyone takes its plan.
        let mut buf = vec![0u8; plan::PLAN_BYTES];
        let mut source = String::new();
        if rank == 0 {
            let (p, s) = plan_for(
                rt,
                size,
                node_of(0),
                (1..size).map(node_of).find(|&n| n != node_of(0)),
                here,
            );
            buf = p.encode();
            source = s;
        }
        let received = match m.bcast_bytes(&mut buf, 0, shadow) {
            Ok(()) => Plan::decode(&buf),
            Err(_) => None,
        };
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
                if !source.is_empty() {
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

/// The plan of a communicator of `size` ranks, `first` the node of its rank
/// 0 and `other` that of its first rank elsewhere (None: all on one node);
/// `here` of its ranks on this node. Built once per shape and cached.
fn plan_for(
    rt: &Runtime,
    size: usize,
    first: u32,
    other: Option<u32>,
    here: usize,
) -> (Arc<Plan>, String) {
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
            return (p.clone(), format!("{source} (cached plan)"));
        }
    }
    let (plan, source) = match build_plan(rt, size, one_node, &peer, cores) {
        Ok((p, s)) => (Arc::new(p), s),
        Err(why) => {
            warn(&format!(
                "no plan for {size} ranks ({why}); this communicator's collectives pass through"
            ));
            (Arc::new(Plan::library()), why)
        }
    };
    if let Ok(mut cache) = rt.plans.lock() {
        cache.push((key, plan.clone(), source.clone()));
    }
    (plan, source)
}

fn build_plan(
    rt: &Runtime,
    size: usize,
    one_node: bool,
    peer: &str,
    cores: usize,
) -> Result<(Plan, String), String> {
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
    let record = reader.transport_ext(&entry.transport).ok();
    let net = Measured {
        pair: &pair,
        exchange: &exchange,
        exchange_ranks: size,
        contention: record.as_ref(),
    };
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
    let plan = plan::build(&net, &setup).map_err(|e| format!("the model failed: {e}"))?;
    let what = if exchange.is_empty() {
        ""
    } else {
        " and its all-ranks exchange"
    };
    Ok((plan, format!("{peer}/{}{what}", entry.transport)))
}
