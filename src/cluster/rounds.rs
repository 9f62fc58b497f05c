//! Rounds of disjoint pairs that every node derives alone, from the sorted
//! member list, the switch groups and the time (no coordinator).
//!
//! Time is cut into rounds of `round_s` seconds from the origin of the
//! clock the nodes share (the Unix epoch for the daemon): round
//! k = ⌊t / round_s⌋. Rounds form cycles. Within a cycle:
//!
//! - **Mesh rounds** follow the circle method (round-robin tournament) over
//!   the members placed on positions by a permutation of the shared seed:
//!   with n' = n rounded up to even positions, mesh round m pairs position
//!   n'−1 with m and every other p with (2m − p) mod (n'−1), so n'−1
//!   rounds pair every two members exactly once and every member at most
//!   once per round (a member facing the padding position sits the round
//!   out). The permutation stays for the life of the member list, so a
//!   pair meets at the same point of every cycle; who drives it alternates
//!   from cycle to cycle. From any start, one cycle therefore meets every
//!   pair and two cycles measure both directions of every pair.
//!   With a cap of c mesh sessions at once (`mesh_pairs_per_round`), each
//!   tournament round becomes ⌈(n'/2) / c⌉ rounds: the pairs of tournament
//!   round m are numbered i = 0 … n'/2 − 1 (i = 0 pairs position n'−1 with
//!   m; i > 0 pairs m + i with m − i, modulo n'−1), and part s of it runs
//!   the pairs with i mod parts = s. Every node derives its part alone.
//! - **Coverage rounds**, one at the start of every block of `every`
//!   rounds, pair a representative of each coverage class: every switch
//!   group with itself (intra-switch) and every two groups. The classes
//!   are packed greedily into as few rounds as the group sizes allow (each
//!   node at most once per round; 64 groups of 64 take 2 rounds), and the
//!   representatives are drawn from each group's members in an order that
//!   changes every cycle, so the duty is spread over nodes. The same pairs
//!   return every pass (every `every` × (coverage rounds) rounds) of a
//!   cycle, so after its first sweep a class is kept fresh by cheap
//!   re-checks; `every` is chosen so a pass takes about `coverage_pass_s`.
//!
//! A cycle is as many blocks as its mesh rounds need, the last one cut
//! short; the coverage rounds go on counting passes across cycles. A node
//! looks up its partner for a round in O(1) from the [`CyclePlan`],
//! computed once per cycle (O(n + classes)).
//!
//! - **Fan-out rounds** (LogfP's 1:P−P:1), one every `fanout_interval_s`
//!   of rounds (round k with k mod period = period − 1), stand outside the
//!   cycles: the other rounds are numbered without them, so the cycle
//!   layout above is unchanged, only stretched by one round per period.
//!   The members are cut into fixed chunks of at most
//!   `fanout_max_peers + 1` (within each switch group, balanced); in a
//!   fan-out round one member of every chunk of three or more drives the
//!   fan-out over the rest of its chunk, the driver rotating from one
//!   fan-out round to the next, so every member drives once per
//!   (chunk size) fan-out rounds and nobody is in two sessions a round.

use super::schedule::{ScheduleConfig, ScheduleError};
use super::topology::Topology;

/// A coverage class: a pair of switch groups (i ≤ j), numbered
/// j·(j+1)/2 + i.
pub type ClassId = u32;

/// Group of the members no topology places.
pub const UNPLACED_GROUP: &str = "(unplaced)";
/// The one group when there is no topology.
pub const ALL_GROUP: &str = "(all)";

const NONE: u32 = u32::MAX;

/// A switch group: members on one leaf switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    /// Member indices, ascending.
    pub members: Vec<u32>,
}

/// The members of the cluster, sorted, and their switch groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    names: Vec<String>,
    group_of: Vec<u32>,
    groups: Vec<Group>,
    /// (i, j) of every class id.
    class_groups: Vec<(u32, u32)>,
}

