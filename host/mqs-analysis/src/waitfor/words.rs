//! The analysis in words: one finding a line, the verdict last.

use mqs_abi::OpStatus;

use super::stance::op_words;
use super::{peer_words, Analysis, Basis, Step, Stopped, WaitKind};
use crate::calls::{Blocked, Call, CallOp};
use crate::collectives::whereabouts;
use crate::ranks::RankSet;

/// Up to this many steps of a cycle or chain are told one by one; more
/// that are all alike are told once (a 100,000-rank ring fits a line).
const STEPS_ONE_BY_ONE: usize = 8;

impl Stopped {
    /// `rank 2 (pid 4242) is stopped by a signal (SIGSTOP), not by mqs:
    /// the ranks waiting for it go on when it resumes (kill -CONT 4242)`.
    pub fn words(&self) -> String {
        let pid = match &self.host {
            Some(host) => format!("pid {} on {host}", self.pid),
            None => format!("pid {}", self.pid),
        };
        if let Some(held) = &self.held_by {
            return format!(
                "rank {} ({pid}) is held stopped by {held}, not by mqs: the ranks waiting for it \
                 go on when that debugger lets it run",
                self.rank
            );
        }
        match &self.state {
            Some(state) if state.stopped_by_signal() => format!(
                "rank {} ({pid}) is {}, not by mqs: the ranks waiting for it go on when it \
                 resumes (kill -CONT {})",
                self.rank,
                state.words(),
                self.pid
            ),
            Some(state) => format!(
                "rank {} ({pid}) is {}, not by mqs: the ranks waiting for it go on when that \
                 tracer lets it run",
                self.rank,
                state.words()
            ),
            None => format!("rank {} ({pid}) is stopped, not by mqs", self.rank),
        }
    }
}

impl Analysis<'_, '_> {
    /// `rank 2 is not calling MPI: 3 messages wait in its transport: 2 from
    /// rank 3 (vader fast box), 1 from rank 1 (vader FIFO)`, for a rank
    /// outside MPI (by its stack) with messages in its transport.
    pub fn stalled_words(&self, rank: i64) -> Option<String> {
        let (_, messages) = self.stalled.iter().find(|(r, _)| *r == rank)?;
        let mut by: Vec<(String, &str, usize)> = Vec::new();
        for &m in messages {
            let op = &self.job.ops[m];
            let from = peer_words(self.job, op.peer, op.comm);
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
            WaitKind::Stack { call, op } => match self.stack_op(call, op) {
                Ok((call, op, comm)) => format!(
                    "{}, from its stack: {}",
                    op_words(op.class, op.peer, op.tag, &comm),
                    call.entry
                ),
                Err(entry) => entry,
            },
            WaitKind::Sending { call, op } => match self.stack_op(call, op) {
                Ok((call, op, comm)) => {
                    let tag = op.tag.map_or("any tag".to_string(), |t| format!("tag {t}"));
                    format!(
                        "the message rank {}'s stack is sending it ({}, {tag} on {comm}), \
                         which neither rank's queues list",
                        call.rank, call.entry
                    )
                }
                Err(entry) => entry,
            },
        }
    }

    /// Operation `op` of the call `call` on a stack, with its
    /// communicator's label; the call's entry where it names no operations.
    fn stack_op(&self, call: usize, op: usize) -> Result<(&Call, &CallOp, String), String> {
        let call = &self.calls[call];
        let Blocked::Ops { ops, .. } = &call.blocked else {
            return Err(call.entry.clone());
        };
        let op = &ops[op];
        let comm = op.comm.map_or("a communicator not known".to_string(), |c| {
            self.job.comms[c].label()
        });
        Ok((call, op, comm))
    }

    /// Steps in words, `, `-separated: one by one, or, for more than
    /// [`STEPS_ONE_BY_ONE`] steps that all wait alike on a rank at the same
    /// distance (a ring's cycle, a halo's chain), once for all of them:
    /// `ranks 0-99999 each wait for rank r-1 (mod 100000) (recv tag 10 on
    /// MPI_COMM_WORLD)`.
    fn steps_words(&self, steps: &[Step]) -> String {
        if let Some(words) = self.alike_steps_words(steps) {
            return words;
        }
        let words: Vec<String> = steps.iter().map(|s| self.step_words(s)).collect();
        words.join(", ")
    }

