//! Who waits for whom: the wait-for graph of a job, its deadlocked ranks,
//! their cycles, and the chains of ranks that wait on a rank that could
//! still move.
//!
//! The model: a rank waits on what it is blocked in ([`stance`]): the
//! blocking MPI call its stack shows (its point-to-point operations, the
//! requests of `MPI_Wait*`, its collective), not everything it has
//! pending; a rank outside MPI, or in a call that returns by itself, waits
//! on nothing. A send waits for its peer only while the peer has not
//! taken it, and a wait whose other half the peer already holds is met by
//! progress alone ([`matching`]), as is a receive matched and still
//! arriving (its sender's MPI sends the rest: it waits only on a sender
//! that cannot run). A specific wait is met by one rank, an
//! ANY_SOURCE receive by any member of its communicator (an OR-wait), a
//! collective only when every member it lacks arrives (an AND-wait); a
//! rank in `MPI_Waitall` needs each of its waits met, one in `MPI_Recv`
//! or `MPI_Waitany` one of them. A rank is deadlocked when its waits
//! cannot be met by ranks that may still move: a rank with nothing to
//! wait for, one outside MPI, one stopped by a signal or held by a
//! debugger (it moves once let go: it is named, never deadlocked), one not
//! dumped or not judged, or one that such ranks can free in turn.
//!
//! Where no stack says what a rank is blocked in, its waits are inferred
//! from its queues (any pending operation may be the one): a cycle that
//! rests on such a rank is reported as possible, never claimed.

mod graph;
mod matching;
mod stance;
mod words;

use mqs_core::interface::OsState;
use rustc_hash::FxHashMap;

use super::calls::{self, Call};
use super::collectives::{self, Collective};
use super::ranks::RankSet;
use crate::global::{Job, Peer};

pub use matching::{Fate, Half, Matcher};

/// What a wait is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// An operation: index into `Job::ops`.
    Op(usize),
    /// A collective: index into `Analysis::collectives`.
    Collective(usize),
    /// An operation only the stack names (its queue was not read, or does
    /// not list it): `op` of `Analysis::calls[call]`'s operations.
    Stack { call: usize, op: usize },
    /// The message another rank's blocking send is sending it, which
    /// neither rank's queues list (under way in the transport: matched,
    /// its data still coming): `op` of `Analysis::calls[call]`'s
    /// operations, a send on the sender's stack.
    Sending { call: usize, op: usize },
}

/// One wait of one rank.
#[derive(Debug, Clone)]
pub struct Wait {
    pub rank: i64,
    pub kind: WaitKind,
    /// The ranks that can meet it; None when not known (a peer whose
    /// global rank the DLL does not give), which counts as "may be met".
    pub on: Option<RankSet>,
    /// Met only when all of `on` arrive (a collective), not any one.
    pub all: bool,
    /// The rank's stack names it (the blocking call it is in).
    pub from_stack: bool,
    /// The peer holds the other half (its posted receive, its pending
    /// send): met as soon as either side's MPI runs, so it holds the rank
    /// only while the peer cannot run.
    pub progress: bool,
    /// Whether the peer holds the other half could not be decided: its
    /// queue of that half was not read.
    pub undecided: bool,
}

/// Where a rank's waits come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The blocking call on its stack, with its arguments or requests.
    Call,
    /// The blocking call on its stack, whose arguments could not be read:
    /// the pending operations of the kinds it waits on.
    CallKind,
    /// The receive its DLL marks as a blocking call's.
    Dll,
    /// The collective on its stack.
    Collective,
    /// Every pending operation: no stack was read for it.
    NoStack,
    /// Every pending operation: its stack is in an MPI call whose waits
    /// mqs does not know.
    OtherCall,
    /// Its stack is in `MPI_Wait*` on requests its DLL does not list, with
    /// nothing pending, and other ranks are in blocking sends to it that
    /// their DLL does not list either: it receives those messages.
    Sender,
}

impl Basis {
    /// Inferred from the queues alone: the rank may not be waiting in
    /// these operations at all.
    pub fn inferred(self) -> bool {
        matches!(self, Basis::NoStack | Basis::OtherCall)
    }
}

/// One rank's waits: where they come from, and whether all of them must
/// be met (`MPI_Waitall`) or any one (`MPI_Recv`, `MPI_Waitany`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankWaits {
    pub rank: i64,
    pub basis: Basis,
    pub all: bool,
}