impl Membership {
    /// Members `names` (sorted and de-duplicated here) grouped by
    /// `leaf_of`; the groups are ordered by name, members no leaf holds
    /// form the group [`UNPLACED_GROUP`] at the end.
    pub fn new<S: AsRef<str>>(
        names: &[S],
        leaf_of: impl Fn(&str) -> Option<String>,
    ) -> Result<Membership, ScheduleError> {
        let mut sorted: Vec<String> = names.iter().map(|s| s.as_ref().to_string()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.is_empty() {
            return Err(ScheduleError::NoMembers);
        }
        if sorted.len() >= NONE as usize {
            return Err(ScheduleError::TooManyMembers(sorted.len()));
        }
        let mut by_leaf: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
        let mut unplaced = Vec::new();
        for (i, n) in sorted.iter().enumerate() {
            match leaf_of(n) {
                Some(leaf) => by_leaf.entry(leaf).or_default().push(i as u32),
                None => unplaced.push(i as u32),
            }
        }
        let mut groups: Vec<Group> = by_leaf
            .into_iter()
            .map(|(name, members)| Group { name, members })
            .collect();
        if !unplaced.is_empty() {
            groups.push(Group {
                name: UNPLACED_GROUP.to_string(),
                members: unplaced,
            });
        }
        let mut group_of = vec![0; sorted.len()];
        for (g, group) in groups.iter().enumerate() {
            for &m in &group.members {
                group_of[m as usize] = g as u32;
            }
        }
        let m = groups.len() as u32;
        let class_groups = (0..m).flat_map(|j| (0..=j).map(move |i| (i, j))).collect();
        Ok(Membership {
            names: sorted,
            group_of,
            groups,
            class_groups,
        })
    }

    /// Every member in one group (no topology).
    pub fn flat<S: AsRef<str>>(names: &[S]) -> Result<Membership, ScheduleError> {
        Self::new(names, |_| Some(ALL_GROUP.to_string()))
    }

    /// Members grouped by their leaf switch in `topology`.
    pub fn with_topology<S: AsRef<str>>(
        names: &[S],
        topology: &Topology,
    ) -> Result<Membership, ScheduleError> {
        Self::new(names, |n| topology.leaf_of(n).map(|s| s.name.clone()))
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn name(&self, member: u32) -> &str {
        &self.names[member as usize]
    }

    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .ok()
            .map(|i| i as u32)
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    pub fn group_of(&self, member: u32) -> u32 {
        self.group_of[member as usize]
    }

    pub fn class_count(&self) -> usize {
        self.class_groups.len()
    }

    /// The class of the pair (a, b).
    pub fn class_of(&self, a: u32, b: u32) -> ClassId {
        let (x, y) = (self.group_of(a), self.group_of(b));
        let (i, j) = (x.min(y), x.max(y));
        j * (j + 1) / 2 + i
    }

    /// The two groups (i ≤ j) of a class.
    pub fn class_groups(&self, class: ClassId) -> (u32, u32) {
        self.class_groups[class as usize]
    }

    /// Whether a class has a pair at all (a group of one has no
    /// intra-switch pair).
    pub fn class_measurable(&self, class: ClassId) -> bool {
        let (i, j) = self.class_groups(class);
        i != j || self.groups[i as usize].members.len() >= 2
    }

    pub fn is_intra(&self, class: ClassId) -> bool {
        let (i, j) = self.class_groups(class);
        i == j
    }
}

/// What a round is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundKind {
    /// Mesh round `m` of the cycle's tournament.
    Mesh(u32),
    /// Coverage round `q` of pass number `pass` (counted from the origin).
    Coverage { q: u32, pass: u64 },
    /// Fan-out round number `f` (counted from the origin).
    Fanout { f: u64 },
}

impl RoundKind {
    /// A short name (status, logs).
    pub fn name(&self) -> &'static str {
        match self {
            RoundKind::Mesh(_) => "mesh",
            RoundKind::Coverage { .. } => "coverage",
            RoundKind::Fanout { .. } => "fanout",
        }
    }
}

/// One round in time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// Absolute round number, ⌊t / round_s⌋.
    pub round: u64,
    pub cycle: u64,
    pub kind: RoundKind,
    pub start_s: f64,
    pub end_s: f64,
}