    /// Alike steps told once ([`Analysis::steps_words`]), or None where
    /// they are few or not alike.
    pub(crate) fn alike_steps_words(&self, steps: &[Step]) -> Option<String> {
        self.alike_steps(steps)
            .map(|(ranks, each)| format!("{} {each}", ranks.labelled()))
    }

    /// Steps that all wait alike, more than [`STEPS_ONE_BY_ONE`] of them:
    /// their ranks, and what each waits for (`each wait for rank r-1 (mod
    /// 100000) (recv tag 10 on MPI_COMM_WORLD)`); on a grid, where the
    /// ranks are not at one distance (a cycle along an inner dimension,
    /// which wraps), by the offset on it (`each wait for the rank at
    /// (+1,0,0) on "cart" (recv tag 11 on "cart")`).
    fn alike_steps(&self, steps: &[Step]) -> Option<(RankSet, String)> {
        // Distances are taken modulo the job's size (its highest rank + 1).
        let n = self.job.ranks.iter().map(|r| r.rank + 1).max().unwrap_or(0);
        if steps.len() <= STEPS_ONE_BY_ONE || n < 2 {
            return None;
        }
        let words = |s: &Step| {
            format!(
                "{}{}",
                self.wait_words(s.wait, None),
                self.progress_words(s.wait)
            )
        };
        let first_words = words(&steps[0]);
        if steps.iter().any(|s| words(s) != first_words) {
            return None;
        }
        let ranks: RankSet = steps.iter().map(|s| s.rank).collect();
        let offset = |s: &Step| (s.to - s.rank).rem_euclid(n);
        let first_offset = offset(&steps[0]);
        if steps.iter().all(|s| offset(s) == first_offset) {
            let d = if first_offset > n / 2 {
                first_offset - n
            } else {
                first_offset
            };
            let sign = if d >= 0 { "+" } else { "" };
            return Some((
                ranks,
                format!("each wait for rank r{sign}{d} (mod {n}) ({first_words})"),
            ));
        }
        let (comm, first) = self.grid_step(&steps[0])?;
        if steps.iter().any(|s| {
            self.grid_step(s)
                .is_none_or(|(c, o)| c != comm || o != first)
        }) {
            return None;
        }
        Some((
            ranks,
            format!(
                "each wait for the rank at {} on {} ({first_words})",
                mqs_abi::offset_words(&first),
                self.job.comms[comm].label()
            ),
        ))
    }

    /// The communicator of a step's wait, and the offset from the waiting
    /// rank to the one it waits for on that communicator's grid, if it has
    /// one.
    fn grid_step(&self, s: &Step) -> Option<(usize, Vec<i64>)> {
        let WaitKind::Op(i) = self.waits[s.wait].kind else {
            return None;
        };
        let index = self.job.ops[i].comm;
        let comm = &self.job.comms[index];
        let grid = comm.grid()?;
        let (me, to) = (comm.grid_local(s.rank)?, comm.grid_local(s.to)?);
        let mut offset = vec![0i64; grid.dims.len()];
        grid.offset(me, to, &mut offset).then_some((index, offset))
    }

