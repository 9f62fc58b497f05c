//! A responder for kinds whose sessions are set up one by one through a
//! TCP side channel (verbs: `ngctl serve --transport rdma|msg`): several
//! sessions at once (a fan-out's queue pairs) served by one thread, each
//! one ending when its client closes its side channel.

use std::net::TcpListener;
use std::time::Duration;

#[cfg(feature = "verbs")]
use super::responder::{serve, Ended, ServePolicy};
#[cfg(feature = "verbs")]
use super::{open_responder, Link};
use super::{LinkSpec, OpenError};
#[cfg(feature = "verbs")]
use crate::transport::multi::Multi;

/// What the session responder reports as it goes (the caller prints it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// A session with `who` is set up; `active` are served now.
    Started { who: String, active: usize },
    /// A client's session could not be set up (it is skipped).
    SetupFailed { who: Option<String>, error: String },
    /// The session with `who` ended.
    Ended { who: String },
    /// The sessions served since the last change answered this much.
    Round { messages: u64, answers: u64 },
    /// Serving failed; every session of the round is dropped.
    Failed { error: String },
    /// No client for the idle limit: the responder returns.
    Idle,
}

/// How often the sessions' silence is looked at.
const POLL: Duration = Duration::from_millis(500);

#[cfg(feature = "verbs")]
pub fn serve_sessions(
    spec: &LinkSpec,
    listener: &TcpListener,
    idle_exit: Option<Duration>,
    on: &mut dyn FnMut(SessionEvent),
) -> Result<(), OpenError> {
    use crate::verbs::exchange::{self, ExchangeError, SideChannel};

    let io_timeout = spec
        .options
        .verbs
        .exchange_timeout
        .unwrap_or(exchange::DEFAULT_TIMEOUT);
    let mut links: Vec<Link> = Vec::new();
    let mut sides: Vec<SideChannel> = Vec::new();
    loop {
        if links.is_empty() {
            match exchange::accept(listener, idle_exit, io_timeout) {
                Ok(side) => add_session(spec, side, &mut links, &mut sides, on)?,
                Err(ExchangeError::AcceptTimeout(_)) => {
                    on(SessionEvent::Idle);
                    return Ok(());
                }
                Err(e) => on(SessionEvent::SetupFailed {
                    who: None,
                    error: e.to_string(),
                }),
            }
            continue;
        }
        // Serve until a client leaves, a new one knocks, or all stay quiet
        // for the idle limit. One session is served directly, several
        // through `Multi`.
        let mut pending = None;
        let mut watch = || {
            if sides.iter().any(|s| s.peer_closed()) {
                return true;
            }
            if let Ok((stream, _)) = listener.accept() {
                pending = Some(stream);
                return true;
            }
            false
        };
        let mut policy = ServePolicy::new(POLL);
        policy.idle_exit = idle_exit;
        policy.watch = Some(&mut watch);
        let served = if links.len() == 1 {
            serve(&mut links[0], policy)
        } else {
            let mut m = Multi::new(std::mem::take(&mut links));
            let r = serve(&mut m, policy);
            links = m.into_inner();
            r
        };
        if let Err(e) = &served {
            on(SessionEvent::Failed {
                error: e.to_string(),
            });
        }
        // Drop the sessions whose client left (all of them after an error,
        // which names no one, or a quiet spell past the limit).
        let all = served.as_ref().map_or(true, |s| s.ended == Ended::Idle);
        let before = links.len();
        let mut k = 0;
        while k < sides.len() {
            if all || sides[k].peer_closed() {
                on(SessionEvent::Ended {
                    who: sides[k].peer().to_string(),
                });
                drop(links.remove(k));
                sides.remove(k);
            } else {
                k += 1;
            }
        }
        if let Ok(s) = served {
            if links.len() < before {
                on(SessionEvent::Round {
                    messages: s.stats.messages,
                    answers: s.stats.answers,
                });
            }
        }
        if let Some(stream) = pending {
            let side = stream
                .set_nonblocking(false)
                .map_err(|source| ExchangeError::Io {
                    peer: "a new client".into(),
                    source,
                })
                .and_then(|()| SideChannel::from_stream(stream, io_timeout));
            match side {
                Ok(side) => add_session(spec, side, &mut links, &mut sides, on)?,
                Err(e) => on(SessionEvent::SetupFailed {
                    who: None,
                    error: e.to_string(),
                }),
            }
        }
    }
}

/// Set up one session on an accepted side channel. A failed exchange (the
/// client gave up, sent garbage) is reported and skipped; a local failure
/// (device, memory) ends the responder.
#[cfg(feature = "verbs")]
fn add_session(
    spec: &LinkSpec,
    mut side: crate::verbs::exchange::SideChannel,
    links: &mut Vec<Link>,
    sides: &mut Vec<crate::verbs::exchange::SideChannel>,
    on: &mut dyn FnMut(SessionEvent),
) -> Result<(), OpenError> {
    let who = side.peer().to_string();
    match open_responder(spec, &mut side) {
        Ok(t) => {
            links.push(t);
            sides.push(side);
            on(SessionEvent::Started {
                who,
                active: links.len(),
            });
            Ok(())
        }
        Err(e @ OpenError::Rendezvous(_)) => {
            on(SessionEvent::SetupFailed {
                who: Some(who),
                error: e.to_string(),
            });
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Without the `verbs` feature no kind sets up sessions this way.
#[cfg(not(feature = "verbs"))]
pub fn serve_sessions(
    spec: &LinkSpec,
    _: &TcpListener,
    _: Option<Duration>,
    _: &mut dyn FnMut(SessionEvent),
) -> Result<(), OpenError> {
    let _ = POLL;
    spec.kind.check_built()?;
    Err(OpenError::NoResponder(spec.kind))
}