/// The round layout of a membership: everything that does not depend on
/// the cycle.
#[derive(Clone, Debug)]
pub struct Rounds {
    round_s: f64,
    seed: u64,
    n: u32,
    /// Positions of the tournament: n rounded up to even.
    slots: u32,
    /// Rounds each tournament round is spread over (the concurrency cap).
    mesh_parts: u32,
    /// Coverage rounds per pass.
    cover_rounds: u32,
    /// Each class's coverage round.
    cover_of: Vec<(ClassId, u32)>,
    /// A coverage round opens every block of this many rounds.
    every: u32,
    /// Blocks (coverage rounds) per cycle.
    blocks: u32,
    cycle_rounds: u64,
    /// Member → tournament position, and position → member (NONE: the
    /// padding position); fixed by the seed.
    pos: Vec<u32>,
    at: Vec<u32>,
    /// Every `fan_period`-th round is a fan-out round (0: none).
    fan_period: u64,
    /// The fan-out chunks (members ascending) and each member's chunk
    /// (NONE: in a chunk too small to fan out).
    fan_chunks: Vec<Vec<u32>>,
    fan_chunk_of: Vec<u32>,
}

/// A member's part in a fan-out round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FanoutPart {
    /// Index of the member's chunk ([`Rounds::fanout_chunk`]).
    pub chunk: u32,
    /// The member that drives the chunk's fan-out this round.
    pub driver: u32,
}

/// Least chunk that fans out: a driver and two peers (LogfP needs P ≥ 2).
const MIN_FANOUT_CHUNK: usize = 3;

impl Rounds {
    pub fn new(membership: &Membership, cfg: &ScheduleConfig) -> Rounds {
        let n = membership.len() as u32;
        let slots = n + n % 2;
        let mesh_parts = match cfg.mesh_pairs_per_round {
            0 => 1,
            cap => (slots / 2).div_ceil(cap).max(1),
        };
        let mesh = slots.saturating_sub(1) * mesh_parts;
        let (cover_of, cover_rounds) = pack_coverage(membership);
        let every = if cover_rounds == 0 {
            u32::MAX
        } else {
            let per_round = cfg.coverage_pass_s / (cfg.round_s * f64::from(cover_rounds));
            (per_round.floor() as u32).max(MIN_BLOCK)
        };
        let blocks = if cover_rounds == 0 {
            0
        } else {
            mesh.div_ceil(every - 1).max(1)
        };
        let cycle_rounds = u64::from(mesh.max(1) + blocks);
        let (pos, at) = permutation(n, slots, cfg.seed);
        let (fan_chunks, fan_chunk_of) = fanout_chunks(membership, cfg.fanout_max_peers);
        let fan_period = if cfg.fanout_interval_s > 0.0 && !fan_chunks.is_empty() {
            ((cfg.fanout_interval_s / cfg.round_s).round() as u64).max(2)
        } else {
            0
        };
        Rounds {
            round_s: cfg.round_s,
            seed: cfg.seed,
            n,
            slots,
            mesh_parts,
            cover_rounds,
            cover_of,
            every,
            blocks,
            cycle_rounds,
            pos,
            at,
            fan_period,
            fan_chunks,
            fan_chunk_of,
        }
    }

    pub fn round_s(&self) -> f64 {
        self.round_s
    }

    /// Rounds of one cycle (fan-out rounds not counted).
    pub fn cycle_rounds(&self) -> u64 {
        self.cycle_rounds
    }

    /// The time one cycle takes, the fan-out rounds between its rounds
    /// included.
    pub fn cycle_s(&self) -> f64 {
        let stretch = match self.fan_period {
            0 => 1.0,
            p => p as f64 / (p - 1) as f64,
        };
        self.cycle_rounds as f64 * self.round_s * stretch
    }

    /// Mesh rounds of one cycle (every pair once).
    pub fn mesh_rounds(&self) -> u32 {
        self.slots.saturating_sub(1) * self.mesh_parts
    }

    /// Mesh sessions at most in one round over the whole cluster.
    pub fn mesh_pairs_per_round(&self) -> u32 {
        (self.slots / 2).div_ceil(self.mesh_parts)
    }

    /// Coverage rounds of one pass (0 when there is nothing to cover).
    pub fn coverage_rounds(&self) -> u32 {
        self.cover_rounds
    }

    /// Rounds per block (a coverage round and `every − 1` mesh rounds).
    pub fn block_rounds(&self) -> Option<u32> {
        (self.cover_rounds > 0).then_some(self.every)
    }

