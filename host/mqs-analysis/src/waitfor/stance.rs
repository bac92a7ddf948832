//! What each rank waits on: the blocking MPI call its stack shows, with
//! that call's arguments where the frame gave them; else the pending
//! operations of the kinds that call waits on; else, where no stack says
//! what it is blocked in, every pending operation it has (inferred from
//! the queues alone, which never makes a deadlock claim).
//!
//! Each point-to-point wait is then held against the peer's queues
//! ([`super::matching`]): a send the peer has taken is no wait, and one
//! whose other half the peer holds is met by progress alone.

use rustc_hash::FxHashMap;

use mqs_abi::{OpClass, OpStatus};

use super::matching::{Fate, Half, Matcher};
use super::{Basis, NotAWait, RankWaits, Wait, WaitKind};
use crate::calls::{self, Blocked, Call, CallOp};
use crate::collectives::{collective_of, Collective};
use crate::global::{Job, Op, Peer, Rank};
use crate::ranks::RankSet;

/// What the stance of every rank gave: their waits and why.
#[derive(Debug, Default)]
pub(super) struct Stances {
    pub waits: Vec<Wait>,
    /// Ranks with waits, in rank order.
    pub ranks: Vec<RankWaits>,
    pub met_in_transit: Vec<(i64, String, usize)>,
    pub not_waits: Vec<NotAWait>,
    /// Ranks in a call that returns by itself (`MPI_Test`, `MPI_Iprobe`),
    /// with that call.
    pub polling: Vec<(i64, String)>,
}

/// Builds every rank's waits.
pub(super) fn stances(
    job: &Job<'_>,
    calls: &[Call],
    collectives: &[Collective],
    members: &[Option<RankSet>],
) -> Stances {
    let matcher = Matcher::new(job);
    let sending = unlisted_sends(calls);
    let mut out = Stances::default();
    let mut call_at = 0;
    for rank in &job.ranks {
        // `calls` are in rank order, one at most per rank.
        while calls.get(call_at).is_some_and(|c| c.rank < rank.rank) {
            call_at += 1;
        }
        let call = calls
            .get(call_at)
            .filter(|c| c.rank == rank.rank)
            .map(|c| (call_at, c));
        let builder = Builder {
            job,
            matcher: &matcher,
            sending: &sending,
            members,
            rank,
            out: &mut out,
        };
        builder.build(call, collectives);
    }
    out
}

/// The blocking sends on the ranks' stacks that their DLL does not list,
/// by destination: `(call, op, sender)`, indices into `calls` and its
/// operations, and the sender's rank.
/// Such a send is under way in the transport (matched, or being copied),
/// and its destination takes part in it.
fn unlisted_sends(calls: &[Call]) -> FxHashMap<i64, Vec<(usize, usize, i64)>> {
    let mut by_peer: FxHashMap<i64, Vec<(usize, usize, i64)>> = FxHashMap::default();
    for (ci, call) in calls.iter().enumerate() {
        let Blocked::Ops { ops, .. } = &call.blocked else {
            continue;
        };
        for (oi, op) in ops.iter().enumerate() {
            if let (OpClass::PendingSends, None, Peer::Rank(to)) = (op.class, op.listed, op.peer) {
                if to != call.rank {
                    by_peer.entry(to).or_default().push((ci, oi, call.rank));
                }
            }
        }
    }
    by_peer
}

/// The kinds of pending operations a blocking call whose arguments are
/// unknown may be waiting on; None for a call that is not a blocking
/// point-to-point one.
pub(super) fn kinds_of(entry: &str) -> Option<&'static [OpClass]> {
    const RECEIVES: &[OpClass] = &[OpClass::PendingReceives];
    const SENDS: &[OpClass] = &[OpClass::PendingSends];
    const BOTH: &[OpClass] = &[OpClass::PendingSends, OpClass::PendingReceives];
    if calls::RECEIVES.contains(&entry) {
        Some(RECEIVES)
    } else if calls::SENDS.contains(&entry) {
        Some(SENDS)
    } else if calls::SENDRECVS.contains(&entry) || calls::WAITS.iter().any(|(n, _)| *n == entry) {
        Some(BOTH)
    } else {
        None
    }
}

/// One rank's waits, being built.
struct Builder<'b, 'j, 'a> {
    job: &'b Job<'a>,
    matcher: &'b Matcher,
    sending: &'b FxHashMap<i64, Vec<(usize, usize, i64)>>,
    members: &'b [Option<RankSet>],
    rank: &'b Rank<'j>,
    out: &'b mut Stances,
}