    /// What a progress wait lacks, said after its operation.
    fn progress_words(&self, wait: usize) -> &'static str {
        let w = &self.waits[wait];
        if !w.progress {
            return "";
        }
        match w.kind {
            WaitKind::Op(i) if self.job.ops[i].status() == OpStatus::Matched => {
                "; matched, its data still to come as the peer's MPI runs"
            }
            _ => "; its other half is there, so only the peer's progress is missing",
        }
    }

    fn step_words(&self, s: &Step) -> String {
        let how = self.progress_words(s.wait);
        format!(
            "rank {} waits for rank {} ({}{how})",
            s.rank,
            s.to,
            self.wait_words(s.wait, Some(s.to))
        )
    }

    /// For steps whose peer's queue of the other half was not read: which
    /// ranks, in one line (`  undecided: ...`).
    fn undecided_line(&self, steps: &[Step]) -> Option<String> {
        let mut sends = RankSet::new();
        let mut receives = RankSet::new();
        for s in steps.iter().filter(|s| self.waits[s.wait].undecided) {
            match self.class_of(s.wait) {
                Some(mqs_abi::OpClass::PendingSends) => receives.insert(s.to),
                _ => sends.insert(s.to),
            };
        }
        let mut parts = Vec::new();
        if !sends.is_empty() {
            parts.push(format!(
                "the sends of {} were not read, so whether one of them is on its way is not known",
                sends.labelled()
            ));
        }
        if !receives.is_empty() {
            parts.push(format!(
                "the receives of {} were not read, so whether one was posted is not known",
                receives.labelled()
            ));
        }
        (!parts.is_empty()).then(|| format!("  undecided: {}\n", parts.join("; ")))
    }

    /// The kind of operation a wait is on, where it is one.
    fn class_of(&self, wait: usize) -> Option<mqs_abi::OpClass> {
        match self.waits[wait].kind {
            WaitKind::Op(i) => Some(self.job.ops[i].class),
            WaitKind::Stack { call, op } => match &self.calls[call].blocked {
                Blocked::Ops { ops, .. } => ops.get(op).map(|o| o.class),
                _ => None,
            },
            WaitKind::Sending { .. } => Some(mqs_abi::OpClass::PendingReceives),
            WaitKind::Collective(_) => None,
        }
    }

    /// Where a rank that others wait for stands.
    fn sink_words(&self, rank: i64) -> String {
        if let Some(stopped) = self.stopped_rank(rank) {
            return stopped.words();
        }
        let Some(r) = self.job.rank(rank) else {
            return format!("rank {rank} was not dumped");
        };
        if let Some(why) = self.unjudged_why(rank) {
            return format!("what rank {rank} waits for is not known ({why})");
        }
        if let Some((_, entry)) = self.polling.iter().find(|(p, _)| *p == rank) {
            return format!(
                "rank {rank} is in {entry}, which returns by itself: it waits on nothing (it \
                 spins, if it calls {entry} in a loop)"
            );
        }
        if let Some(words) = self.stalled_words(rank) {
            return format!("{words}: it is probably the one the others wait for");
        }
        let pending = self.job.waits_of(rank).count();
        let place = whereabouts(r);
        match (pending, r.inside_mpi) {
            (0, Some(false)) => format!(
                "rank {rank} has nothing pending and is {place}: it is probably the one \
                 the others wait for"
            ),
            (_, Some(false)) => format!(
                "rank {rank} is {place}, with {pending} operation{} pending: it is probably the \
                 one the others wait for",
                if pending == 1 { "" } else { "s" }
            ),
            (0, _) if self.matched_receives(rank) > 0 => format!(
                "rank {rank} has nothing pending but a receive matched, its data still arriving \
                 ({place})"
            ),
            (0, _) => format!("rank {rank} has nothing pending ({place})"),
            (n, _) => format!("rank {rank} is {place} with {n} operations pending"),
        }
    }

    /// How many of `rank`'s receives are matched and not complete.
    fn matched_receives(&self, rank: i64) -> usize {
        self.job
            .op_indices(rank)
            .filter(|&i| {
                let o = &self.job.ops[i];
                o.class == mqs_abi::OpClass::PendingReceives && o.status() == OpStatus::Matched
            })
            .count()
    }

    /// One cycle's lines: its steps, and the OR-waits of its ranks that
    /// cannot break it.
    /// The cycles, each in its lines; cycles whose steps all wait alike
    /// and alike one another (a grid's rows, each a cycle along one
    /// dimension: thousands in a large job) told once: `deadlock: 50
    /// cycles alike: ranks 0-1999 each wait for rank r+50 (mod 2000) (recv
    /// tag 10 on MPI_COMM_WORLD)`.
    fn deadlock_lines(&self, out: &mut String) {
        let mut alike: Vec<(String, RankSet, usize)> = Vec::new();
        for cycle in &self.cycles {
            let mut lines = String::new();
            self.cycle_lines(cycle, "deadlock", &mut lines);
            match self.alike_steps(cycle) {
                Some((ranks, each)) if lines.lines().count() == 1 => {
                    match alike.iter_mut().find(|(e, _, _)| *e == each) {
                        Some((_, all, count)) => {
                            all.extend(ranks.iter());
                            *count += 1;
                        }
                        None => alike.push((each, ranks, 1)),
                    }
                }
                _ => out.push_str(&lines),
            }
        }
        for (each, ranks, count) in alike {
            let cycles = if count == 1 {
                String::new()
            } else {
                format!("{count} cycles alike: ")
            };
            out.push_str(&format!("deadlock: {cycles}{} {each}\n", ranks.labelled()));
        }
    }

    fn cycle_lines(&self, cycle: &[Step], head: &str, out: &mut String) {
        out.push_str(&format!("{head}: {}\n", self.steps_words(cycle)));
        out.extend(self.undecided_line(cycle));
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

    /// `recv` waits of a rank that inferred them, in words: why.
    fn inferred_words(&self, ranks: &RankSet) -> String {
        let no_stack = ranks
            .iter()
            .filter(|&r| self.basis_of(r).is_some_and(|b| b.basis == Basis::NoStack))
            .collect::<RankSet>();
        let other: RankSet = ranks.iter().filter(|r| !no_stack.contains(*r)).collect();
        let mut why = Vec::new();
        if !no_stack.is_empty() {
            why.push(format!("{}: no stack was read", no_stack.labelled()));
        }
        for r in other.iter() {
            let place = self.job.rank(r).map_or("stack unknown".into(), whereabouts);
            why.push(format!(
                "rank {r}: {place}, a call whose waits mqs does not know"
            ));
        }
        why.join("; ")
    }

    fn collective_lines(&self, out: &mut String) {
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
                let missing: Vec<String> = c
                    .missing
                    .iter()
                    .map(|m| format!("rank {m} ({})", self.missing_place(m)))
                    .collect();
                line.push_str(&format!("; missing: {}", missing.join(", ")));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }

    /// Where a member missing from a collective is, and what it waits for.
    fn missing_place(&self, m: i64) -> String {
        let Some(r) = self.job.rank(m) else {
            return "not dumped".into();
        };
        if let Some(stopped) = self.stopped_rank(m) {
            return stopped.words();
        }
        let mut place = whereabouts(r);
        if let Some(other) = self.collectives.iter().find(|o| o.ranks.contains(m)) {
            let on = match other.comm {
                Some(i) => format!(" on {}", self.job.comms[i].label()),
                None => String::new(),
            };
            place = format!("in a different collective, {}{on}", other.name);
        }
        let mine: Vec<String> = self
            .waits_of(m)
            .into_iter()
            .filter(|&w| !matches!(self.waits[w].kind, WaitKind::Collective(_)))
            .map(|w| {
                let to = self.waits[w]
                    .on
                    .as_ref()
                    .filter(|on| on.len() == 1)
                    .and_then(RankSet::first);
                match to {
                    Some(t) => format!("waiting for rank {t} ({})", self.wait_words(w, None)),
                    None => format!("waiting on {}", self.wait_words(w, None)),
                }
            })
            .collect();
        if !mine.is_empty() {
            place = format!("{place}, {}", mine.join(", "));
        }
        place
    }

    fn chain_lines(&self, out: &mut String) {
        for chain in &self.chains {
            let steps = self.steps_words(&chain.steps);
            let others = chain.waiting.len().saturating_sub(1);
            let more = if others > chain.steps.len().saturating_sub(1) {
                format!(" ({} wait for it in all)", chain.waiting.labelled())
            } else {
                String::new()
            };
            out.push_str(&format!(
                "chain: {steps}; {}: the chain waits for rank {}{more}\n",
                self.sink_words(chain.sink),
                chain.sink
            ));
            out.extend(self.undecided_line(&chain.steps));
        }
    }

    /// What is no wait, and why: messages in transit, sends taken, calls
    /// that return by themselves, disagreements, ranks not judged.
    fn note_lines(&self, out: &mut String) {
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
        for n in &self.not_waits {
            out.push_str(&format!("taken: {}: not a wait\n", n.words));
        }
        for (rank, entry) in &self.polling {
            out.push_str(&format!(
                "polling: rank {rank} is in {entry}, which returns by itself: it waits on \
                 nothing\n"
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
    }

    /// The last line: deadlocked, possibly deadlocked, cannot tell, or no
    /// deadlock.
    fn verdict(&self, out: &mut String) {
        let judged = self.job.ranks.len() - (self.unjudged_ranks().len() - self.not_dumped());
        let waiting = self
            .job
            .ranks
            .iter()
            .filter(|r| self.by_rank.contains_key(&r.rank))
            .count();
        let inferred = self.inferred_ranks();
        let from_queues = if inferred.is_empty() {
            String::new()
        } else if inferred.len() == self.job.ranks.len() {
            "; waits inferred from the queues alone: no stack says what any rank is blocked in"
                .to_owned()
        } else {
            format!(
                "; the waits of {} inferred from the queues alone",
                inferred.labelled()
            )
        };
        let stopped: RankSet = self.stopped.iter().map(|s| s.rank).collect();
        let stopped = if stopped.is_empty() {
            String::new()
        } else {
            format!(
                "; {} stopped, not by mqs: the others go on when {} let go",
                stopped.labelled(),
                if stopped.len() == 1 {
                    "it is"
                } else {
                    "they are"
                }
            )
        };
        if !self.cycles.is_empty() {
            out.push_str(&format!(
                "deadlocked: {} in {} cycle{}\n",
                self.deadlocked.labelled(),
                self.cycles.len(),
                if self.cycles.len() == 1 { "" } else { "s" }
            ));
        } else if !self.unsure.is_empty() {
            out.push_str(&format!(
                "cannot tell: {} may be deadlocked, but the cycle rests on waits inferred from \
                 the queues alone ({}): whether they are blocked in those operations is not \
                 known (--stacks shows what each rank is blocked in)\n",
                self.maybe.labelled(),
                self.inferred_words(
                    &self
                        .maybe
                        .iter()
                        .filter(|r| inferred.contains(*r))
                        .collect()
                )
            ));
        } else if self.cannot_tell() {
            let were = if judged == 1 {
                "1 rank that was".to_owned()
            } else {
                format!("{judged} ranks that were")
            };
            out.push_str(&format!(
                "cannot tell: {} not judged; no cycle of waits among the {were} ({waiting} \
                 waiting{from_queues}{stopped})\n",
                self.unjudged_ranks().labelled()
            ));
        } else {
            out.push_str(&format!(
                "no deadlock: no cycle of waits among {} ranks ({waiting} waiting{from_queues}\
                 {stopped})\n",
                self.job.ranks.len(),
            ));
        }
    }

    /// The analysis in words, one finding a line.
    pub fn words(&self) -> String {
        let mut out = String::new();
        self.deadlock_lines(&mut out);
        if !self.feeders.is_empty() {
            let ranks: RankSet = self.feeders.iter().map(|s| s.rank).collect();
            out.push_str(&format!(
                "  {} deadlocked through the cycle: {}\n",
                ranks.labelled(),
                self.steps_words(&self.feeders)
            ));
        }
        for cycle in &self.unsure {
            self.cycle_lines(cycle, "possible deadlock", &mut out);
        }
        for s in &self.stopped {
            out.push_str(&format!("stopped: {}\n", s.words()));
        }
        self.collective_lines(&mut out);
        self.chain_lines(&mut out);
        self.note_lines(&mut out);
        self.verdict(&mut out);
        out
    }
}
