//! The one PRTT responder: `pattern::prtt::serve` on a link until a
//! [`ServePolicy`] says stop. Every responder of the project runs it: the
//! daemon's standing UDP and raw responders and its verbs sessions,
//! `ngctl serve`, and the MPI ranks that answer rank 0.
//!
//! The policy is looked at when the link has been silent for
//! [`ServePolicy::poll`] and when a burst has been answered (or a session
//! ended), never per message: a burst's messages are received back to
//! back. The flags it reads are atomics; its `watch`, which may make
//! system calls, only after silence.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::pattern::prtt::{self, ServeStats};
use crate::transport::{Transport, TransportError};

/// When a responder stops.
pub struct ServePolicy<'a> {
    /// The longest receive wait between two looks at the policy.
    pub poll: Duration,
    /// Stop once this is set (the daemon's shutdown).
    pub stop: Option<&'a AtomicBool>,
    /// Serve while the gate holds this nonce (the session granted on the
    /// control plane): ended by `ProbeDone`, its TTL or a newer session.
    pub gate: Option<(&'a AtomicU64, u64)>,
    /// Stop when the peer ends its session (else wait for the next one).
    pub until_session_end: bool,
    /// Stop after this long without a message.
    pub idle_exit: Option<Duration>,
    /// A further condition, looked at after silence only (it may make
    /// system calls): true stops.
    pub watch: Option<&'a mut dyn FnMut() -> bool>,
}

impl<'a> ServePolicy<'a> {
    /// Poll every `poll`, stop on nothing.
    pub fn new(poll: Duration) -> Self {
        ServePolicy {
            poll,
            stop: None,
            gate: None,
            until_session_end: false,
            idle_exit: None,
            watch: None,
        }
    }
}

/// Why a responder stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Shutdown,
    /// The gate no longer holds the session's nonce.
    GateClosed,
    /// The peer ended its session.
    SessionEnded,
    /// No message for the policy's `idle_exit`.
    Idle,
    /// The policy's `watch` said stop.
    Watched,
}

impl Ended {
    pub fn describe(self) -> &'static str {
        match self {
            Ended::Shutdown => "shutdown",
            Ended::GateClosed => "done",
            Ended::SessionEnded => "the peer ended the session",
            Ended::Idle => "quiet (driver gone?)",
            Ended::Watched => "stopped by its watch",
        }
    }
}

/// What a responder did and why it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub stats: ServeStats,
    pub ended: Ended,
}

