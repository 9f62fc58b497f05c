//! MPI_Init's parts: the environment set before PMPI_Init (`before_init`)
//! and the process's start after it (`init`): settings, segment, placement
//! and the votes every rank takes part in.

use super::*;

/// Whether the MPI running is the one this build was made for; the reason
/// if not.
fn same_abi<M: Mpi + ?Sized>(m: &M) -> Result<(), String> {
    let version = m.library_version();
    let ok = match m.abi_name() {
        "openmpi" => version.contains("Open MPI"),
        "mpich" => version.contains("MPICH"),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "built for {} but running on {:?}",
        m.abi_name(),
        version.lines().next().unwrap_or("")
    ))
}

/// Opens the segment and checks it is fresh; the reason if not.
fn open_segment(cfg: &Config) -> Result<Reader, String> {
    let mut r = match &cfg.shm {
        Some(p) => Reader::open(p).map_err(|e| format!("segment {}: {e}", p.display()))?,
        None => Reader::open_default()
            .map_err(|e| format!("segment {}: {e}", netgauge::DEFAULT_PATH))?,
    };
    if let Some(ns) = cfg.stale_after_ns {
        r.set_stale_after_ns(ns);
    }
    let limit = cfg
        .stale_after_ns
        .unwrap_or(netgauge::DEFAULT_STALE_AFTER_NS);
    if limit > 0 {
        match r.heartbeat_age_ns() {
            None => return Err("the segment's writer has shut down (stale)".into()),
            Some(age) if age > limit => {
                return Err(format!(
                    "the segment is stale (last heartbeat {:.1} s ago)",
                    age as f64 / 1e9
                ))
            }
            _ => {}
        }
    }
    Ok(r)
}

/// The environment variable that turns Open MPI's coll/tuned dynamic rules
/// on, which a communicator's forced algorithm needs.
const OMPI_DYNAMIC_RULES: &str = "OMPI_MCA_coll_tuned_use_dynamic_rules";

/// MPI_Init's part before PMPI_Init (C and Fortran): under Open MPI,
/// where libngcoll may run the library's other algorithms (on, and
/// `NETGAUGE_COLL_LIBRARY_ALGS` not 0), turns coll/tuned's dynamic rules on
/// through the environment, which Open MPI reads in MPI_Init, unless the
/// program sets any coll/tuned parameter (in its environment, or in an MCA
/// parameter file: named by the environment, or the user's or the
/// system's default one, which the environment would override). Without a rules
/// file and a forced algorithm those rules decide as the fixed ones do, so
/// the library's own choice is unchanged (`init` checks that none is
/// forced); a duplicate made with an algorithm forced runs that one
/// (`Mpi::comm_dup_forced`). The variable is set before MPI exists, while
/// the program is normally still single-threaded. (An MCA parameter file
/// that turns the dynamic rules off is overridden by it; one that forces
/// an algorithm turns the alternatives off in `init`.)
pub fn before_init<M: Mpi + ?Sized>(m: &M) {
    if m.abi_name() != "openmpi" || RUNTIME.get().is_some() {
        return;
    }
    let Ok(cfg) = Config::from_env() else { return };
    if cfg.mode == Mode::Off || !cfg.library_algs {
        return;
    }
    // Any coll/tuned setting of the program's (a forced algorithm, a rules
    // file, the dynamic rules either way) is left alone: with the dynamic
    // rules on, a forced algorithm of its own would change the library's
    // own choice.
    let tuned = std::env::vars_os().any(|(k, _)| {
        k.to_str().is_some_and(|k| {
            k.starts_with("OMPI_MCA_coll_tuned_")
                || k == "OMPI_MCA_mca_base_param_files"
                || k == "OMPI_MCA_mca_base_envar_file_prefix"
        })
    });
    if !tuned && !param_files_name_tuned() {
        std::env::set_var(OMPI_DYNAMIC_RULES, "1");
    }
}