/// A pending operation that is no wait, in words (a send its peer has
/// taken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAWait {
    pub rank: i64,
    pub words: String,
}

/// One edge of a cycle or chain: `rank` waits for `to` through `wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub rank: i64,
    pub wait: usize,
    pub to: i64,
}

/// Ranks that wait, through one another, for one rank that may move.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The longest path to the sink.
    pub steps: Vec<Step>,
    pub sink: i64,
    /// Every rank whose path ends at the sink.
    pub waiting: RankSet,
}

/// Ranks whose waits could not be judged, for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unjudged {
    pub ranks: RankSet,
    pub why: String,
}

/// A rank that does not run until someone lets it go: stopped by a
/// signal, or held by a debugger or another tracer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub rank: i64,
    pub pid: i32,
    pub host: Option<String>,
    /// The OS state found, where the source read one.
    pub state: Option<OsState>,
    /// The debugger that holds it, in words (`gdb (pid 77)`).
    pub held_by: Option<String>,
}

/// The wait-for analysis of one dump.
#[derive(Debug)]
pub struct Analysis<'j, 'a> {
    pub job: &'j Job<'a>,
    pub collectives: Vec<Collective>,
    /// The calls the ranks' stacks say they are in.
    pub calls: Vec<Call>,
    pub waits: Vec<Wait>,
    /// Each rank with waits, in rank order: where they come from.
    pub bases: Vec<RankWaits>,
    /// Ranks that may move by themselves: nothing to wait for, or outside
    /// MPI.
    pub free: RankSet,
    /// Ranks stopped by a signal or held by a debugger: they move when let
    /// go, and the ranks that wait for them are named as waiting for them.
    pub stopped: Vec<Stopped>,
    /// Ranks in a call that returns by itself (`MPI_Test`, `MPI_Iprobe`):
    /// they move (spinning, if the program loops on it).
    pub polling: Vec<(i64, String)>,
    /// Receives (or blocking calls) that a message already in the rank's
    /// transport will meet once its MPI looks: (the wait's words, the
    /// index of that message in `Job::ops`). They are no waits.
    pub met_in_transit: Vec<(i64, String, usize)>,
    /// Pending operations that are no waits: sends their peers have taken.
    pub not_waits: Vec<NotAWait>,
    /// Ranks outside MPI with messages waiting in their transport: likely
    /// the ones the others wait for. (rank, the messages' indices.)
    pub stalled: Vec<(i64, Vec<usize>)>,
    /// Ranks whose waits are not known: their queues could not be read
    /// (and no stack says they run outside MPI), or they were not dumped.
    /// They count as able to move, so they never make a deadlock; but
    /// while there are any, "no deadlock" cannot be said.
    pub unjudged: Vec<Unjudged>,
    /// Ranks deadlocked through a claimed cycle.
    pub deadlocked: RankSet,
    /// Cycles of waits every rank on which is known to be blocked in.
    pub cycles: Vec<Vec<Step>>,
    /// Cycles that rest on waits inferred from the queues alone: possible
    /// deadlocks, never claimed.
    pub unsure: Vec<Vec<Step>>,
    /// Ranks that cannot move under the waits as inferred, but only
    /// through an unsure cycle.
    pub maybe: RankSet,
    /// Deadlocked ranks not on a cycle, with the first step of their path
    /// into one.
    pub feeders: Vec<Step>,
    pub chains: Vec<Chain>,
    /// The indices into `waits` of each rank's waits, in order.
    by_rank: WaitsByRank,
}

impl<'j, 'a> Analysis<'j, 'a> {
    pub fn new(job: &'j Job<'a>) -> Self {
        let collectives = collectives::collectives(job);
        let members = any_source_members(job);
        let calls = calls::calls(job);
        let stances = stance::stances(job, &calls, &collectives, &members);
        let stopped = stopped(job);
        let unjudged = unjudged(job, &calls, &stopped);
        let by_rank = by_rank(&stances.waits);
        let mut analysis = Analysis {
            job,
            collectives,
            calls,
            waits: stances.waits,
            bases: stances.ranks,
            free: RankSet::new(),
            stopped,
            polling: stances.polling,
            met_in_transit: stances.met_in_transit,
            not_waits: stances.not_waits,
            stalled: stalled(job),
            unjudged,
            deadlocked: RankSet::new(),
            cycles: Vec::new(),
            unsure: Vec::new(),
            maybe: RankSet::new(),
            feeders: Vec::new(),
            chains: Vec::new(),
            by_rank,
        };
        analysis.settle();
        analysis
    }

