//! The job as the analyses see it: ranks by global rank, communicators
//! matched across ranks, and every pending operation with its peer
//! translated to a global rank. Built from the dump model only.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use mqs_abi::{OpClass, OpStatus};

use super::ranks::RankSet;
use mqs_core::model::{
    shifted_peer, CallArgs, CommunicatorDump, FrameComm, JobDump, Operation, ProcessDump, Section,
    ThreadStack,
};

/// What DLLs report for -1 read as a 32-bit unsigned (Open MPI's own
/// DLL: MPI_ANY_SOURCE and MPI_ANY_TAG).
const MINUS_ONE_U32: i64 = 4_294_967_295;

/// One dumped rank.
#[derive(Debug)]
pub struct Rank<'a> {
    pub rank: i64,
    pub process: &'a ProcessDump,
    /// The main thread's stack, when stacks were taken.
    pub main: Option<&'a ThreadStack>,
    /// The other threads' stacks.
    pub others: Vec<&'a ThreadStack>,
    /// The MPI function the main thread is in (`MPI_Recv`), if any.
    pub entry: Option<String>,
    /// Whether the main thread is inside MPI; None without stacks.
    pub inside_mpi: Option<bool>,
    /// The communicator of the MPI call the main thread is in, from the
    /// outermost frame whose `comm` argument was read (debug builds).
    pub comm_arg: Option<FrameComm>,
    /// The arguments of that call, where its frame gave them.
    pub call_args: Option<&'a CallArgs>,
}

/// A communicator as the job knows it: the same name and group on every
/// member.
#[derive(Debug, Clone)]
pub struct JobComm {
    pub name: String,
    pub unique_id: u64,
    pub size: i64,
    /// The global rank of each local rank, where known: from the DLL's
    /// group, else from the members' own reports of their local rank.
    pub group: Vec<Option<i64>>,
    /// The dumped ranks that list it.
    pub members: RankSet,
    /// Its Cartesian grid, where a member's DLL told it.
    pub cartesian: Option<mqs_abi::Cartesian>,
    /// Members rebuilt from their own reports disagreed.
    conflict: bool,
    /// Every local rank is its own global rank (set once the group is
    /// complete: the job view asks for each operation).
    identity: bool,
    /// Each member's local rank by its global rank, on a communicator
    /// with a grid whose ranks are not the job's (waits are told by their
    /// offset on it).
    locals: Option<rustc_hash::FxHashMap<i64, i64>>,
}

impl JobComm {
    /// `MPI_COMM_WORLD`, `"ring"`, or `(unnamed 0x5)`.
    pub fn label(&self) -> String {
        if self.name.starts_with("MPI_COMM_") {
            self.name.clone()
        } else if self.name.is_empty() {
            format!("(unnamed {:#x})", self.unique_id)
        } else {
            format!("\"{}\"", self.name)
        }
    }

    /// The global ranks of all its members, where known.
    pub fn global_members(&self) -> RankSet {
        self.group.iter().flatten().copied().collect()
    }

    /// Whether every local rank is its own global rank (WORLD-like).
    pub fn is_identity(&self) -> bool {
        self.identity
    }

    /// Its grid, if it has one of its size.
    pub fn grid(&self) -> Option<&mqs_abi::Cartesian> {
        self.cartesian.as_ref().filter(|g| g.size() == self.size)
    }

    /// The local rank of global rank `global` on a communicator with a
    /// grid (None elsewhere, or if it is not a member).
    pub fn grid_local(&self, global: i64) -> Option<i64> {
        self.grid()?;
        match &self.locals {
            _ if self.identity => (0..self.size).contains(&global).then_some(global),
            Some(map) => map.get(&global).copied(),
            None => None,
        }
    }
}

/// Who can match an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// One rank, by global rank.
    Rank(i64),
    /// One rank whose global rank is not known (its local rank).
    Local(i64),
    /// MPI_ANY_SOURCE: any member of the communicator.
    Any,
}

