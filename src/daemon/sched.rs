//! The phase of each (peer, transport) the daemon keeps current, as the
//! status file shows it. Which pair is measured when, and how, is the
//! cluster schedule's (`cluster::schedule`, run by the probe thread).

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerPhase {
    /// Never measured (or nothing loaded from the state file).
    New,
    /// Published values, agreeing with the last re-check if any.
    Known,
    /// A re-check disagreed with the published values.
    Suspect,
    /// The last meeting failed; the partner is backed off; its entries
    /// are stale.
    Failing,
}

impl PeerPhase {
    /// The name the status file uses.
    pub fn name(self) -> &'static str {
        match self {
            PeerPhase::New => "new",
            PeerPhase::Known => "known",
            PeerPhase::Suspect => "suspect",
            PeerPhase::Failing => "failing",
        }
    }
}