    /// The round at time `t_s` (seconds on the shared clock, ≥ 0).
    pub fn slot_at(&self, t_s: f64) -> Slot {
        self.slot(((t_s.max(0.0)) / self.round_s).floor() as u64)
    }

    /// Rounds from one fan-out round to the next (None: no fan-out rounds).
    pub fn fanout_period(&self) -> Option<u64> {
        (self.fan_period > 0).then_some(self.fan_period)
    }

    /// Round number `round`.
    pub fn slot(&self, round: u64) -> Slot {
        let start_s = round as f64 * self.round_s;
        let end_s = start_s + self.round_s;
        // The rounds of the cycles are numbered without the fan-out rounds.
        let (fanout, inner) = match self.fan_period {
            0 => (false, round),
            p => (round % p == p - 1, round - round / p),
        };
        let cycle = inner / self.cycle_rounds;
        if fanout {
            return Slot {
                round,
                cycle,
                kind: RoundKind::Fanout {
                    f: round / self.fan_period,
                },
                start_s,
                end_s,
            };
        }
        let j = inner % self.cycle_rounds;
        let kind = if self.cover_rounds == 0 {
            RoundKind::Mesh(j as u32)
        } else {
            let every = u64::from(self.every);
            let (block, within) = (j / every, j % every);
            if within == 0 {
                let global = cycle * u64::from(self.blocks) + block;
                let c = u64::from(self.cover_rounds);
                RoundKind::Coverage {
                    q: (global % c) as u32,
                    pass: global / c,
                }
            } else {
                RoundKind::Mesh((block * (every - 1) + within - 1) as u32)
            }
        };
        Slot {
            round,
            cycle,
            kind,
            start_s,
            end_s,
        }
    }

    /// `member`'s part in `slot` when it is a fan-out round and the member
    /// is in a chunk that fans out.
    pub fn fanout(&self, slot: &Slot, member: u32) -> Option<FanoutPart> {
        let RoundKind::Fanout { f } = slot.kind else {
            return None;
        };
        let chunk = *self.fan_chunk_of.get(member as usize)?;
        let members = self.fan_chunks.get(chunk as usize)?;
        let turn = f.wrapping_add(mix(self.seed ^ u64::from(chunk) ^ 0xfa_0007));
        let driver = members[(turn % members.len() as u64) as usize];
        Some(FanoutPart { chunk, driver })
    }

    /// The members of fan-out chunk `chunk`, ascending.
    pub fn fanout_chunk(&self, chunk: u32) -> &[u32] {
        self.fan_chunks
            .get(chunk as usize)
            .map_or(&[][..], |c| &c[..])
    }

    /// The coverage representatives of cycle `cycle`.
    pub fn plan_cycle(&self, membership: &Membership, cycle: u64) -> CyclePlan {
        // Each group's members in an order drawn for this cycle.
        let mut rng = Mix::new(self.seed ^ mix(cycle.wrapping_add(0xc0fe)));
        let order: Vec<Vec<u32>> = membership
            .groups()
            .iter()
            .map(|g| {
                let mut m = g.members.clone();
                shuffle(&mut m, &mut rng);
                m
            })
            .collect();
        CyclePlan {
            cycle,
            n: self.n as usize,
            cover: self.pick_representatives(membership, order),
        }
    }

    /// For every coverage round, each member's partner and class (or NONE):
    /// the packed classes get members in `order` of each group, each member
    /// at most once per round, the duty rotating.
    fn pick_representatives(
        &self,
        membership: &Membership,
        order: Vec<Vec<u32>>,
    ) -> Vec<(u32, ClassId)> {
        let n = self.n as usize;
        let mut cover = vec![(NONE, 0); n * self.cover_rounds as usize];
        let mut cursor = vec![0usize; order.len()];
        // The next member of group g free in round q. The packing placed at
        // most |g| picks of g in q, so there always is one; were there none,
        // the class would only go without a representative.
        let mut take = |g: u32, q: u32, cover: &[(u32, ClassId)]| -> Option<u32> {
            let members = &order[g as usize];
            (0..members.len()).find_map(|_| {
                let m = members[cursor[g as usize] % members.len()];
                cursor[g as usize] += 1;
                (cover[q as usize * n + m as usize].0 == NONE).then_some(m)
            })
        };
        for &(class, q) in &self.cover_of {
            let (i, j) = membership.class_groups(class);
            let row = q as usize * n;
            let Some(a) = take(i, q, &cover) else {
                continue;
            };
            // Mark a as taken before the second pick (needed when i == j).
            cover[row + a as usize] = (a, class);
            match take(j, q, &cover) {
                Some(b) => {
                    cover[row + a as usize] = (b, class);
                    cover[row + b as usize] = (a, class);
                }
                None => cover[row + a as usize] = (NONE, 0),
            }
        }
        cover
    }
}