/// One operation of one rank.
#[derive(Debug, Clone)]
pub struct Op<'a> {
    pub rank: i64,
    /// Index into `Job::comms`.
    pub comm: usize,
    pub class: OpClass,
    pub peer: Peer,
    /// The peer's rank in the communicator (None for ANY).
    pub local_peer: Option<i64>,
    /// None: MPI_ANY_TAG.
    pub tag: Option<i64>,
    pub op: &'a Operation,
    /// How far this rank's peers are from those `op` names: its place in
    /// a run whose peers shift ([`ProcessDump::run_shifts_peers`]), on a
    /// communicator whose ranks move along the run; else 0.
    pub shift: i64,
}

impl<'a> Op<'a> {
    pub fn status(&self) -> OpStatus {
        self.op.status
    }

    /// Where the message waits, for one that arrived but that its
    /// receiver's MPI has not looked at yet (in its transport): what the
    /// DLL wrote after [`mqs_abi::IN_TRANSIT`] (`vader FIFO`).
    pub fn in_transit(&self) -> Option<&'a str> {
        self.op
            .extra_text
            .first()
            .and_then(|l| l.strip_prefix(mqs_abi::IN_TRANSIT))
    }
}

/// Rank, communicators and operations of a dump.
#[derive(Debug)]
pub struct Job<'a> {
    pub dump: &'a JobDump,
    /// By global rank.
    pub ranks: Vec<Rank<'a>>,
    pub comms: Vec<JobComm>,
    /// Every listed operation of every rank, in rank order.
    pub ops: Vec<Op<'a>>,
    /// Where each rank's operations start in `ops`, by its place in
    /// `ranks`; then the end of the last one.
    op_start: Vec<usize>,
    /// Sections the DLL could not list: (what, reason) -> ranks.
    pub not_available: BTreeMap<(String, String), RankSet>,
    /// Queues the DLL listed only in part: (what, why) -> ranks.
    pub cut_short: BTreeMap<(String, String), RankSet>,
    /// (the dump's address, the DLL's `unique_id` there) -> index into
    /// `comms` (the ranks of a run share their dump).
    by_id: FxHashMap<(usize, u64), usize>,
}

/// The key communicators are matched by: name and group where the DLL
/// gives groups; else name, size and how many of that name and size the
/// process listed before it (DLLs without groups, such as MPICH's, also
/// give ids that differ between processes: addresses).
///
/// An MPI-1 DLL (compatibility 2) gives group members as ranks in each
/// process's own MPI_COMM_WORLD: a spawned job's world then looks like its
/// parents' one. Its communicators are told apart by the job too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum CommKey {
    Group(Option<String>, String, Vec<i64>),
    Nth(Option<String>, String, i64, usize),
}

fn key_of(p: &ProcessDump, c: &CommunicatorDump, earlier: &[&CommunicatorDump]) -> CommKey {
    let job = (p.dll.compatibility < 3)
        .then(|| p.spawned.as_ref().map(|s| s.job.clone()))
        .flatten();
    match &c.group {
        Some(g) if !g.is_empty() => CommKey::Group(job, c.name.clone(), g.clone()),
        _ => {
            let nth = earlier
                .iter()
                .filter(|e| e.group.is_none() && e.name == c.name && e.size == c.size)
                .count();
            CommKey::Nth(job, c.name.clone(), c.size, nth)
        }
    }
}

/// A process's global rank: as the host numbered it, else its rank in its
/// MPI_COMM_WORLD.
fn global_rank(p: &ProcessDump) -> Option<i64> {
    if p.global_rank >= 0 {
        return Some(i64::from(p.global_rank));
    }
    let Section::Ok { value } = &p.communicators else {
        return None;
    };
    value
        .list
        .iter()
        .find(|c| c.name == "MPI_COMM_WORLD")
        .map(|c| c.local_rank)
        .filter(|r| (0..MINUS_ONE_U32 - 1).contains(r))
}