    /// Whether a deadlock is claimed: a cycle of waits every rank on which
    /// is known to be blocked in.
    pub fn has_deadlock(&self) -> bool {
        !self.cycles.is_empty()
    }

    /// Whether the answer is "cannot tell": no claimed deadlock, but some
    /// ranks could not be judged, or a cycle rests on inferred waits.
    pub fn cannot_tell(&self) -> bool {
        self.cycles.is_empty() && (!self.unjudged.is_empty() || !self.unsure.is_empty())
    }

    /// Every rank that could not be judged.
    pub fn unjudged_ranks(&self) -> RankSet {
        self.unjudged.iter().flat_map(|u| u.ranks.iter()).collect()
    }

    /// Ranks whose waits were inferred from the queues alone.
    pub fn inferred_ranks(&self) -> RankSet {
        self.bases
            .iter()
            .filter(|b| b.basis.inferred())
            .map(|b| b.rank)
            .collect()
    }

    /// Where `rank`'s waits come from, if it has any.
    pub fn basis_of(&self, rank: i64) -> Option<RankWaits> {
        self.bases
            .binary_search_by_key(&rank, |b| b.rank)
            .ok()
            .map(|at| self.bases[at])
    }

    /// The stopped rank `rank`, if it is one.
    pub fn stopped_rank(&self, rank: i64) -> Option<&Stopped> {
        self.stopped.iter().find(|s| s.rank == rank)
    }

    /// Whether the chain ends in a rank that is outside MPI (not merely
    /// polling inside it) and runs: what a watch counts as stuck. A chain
    /// that ends in a stopped rank is no evidence: it moves once let go.
    pub fn sink_outside_mpi(&self, chain: &Chain) -> bool {
        self.stopped_rank(chain.sink).is_none()
            && self
                .job
                .rank(chain.sink)
                .is_some_and(|r| r.inside_mpi == Some(false))
    }

    /// Why `rank` could not be judged, if it could not.
    fn unjudged_why(&self, rank: i64) -> Option<&str> {
        self.unjudged
            .iter()
            .find(|u| u.ranks.contains(rank))
            .map(|u| u.why.as_str())
    }

    /// How many ranks were not dumped (they are judged by nobody).
    fn not_dumped(&self) -> usize {
        let dumped = self.job.all_ranks();
        self.unjudged_ranks()
            .iter()
            .filter(|r| !dumped.contains(*r))
            .count()
    }
}

/// The ranks stopped before mqs came (by their OS state), or held by a
/// debugger mqs read them beside.
fn stopped(job: &Job<'_>) -> Vec<Stopped> {
    job.ranks
        .iter()
        .filter_map(|r| {
            let p = r.process;
            let state = p.os_state.clone();
            let stopped = state.as_ref().is_some_and(OsState::is_stopped) || p.held_by.is_some();
            stopped.then(|| Stopped {
                rank: r.rank,
                pid: p.pid + i32::try_from(r.rank - i64::from(p.global_rank)).unwrap_or(0),
                host: p.host.clone(),
                state,
                held_by: p.held_by.as_ref().map(ToString::to_string),
            })
        })
        .collect()
}