/// Whether Open MPI's default MCA parameter files (the user's and Debian's
/// system one) set any coll/tuned parameter: the environment would take
/// precedence over them, and turning the dynamic rules on would bring a
/// rules file or a forced algorithm of theirs into effect.
fn param_files_name_tuned() -> bool {
    let mut files = vec![std::path::PathBuf::from(
        "/etc/openmpi/openmpi-mca-params.conf",
    )];
    if let Some(home) = std::env::var_os("HOME") {
        files.push(std::path::Path::new(&home).join(".openmpi/mca-params.conf"));
    }
    files.iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines()
                .map(str::trim)
                .any(|l| !l.starts_with('#') && l.contains("coll_tuned_"))
        })
    })
}

/// MPI_Init's part (after PMPI_Init succeeded). Never fails: any problem
/// leaves libngcoll off, with one line on stderr.
pub fn init<M: Mpi + ?Sized>(m: &M) {
    if RUNTIME.get().is_some() {
        return;
    }
    // A rejected setting does not turn this rank off on its own: the other
    // ranks, whose settings may be good, are about to wait for it in the
    // set-up's collectives below, and would then run our algorithms against
    // its library calls. It takes part and votes every rank off.
    let (cfg, bad_setting) = match Config::from_env() {
        Ok(c) => (c, None),
        Err(e) => (Config::default(), Some(e.to_string())),
    };
    let lib = if m.abi_name() == "mpich" {
        Library::Mpich40
    } else {
        Library::OpenMpi41
    };
    let mut rt = Runtime {
        cfg,
        enabled: false,
        keyval: 0,
        reader: None,
        hosts: Vec::new(),
        world_node: Vec::new(),
        my_node: 0,
        cores: online_cores(),
        ranks_here: 1,
        polite: false,
        lib,
        library_algs: false,
        spin_slice_ns: 0.0,
        gamma: OnceLock::new(),
        fresh: OnceLock::new(),
        plans: Mutex::new(Vec::new()),
        comms: Mutex::new(Vec::new()),
        next_comm: AtomicU64::new(0),
    };
    // An off rank takes part in the set-up's collectives too (the others,
    // if on, wait for it there) and votes every rank off, silently; a call
    // of its own then touches nothing but the on/off flag.
    let off = rt.cfg.mode == Mode::Off && bad_setting.is_none();
    // The keyval is created here, before the vote (it is local): a rank
    // that cannot create it votes failure instead of staying off alone.
    let local = if let Some(why) = &bad_setting {
        Err(why.clone())
    } else if off {
        Err(String::new())
    } else {
        same_abi(m)
            .and_then(|()| open_segment(&rt.cfg))
            .and_then(|r| {
                let k = m
                    .keyval_create(release_state)
                    .map_err(|e| format!("cannot create the attribute keyval ({e})"))?;
                Ok((r, k))
            })
    };
    // Host names of every world rank (collective: every rank takes part).
    let world = m.comm_world();
    let (Ok(p), Ok(me)) = (m.comm_size(world), m.comm_rank(world)) else {
        let _ = RUNTIME.set(rt);
        return;
    };
    // Each rank's host name, then a digest of the setting that decides on
    // its own which algorithm a call runs (NETGAUGE_COLL_FORCE): ranks that
    // differ there would run different algorithms in one call.
    let mut mine = [0u8; GATHER_BYTES];
    let host = hostname();
    let hb = host.as_bytes();
    mine[..hb.len().min(HOST_BYTES)].copy_from_slice(&hb[..hb.len().min(HOST_BYTES)]);
    mine[HOST_BYTES..].copy_from_slice(&force_digest(&rt.cfg.force).to_le_bytes());
    let mut all = vec![0u8; GATHER_BYTES * p];
    let gathered = m.allgather_bytes(&mine, &mut all, world).is_ok();
    let same_force = all
        .chunks_exact(GATHER_BYTES)
        .all(|c| c[HOST_BYTES..] == mine[HOST_BYTES..]);
    // One vote per rank, the least wins: a rejected setting votes its rank
    // number (the lowest such rank reports it), NETGAUGE_COLL=off `p`,
    // NETGAUGE_COLL_FORCE unlike another rank's `p + 1`, any other failure
    // `p + 2`, ready `p + 3`. A failed vote counts as a failure.
    let p_i32 = i32::try_from(p).unwrap_or(i32::MAX - 3);
    let (vote_off, vote_unlike, vote_failed, vote_ready) = (p_i32, p_i32 + 1, p_i32 + 2, p_i32 + 3);
    let vote = match (&bad_setting, local.is_ok() && gathered) {
        (Some(_), _) => i32::try_from(me).unwrap_or(0),
        (None, _) if off => vote_off,
        (None, false) => vote_failed,
        (None, true) if !same_force => vote_unlike,
        (None, true) => vote_ready,
    };
    let least = m.allreduce_min(vote, world).unwrap_or(vote_failed);
    let agree = least == vote_ready;
    // The library's other algorithms, where every rank can run them (a
    // second vote, taken by every rank whatever the first: each rank's
    // library checks its own settings). Not with several threads in MPI:
    // forcing one writes a process-wide control variable around a
    // duplicate, which another thread's duplicate could catch.
    let can_alt =
        rt.cfg.library_algs && local.is_ok() && !m.thread_multiple() && m.library_algorithms();
    let every_rank_can_alt = m.allreduce_min(i32::from(can_alt), world).ok() == Some(1);
    rt.library_algs = agree && every_rank_can_alt;
    // MPI_T was held (`Mpi::library_algorithms`) for the duplicates only.
    if !rt.library_algs {
        m.release_tools();
    }
    let bad_setting_somewhere = least < vote_off;
    if gathered {
        for r in 0..p {
            let raw = &all[r * GATHER_BYTES..r * GATHER_BYTES + HOST_BYTES];
            let n = raw.iter().position(|&b| b == 0).unwrap_or(HOST_BYTES);
            let name = String::from_utf8_lossy(&raw[..n]).into_owned();
            let idx = match rt.hosts.iter().position(|h| *h == name) {
                Some(i) => i,
                None => {
                    rt.hosts.push(name);
                    rt.hosts.len() - 1
                }
            };
            rt.world_node.push(idx as u32);
        }
        rt.my_node = rt.world_node[me];
        rt.ranks_here = rt.world_node.iter().filter(|&&n| n == rt.my_node).count();
    }
    let first_here = rt.world_node.iter().position(|&n| n == rt.my_node) == Some(me);
    match (&bad_setting, &local, agree) {
        (Some(why), _, _) if usize::try_from(least) == Ok(me) => warn(&format!(
            "rank {me}: {why}; collectives pass through on every rank"
        )),
        _ if bad_setting_somewhere || off => {}
        _ if least == vote_off && me == 0 => {
            warn("NETGAUGE_COLL=off on some ranks; collectives pass through on every rank")
        }
        _ if least == vote_off => {}
        _ if least == vote_unlike && me == 0 => warn(
            "NETGAUGE_COLL_FORCE differs between ranks; collectives pass through on every rank",
        ),
        _ if least == vote_unlike => {}
        (_, Err(why), _) if first_here => warn(&format!("{why}; collectives pass through")),
        (_, Ok(_), false) if me == 0 => {
            warn("another rank cannot use its segment; collectives pass through")
        }
        _ => {}
    }
    if let Ok((reader, keyval)) = local {
        rt.reader = Some(reader);
        rt.keyval = keyval;
        rt.enabled = agree;
    }
    // Open MPI's own waits give the core away when it runs oversubscribed
    // (mpirun sets mpi_yield_when_idle), so PMPI_Waitall does; MPICH's
    // spin, and a spinning rank keeps the one it waits for off the core.
    // A poll-and-yield loop of our own is much slower than Open MPI's
    // (sched_yield after every poll): only where the library spins.
    rt.polite = rt
        .cfg
        .polite
        .unwrap_or(lib.spins() && rt.ranks_here > rt.cores);
    if lib.spins() {
        rt.spin_slice_ns = sched_slice_ns();
    }
    let on = rt.enabled;
    let gated = !m.thread_multiple() && rt.cfg.force != Force::Cycle;
    if RUNTIME.set(rt).is_ok() {
        gate::set(on, gated);
    }
}