impl<'a> Job<'a> {
    pub fn new(dump: &'a JobDump) -> Self {
        let ranks = ranks_of(dump);
        let mut m = Matching::default();
        // Sized once: at 100,000 ranks the operations are tens of
        // megabytes, and a vector that doubles (then shrinks) to hold
        // them holds twice that for a moment.
        m.ops.reserve_exact(listed_operations(&ranks));
        // The job's communicator of each of a dump's communicators, found
        // once per dump: the ranks of a run share it.
        let mut matched: Option<(*const ProcessDump, Vec<Option<usize>>)> = None;
        for r in &ranks {
            m.rank(r, &mut matched);
        }
        let Matching {
            mut comms,
            mut ops,
            not_available,
            cut_short,
            by_id,
            ..
        } = m;
        for comm in &mut comms {
            if comm.conflict {
                comm.group.iter_mut().for_each(|g| *g = None);
            }
            comm.identity = comm
                .group
                .iter()
                .enumerate()
                .all(|(i, g)| *g == Some(i as i64));
            if !comm.identity && comm.grid().is_some() {
                comm.locals = Some(
                    (0i64..)
                        .zip(&comm.group)
                        .filter_map(|(local, g)| Some(((*g)?, local)))
                        .collect(),
                );
            }
        }
        resolve_peers(&mut ops, &comms);
        let op_start = op_starts(&ranks, &ops);
        Job {
            dump,
            ranks,
            comms,
            ops,
            op_start,
            not_available,
            cut_short,
            by_id,
        }
    }

    /// The job's communicator that `rank` lists with id `unique_id`.
    pub fn comm_of(&self, rank: i64, unique_id: u64) -> Option<usize> {
        let dump = std::ptr::from_ref(self.rank(rank)?.process) as usize;
        self.by_id.get(&(dump, unique_id)).copied()
    }

    /// The job's communicator a frame's argument names on `rank`: our DLLs
    /// and Open MPI's give the id the MPI keeps, MPICH's own DLL the
    /// object's address.
    pub fn frame_comm(&self, rank: i64, comm: &FrameComm) -> Option<usize> {
        self.comm_of(rank, comm.unique_id)
            .or_else(|| self.comm_of(rank, comm.address))
    }

    /// The indices into `ops` of `rank`'s operations (`ops` is in rank
    /// order).
    pub fn op_indices(&self, rank: i64) -> std::ops::Range<usize> {
        match self.position(rank) {
            Some(at) => self.op_start[at]..self.op_start[at + 1],
            None => 0..0,
        }
    }

    /// Where `rank` is in `ranks`: at its own number when ranks are
    /// numbered from 0 without gaps (the usual job), else found by search.
    fn position(&self, rank: i64) -> Option<usize> {
        let dense = usize::try_from(rank)
            .ok()
            .filter(|&at| self.ranks.get(at).is_some_and(|r| r.rank == rank));
        dense.or_else(|| self.ranks.binary_search_by_key(&rank, |r| r.rank).ok())
    }

    /// Whether `rank`'s queue of `class` on the job's communicator `comm`
    /// was read (listed, even if empty): only then does its absence of an
    /// operation mean something.
    pub fn queue_read(&self, rank: i64, comm: usize, class: OpClass) -> bool {
        let Some(r) = self.rank(rank) else {
            return false;
        };
        let Section::Ok { value } = &r.process.communicators else {
            return false;
        };
        let dump = std::ptr::from_ref(r.process) as usize;
        value.list.iter().any(|c| {
            self.by_id.get(&(dump, c.unique_id)) == Some(&comm)
                && matches!(c.queue(class), Section::Ok { .. })
        })
    }

    /// `rank`'s operations.
    pub fn ops_of(&self, rank: i64) -> &[Op<'a>] {
        &self.ops[self.op_indices(rank)]
    }

