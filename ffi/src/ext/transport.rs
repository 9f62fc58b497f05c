//! The per-transport contention record: penalties per conflict scheme
//! and k, the sharing fit, the last bisection result.

use crate::layout::{MAX_K, SCHEMES};
use crate::types::SegmentError;

use super::*;

named_enum! {
    /// Conflict schemes of the bandwidth-sharing probes (Vienne et al.).
    pub enum Scheme: usize {
        /// k flows out of this node at once (1:k).
        Outgoing = 0 => "outgoing",
        /// k flows into this node at once (k:1).
        Incoming = 1 => "incoming",
        /// k flows out and k flows in at once.
        Mixed = 2 => "mixed",
    }
}

const _: () = assert!(Scheme::ALL.len() == SCHEMES);

named_enum! {
    /// The parts of a [`TransportExt`] that carry a status (nibble index in
    /// [`TransportExt::status`]).
    pub enum TransportField: u8 {
        PenaltyOutgoing = 0 => "penalty_outgoing",
        PenaltyIncoming = 1 => "penalty_incoming",
        PenaltyMixed = 2 => "penalty_mixed",
        /// β of the sharing model.
        Beta = 3 => "beta",
        /// γ_o of the sharing model.
        GammaO = 4 => "gamma_o",
        /// γ_i of the sharing model.
        GammaI = 5 => "gamma_i",
        /// The effective-bisection result.
        Bisection = 6 => "bisection",
    }
}

impl TransportField {
    /// The penalty field of a scheme.
    pub fn penalty(s: Scheme) -> TransportField {
        Self::ALL[s as usize]
    }
}

/// The last effective-bisection-bandwidth result over a node set: the
/// distribution of per-pair bandwidth under random perfect matchings (all
/// pairs streaming at once). C: `ng_bisection`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bisection {
    pub min_bytes_per_s: f64,
    pub median_bytes_per_s: f64,
    pub mean_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
    /// Nodes in the set (≥ 2).
    pub nodes: u32,
    /// Matchings measured (≥ 1).
    pub rounds: u32,
    /// Message size each pair streamed, bytes.
    pub msg_bytes: u64,
    pub measured_unix_ns: u64,
}

/// [`TransportExt::present`] bit: some scheme has penalties.
pub const TX_PENALTIES: u32 = 1 << 0;
/// [`TransportExt::present`] bit: β, γ_o, γ_i are set.
pub const TX_SHARING: u32 = 1 << 1;
/// [`TransportExt::present`] bit: the bisection result is set.
pub const TX_BISECTION: u32 = 1 << 2;

/// What this node measured for one transport as a whole, not per peer:
/// bandwidth-sharing penalties T_shared / T_ref of k = 1..=8 concurrent
/// flows per scheme, the β, γ_o, γ_i fit of Vienne et al.'s model, and the
/// last effective bisection bandwidth. Fill it with the setters (they keep
/// `present` and `n_k` right); unused slots are zero. C: `ng_transport_ext`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TransportExt {
    /// TX_* bits.
    pub present: u32,
    /// Penalties of scheme s are set for k = 1..=n_k[s].
    pub n_k: [u32; SCHEMES],
    /// 4-bit [`Status`] per [`TransportField`].
    pub status: u64,
    /// When the penalties and the sharing fit were measured, CLOCK_REALTIME ns.
    pub contention_unix_ns: u64,
    /// penalty[scheme][k − 1].
    pub penalty: [[Estimate; MAX_K]; SCHEMES],
    pub beta: Estimate,
    pub gamma_o: Estimate,
    pub gamma_i: Estimate,
    pub bisection: Bisection,
}

impl Default for TransportExt {
    fn default() -> Self {
        TransportExt {
            present: 0,
            n_k: [0; SCHEMES],
            status: 0,
            contention_unix_ns: 0,
            penalty: [[Estimate::default(); MAX_K]; SCHEMES],
            beta: Estimate::default(),
            gamma_o: Estimate::default(),
            gamma_i: Estimate::default(),
            bisection: Bisection::default(),
        }
    }
}

impl TransportExt {
    /// Sets the penalties of `scheme` for k = 1..=penalties.len() (at most
    /// MAX_K) and their status.
    pub fn set_penalties(
        &mut self,
        scheme: Scheme,
        penalties: &[Estimate],
        status: Status,
    ) -> Result<(), SegmentError> {
        if penalties.len() > MAX_K {
            return Err(SegmentError::BadTransport("more than 8 flow counts k"));
        }
        let row = &mut self.penalty[scheme as usize];
        *row = [Estimate::default(); MAX_K];
        row[..penalties.len()].copy_from_slice(penalties);
        self.n_k[scheme as usize] = penalties.len() as u32;
        self.set_status(TransportField::penalty(scheme), status);
        self.sync_present();
        Ok(())
    }

    /// Sets the sharing fit β, γ_o, γ_i with their statuses.
    pub fn set_sharing(
        &mut self,
        beta: (Estimate, Status),
        gamma_o: (Estimate, Status),
        gamma_i: (Estimate, Status),
    ) {
        self.beta = beta.0;
        self.gamma_o = gamma_o.0;
        self.gamma_i = gamma_i.0;
        self.set_status(TransportField::Beta, beta.1);
        self.set_status(TransportField::GammaO, gamma_o.1);
        self.set_status(TransportField::GammaI, gamma_i.1);
        self.present |= TX_SHARING;
    }

    /// Sets the bisection result and its status.
    pub fn set_bisection(&mut self, b: Bisection, status: Status) {
        self.bisection = b;
        self.set_status(TransportField::Bisection, status);
        self.present |= TX_BISECTION;
    }

    fn sync_present(&mut self) {
        if self.n_k.iter().any(|&n| n > 0) {
            self.present |= TX_PENALTIES;
        } else {
            self.present &= !TX_PENALTIES;
        }
    }

    pub fn status(&self, f: TransportField) -> Status {
        nibble(self.status, f as u8)
    }

    pub fn set_status(&mut self, f: TransportField, s: Status) {
        set_nibble(&mut self.status, f as u8, s);
    }

    /// The penalties of a scheme, k = 1 first.
    pub fn penalties(&self, scheme: Scheme) -> &[Estimate] {
        let n = (self.n_k[scheme as usize] as usize).min(MAX_K);
        &self.penalty[scheme as usize][..n]
    }

    /// The penalty of k concurrent flows, if measured.
    pub fn penalty(&self, scheme: Scheme, k: usize) -> Option<Estimate> {
        k.checked_sub(1)
            .and_then(|i| self.penalties(scheme).get(i).copied())
    }

    /// β, γ_o, γ_i, if set.
    pub fn sharing(&self) -> Option<[Estimate; 3]> {
        (self.present & TX_SHARING != 0).then_some([self.beta, self.gamma_o, self.gamma_i])
    }

    pub fn bisection(&self) -> Option<&Bisection> {
        (self.present & TX_BISECTION != 0).then_some(&self.bisection)
    }
}
