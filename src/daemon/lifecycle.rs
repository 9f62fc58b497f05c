//! Stopping and staying alive: the daemon's shutdown, the liveness of its
//! threads (what the systemd watchdog reflects), and the signal thread.
//!
//! - [`Shutdown`]: a flag for the loops that look at one, and a channel
//!   that every sleeping thread selects on, closed by [`Shutdown::trigger`]:
//!   a SIGTERM wakes them at once instead of at their next timeout, so an
//!   idle daemon can sleep long and still stop fast.
//! - [`Liveness`]: a promise a thread keeps by checking in before a
//!   deadline it set itself (sleeping until the next job, or running one
//!   whose waits are all bounded); the publisher feeds the watchdog only
//!   while every promise is kept.
//! - [`spawn_signal_thread`]: SIGTERM and SIGINT trigger the shutdown; if
//!   the daemon has not exited [`EXIT_DEADLINE`] later (a thread stuck
//!   where nothing can wake it), the process exits anyway: a stop never
//!   takes longer than 2 s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

/// After a SIGTERM, the process exits by this time whatever its threads
/// are doing (the clean path takes a few milliseconds).
pub const EXIT_DEADLINE: Duration = Duration::from_millis(1800);

/// The daemon's shutdown: set once, seen by every thread.
#[derive(Debug)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
}

impl Shutdown {
    pub fn new() -> Arc<Shutdown> {
        let (tx, rx) = crossbeam_channel::bounded(0);
        Arc::new(Shutdown {
            flag: Arc::new(AtomicBool::new(false)),
            tx: Mutex::new(Some(tx)),
            rx,
        })
    }

    /// Stop: set the flag and wake every thread waiting on [`Self::wait`]
    /// or selecting on [`Self::receiver`].
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::Release);
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// The flag itself (for loops that take an `&AtomicBool`).
    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.flag
    }

    /// A channel that never carries a message and disconnects on
    /// [`Self::trigger`]: select on it to wake up for the shutdown.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.rx
    }

    /// Sleep for `d` or until the shutdown; true if shutting down.
    pub fn wait(&self, d: Duration) -> bool {
        if self.is_set() {
            return true;
        }
        let _ = self.rx.recv_timeout(d);
        self.is_set()
    }
}

/// A thread's promise to check in again before a deadline.
#[derive(Debug)]
pub struct Liveness {
    base: Instant,
    /// Milliseconds since `base` by which the thread checks in again.
    due_ms: AtomicU64,
}

impl Liveness {
    pub fn new() -> Liveness {
        Liveness {
            base: Instant::now(),
            due_ms: AtomicU64::new(u64::MAX),
        }
    }

    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis().min(u128::from(u64::MAX)) as u64
    }

    /// "I will check in again within `d`."
    pub fn promise(&self, d: Duration) {
        let d = d.as_millis().min(u128::from(u64::MAX / 2)) as u64;
        self.due_ms
            .store(self.now_ms().saturating_add(d), Ordering::Release);
    }

    /// Whether the last promise still holds.
    pub fn kept(&self) -> bool {
        self.now_ms() <= self.due_ms.load(Ordering::Acquire)
    }
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness::new()
    }
}

/// SIGTERM and SIGINT trigger `shutdown`; a thread then makes sure the
/// process is gone [`EXIT_DEADLINE`] later. The signal thread sleeps in
/// the kernel until a signal arrives: it costs nothing while idle.
pub fn spawn_signal_thread(shutdown: Arc<Shutdown>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("ng-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                tracing::info!("signal {sig}: stopping");
                shutdown.trigger();
                std::thread::sleep(EXIT_DEADLINE);
                tracing::error!(
                    "the daemon did not stop within {EXIT_DEADLINE:?} of the signal; exiting now"
                );
                std::process::exit(1);
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_wakes_every_waiter_at_once() {
        let s = Shutdown::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || s.wait(Duration::from_secs(3600)))
            })
            .collect();
        assert!(!s.wait(Duration::from_millis(1)));
        s.trigger();
        for w in waiters {
            assert!(w.join().unwrap(), "woken by the shutdown");
        }
        assert!(s.is_set() && s.wait(Duration::from_secs(3600)));
        assert!(s.receiver().recv().is_err(), "disconnected");
    }

    #[test]
    fn a_promise_holds_until_its_deadline() {
        let l = Liveness::new();
        assert!(l.kept(), "no promise yet: nothing to break");
        l.promise(Duration::from_secs(60));
        assert!(l.kept());
        l.promise(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!l.kept());
    }
}