impl Builder<'_, '_, '_> {
    fn build(mut self, call: Option<(usize, &Call)>, collectives: &[Collective]) {
        let rank = self.rank;
        let has_stack = rank.main.is_some_and(|m| !m.frames.is_empty());
        if !has_stack {
            // No stack: the receive its DLL marks as a blocking call's is
            // what it is in; else every pending operation may be.
            match self.dll_blocking_receive() {
                Some(i) => self.listed_ops(&[i], Basis::Dll, false),
                None => self.queued(Basis::NoStack),
            }
            return;
        }
        if rank.inside_mpi == Some(false) {
            return;
        }
        if collective_of(rank).is_some() {
            self.collective(collectives);
            return;
        }
        let entry = rank.entry.clone();
        match call {
            Some((
                _,
                Call {
                    blocked: Blocked::Polling,
                    entry,
                    ..
                },
            )) => {
                self.out.polling.push((rank.rank, entry.clone()));
            }
            Some((
                ci,
                Call {
                    blocked: Blocked::Ops { ops, all },
                    ..
                },
            )) => {
                self.call_ops(ci, ops, *all);
            }
            Some((
                _,
                Call {
                    blocked: Blocked::Unknown(_),
                    entry,
                    ..
                },
            )) => {
                // `MPI_Wait*` on requests the DLL does not list: for a
                // call that needs every one, a pending operation it cannot
                // meet holds it; one that returns on any of them may be
                // waiting on a request already complete.
                let every = calls::WAITS.iter().any(|(n, all)| n == entry && *all);
                if self.job.waits_of(self.rank.rank).next().is_none() && self.receives_sends() {
                    return;
                }
                if every {
                    self.queued(Basis::CallKind);
                } else {
                    self.queued(Basis::OtherCall);
                }
            }
            None => match entry.as_deref().and_then(kinds_of) {
                // A blocking call whose arguments are gone: the receive the
                // DLL marks, else the pending operations of its kinds.
                Some(kinds) => match self.dll_blocking_receive() {
                    Some(i) => self.listed_ops(&[i], Basis::Dll, false),
                    None => self.call_kinds(kinds),
                },
                None => self.queued(Basis::OtherCall),
            },
        }
    }

    /// A rank in `MPI_Wait*` with nothing listed, to which other ranks are
    /// in blocking sends that their DLL does not list either: its wait is
    /// most likely on those messages (under way in the transport: matched,
    /// data still coming). As a receive matched and still arriving, each
    /// holds it only while its sender cannot run (a sender stopped by a
    /// signal mid-send). False when no rank sends to it so.
    fn receives_sends(&mut self) -> bool {
        let me = self.rank.rank;
        let Some(sends) = self.sending.get(&me) else {
            return false;
        };
        let start = self.out.waits.len();
        for &(call, op, sender) in sends {
            self.out.waits.push(Wait {
                rank: me,
                kind: WaitKind::Sending { call, op },
                on: Some(std::iter::once(sender).collect()),
                all: false,
                from_stack: true,
                progress: true,
                undecided: false,
            });
        }
        self.close(start, Basis::Sender, false);
        true
    }

    /// The one receive of the rank the DLL marks as a blocking call's
    /// ([`mqs_abi::BLOCKING_RECEIVE`]).
    fn dll_blocking_receive(&self) -> Option<usize> {
        let range = self.job.op_indices(self.rank.rank);
        let mut marked = range.filter(|&i| {
            let o = &self.job.ops[i];
            o.class == OpClass::PendingReceives
                && o.op
                    .extra_text
                    .first()
                    .is_some_and(|l| l.starts_with(mqs_abi::BLOCKING_RECEIVE))
        });
        let first = marked.next()?;
        marked.next().is_none().then_some(first)
    }

    fn collective(&mut self, collectives: &[Collective]) {
        let r = self.rank.rank;
        let Some((i, c)) = collectives
            .iter()
            .enumerate()
            .find(|(_, c)| c.ranks.contains(r))
        else {
            return;
        };
        if c.missing.is_empty() {
            return;
        }
        let start = self.out.waits.len();
        self.out.waits.push(Wait {
            rank: r,
            kind: WaitKind::Collective(i),
            on: Some(c.missing.clone()),
            all: true,
            from_stack: true,
            progress: false,
            undecided: false,
        });
        self.close(start, Basis::Collective, false);
    }

    /// The operations the call on the stack names.
    fn call_ops(&mut self, call: usize, ops: &[CallOp], all: bool) {
        let start = self.out.waits.len();
        for (oi, op) in ops.iter().enumerate() {
            if let Some(listed) = op.listed {
                self.listed(listed, true);
                continue;
            }
            let half = op.comm.map(|comm| Half {
                rank: self.rank.rank,
                comm,
                peer: op.peer,
                tag: op.tag,
                length: None,
            });
            if let Some(wait) = self.unlisted(half, op, WaitKind::Stack { call, op: oi }) {
                self.out.waits.push(wait);
            }
        }
        let returns = if all {
            // Every one must complete: done when none is left.
            self.out.waits.len() == start
        } else {
            // Any one completing returns: one that needs no wait does.
            self.out.waits.len() - start < ops.len()
        };
        if returns {
            self.out.waits.truncate(start);
            return;
        }
        self.close(start, Basis::Call, all);
    }

    /// A blocking call's operation that the DLL does not list: its wait,
    /// unless a message in the rank's transport meets it.
    fn unlisted(&mut self, half: Option<Half>, op: &CallOp, kind: WaitKind) -> Option<Wait> {
        let rank = self.rank.rank;
        let mut wait = Wait {
            rank,
            kind,
            on: reachable(self.members, rank, op.comm, op.peer),
            all: false,
            from_stack: true,
            progress: false,
            undecided: false,
        };
        let Some(half) = half else {
            return Some(wait);
        };
        if op.class == OpClass::PendingReceives {
            if let Some(m) = in_transit_for(self.job, rank, half.comm, half.peer, half.tag) {
                let words = op_words(
                    op.class,
                    op.peer,
                    op.tag,
                    &self.job.comms[half.comm].label(),
                );
                self.out.met_in_transit.push((rank, words, m));
                return None;
            }
        }
        match self.fate(op.class, &half) {
            Fate::Taken(at) => {
                self.not_a_wait(op.class, &half, at);
                None
            }
            Fate::Progress(_) => {
                wait.progress = true;
                Some(wait)
            }
            Fate::Unknown => {
                wait.undecided = true;
                Some(wait)
            }
            Fate::Waits => Some(wait),
        }
    }

    /// The pending operations of `kinds`, for a call whose arguments are
    /// unknown: it waits on one of them (or, in `MPI_Waitall`, on some).
    fn call_kinds(&mut self, kinds: &[OpClass]) {
        let ops: Vec<usize> = self
            .job
            .op_indices(self.rank.rank)
            .filter(|&i| {
                let o = &self.job.ops[i];
                kinds.contains(&o.class)
                    && (o.status() == OpStatus::Pending
                        || (o.class == OpClass::PendingReceives && o.status() == OpStatus::Matched))
            })
            .collect();
        // None listed: its operation is done and being completed, or the
        // DLL does not list it (then its queues say so, and it is not
        // judged); it waits on nothing listed, unless a rank is sending
        // to it.
        if ops.is_empty() && kinds.contains(&OpClass::PendingReceives) && self.receives_sends() {
            return;
        }
        self.listed_ops(&ops, Basis::CallKind, false);
    }

    /// Every pending operation of the rank: what it is blocked in is not
    /// known (`why`, where there is more to say than `basis`).
    fn queued(&mut self, basis: Basis) {
        let ops: Vec<usize> = self.job.waits_of(self.rank.rank).collect();
        self.listed_ops(&ops, basis, false);
    }

    /// Waits on listed operations (indices into `Job::ops`), any of which
    /// may be the one the rank is in.
    fn listed_ops(&mut self, ops: &[usize], basis: Basis, all: bool) {
        let start = self.out.waits.len();
        let mut met = false;
        for &i in ops {
            met |= !self.listed(i, basis != Basis::NoStack && basis != Basis::OtherCall);
        }
        // One of them needs no wait, and it may be the one the rank is
        // in: it may return.
        if met && !all {
            self.out.waits.truncate(start);
            return;
        }
        self.close(start, basis, all);
    }

    /// The wait of one listed operation; false when it is none (complete,
    /// met in transit, taken by its peer).
    fn listed(&mut self, i: usize, from_stack: bool) -> bool {
        let job = self.job;
        let op: &Op<'_> = &job.ops[i];
        if op.class == OpClass::PendingReceives && op.status() == OpStatus::Matched {
            return self.matched_receive(i, from_stack);
        }
        if op.class == OpClass::UnexpectedMessages || op.status() != OpStatus::Pending {
            return false;
        }
        let half = Half::of(op);
        if op.class == OpClass::PendingReceives {
            if let Some(m) = in_transit_for(job, op.rank, op.comm, op.peer, op.tag) {
                let words = op_words(op.class, op.peer, op.tag, &job.comms[op.comm].label());
                self.out.met_in_transit.push((op.rank, words, m));
                return false;
            }
        }
        let fate = self.fate(op.class, &half);
        if let Fate::Taken(at) = fate {
            self.not_a_wait(op.class, &half, at);
            return false;
        }
        self.out.waits.push(Wait {
            rank: op.rank,
            kind: WaitKind::Op(i),
            on: reachable(self.members, op.rank, Some(op.comm), op.peer),
            all: false,
            from_stack,
            progress: matches!(fate, Fate::Progress(_)),
            undecided: fate == Fate::Unknown,
        });
        true
    }

    /// A receive matched and not complete: its data is still to come from
    /// the sender it matched, which moves it on whenever its MPI runs (a
    /// progress wait: it holds the rank only while that sender cannot run,
    /// stopped by a signal, say).
    fn matched_receive(&mut self, i: usize, from_stack: bool) -> bool {
        let op: &Op<'_> = &self.job.ops[i];
        let sender = op.op.actual_global_rank;
        let on = if sender >= 0 {
            Some(std::iter::once(sender).collect())
        } else {
            reachable(self.members, op.rank, Some(op.comm), op.peer)
        };
        self.out.waits.push(Wait {
            rank: op.rank,
            kind: WaitKind::Op(i),
            on,
            all: false,
            from_stack,
            progress: true,
            undecided: false,
        });
        true
    }

    fn fate(&self, class: OpClass, half: &Half) -> Fate {
        if class == OpClass::PendingSends {
            self.matcher.send_fate(self.job, half)
        } else {
            self.matcher.recv_fate(self.job, half)
        }
    }

    /// A send its peer has taken: said, not waited on.
    fn not_a_wait(&mut self, class: OpClass, half: &Half, at: usize) {
        let comm = self.job.comms[half.comm].label();
        let peer = self.job.ops[at].rank;
        let status = self.job.ops[at].status().name();
        self.out.not_waits.push(NotAWait {
            rank: half.rank,
            words: format!(
                "rank {}'s {} to rank {peer}: its receive there is {status}",
                half.rank,
                op_words(class, half.peer, half.tag, &comm)
            ),
        });
    }

    /// Records the rank's waits from `start` on, if any.
    fn close(&mut self, start: usize, basis: Basis, all: bool) {
        if self.out.waits.len() > start {
            self.out.ranks.push(RankWaits {
                rank: self.rank.rank,
                basis,
                all,
            });
        }
    }
}