    pub fn rank(&self, rank: i64) -> Option<&Rank<'a>> {
        self.position(rank).map(|i| &self.ranks[i])
    }

    /// The peer a rank's `local` names on communicator `comm`: its global
    /// rank where the group tells it.
    pub fn peer_of(&self, comm: usize, local: i64) -> Peer {
        match usize::try_from(local)
            .ok()
            .and_then(|l| self.comms[comm].group.get(l))
        {
            Some(Some(g)) => Peer::Rank(*g),
            _ => Peer::Local(local),
        }
    }

    /// Why the waits of `rank` are not all known from its queues: its
    /// communicators, sends or receives that the DLL could not list, or
    /// listed only in part (unexpected messages are no waits). Empty when
    /// they are known.
    pub fn unknown_waits(&self, rank: i64) -> Vec<String> {
        self.unknown_waits_of(rank, &[OpClass::PendingSends, OpClass::PendingReceives])
    }

    /// [`Job::unknown_waits`] for a rank that can wait only on operations
    /// of `kinds` (a blocking receive on its receives): the others do not
    /// matter.
    pub fn unknown_waits_of(&self, rank: i64, kinds: &[OpClass]) -> Vec<String> {
        let waits =
            |what: &str| what == "communicators" || kinds.iter().any(|&k| class_name(k) == what);
        let listed = self
            .not_available
            .iter()
            .filter(|((what, _), ranks)| waits(what) && ranks.contains(rank))
            .map(|((what, why), _)| format!("{what} not available: {why}"));
        let cut = self
            .cut_short
            .iter()
            .filter(|((what, _), ranks)| waits(what) && ranks.contains(rank))
            .map(|((what, why), _)| format!("{what} cut short: {why}"));
        listed.chain(cut).collect()
    }

    /// Every dumped rank.
    pub fn all_ranks(&self) -> RankSet {
        self.ranks.iter().map(|r| r.rank).collect()
    }

    /// The operations that wait: pending (not matched or complete) sends
    /// and receives.
    pub fn waits(&self) -> impl Iterator<Item = &Op<'a>> {
        self.ops
            .iter()
            .filter(|o| o.class != OpClass::UnexpectedMessages && o.status() == OpStatus::Pending)
    }

    /// The indices into `ops` of `rank`'s operations that wait: pending
    /// sends and receives.
    pub fn waits_of(&self, rank: i64) -> impl Iterator<Item = usize> + '_ {
        self.op_indices(rank).filter(|&i| {
            let o = &self.ops[i];
            o.class != OpClass::UnexpectedMessages && o.status() == OpStatus::Pending
        })
    }

    /// Ranks with no pending send or receive (and whose queues were all
    /// read: an unknown queue may hold some).
    pub fn idle_ranks(&self) -> RankSet {
        let busy: RankSet = self.waits().map(|o| o.rank).collect();
        let unknown: RankSet = self
            .not_available
            .iter()
            .chain(&self.cut_short)
            .filter(|((what, _), _)| {
                matches!(what.as_str(), "communicators" | "sends" | "receives")
            })
            .fold(RankSet::new(), |mut all, (_, ranks)| {
                all.union_with(ranks);
                all
            });
        self.ranks
            .iter()
            .map(|r| r.rank)
            .filter(|r| !busy.contains(*r) && !unknown.contains(*r))
            .collect()
    }

    /// `recv from rank 1 tag 10 on "ring"` (the words of one operation).
    pub fn describe(&self, op: &Op<'_>) -> String {
        let comm = &self.comms[op.comm];
        let tag = match op.tag {
            Some(t) => format!("tag {t}"),
            None => "any tag".into(),
        };
        let what = match op.class {
            OpClass::PendingSends => "send to",
            OpClass::PendingReceives => "recv from",
            OpClass::UnexpectedMessages => "unexpected message from",
        };
        let peer = match op.peer {
            Peer::Any => "ANY_SOURCE".to_string(),
            Peer::Rank(g) => match op.local_peer {
                Some(l) if l != g => format!("rank {g} ({} rank {l})", comm.label()),
                _ => format!("rank {g}"),
            },
            Peer::Local(l) => format!("{} rank {l} (global rank unknown)", comm.label()),
        };
        format!("{what} {peer} {tag} on {}", comm.label())
    }
}

/// Every rank of the dump, by global rank (a run of ranks read as its
/// ranks), once each.
fn ranks_of(dump: &JobDump) -> Vec<Rank<'_>> {
    let mut ranks: Vec<Rank<'_>> = dump
        .processes
        .iter()
        .flat_map(|p| {
            let first = global_rank(p);
            (0..i64::from(p.run_len.max(1)))
                .filter_map(move |offset| Some(rank_of(first? + offset, p)))
        })
        .collect();
    ranks.sort_by_key(|r| r.rank);
    ranks.dedup_by_key(|r| r.rank);
    ranks
}

/// The job's communicators and operations, being matched rank by rank.
#[derive(Default)]
struct Matching<'a> {
    keys: FxHashMap<CommKey, usize>,
    comms: Vec<JobComm>,
    not_available: BTreeMap<(String, String), RankSet>,
    cut_short: BTreeMap<(String, String), RankSet>,
    by_id: FxHashMap<(usize, u64), usize>,
    /// Peers are read once every communicator's group is known.
    ops: Vec<Op<'a>>,
}

