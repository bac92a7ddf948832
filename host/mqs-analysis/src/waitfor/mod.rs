//! Who waits for whom: the wait-for graph of a job from its pending
//! operations (and from its collectives, when stacks were taken), its
//! deadlocked ranks, their cycles, and the chains of ranks that wait on a
//! rank that could still move.
//!
//! The model: each rank waits on each of its pending sends and receives,
//! and on the collective it is in. A specific receive or a send can be met
//! by one rank; an ANY_SOURCE receive by any member of its communicator (an
//! OR-wait); a collective only when every member it lacks arrives (an
//! AND-wait). We do not know which of its operations a rank is blocked in
//! (a rank in MPI_Waitany is freed by any of them), so a rank counts as
//! deadlocked only if *none* of its waits can be met by a rank that may
//! still move: a rank with nothing pending, one outside MPI, one not
//! dumped, or one that such ranks can free in turn. That reports no
//! deadlock that a single completion could break.

use mqs_abi::OpClass;

use super::calls::{self, Blocked, Call, CallOp};
use super::collectives::{self, whereabouts, Collective};
use super::ranks::RankSet;
use crate::global::{Job, Peer};

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
    /// The rank's stack names it too (the blocking call it is in).
    pub from_stack: bool,
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

/// The wait-for analysis of one dump.
#[derive(Debug)]
pub struct Analysis<'j, 'a> {
    pub job: &'j Job<'a>,
    pub collectives: Vec<Collective>,
    /// The calls the ranks' stacks say they are in.
    pub calls: Vec<Call>,
    pub waits: Vec<Wait>,
    /// Ranks that may move by themselves: nothing to wait for, or outside
    /// MPI.
    pub free: RankSet,
    /// Receives (or blocking calls) that a message already in the rank's
    /// transport will meet once its MPI looks: (the wait's words, the
    /// index of that message in `Job::ops`). They are no waits.
    pub met_in_transit: Vec<(i64, String, usize)>,
    /// Ranks outside MPI with messages waiting in their transport: likely
    /// the ones the others wait for. (rank, the messages' indices.)
    pub stalled: Vec<(i64, Vec<usize>)>,
    /// Ranks whose waits are not known: their queues could not be read
    /// (and no stack says they run outside MPI), or they were not dumped.
    /// They count as able to move, so they never make a deadlock; but
    /// while there are any, "no deadlock" cannot be said.
    pub unjudged: Vec<Unjudged>,
    pub deadlocked: RankSet,
    pub cycles: Vec<Vec<Step>>,
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
        let mut waits = Vec::new();
        // The wait of each listed operation that has one: index into
        // `waits` (NO_WAIT: none), by the operation's index.
        const NO_WAIT: usize = usize::MAX;
        let mut wait_of_op: Vec<usize> = vec![NO_WAIT; job.ops.len()];
        let mut met_in_transit = Vec::new();
        for (i, op) in job.ops.iter().enumerate() {
            if op.class == OpClass::UnexpectedMessages || op.status() != mqs_abi::OpStatus::Pending
            {
                continue;
            }
            if op.class == OpClass::PendingReceives {
                if let Some(m) = in_transit_for(job, op.rank, Some(op.comm), op.peer, op.tag) {
                    let words = op_words(op.class, op.peer, op.tag, &job.comms[op.comm].label());
                    met_in_transit.push((op.rank, words, m));
                    continue;
                }
            }
            let on = match op.peer {
                Peer::Rank(g) => Some(std::iter::once(g).collect()),
                Peer::Local(_) => None,
                Peer::Any => members[op.comm].as_ref().map(|m| m.without(op.rank)),
            };
            wait_of_op[i] = waits.len();
            waits.push(Wait {
                rank: op.rank,
                kind: WaitKind::Op(i),
                on,
                all: false,
                from_stack: false,
            });
        }
        let calls = calls::calls(job);
        for (ci, call) in calls.iter().enumerate() {
            let Blocked::Ops { ops, .. } = &call.blocked else {
                continue;
            };
            for (oi, op) in ops.iter().enumerate() {
                match op.listed {
                    // The DLL lists it: one wait, named by both (or none,
                    // where the DLL says it is matched already).
                    Some(listed) => {
                        if let Some(&w) = wait_of_op.get(listed).filter(|&&w| w != NO_WAIT) {
                            waits[w].from_stack = true;
                        }
                    }
                    None if op.class == OpClass::PendingReceives
                        && in_transit_for(job, call.rank, op.comm, op.peer, op.tag).is_some() =>
                    {
                        let m = in_transit_for(job, call.rank, op.comm, op.peer, op.tag);
                        let comm = op
                            .comm
                            .map_or("a communicator not known".into(), |c| job.comms[c].label());
                        let words = op_words(op.class, op.peer, op.tag, &comm);
                        met_in_transit.extend(m.map(|m| (call.rank, words, m)));
                    }
                    None => waits.push(Wait {
                        rank: call.rank,
                        kind: WaitKind::Stack { call: ci, op: oi },
                        on: reachable(&members, call.rank, op),
                        all: false,
                        from_stack: true,
                    }),
                }
            }
        }
        for (i, c) in collectives.iter().enumerate() {
            if c.missing.is_empty() {
                continue;
            }
            for rank in c.ranks.iter() {
                waits.push(Wait {
                    rank,
                    kind: WaitKind::Collective(i),
                    on: Some(c.missing.clone()),
                    all: true,
                    from_stack: true,
                });
            }
        }
        let unjudged = unjudged(job, &calls);
        let unknown: RankSet = unjudged.iter().flat_map(|u| u.ranks.iter()).collect();
        let waiting: RankSet = waits.iter().map(|w| w.rank).collect();
        let free: RankSet = job
            .ranks
            .iter()
            .filter(|r| {
                r.inside_mpi == Some(false)
                    || !(waiting.contains(r.rank) || unknown.contains(r.rank))
            })
            .map(|r| r.rank)
            .collect();
        let dumped = job.all_ranks();