/// The ranks that can meet a wait on `peer`: that rank, or for
/// ANY_SOURCE every other member of its communicator; None when not known.
fn reachable(
    members: &[Option<RankSet>],
    rank: i64,
    comm: Option<usize>,
    peer: Peer,
) -> Option<RankSet> {
    match peer {
        Peer::Rank(g) => Some(std::iter::once(g).collect()),
        Peer::Local(_) => None,
        Peer::Any => members[comm?].as_ref().map(|m| m.without(rank)),
    }
}

/// The words of a wait on one operation: `recv tag 10 on "ring"`, or for an
/// OR-wait `recv from ANY_SOURCE tag 11 on MPI_COMM_WORLD`.
pub(super) fn op_words(class: OpClass, peer: Peer, tag: Option<i64>, comm: &str) -> String {
    let tag = match tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".into(),
    };
    let what = if class == OpClass::PendingSends {
        "send"
    } else {
        "recv"
    };
    match peer {
        Peer::Any => format!("{what} from ANY_SOURCE {tag} on {comm}"),
        _ => format!("{what} {tag} on {comm}"),
    }
}

/// The message in `rank`'s transport that a receive on `comm` from `peer`
/// with `tag` will match once the rank's MPI looks (index into
/// `Job::ops`).
fn in_transit_for(
    job: &Job<'_>,
    rank: i64,
    comm: usize,
    peer: Peer,
    tag: Option<i64>,
) -> Option<usize> {
    job.op_indices(rank).find(|&i| {
        let m = &job.ops[i];
        m.comm == comm
            && m.class == OpClass::UnexpectedMessages
            && m.in_transit().is_some()
            && (peer == Peer::Any || m.peer == peer)
            && tag.is_none_or(|t| m.tag == Some(t))
    })
}