/// The tournament positions of the members, from the seed: member →
/// position and position → member (NONE for the padding position, which
/// is shuffled like a member, so who sits out varies from round to round).
fn permutation(n: u32, slots: u32, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut at: Vec<u32> = (0..slots).collect();
    shuffle(&mut at, &mut Mix::new(seed ^ 0x7e57_ab1e));
    let mut pos = vec![0u32; n as usize];
    for (p, &m) in at.iter().enumerate() {
        if m < n {
            pos[m as usize] = p as u32;
        }
    }
    let at = at
        .into_iter()
        .map(|m| if m < n { m } else { NONE })
        .collect();
    (pos, at)
}

/// The fan-out chunks: each switch group cut into balanced chunks of at
/// most `max_peers + 1` members; chunks too small to fan out are dropped.
fn fanout_chunks(membership: &Membership, max_peers: u32) -> (Vec<Vec<u32>>, Vec<u32>) {
    let size = (max_peers as usize).saturating_add(1).max(MIN_FANOUT_CHUNK);
    let mut chunks = Vec::new();
    let mut chunk_of = vec![NONE; membership.len()];
    for g in membership.groups() {
        let m = &g.members;
        let k = m.len().div_ceil(size);
        for c in 0..k {
            // Balanced: chunk c holds members [c·len/k, (c+1)·len/k).
            let part = &m[c * m.len() / k..(c + 1) * m.len() / k];
            if part.len() >= MIN_FANOUT_CHUNK {
                for &x in part {
                    chunk_of[x as usize] = chunks.len() as u32;
                }
                chunks.push(part.to_vec());
            }
        }
    }
    (chunks, chunk_of)
}

/// Fisher–Yates.
fn shuffle(v: &mut [u32], rng: &mut Mix) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// Least block: a coverage round and three mesh rounds (coverage never
/// takes more than a quarter of the rounds).
const MIN_BLOCK: u32 = 4;

/// Assign every measurable class a coverage round: intra-switch classes
/// first, then the pairs of groups in the circle method's order over the
/// groups, each into the earliest round where both groups still have a
/// free member. Returns the assignment and the number of rounds.
fn pack_coverage(membership: &Membership) -> (Vec<(ClassId, u32)>, u32) {
    let groups = membership.groups();
    let m = groups.len() as u32;
    let mut tasks: Vec<ClassId> = Vec::new();
    for g in 0..m {
        let c = g * (g + 1) / 2 + g;
        if membership.class_measurable(c) {
            tasks.push(c);
        }
    }
    let slots = m + m % 2;
    for t in 0..slots.saturating_sub(1) {
        for p in 0..slots {
            let q = circle_partner(p, t, slots);
            if p < q && q < m {
                tasks.push(q * (q + 1) / 2 + p);
            }
        }
    }
    // free[r][g]: members of group g not yet used in round r.
    let mut free: Vec<Vec<usize>> = Vec::new();
    let mut out = Vec::with_capacity(tasks.len());
    for class in tasks {
        let (i, j) = membership.class_groups(class);
        let fits = |f: &Vec<usize>| {
            if i == j {
                f[i as usize] >= 2
            } else {
                f[i as usize] >= 1 && f[j as usize] >= 1
            }
        };
        let r = match free.iter().position(fits) {
            Some(r) => r,
            None => {
                free.push(groups.iter().map(|g| g.members.len()).collect());
                free.len() - 1
            }
        };
        free[r][i as usize] -= 1;
        free[r][j as usize] -= 1;
        out.push((class, r as u32));
    }
    (out, free.len() as u32)
}