/// The ranks whose waits are not known, grouped by why: dumped ranks whose
/// communicators, sends or receives the DLL could not list (unless their
/// stack says what they wait on, or that they run outside MPI), and ranks
/// not dumped.
fn unjudged(job: &Job<'_>, calls: &[Call], stopped: &[Stopped]) -> Vec<Unjudged> {
    let mut out: Vec<Unjudged> = Vec::new();
    let mut add = |rank: i64, why: String| match out.iter_mut().find(|u| u.why == why) {
        Some(u) => {
            u.ranks.insert(rank);
        }
        None => out.push(Unjudged {
            ranks: std::iter::once(rank).collect(),
            why,
        }),
    };
    let call_of: FxHashMap<i64, &Call> = calls.iter().map(|c| (c.rank, c)).collect();
    let halted: RankSet = stopped.iter().map(|s| s.rank).collect();
    for r in &job.ranks {
        if r.inside_mpi == Some(false)
            || halted.contains(r.rank)
            || collectives::collective_of(r).is_some()
        {
            continue;
        }
        let call = call_of.get(&r.rank).copied();
        // The stack tells what it waits for, or that it moves.
        if let Some(Call {
            blocked: calls::Blocked::Ops { .. } | calls::Blocked::Polling,
            ..
        }) = call
        {
            continue;
        }
        // A blocking call whose arguments are gone waits on operations of
        // its kinds only: the queues of the others do not matter.
        let kinds = match call {
            None => r.entry.as_deref().and_then(stance::kinds_of),
            Some(_) => None,
        };
        let mut unknown = match kinds {
            Some(kinds) => job.unknown_waits_of(r.rank, kinds),
            None => job.unknown_waits(r.rank),
        };
        if unknown.is_empty() {
            continue;
        }
        match call {
            Some(Call {
                blocked: calls::Blocked::Unknown(why),
                ..
            }) => unknown.push(why.clone()),
            None => unknown.extend(calls::arguments_missing(r)),
            _ => {}
        }
        add(r.rank, unknown.join("; "));
    }
    for f in &job.dump.failures {
        add(f.rank as i64, format!("not dumped: {}", f.message));
    }
    // Members of the dumped ranks' communicators that were not dumped and
    // did not fail: the processes named left them out. Their waits are
    // unknown like any unread rank's, so no "no deadlock" is said.
    let dumped = job.all_ranks();
    let failed: RankSet = job.dump.failures.iter().map(|f| f.rank as i64).collect();
    let mut absent = RankSet::new();
    for c in &job.comms {
        for &g in c.group.iter().flatten() {
            if !dumped.contains(g) && !failed.contains(g) {
                absent.insert(g);
            }
        }
    }
    for g in absent.iter() {
        add(g, NOT_NAMED.to_string());
    }
    out
}

/// Why a member of the job's communicators was not judged when the
/// processes read left it out.
const NOT_NAMED: &str = "not dumped: not among the processes read (name every rank, or the job's \
                         starter where it keeps a process table; a starter without one, such as \
                         Debian's hydra mpiexec, shows only its ranks on this host)";

/// Each communicator's global members, where every one is known (who can
/// meet an ANY_SOURCE receive on it), by index into `Job::comms`.
fn any_source_members(job: &Job<'_>) -> Vec<Option<RankSet>> {
    job.comms
        .iter()
        .map(|c| (!c.group.iter().any(Option::is_none)).then(|| c.global_members()))
        .collect()
}

/// The indices into `waits` of each rank's waits, in order: one list
/// sorted by rank, and where each rank's part starts (a map of a list per
/// rank cost 120 bytes a rank at 100,000 ranks).
#[derive(Debug)]
struct WaitsByRank {
    ranks: Vec<i64>,
    /// Where each of `ranks` starts in `waits`; then the end.
    starts: Vec<usize>,
    waits: Vec<usize>,
}

impl WaitsByRank {
    fn get(&self, rank: &i64) -> Option<&[usize]> {
        let at = self.ranks.binary_search(rank).ok()?;
        Some(&self.waits[self.starts[at]..self.starts[at + 1]])
    }

    fn contains_key(&self, rank: &i64) -> bool {
        self.ranks.binary_search(rank).is_ok()
    }
}

fn by_rank(waits: &[Wait]) -> WaitsByRank {
    let mut order: Vec<usize> = (0..waits.len()).collect();
    // Stable: each rank's waits stay in their order.
    order.sort_by_key(|&i| waits[i].rank);
    let mut index = WaitsByRank {
        ranks: Vec::new(),
        starts: Vec::new(),
        waits: order,
    };
    for (at, &i) in index.waits.iter().enumerate() {
        if index.ranks.last() != Some(&waits[i].rank) {
            index.ranks.push(waits[i].rank);
            index.starts.push(at);
        }
    }
    index.starts.push(index.waits.len());
    index
}

/// Ranks outside MPI (by their stacks) with messages waiting in their
/// transport.
fn stalled(job: &Job<'_>) -> Vec<(i64, Vec<usize>)> {
    job.ranks
        .iter()
        .filter(|r| r.inside_mpi == Some(false))
        .filter_map(|r| {
            let messages: Vec<usize> = job
                .op_indices(r.rank)
                .filter(|&i| job.ops[i].in_transit().is_some())
                .collect();
            (!messages.is_empty()).then_some((r.rank, messages))
        })
        .collect()
}

/// Who a wait's peer is, for words: `rank 3`, `"ring" rank 2`.
fn peer_words(job: &Job<'_>, peer: Peer, comm: usize) -> String {
    match peer {
        Peer::Rank(g) => format!("rank {g}"),
        Peer::Local(l) => format!("{} rank {l}", job.comms[comm].label()),
        Peer::Any => "a rank not known".into(),
    }
}