        // The ranks that may move: the free ones, the ones not dumped or
        // not judged, and the ones with a wait that those can meet, until
        // nothing changes. Each rank added keeps the step that let it in,
        // towards a rank added before it: the chains follow those down to
        // a free rank.
        let mut may = free.clone();
        may.extend(unknown.iter());
        let by_rank = by_rank(&waits);
        let mut via: Vec<Step> = Vec::new();
        // Passes over the ranks in order, until one changes nothing. Most
        // waits point down or across, so few passes are needed; a rank
        // let in earlier in a pass counts for the ones after it.
        loop {
            let mut changed = false;
            for r in dumped.iter() {
                if may.contains(r) {
                    continue;
                }
                let moves = |s: i64| may.contains(s) || !dumped.contains(s);
                let met = by_rank.get(&r).into_iter().flatten().find_map(|&i| {
                    let w = &waits[i];
                    match &w.on {
                        None => Some(None),
                        Some(on) if w.all => on.iter().all(moves).then(|| on.first()),
                        // The lowest member that moves.
                        Some(on) => match (on.first_common(&may), on.first_not_in(&dumped)) {
                            (Some(a), Some(b)) => Some(Some(a.min(b))),
                            (Some(a), None) | (None, Some(a)) => Some(Some(a)),
                            (None, None) => None,
                        },
                    }
                    .map(|to| (i, to))
                });
                if let Some((wait, to)) = met {
                    if let Some(to) = to {
                        via.push(Step { rank: r, wait, to });
                    }
                    may.insert(r);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let deadlocked: RankSet = dumped.iter().filter(|r| !may.contains(*r)).collect();

        let mut analysis = Analysis {
            job,
            collectives,
            calls,
            waits,
            by_rank,
            free,
            met_in_transit,
            stalled: stalled(job),
            unjudged,
            deadlocked,
            cycles: Vec::new(),
            feeders: Vec::new(),
            chains: Vec::new(),
        };
        analysis.find_cycles();
        analysis.find_chains(&via);
        analysis
    }

    /// Whether any rank is deadlocked (then there is a cycle).
    pub fn has_deadlock(&self) -> bool {
        !self.cycles.is_empty()
    }

    /// Whether the answer is "cannot tell": no deadlock among the ranks
    /// that could be judged, but some could not be.
    pub fn cannot_tell(&self) -> bool {
        self.cycles.is_empty() && !self.unjudged.is_empty()
    }

    /// How many ranks were not dumped (they are judged by nobody).
    fn not_dumped(&self) -> usize {
        let dumped = self.job.all_ranks();
        self.unjudged_ranks()
            .iter()
            .filter(|r| !dumped.contains(*r))
            .count()
    }

    /// `rank 2 is not calling MPI: 3 messages wait in its transport: 2 from
    /// rank 3 (vader fast box), 1 from rank 1 (vader FIFO)`, for a rank
    /// outside MPI (by its stack) with messages in its transport.
    pub fn stalled_words(&self, rank: i64) -> Option<String> {
        let (_, messages) = self.stalled.iter().find(|(r, _)| *r == rank)?;
        let mut by: Vec<(String, &str, usize)> = Vec::new();
        for &m in messages {
            let op = &self.job.ops[m];
            let from = match op.peer {
                Peer::Rank(g) => format!("rank {g}"),
                Peer::Local(l) => format!("{} rank {l}", self.job.comms[op.comm].label()),
                Peer::Any => "a rank not known".into(),
            };
            let place = op.in_transit().unwrap_or("transport");
            match by.iter_mut().find(|(f, p, _)| *f == from && *p == place) {
                Some(entry) => entry.2 += 1,
                None => by.push((from, place, 1)),
            }
        }
        let parts: Vec<String> = by
            .iter()
            .map(|(from, place, n)| format!("{n} from {from} ({place})"))
            .collect();
        let n = messages.len();
        Some(format!(
            "rank {rank} is not calling MPI: {n} message{} wait{} in its transport: {}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
            parts.join(", ")
        ))
    }

    /// Every rank that could not be judged.
    pub fn unjudged_ranks(&self) -> RankSet {
        self.unjudged.iter().flat_map(|u| u.ranks.iter()).collect()
    }

    /// Why `rank` could not be judged, if it could not.
    fn unjudged_why(&self, rank: i64) -> Option<&str> {
        self.unjudged
            .iter()
            .find(|u| u.ranks.contains(rank))
            .map(|u| u.why.as_str())
    }

    /// The waits of `rank`, the specific ones (one peer) first, then
    /// collectives, then OR-waits.
    fn waits_of(&self, rank: i64) -> Vec<usize> {
        let mut list: Vec<usize> = self
            .by_rank
            .get(&rank)
            .map(<[usize]>::to_vec)
            .unwrap_or_default();
        list.sort_by_key(|&i| {
            let w = &self.waits[i];
            let n = w.on.as_ref().map_or(usize::MAX, RankSet::len);
            (
                matches!(w.kind, WaitKind::Collective(_)) as u8 + 2 * (n > 1 && !w.all) as u8,
                i,
            )
        });
        list
    }

    /// The step a deadlocked rank is shown taking: its most specific wait,
    /// towards a deadlocked rank.
    fn step_within(&self, rank: i64, within: &RankSet) -> Option<Step> {
        self.waits_of(rank).into_iter().find_map(|w| {
            let to = self.waits[w].on.as_ref()?.first_common(within)?;
            Some(Step { rank, wait: w, to })
        })
    }

    fn find_cycles(&mut self) {
        let mut covered = RankSet::new();
        for start in self.deadlocked.iter() {
            if covered.contains(start) {
                continue;
            }
            let mut path: Vec<Step> = Vec::new();
            let mut cur = start;
            loop {
                if let Some(at) = path.iter().position(|s| s.rank == cur) {
                    self.cycles.push(path[at..].to_vec());
                    for s in &path[..at] {
                        self.feeders.push(*s);
                    }
                    break;
                }
                if covered.contains(cur) {
                    self.feeders.extend(path.iter().copied());
                    break;
                }
                let Some(step) = self.step_within(cur, &self.deadlocked) else {
                    break;
                };
                path.push(step);
                cur = step.to;
                if path.len() > self.deadlocked.len() + 1 {
                    break;
                }
            }
            covered.extend(path.iter().map(|s| s.rank));
        }
    }

    fn find_chains(&mut self, via: &[Step]) {
        // Each step leads to a rank let in earlier (or free from the
        // start), so one pass in order gives every step its sink and the
        // length of its path there.
        let at: std::collections::HashMap<i64, usize> =
            via.iter().enumerate().map(|(i, s)| (s.rank, i)).collect();
        let mut sink = vec![0i64; via.len()];
        let mut depth = vec![0usize; via.len()];
        for (i, s) in via.iter().enumerate() {
            match at.get(&s.to).filter(|&&j| j < i) {
                Some(&j) => {
                    sink[i] = sink[j];
                    depth[i] = depth[j] + 1;
                }
                None => {
                    sink[i] = s.to;
                    depth[i] = 1;
                }
            }
        }
        // Chains by sink, in order of first appearance; each shows the
        // longest path (the first of that length).
        let mut chains: Vec<(Chain, usize)> = Vec::new();
        let mut chain_of: std::collections::HashMap<i64, usize> = Default::default();
        for (i, first) in via.iter().enumerate() {
            match chain_of.get(&sink[i]).map(|&c| &mut chains[c]) {
                Some((chain, longest)) => {
                    chain.waiting.insert(first.rank);
                    if depth[i] > depth[*longest] {
                        *longest = i;
                    }
                }
                None => {
                    chain_of.insert(sink[i], chains.len());
                    chains.push((
                        Chain {
                            steps: Vec::new(),
                            sink: sink[i],
                            waiting: std::iter::once(first.rank).collect(),
                        },
                        i,
                    ));
                }
            }
        }
        self.chains = chains
            .into_iter()
            .map(|(mut chain, longest)| {
                let mut path = vec![via[longest]];
                while let Some(&j) = at.get(&path[path.len() - 1].to) {
                    if path.len() > via.len() {
                        break;
                    }
                    path.push(via[j]);
                }
                chain.steps = path;
                chain
            })
            .collect();
    }

    /// Whether the chain ends in a rank that is outside MPI (not merely
    /// polling inside it).
    pub fn sink_outside_mpi(&self, chain: &Chain) -> bool {
        self.job
            .rank(chain.sink)
            .is_some_and(|r| r.inside_mpi == Some(false))
    }

    /// The words of one wait, short: `recv tag 10 on "ring"`, or for an
    /// OR-wait `recv from ANY_SOURCE tag 11 on MPI_COMM_WORLD`, or
    /// `MPI_Barrier, which rank 3 has not entered`.
    pub fn wait_words(&self, wait: usize, to: Option<i64>) -> String {
        match self.waits[wait].kind {
            WaitKind::Op(i) => {
                let op = &self.job.ops[i];
                op_words(op.class, op.peer, op.tag, &self.job.comms[op.comm].label())
            }
            WaitKind::Collective(c) => {
                let c = &self.collectives[c];
                match to {
                    Some(t) => format!("{}, which rank {t} has not entered", c.name),
                    None => c.name.clone(),
                }
            }
            WaitKind::Stack { call, op } => {
                let call = &self.calls[call];
                let Blocked::Ops { ops, .. } = &call.blocked else {
                    return call.entry.clone();
                };
                let op = &ops[op];
                let comm = op.comm.map_or("a communicator not known".to_string(), |c| {
                    self.job.comms[c].label()
                });
                format!(
                    "{}, from its stack: {}",
                    op_words(op.class, op.peer, op.tag, &comm),
                    call.entry
                )
            }
        }
    }

    fn step_words(&self, s: &Step) -> String {
        format!(
            "rank {} waits for rank {} ({})",
            s.rank,
            s.to,
            self.wait_words(s.wait, Some(s.to))
        )
    }

    /// Where a rank that others wait for stands.
    fn sink_words(&self, rank: i64) -> String {
        let Some(r) = self.job.rank(rank) else {
            return format!("rank {rank} was not dumped");
        };
        if let Some(why) = self.unjudged_why(rank) {
            return format!("what rank {rank} waits for is not known ({why})");
        }
        let polling = self
            .calls
            .iter()
            .find(|c| c.rank == rank && c.blocked == Blocked::Polling);
        if let (Some(call), false) = (polling, self.job.unknown_waits(rank).is_empty()) {
            return format!(
                "rank {rank} is in {}, which returns by itself (its queues could not be read)",
                call.entry
            );
        }
        if let Some(words) = self.stalled_words(rank) {
            return format!("{words}: it is probably the one the others wait for");
        }
        let pending = self.by_rank.get(&rank).map_or(0, <[usize]>::len);
        let place = whereabouts(r);
        match (pending, r.inside_mpi) {
            (0, Some(false)) => format!(
                "rank {rank} has nothing pending and is {place}: it is probably the one \
                 the others wait for"
            ),
            (0, _) => format!("rank {rank} has nothing pending ({place})"),
            (n, _) => format!("rank {rank} is {place} with {n} operations pending"),
        }
    }

    /// The analysis in words, one finding a line.
    pub fn words(&self) -> String {
        let mut out = String::new();
        for cycle in &self.cycles {
            let steps: Vec<String> = cycle.iter().map(|s| self.step_words(s)).collect();
            out.push_str(&format!("deadlock: {}\n", steps.join(", ")));
            let on_cycle: RankSet = cycle.iter().map(|s| s.rank).collect();
            // Be precise about the OR-waits of the ranks in it.
            for r in on_cycle.iter() {
                for &i in self.by_rank.get(&r).into_iter().flatten() {
                    let w = &self.waits[i];
                    let Some(on) = &w.on else { continue };
                    if w.all || on.len() < 2 {
                        continue;
                    }
                    out.push_str(&format!(
                        "  rank {r} also waits on {} ({}): any of {} could match it, and every \
                         one of them is deadlocked too, so it cannot break the cycle\n",
                        if matches!(w.kind, WaitKind::Op(_)) {
                            "an OR-wait"
                        } else {
                            "a wait"
                        },
                        self.wait_words(i, None),
                        on.labelled()
                    ));
                }
            }
        }
        if !self.feeders.is_empty() {
            let ranks: RankSet = self.feeders.iter().map(|s| s.rank).collect();
            let steps: Vec<String> = self.feeders.iter().map(|s| self.step_words(s)).collect();
            out.push_str(&format!(
                "  {} deadlocked through the cycle: {}\n",
                ranks.labelled(),
                steps.join(", ")
            ));
        }
        for c in &self.collectives {
            let comm = match (c.comm, c.assumed) {
                (Some(i), _) => self.job.comms[i].label(),
                (None, Some(i)) => format!(
                    "communicator unknown (no debug info for the call's arguments), {} assumed",
                    self.job.comms[i].label()
                ),
                (None, None) => "communicator unknown".into(),
            };
            let mut line = format!(
                "collective: {} {} in {} ({comm})",
                c.ranks.labelled(),
                if c.ranks.len() == 1 { "is" } else { "are" },
                c.name
            );
            if c.missing.is_empty() {
                line.push_str("; no member is missing");
            } else {
                let mut missing = Vec::new();
                for m in c.missing.iter() {
                    let place = match self.job.rank(m) {
                        Some(r) => {
                            let mut place = whereabouts(r);
                            if let Some(other) =
                                self.collectives.iter().find(|o| o.ranks.contains(m))
                            {
                                let on = match other.comm {
                                    Some(i) => format!(" on {}", self.job.comms[i].label()),
                                    None => String::new(),
                                };
                                place = format!("in a different collective, {}{on}", other.name);
                            }
                            let mine: Vec<String> = self
                                .waits_of(m)
                                .into_iter()
                                .filter(|&w| matches!(self.waits[w].kind, WaitKind::Op(_)))
                                .map(|w| {
                                    let to = self.waits[w]
                                        .on
                                        .as_ref()
                                        .filter(|on| on.len() == 1)
                                        .and_then(RankSet::first);
                                    match to {
                                        Some(t) => format!(
                                            "waiting for rank {t} ({})",
                                            self.wait_words(w, None)
                                        ),
                                        None => format!("waiting on {}", self.wait_words(w, None)),
                                    }
                                })
                                .collect();
                            if !mine.is_empty() {
                                place = format!("{place}, {}", mine.join(", "));
                            }
                            place
                        }
                        None => "not dumped".into(),
                    };
                    missing.push(format!("rank {m} ({place})"));
                }
                line.push_str(&format!("; missing: {}", missing.join(", ")));
            }
            out.push_str(&line);
            out.push('\n');
        }
        for chain in &self.chains {
            let steps: Vec<String> = chain.steps.iter().map(|s| self.step_words(s)).collect();
            let others = chain.waiting.len().saturating_sub(1);
            let more = if others > chain.steps.len().saturating_sub(1) {
                format!(" ({} wait for it in all)", chain.waiting.labelled())
            } else {
                String::new()
            };
            out.push_str(&format!(
                "chain: {}; {}: the chain waits for rank {}{more}\n",
                steps.join(", "),
                self.sink_words(chain.sink),
                chain.sink
            ));
        }
        for (rank, _) in &self.stalled {
            if let Some(words) = self.stalled_words(*rank) {
                out.push_str(&format!("not calling MPI: {words}\n"));
            }
        }
        for (rank, wait, m) in &self.met_in_transit {
            let message = &self.job.ops[*m];
            out.push_str(&format!(
                "in transit: rank {rank}'s {wait} is met by a message already in its {} (its \
                 MPI has not looked yet): not a wait\n",
                message.in_transit().unwrap_or("transport")
            ));
        }
        for call in &self.calls {
            if let Some(words) = &call.disagrees {
                out.push_str(&format!("stack and queues disagree: {words}\n"));
            }
        }
        for u in &self.unjudged {
            out.push_str(&format!(
                "not judged: {} ({}; counted as able to move: what they wait for is unknown)\n",
                u.ranks.labelled(),
                u.why
            ));
        }
        let judged = self.job.ranks.len() - (self.unjudged_ranks().len() - self.not_dumped());
        let waiting = self
            .job
            .ranks
            .iter()
            .filter(|r| self.by_rank.contains_key(&r.rank))
            .count();
        if self.cannot_tell() {
            let were = if judged == 1 {
                "1 rank that was".to_owned()
            } else {
                format!("{judged} ranks that were")
            };
            out.push_str(&format!(
                "cannot tell: {} not judged; no cycle of waits among the {were} ({waiting} \
                 waiting)\n",
                self.unjudged_ranks().labelled()
            ));
        } else if self.cycles.is_empty() {
            out.push_str(&format!(
                "no deadlock: no cycle of waits among {} ranks ({waiting} waiting)\n",
                self.job.ranks.len(),
            ));
        } else {
            out.push_str(&format!(
                "deadlocked: {} in {} cycle{}\n",
                self.deadlocked.labelled(),
                self.cycles.len(),
                if self.cycles.len() == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

/// The ranks whose waits are not known, grouped by why: dumped ranks whose
/// communicators, sends or receives the DLL could not list (unless their
/// stack shows them outside MPI: then they run, whatever is queued), and
/// ranks not dumped.
fn unjudged(job: &Job<'_>, calls: &[Call]) -> Vec<Unjudged> {
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
    let call_of: std::collections::HashMap<i64, &Call> =
        calls.iter().map(|c| (c.rank, c)).collect();
    for r in &job.ranks {
        if r.inside_mpi == Some(false) {
            continue;
        }
        let call = call_of.get(&r.rank).copied();
        // The stack tells what it waits for, or that it moves.
        if let Some(Call {
            blocked: Blocked::Ops { .. } | Blocked::Polling,
            ..
        }) = call
        {
            continue;
        }
        let mut unknown = job.unknown_waits(r.rank);
        if unknown.is_empty() {
            continue;
        }
        match call {
            Some(Call {
                blocked: Blocked::Unknown(why),
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

/// The ranks that can meet an operation a stack names: its peer, or for
/// ANY_SOURCE every other member of its communicator; None when not known.
fn reachable(members: &[Option<RankSet>], rank: i64, op: &CallOp) -> Option<RankSet> {
    match op.peer {
        Peer::Rank(g) => Some(std::iter::once(g).collect()),
        Peer::Local(_) => None,
        Peer::Any => members[op.comm?].as_ref().map(|m| m.without(rank)),
    }
}

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

/// The words of a wait on one operation: `recv tag 10 on "ring"`, or for an
/// OR-wait `recv from ANY_SOURCE tag 11 on MPI_COMM_WORLD`.
fn op_words(class: OpClass, peer: Peer, tag: Option<i64>, comm: &str) -> String {
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
    comm: Option<usize>,
    peer: Peer,
    tag: Option<i64>,
) -> Option<usize> {
    let comm = comm?;
    job.op_indices(rank).find(|&i| {
        let m = &job.ops[i];
        m.comm == comm
            && m.class == OpClass::UnexpectedMessages
            && m.in_transit().is_some()
            && (peer == Peer::Any || m.peer == peer)
            && tag.is_none_or(|t| m.tag == Some(t))
    })
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