impl<'a> Matching<'a> {
    /// One rank: its communicators matched to the job's (once per dump),
    /// its place in each, its operations.
    fn rank(
        &mut self,
        r: &Rank<'a>,
        matched: &mut Option<(*const ProcessDump, Vec<Option<usize>>)>,
    ) {
        let list = match &r.process.communicators {
            Section::Ok { value } => &value.list,
            Section::NotAvailable { reason: why } | Section::Error { message: why } => {
                self.not_available
                    .entry(("communicators".into(), why.clone()))
                    .or_default()
                    .insert(r.rank);
                return;
            }
        };
        let this = std::ptr::from_ref(r.process);
        if matched.as_ref().is_none_or(|(p, _)| *p != this) {
            *matched = Some((this, self.indices(r.process, list)));
        }
        let Some((_, indices)) = matched.as_ref() else {
            return;
        };
        let offset = r.rank - global_rank(r.process).unwrap_or(r.rank);
        for (c, index) in list.iter().zip(indices) {
            let Some(index) = *index else {
                continue;
            };
            let comm = &mut self.comms[index];
            comm.members.insert(r.rank);
            if let Some(slot) = usize::try_from(r.process.local_rank_at(c, offset))
                .ok()
                .and_then(|l| comm.group.get_mut(l))
            {
                // Two processes at one place: the matching was wrong
                // (communicators alike in name and size), so nothing
                // about its members can be trusted.
                if slot.is_some_and(|g| g != r.rank) && c.group.is_none() {
                    comm.conflict = true;
                }
                slot.get_or_insert(r.rank);
            }
            // The peers of a run that shifts them move along with the
            // rank on the communicators whose rank moves.
            let shift = if r.process.run_shifts_peers
                && r.process.local_rank_at(c, offset) != c.local_rank
            {
                offset
            } else {
                0
            };
            self.queues(r.rank, c, index, shift);
        }
    }

    /// The job's communicator of each of one dump's communicators.
    fn indices(&mut self, p: &ProcessDump, list: &[CommunicatorDump]) -> Vec<Option<usize>> {
        let mut indices = Vec::with_capacity(list.len());
        let this = std::ptr::from_ref(p) as usize;
        for (at, c) in list.iter().enumerate() {
            // MPI_COMM_NULL and other empty ones hold nothing to match.
            if c.size <= 0 {
                indices.push(None);
                continue;
            }
            let earlier: Vec<&CommunicatorDump> = list[..at].iter().collect();
            let key = key_of(p, c, &earlier);
            let index = match self.keys.get(&key) {
                Some(&i) => {
                    if self.comms[i].cartesian.is_none() && c.cartesian.is_some() {
                        self.comms[i].cartesian.clone_from(&c.cartesian);
                    }
                    i
                }
                None => {
                    self.keys.insert(key, self.comms.len());
                    let mut comm = JobComm {
                        name: c.name.clone(),
                        unique_id: c.unique_id,
                        size: c.size,
                        group: vec![None; usize::try_from(c.size.min(1 << 20)).unwrap_or(0)],
                        members: RankSet::new(),
                        cartesian: c.cartesian.clone(),
                        conflict: false,
                        identity: false,
                        locals: None,
                    };
                    // The DLL's group: the same for every member (it is
                    // part of the key).
                    if let Some(group) = &c.group {
                        for (slot, g) in comm.group.iter_mut().zip(group) {
                            *slot = Some(*g);
                        }
                    }
                    self.comms.push(comm);
                    self.comms.len() - 1
                }
            };
            self.by_id.entry((this, c.unique_id)).or_insert(index);
            indices.push(Some(index));
        }
        indices
    }

