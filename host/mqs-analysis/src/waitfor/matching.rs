//! Whether a point-to-point wait still waits for its peer: a send's
//! message and a receive's sender are looked for in the peer's queues
//! (communicator, source, tag, length, in the order MPI matches them).
//!
//! A send whose receive the peer has completed or matched is no wait on
//! the peer: what is left is local to the sender. A send whose receive
//! the peer has posted, or a receive whose send the peer holds, is met by
//! progress alone: either side's MPI moves it on, wherever that side is
//! blocked inside MPI, so it waits only on a peer that cannot run (stopped
//! by a signal, say). Anything else waits for the peer to act.

use rustc_hash::FxHashMap;

use mqs_abi::{OpClass, OpStatus};

use crate::global::{Job, Op, Peer};
use crate::ranks::RankSet;

/// What the peer's queues say of one point-to-point wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The peer has taken it: its matching receive (index into `Job::ops`)
    /// is complete or matched. Not a wait.
    Taken(usize),
    /// The peer holds the other half (its posted receive, or its pending
    /// send; index into `Job::ops`): met as soon as either side's MPI
    /// runs.
    Progress(usize),
    /// The peer holds nothing that matches: it must act first.
    Waits,
    /// The peer's queue of the other half was not read (or the peer is not
    /// known): cannot be decided, so it counts as a wait on the peer.
    Unknown,
}

/// One side of a point-to-point exchange, as the rank that waits sees it.
#[derive(Debug, Clone, Copy)]
pub struct Half {
    /// The waiting rank (global).
    pub rank: i64,
    /// Index into `Job::comms`.
    pub comm: usize,
    /// The other side.
    pub peer: Peer,
    /// None: MPI_ANY_TAG (receives only).
    pub tag: Option<i64>,
    /// Bytes: a send's message, a receive's buffer; None where not known.
    pub length: Option<i64>,
}

impl Half {
    /// The half an operation the DLL lists is.
    pub fn of(op: &Op<'_>) -> Self {
        Half {
            rank: op.rank,
            comm: op.comm,
            peer: op.peer,
            tag: op.tag,
            length: (op.op.desired_length > 0).then_some(op.op.desired_length),
        }
    }
}

/// The job's queues indexed for matching: each pending send by its
/// communicator and destination, and the ranks whose sends or receives
/// were not all read. Built once per analysis (an ANY_SOURCE receive
/// looks at every member, so a scan per receive would be quadratic).
#[derive(Debug, Default)]
pub struct Matcher {
    sends_to: FxHashMap<(usize, i64), Vec<usize>>,
    unread_sends: RankSet,
    unread_receives: RankSet,
    /// By communicator: every member is known, dumped, and its sends read
    /// (an ANY_SOURCE receive on it that finds no send then waits).
    sends_read: Vec<bool>,
}

impl Matcher {
    pub fn new(job: &Job<'_>) -> Self {
        let mut sends_to: FxHashMap<(usize, i64), Vec<usize>> = FxHashMap::default();
        for (i, op) in job.ops.iter().enumerate() {
            if let (OpClass::PendingSends, Peer::Rank(dest)) = (op.class, op.peer) {
                sends_to.entry((op.comm, dest)).or_default().push(i);
            }
        }
        let unread = |what: &str| -> RankSet {
            let mut set = RankSet::new();
            for ((kind, _), ranks) in job.not_available.iter().chain(&job.cut_short) {
                if kind == what || kind == "communicators" {
                    set.union_with(ranks);
                }
            }
            set
        };
        let unread_sends = unread("sends");
        let dumped = job.all_ranks();
        let sends_read = job
            .comms
            .iter()
            .map(|c| {
                let members = c.global_members();
                members.len() == c.group.len()
                    && members.first_common(&unread_sends).is_none()
                    && members.first_not_in(&dumped).is_none()
            })
            .collect();
        Matcher {
            sends_to,
            unread_sends,
            unread_receives: unread("receives"),
            sends_read,
        }
    }

    /// Whether a send (`send`) waits for its destination.
    pub fn send_fate(&self, job: &Job<'_>, send: &Half) -> Fate {
        let Peer::Rank(dest) = send.peer else {
            return Fate::Unknown;
        };
        let receives = || {
            job.op_indices(dest).filter(|&i| {
                let r = &job.ops[i];
                r.class == OpClass::PendingReceives
                    && r.comm == send.comm
                    && from_either(r.peer, send.rank)
                    && r.tag.is_none_or(|t| Some(t) == send.tag)
                    && fits(send.length, length_of(r))
            })
        };
        // The oldest match first: a receive taken is the one MPI matched.
        if let Some(i) = receives().find(|&i| job.ops[i].status() != OpStatus::Pending) {
            return Fate::Taken(i);
        }
        if let Some(i) = receives().next() {
            return Fate::Progress(i);
        }
        if job.rank(dest).is_some() && !self.unread_receives.contains(dest) {
            Fate::Waits
        } else {
            Fate::Unknown
        }
    }

    /// Whether a receive (`recv`) waits for its source: it does not when a
    /// sender holds a matching send (for ANY_SOURCE, any member does).
    pub fn recv_fate(&self, job: &Job<'_>, recv: &Half) -> Fate {
        let from_source = |s: &Op<'_>| match recv.peer {
            Peer::Rank(g) => s.rank == g,
            Peer::Any => s.rank != recv.rank,
            Peer::Local(_) => false,
        };
        let sends = self
            .sends_to
            .get(&(recv.comm, recv.rank))
            .map_or(&[][..], Vec::as_slice);
        let found = sends.iter().copied().find(|&i| {
            let s = &job.ops[i];
            from_source(s)
                && recv.tag.is_none_or(|t| s.tag == Some(t))
                && fits(length_of(s), recv.length)
        });
        if let Some(i) = found {
            return Fate::Progress(i);
        }
        let read = match recv.peer {
            Peer::Rank(g) => job.rank(g).is_some() && !self.unread_sends.contains(g),
            Peer::Local(_) => false,
            Peer::Any => self.sends_read.get(recv.comm).copied().unwrap_or(false),
        };
        if read {
            Fate::Waits
        } else {
            Fate::Unknown
        }
    }
}

/// A receive's source names `rank`: the rank itself or ANY_SOURCE.
fn from_either(source: Peer, rank: i64) -> bool {
    matches!(source, Peer::Any) || source == Peer::Rank(rank)
}

fn length_of(op: &Op<'_>) -> Option<i64> {
    (op.op.desired_length > 0).then_some(op.op.desired_length)
}

/// A message of `message` bytes fits a buffer of `buffer` bytes (either
/// unknown: it may).
fn fits(message: Option<i64>, buffer: Option<i64>) -> bool {
    match (message, buffer) {
        (Some(m), Some(b)) => m <= b,
        _ => true,
    }
}