/// Answer PRTT bursts on `link` until `policy` says stop.
pub fn serve<T: Transport>(
    link: &mut T,
    mut policy: ServePolicy<'_>,
) -> Result<Served, TransportError> {
    let poll = policy.poll.max(Duration::from_millis(1));
    let idle_limit = policy
        .idle_exit
        .map(|d| d.as_nanos().div_ceil(poll.as_nanos()).max(1));
    let mut seen = ServeStats::default();
    let mut silences = 0u128;
    let mut ended = None;
    let stats = prtt::serve(link, poll, |st| {
        let silence = st.timeouts != seen.timeouts;
        let answered = st.answers != seen.answers || st.send_failures != seen.send_failures;
        let session_end = st.sessions_ended != seen.sessions_ended;
        if st.messages != seen.messages {
            silences = 0;
        }
        seen = *st;
        if !(silence || answered || session_end) {
            return true;
        }
        let why = if session_end && policy.until_session_end {
            Some(Ended::SessionEnded)
        } else if policy.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            Some(Ended::Shutdown)
        } else if policy
            .gate
            .is_some_and(|(g, nonce)| g.load(Ordering::Relaxed) != nonce)
        {
            Some(Ended::GateClosed)
        } else if silence {
            silences += 1;
            if idle_limit.is_some_and(|l| silences >= l) {
                Some(Ended::Idle)
            } else if policy.watch.as_mut().is_some_and(|w| w()) {
                Some(Ended::Watched)
            } else {
                None
            }
        } else {
            None
        };
        ended = why;
        why.is_none()
    })?;
    Ok(Served {
        stats,
        ended: ended.unwrap_or(Ended::Shutdown),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Caps, Counters, Meta, PeerId, Received};
    use std::collections::VecDeque;

    /// A scripted link: each receive takes the next event.
    struct Script {
        events: VecDeque<Option<Result<Meta, ()>>>,
        sent: usize,
        /// Sends that fail (a full queue past its deadline) before the
        /// next one goes through.
        fail_sends: usize,
    }

    impl Transport for Script {
        fn caps(&self) -> Caps {
            Caps {
                max_msg_bytes: 64,
                one_sided: false,
                has_recv_overhead: true,
                peers: 1,
            }
        }
        fn send(&mut self, _: PeerId, _: usize, _: Meta) -> Result<(), TransportError> {
            if self.fail_sends > 0 {
                self.fail_sends -= 1;
                return Err(TransportError::Timeout(Duration::from_secs(1)));
            }
            self.sent += 1;
            Ok(())
        }
        fn recv(&mut self, _: Option<PeerId>, t: Duration) -> Result<Received, TransportError> {
            match self.events.pop_front() {
                Some(Some(Ok(meta))) => Ok(Received {
                    peer: 0,
                    bytes: 8,
                    meta,
                    overhead_ns: 10.0,
                }),
                Some(Some(Err(()))) => Err(TransportError::PeerGone("bye".into())),
                _ => Err(TransportError::Timeout(t)),
            }
        }
        fn counters(&self) -> Counters {
            Counters::default()
        }
    }

    /// Polls every `poll` ms; ends after `idle` ms without a message.
    fn idle_exit_ms(poll: u64, idle: u64) -> ServePolicy<'static> {
        let mut p = ServePolicy::new(Duration::from_millis(poll));
        p.idle_exit = Some(Duration::from_millis(idle));
        p
    }

    fn script(events: &[Option<Result<bool, ()>>]) -> Script {
        Script {
            events: events
                .iter()
                .map(|e| {
                    e.map(|r| {
                        r.map(|answer| Meta {
                            answer,
                            report_ns: 0,
                        })
                    })
                })
                .collect(),
            sent: 0,
            fail_sends: 0,
        }
    }

    const MSG: Option<Result<bool, ()>> = Some(Ok(false));
    const ASK: Option<Result<bool, ()>> = Some(Ok(true));
    const QUIET: Option<Result<bool, ()>> = None;
    const GONE: Option<Result<bool, ()>> = Some(Err(()));

    #[test]
    fn a_failed_answer_loses_its_burst_and_the_responder_serves_on() {
        let mut l = script(&[ASK, ASK, ASK, QUIET]);
        l.fail_sends = 1;
        let s = serve(&mut l, idle_exit_ms(1, 1)).unwrap();
        assert_eq!(s.ended, Ended::Idle);
        assert_eq!(
            (s.stats.messages, s.stats.answers, s.stats.send_failures),
            (3, 2, 1)
        );
        assert_eq!(l.sent, 2);
    }

    #[test]
    fn idle_exit_counts_silence_since_the_last_message() {
        let mut l = script(&[QUIET, MSG, ASK, QUIET, QUIET, MSG, QUIET, QUIET, QUIET]);
        let s = serve(&mut l, idle_exit_ms(100, 250)).unwrap();
        assert_eq!(s.ended, Ended::Idle);
        // Three silences after the last message, and nothing left over.
        assert_eq!(
            (s.stats.messages, s.stats.answers, s.stats.timeouts),
            (3, 1, 6)
        );
        assert!(l.events.is_empty());
        assert_eq!(l.sent, 1);
    }

    #[test]
    fn a_session_end_stops_only_when_asked() {
        let mut l = script(&[ASK, GONE, ASK, QUIET]);
        let mut p = ServePolicy::new(Duration::from_millis(1));
        p.until_session_end = true;
        let s = serve(&mut l, p).unwrap();
        assert_eq!(
            (s.ended, s.stats.sessions_ended, l.events.len()),
            (Ended::SessionEnded, 1, 2)
        );
        let mut l = script(&[ASK, GONE, ASK, QUIET]);
        let s = serve(&mut l, idle_exit_ms(1, 1)).unwrap();
        assert_eq!((s.ended, s.stats.answers), (Ended::Idle, 2));
    }

    #[test]
    fn flags_are_read_after_bursts_and_the_watch_after_silence_only() {
        let stop = AtomicBool::new(true);
        // The stop flag is seen at the first answered burst, not before.
        let mut l = script(&[MSG, MSG, ASK, MSG]);
        let mut p = ServePolicy::new(Duration::from_millis(1));
        p.stop = Some(&stop);
        let s = serve(&mut l, p).unwrap();
        assert_eq!(
            (s.ended, s.stats.messages, l.events.len()),
            (Ended::Shutdown, 3, 1)
        );
        // A gate that no longer holds the nonce.
        let gate = AtomicU64::new(5);
        let mut l = script(&[ASK, QUIET]);
        let mut p = ServePolicy::new(Duration::from_millis(1));
        p.gate = Some((&gate, 4));
        assert_eq!(serve(&mut l, p).unwrap().ended, Ended::GateClosed);
        // The watch: never at a burst, at the first silence.
        let mut looked = 0;
        let mut watch = || {
            looked += 1;
            true
        };
        let mut l = script(&[ASK, ASK, QUIET, ASK]);
        let mut p = ServePolicy::new(Duration::from_millis(1));
        p.watch = Some(&mut watch);
        let s = serve(&mut l, p).unwrap();
        assert_eq!((s.ended, s.stats.answers), (Ended::Watched, 2));
        assert_eq!(looked, 1);
    }
}