    /// A rank's operations on one communicator, and what its queues there
    /// could not list.
    fn queues(&mut self, rank: i64, c: &'a CommunicatorDump, index: usize, shift: i64) {
        for class in OpClass::ALL {
            match c.queue(class) {
                Section::Ok { value } => {
                    for (i, op) in value.operations.iter().enumerate() {
                        self.ops.push(Op {
                            rank,
                            comm: index,
                            class,
                            peer: Peer::Any,
                            local_peer: None,
                            tag: op.desired_tag.filter(|t| *t != MINUS_ONE_U32 && *t != -1),
                            op,
                            // A hub's peer stays for every rank of the run.
                            shift: if value.is_fixed_in_run(i) { 0 } else { shift },
                        });
                    }
                    if let Some(why) = &value.truncated {
                        self.cut_short
                            .entry((class_name(class).into(), why.clone()))
                            .or_default()
                            .insert(rank);
                    }
                }
                Section::NotAvailable { reason: why } | Section::Error { message: why } => {
                    self.not_available
                        .entry((class_name(class).into(), why.clone()))
                        .or_default()
                        .insert(rank);
                }
            }
        }
    }
}

/// How many operations the ranks list, counted once per dump (the ranks
/// of a run share theirs).
fn listed_operations(ranks: &[Rank<'_>]) -> usize {
    let mut last: Option<(*const ProcessDump, usize)> = None;
    let mut all = 0;
    for r in ranks {
        let this = std::ptr::from_ref(r.process);
        let count = match last {
            Some((p, count)) if p == this => count,
            _ => {
                let count = r.process.listed_operations();
                last = Some((this, count));
                count
            }
        };
        all += count;
    }
    all
}

/// Each operation's peer as a global rank, now that the groups are known.
fn resolve_peers(ops: &mut [Op<'_>], comms: &[JobComm]) {
    for o in ops {
        let c = &comms[o.comm];
        let local = shifted_peer(o.op.desired_local_rank, o.shift, c.size);
        let global = shifted_peer(o.op.desired_global_rank, o.shift, c.size);
        (o.peer, o.local_peer) = if local < 0 || local >= c.size {
            (Peer::Any, None)
        } else if let Some(Some(g)) = usize::try_from(local).ok().and_then(|l| c.group.get(l)) {
            (Peer::Rank(*g), Some(local))
        } else if (0..MINUS_ONE_U32).contains(&global) {
            (Peer::Rank(global), Some(local))
        } else {
            (Peer::Local(local), Some(local))
        };
    }
}

/// Where each rank's operations start in `ops` (in rank order, as `ranks`
/// is); then the end of the last one.
fn op_starts(ranks: &[Rank<'_>], ops: &[Op<'_>]) -> Vec<usize> {
    let mut op_start = Vec::with_capacity(ranks.len() + 1);
    let mut at = 0;
    for r in ranks {
        while ops.get(at).is_some_and(|o| o.rank < r.rank) {
            at += 1;
        }
        op_start.push(at);
    }
    op_start.push(ops.len());
    op_start
}

/// The words a queue is named by in `not_available` and `cut_short`.
pub(crate) fn class_name(class: OpClass) -> &'static str {
    match class {
        OpClass::PendingSends => "sends",
        OpClass::PendingReceives => "receives",
        OpClass::UnexpectedMessages => "unexpected messages",
    }
}

fn rank_of(rank: i64, process: &ProcessDump) -> Rank<'_> {
    let threads: Vec<&ThreadStack> = match &process.stacks {
        Some(Section::Ok { value }) => value.list.iter().collect(),
        _ => Vec::new(),
    };
    // The main thread's id is the process id; sources list it first.
    let main = threads
        .iter()
        .copied()
        .find(|t| t.tid == process.pid)
        .or_else(|| threads.first().copied());
    let others = threads
        .iter()
        .copied()
        .filter(|t| main.is_none_or(|m| m.tid != t.tid))
        .collect();
    let entry = main.and_then(|m| mqs_core::model::mpi_entry(m.call_path()));
    let inside_mpi = main
        .filter(|m| !m.frames.is_empty())
        .map(|m| m.call_path().any(mqs_core::model::is_mpi_function));
    // Frames are innermost first: the outermost call's argument is the
    // user's communicator (inner ones may be the MPI's own).
    let comm_arg = main.and_then(|m| m.frames.iter().rev().find_map(|f| f.comm));
    let call_args = main.and_then(|m| m.frames.iter().rev().find_map(|f| f.call.as_ref()));
    Rank {
        rank,
        process,
        main,
        others,
        entry,
        inside_mpi,
        comm_arg,
        call_args,
    }
}