/// The circle method: the partner of position `p` in round `t` of a
/// tournament over `slots` (even) positions.
fn circle_partner(p: u32, t: u32, slots: u32) -> u32 {
    let last = slots - 1;
    if p == last {
        t
    } else if p == t {
        last
    } else {
        (2 * t + last - p) % last
    }
}

/// The number i of the pair position `p` is in, in round `t` of the
/// circle method over `slots` (even) positions: 0 for the pair of the last
/// position, else the distance of p from t (the pair t + i, t − i).
fn circle_pair_index(p: u32, t: u32, slots: u32) -> u32 {
    let last = slots - 1;
    if p == last || p == t {
        0
    } else {
        let d = (p + last - t) % last;
        d.min(last - d)
    }
}

/// One cycle's coverage representatives.
#[derive(Clone, Debug)]
pub struct CyclePlan {
    pub cycle: u64,
    n: usize,
    /// Coverage round q, member m at q·n + m: (partner, class).
    cover: Vec<(u32, ClassId)>,
}

/// A member's part in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pairing {
    pub partner: u32,
    /// This member drives (sends the request and measures).
    pub drives: bool,
    /// A coverage round's representative pair.
    pub coverage: bool,
}

impl CyclePlan {
    /// `member`'s partner in `slot` (which must be of this cycle), or None
    /// (fan-out rounds pair nobody: see [`Rounds::fanout`]).
    pub fn pairing(&self, rounds: &Rounds, slot: &Slot, member: u32) -> Option<Pairing> {
        let n = self.n;
        match slot.kind {
            RoundKind::Fanout { .. } => None,
            RoundKind::Mesh(j) => {
                let (m, part) = (j / rounds.mesh_parts, j % rounds.mesh_parts);
                let own = rounds.pos[member as usize];
                if circle_pair_index(own, m, rounds.slots) % rounds.mesh_parts != part {
                    return None;
                }
                let p = circle_partner(own, m, rounds.slots);
                let partner = rounds.at[p as usize];
                (partner != NONE).then(|| {
                    let (lo, hi) = (member.min(partner), member.max(partner));
                    let flip =
                        (mix(rounds.seed ^ (u64::from(lo) << 32) ^ u64::from(hi)) ^ self.cycle) & 1;
                    let driver = if flip == 0 { lo } else { hi };
                    Pairing {
                        partner,
                        drives: driver == member,
                        coverage: false,
                    }
                })
            }
            RoundKind::Coverage { q, pass } => {
                let (partner, class) = *self.cover.get(q as usize * n + member as usize)?;
                (partner != NONE).then(|| {
                    let (lo, hi) = (member.min(partner), member.max(partner));
                    // Passes count from the origin: the driver alternates
                    // from pass to pass, across cycles too.
                    let flip = (mix(rounds.seed ^ u64::from(class)) ^ pass) & 1;
                    let driver = if flip == 0 { lo } else { hi };
                    Pairing {
                        partner,
                        drives: driver == member,
                        coverage: true,
                    }
                })
            }
        }
    }

    /// The representative pairs of coverage round `q`: (a, b, class), a < b.
    pub fn coverage_pairs(&self, q: u32) -> impl Iterator<Item = (u32, u32, ClassId)> + '_ {
        let n = self.n;
        let row = self
            .cover
            .get(q as usize * n..(q as usize + 1) * n)
            .unwrap_or(&[]);
        row.iter()
            .enumerate()
            .filter(|&(a, &(b, _))| b != NONE && (a as u32) < b)
            .map(|(a, &(b, c))| (a as u32, b, c))
    }
}

/// SplitMix64's output function: the schedule's only source of
/// pseudo-random numbers, written here so every node (and every later
/// version) derives the same permutation from the same seed.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A well-mixed hash of one word.
pub(crate) fn mix(z: u64) -> u64 {
    finalize(z.wrapping_add(GOLDEN))
}

/// A SplitMix64 stream.
pub(crate) struct Mix(u64);

impl Mix {
    pub(crate) fn new(seed: u64) -> Mix {
        Mix(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        finalize(self.0)
    }

    /// A number in 0..bound (multiply-shift; the bias, bound / 2⁶⁴, does
    /// not matter for a permutation).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(bound)) >> 64) as u64
    }
}
