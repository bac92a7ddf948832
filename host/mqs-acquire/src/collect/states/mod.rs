//! Ranks in equal states: what a parent in a collector tree sends up in
//! place of one dump per rank.
//!
//! Two ranks are in the same state when their dumps are equal once what
//! necessarily differs between ranks is taken out: the pid, the global
//! rank, the host, the dump's counters, and the local rank of each
//! communicator on which it is the global rank (MPI_COMM_WORLD and its
//! copies). A state is sent once, with runs of the
//! ranks in it; consecutive ranks with consecutive pids on one host and
//! equal counters make one run. Nothing is lost: [`States::expand`] gives
//! back every rank's dump exactly as its collector made it.
//!
//! In a ring, a halo exchange or a stencil every rank's peers differ; read
//! relative to the rank (on the communicators where its rank is its global
//! one) they are equal. So a state is kept in one of two forms: peers as
//! they are (everyone receives from rank 0), or relative to each rank (a
//! ring: everyone from the rank before it). A rank goes to a state of
//! either form that it equals; a new state starts with peers as they are,
//! and becomes relative when the next new rank equals it only that way.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use mqs_core::model::{DumpStats, ProcessDump, Section};

mod run;
use run::push_run;
pub use run::Run;

/// The host of a run that the sender read itself: its receiver puts the
/// sender's key in its place ([`States::own_host_is`]).
pub const OWN_HOST: &str = "";

/// Ranks grouped by state; see the module's documentation.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct States {
    pub list: Vec<State>,
    /// What each level of the subtree that sent it did: its sender first,
    /// then the sender's children, and so on (figures only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<Level>,
    /// The host and pid of every rank its states name by number alone
    /// ([`Run::by_number`]), host by host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roll: Vec<Run>,
    /// Each state's normal form as JSON, to find it again (not sent).
    #[serde(skip)]
    index: HashMap<Vec<u8>, usize>,
    /// The state the last rank added went to: the next rank is most often
    /// in it too, and comparing is far cheaper than writing the JSON.
    #[serde(skip)]
    last: Option<usize>,
    /// Ranks added are compared on what the views read only
    /// ([`strip_per_rank_detail`]).
    #[serde(skip)]
    view_only: bool,
    /// Ranks that no line names by pid go in their state by number, their
    /// hosts and pids in the roll call ([`States::by_number`]).
    #[serde(skip)]
    by_number: bool,
    /// States of one rank that may yet become relative, by their relative
    /// form's key, the oldest first out past [`MAX_PENDING`].
    #[serde(skip)]
    pending: HashMap<Vec<u8>, Pending>,
    #[serde(skip)]
    pending_order: std::collections::VecDeque<Vec<u8>>,
    /// Peers that many of the ranks name, by communicator (name and id)
    /// and rank in it: in a relative form they stay as they are
    /// ([`States::find_hubs`]).
    #[serde(skip)]
    hubs: HashSet<Hub>,
}

/// A peer that many ranks name: a communicator's id, and the peer's rank
/// in it. (Ids that differ from process to process find no hub, and the
/// peers stay relative: only less is merged.)
type Hub = (u64, i64);

/// How many single-rank states wait to become relative at most: the edge
/// classes of a halo exchange are met again only a row or a plane later.
const MAX_PENDING: usize = 1024;

/// The collectors of one level of a tree, together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub collectors: u64,
    /// Bytes they read from their children.
    pub bytes_received: u64,
    /// The longest time one of them took to merge its children's results.
    pub merge_ms: f64,
}

impl Level {
    /// Both levels as one.
    pub fn absorb(&mut self, other: &Level) {
        self.collectors += other.collectors;
        self.bytes_received += other.bytes_received;
        self.merge_ms = self.merge_ms.max(other.merge_ms);
    }
}

/// Adds `more` to `levels` level by level, `more[0]` to `levels[at]`.
pub fn absorb_levels(levels: &mut Vec<Level>, more: &[Level], at: usize) {
    if levels.len() < at + more.len() {
        levels.resize(at + more.len(), Level::default());
    }
    for (i, level) in more.iter().enumerate() {
        levels[at + i].absorb(level);
    }
}

/// One state and the ranks in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The dump in normal form (pid and global rank 0, no host, no
    /// counters, a local rank equal to the global rank marked as such).
    pub dump: ProcessDump,
    pub runs: Vec<Run>,
    /// Its peers on the communicators whose local rank is marked are
    /// distances from each rank ([`RELATIVE`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relative: bool,
}

/// A state of one rank that may yet become relative: a later new rank
/// whose relative form is its own joins it so.
#[derive(Debug)]
struct Pending {
    at: usize,
    absolute_key: Vec<u8>,
    relative: ProcessDump,
}

impl States {
    pub fn new() -> Self {
        Self::default()
    }

    /// States of ranks compared on what the job view, `--deadlock` and DOT
    /// read: without `per_rank_detail`, each rank added loses what only a
    /// per-rank output shows ([`strip_per_rank_detail`]).
    pub fn with_detail(per_rank_detail: bool) -> Self {
        Self {
            view_only: !per_rank_detail,
            ..Self::default()
        }
    }

    /// With `yes`, a rank that no line of the job view or DOT names by its
    /// pid (one neither stopped nor held by a debugger) goes in its state by
    /// number, its host and pid in the roll call: runs of a state then go
    /// on across hosts. Only for a job whose ranks are numbered already
    /// (not processes found on nodes, numbered later by host and pid).
    pub fn by_number(self, yes: bool) -> Self {
        Self {
            by_number: yes,
            ..self
        }
    }

    /// Finds the hubs among the peers of `dumps` (the ranks about to be
    /// added): a peer that more than a quarter of them (and more than 3)
    /// name on a communicator on which each is its global rank, such as
    /// rank 0 that every rank of a ring also waits on. In a relative form
    /// it stays as it is (and does not move along a run), so that the
    /// ring's ranks are still one state.
    pub fn find_hubs(&mut self, dumps: &[ProcessDump]) {
        let mut named: HashMap<Hub, usize> = HashMap::new();
        for p in dumps {
            let Section::Ok { value } = &p.communicators else {
                continue;
            };
            let mut by_this: HashSet<Hub> = HashSet::new();
            for c in value
                .list
                .iter()
                .filter(|c| c.local_rank == i64::from(p.global_rank))
            {
                for q in [&c.sends, &c.receives, &c.unexpected] {
                    let Section::Ok { value: q } = q else {
                        continue;
                    };
                    for op in &q.operations {
                        if (0..c.size).contains(&op.desired_local_rank) {
                            by_this.insert((c.unique_id, op.desired_local_rank));
                        }
                    }
                }
            }
            for hub in by_this {
                *named.entry(hub).or_default() += 1;
            }
        }
        self.hubs = named
            .into_iter()
            .filter(|(_, count)| mqs_core::model::is_hub(*count, dumps.len()))
            .map(|(hub, _)| hub)
            .collect();
    }

    /// How many ranks it holds.
    pub fn ranks(&self) -> usize {
        self.list.iter().flat_map(|s| &s.runs).map(Run::ranks).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Adds one rank's dump, read on host `host` (its key).
    pub fn add(&mut self, host: &str, mut process: ProcessDump) {
        let (pid, rank) = (process.pid, process.global_rank);
        let stats = std::mem::take(&mut process.stats);
        let stats = if self.view_only {
            strip_per_rank_detail(&mut process);
            // Counters are per-rank detail too: runs go on past them.
            DumpStats::default()
        } else {
            stats
        };
        let mut run = Run::one(host, rank, pid, stats);
        if self.by_number && !named_by_pid(&process) {
            push_run(&mut self.roll, run.clone());
            run = run.numbered();
        }
        normalize(&mut process, rank);
        self.add_rank(process, run);
    }

    /// One rank's state, in either form: the one of a state it equals,
    /// else a new state (made relative by a later rank if that is how the
    /// two are equal).
    fn add_rank(&mut self, dump: ProcessDump, run: Run) {
        let at = self.state_of(dump, run.rank);
        self.join(at, vec![run]);
    }

    fn state_of(&mut self, dump: ProcessDump, rank: i32) -> usize {
        // The next rank is most often in the last rank's state; as it is,
        // it needs no relative form.
        let last = self
            .last
            .filter(|&at| self.list[at].relative || self.list[at].dump == dump);
        if let Some(at) = last.filter(|&at| !self.list[at].relative) {
            return at;
        }
        let relative = relative_form(&dump, rank, &self.hubs);
        if let Some(at) = last.filter(|&at| relative.as_ref() == Some(&self.list[at].dump)) {
            return at;
        }
        let absolute_key = key_of(&dump, false);
        if let Some(&at) = self.index.get(&absolute_key) {
            return at;
        }
        let Some(relative) = relative else {
            return self.new_state(absolute_key, dump, false);
        };
        let relative_key = key_of(&relative, true);
        if let Some(&at) = self.index.get(&relative_key) {
            return at;
        }
        if let Some(at) = self.convert_pending(&relative_key) {
            return at;
        }
        let at = self.new_state(absolute_key.clone(), dump, false);
        if self.pending_order.len() >= MAX_PENDING {
            if let Some(oldest) = self.pending_order.pop_front() {
                self.pending.remove(&oldest);
            }
        }
        self.pending_order.push_back(relative_key.clone());
        self.pending.insert(
            relative_key,
            Pending {
                at,
                absolute_key,
                relative,
            },
        );
        at
    }

    fn new_state(&mut self, key: Vec<u8>, dump: ProcessDump, relative: bool) -> usize {
        self.index.insert(key, self.list.len());
        self.list.push(State {
            dump,
            runs: Vec::new(),
            relative,
        });
        self.list.len() - 1
    }

    /// Adds every state of `other` (a child's), and its levels one level
    /// below this sender's.
    pub fn merge(&mut self, other: States) {
        absorb_levels(&mut self.levels, &other.levels, 1);
        for run in other.roll {
            push_run(&mut self.roll, run);
        }
        for state in other.list {
            // A state of one rank may be in a ring with ranks of ours.
            if !state.relative && state.runs.len() == 1 && state.runs[0].is_single() {
                let run = state.runs.into_iter().next().expect("one run");
                self.add_rank(state.dump, run);
            } else {
                self.add_runs(state.dump, state.runs, state.relative);
            }
        }
    }

    fn add_runs(&mut self, dump: ProcessDump, runs: Vec<Run>, relative: bool) {
        let same = self.last.filter(|&at| {
            self.list
                .get(at)
                .is_some_and(|s| s.relative == relative && s.dump == dump)
        });
        let at = match same {
            Some(at) => at,
            None => {
                let key = key_of(&dump, relative);
                match self.index.get(&key) {
                    Some(&at) => at,
                    None => match self.convert_pending(&key) {
                        Some(at) => at,
                        None => self.new_state(key, dump, relative),
                    },
                }
            }
        };
        self.join(at, runs);
    }

    /// The pending state of one rank whose relative form has
    /// `relative_key`, made relative, if it is still alone.
    fn convert_pending(&mut self, relative_key: &[u8]) -> Option<usize> {
        let pending = self.pending.remove(relative_key)?;
        let state = &self.list[pending.at];
        if state.relative || state.runs.len() != 1 || !state.runs[0].is_single() {
            return None;
        }
        self.index.remove(&pending.absolute_key);
        self.index.insert(relative_key.to_vec(), pending.at);
        let state = &mut self.list[pending.at];
        state.dump = pending.relative;
        state.relative = true;
        Some(pending.at)
    }

    /// Adds `runs` to state `at`, extending its last run where they go on,
    /// and making runs of equal length at equal distances one run of blocks.
    fn join(&mut self, at: usize, runs: Vec<Run>) {
        self.last = Some(at);
        let list = &mut self.list[at].runs;
        for run in runs {
            push_run(list, run);
        }
    }

    /// Every state's runs and the roll call in rank order, joined again
    /// where that makes fewer: a parent merges its children in the order
    /// they answer, and a child's runs go on from another's only in order.
    pub fn in_rank_order(&mut self) {
        for state in &mut self.list {
            run::in_rank_order(&mut state.runs);
        }
        run::in_rank_order(&mut self.roll);
    }

    /// Records the sender's own level: it read `bytes_received` from its
    /// children and merged for `merge_ms`.
    pub fn own_level(&mut self, bytes_received: u64, merge_ms: f64) {
        if self.levels.is_empty() {
            self.levels.push(Level::default());
        }
        self.levels[0] = Level {
            collectors: 1,
            bytes_received,
            merge_ms,
        };
    }

    /// Names `key` as the host of the sender's own runs.
    pub fn own_host_is(&mut self, key: &str) {
        let runs = self.list.iter_mut().flat_map(|s| &mut s.runs);
        for run in runs.chain(&mut self.roll).filter(|r| !r.by_number) {
            if run.host == OWN_HOST {
                run.host = key.to_string();
            }
        }
    }

    /// One dump per run of consecutive ranks (a block), standing for its
    /// ranks (a compact job's, see [`ProcessDump::run_len`]), with the key
    /// of its host; none for a run by number (pid 0: the ranks' hosts and
    /// pids are in the roll call, which the caller takes first).
    pub fn runs(self) -> Vec<(Option<String>, ProcessDump)> {
        let mut out = Vec::new();
        for state in self.list {
            for run in state.runs.iter().flat_map(Run::each_block) {
                let mut p = state.dump.clone();
                p.pid = run.pid;
                p.global_rank = run.rank;
                p.stats = run.stats;
                p.run_len = run.count.max(1);
                p.run_shifts_peers = state.relative && p.run_len > 1;
                restore(&mut p, state.relative);
                if !p.run_shifts_peers {
                    p.clear_fixed_in_run();
                }
                out.push(((!run.by_number).then_some(run.host), p));
            }
        }
        out
    }

    /// Every rank's dump, with the key of the host it was read on (as
    /// [`States::runs`]).
    pub fn expand(self) -> Vec<(Option<String>, ProcessDump)> {
        let mut out = Vec::with_capacity(self.ranks());
        for (host, run) in self.runs() {
            for p in run.split_run() {
                out.push((host.clone(), p));
            }
        }
        out
    }
}

/// Whether a line of the job view or DOT may name the rank by its pid: a
/// rank stopped by a signal or held by a debugger is told with the pid to
/// let it go by.
fn named_by_pid(p: &ProcessDump) -> bool {
    p.held_by.is_some()
        || p.os_state
            .as_ref()
            .is_some_and(mqs_core::interface::OsState::is_stopped)
}

/// What a communicator's local rank becomes in the normal form when it is
/// the global rank (MPI_COMM_WORLD and its copies); no DLL reports it.
const SAME_AS_GLOBAL: i64 = i64::MIN;

/// What the main thread's id becomes in the normal form: it is the pid.
const MAIN_TID: i32 = i32::MIN;

/// Takes out of a dump what only a per-rank output shows (`--json`, the
/// per-rank listing), so that ranks whose views are equal share a state
/// (the front end asked for the job view, `--deadlock` or DOT). Buffer
/// addresses go, and frame addresses where the frame's function is known;
/// the other threads' ids become 0; the requests a rank's operations name
/// and its `MPI_Wait*` call waits on are numbered in order of first
/// appearance instead of by address, which keeps what matches them.
pub fn strip_per_rank_detail(p: &mut ProcessDump) {
    let mut numbers: HashMap<u64, u64> = HashMap::new();
    let mut number = |address: u64| {
        let next = numbers.len() as u64 + 1;
        *numbers.entry(address).or_insert(next)
    };
    if let Section::Ok { value } = &mut p.communicators {
        for c in &mut value.list {
            for queue in [&mut c.sends, &mut c.receives, &mut c.unexpected] {
                let Section::Ok { value: queue } = queue else {
                    continue;
                };
                for op in &mut queue.operations {
                    op.buffer = 0;
                    // Every operation of every rank: each line is looked at
                    // once, and the lines are written again in one buffer
                    // only from the first that names a request.
                    let text = &op.extra_text;
                    let mut rewritten: Option<mqs_abi::LinesBuf> = None;
                    for (at, line) in text.iter().enumerate() {
                        match (mqs_abi::request_split(line), &mut rewritten) {
                            (Some((what, address)), lines) => {
                                let lines = lines.get_or_insert_with(|| {
                                    let mut lines = mqs_abi::LinesBuf::with_capacity(64);
                                    text.iter().take(at).for_each(|l| lines.push(l));
                                    lines
                                });
                                lines.push_parts(&mqs_abi::request_parts(what, number(address)));
                            }
                            (None, Some(lines)) => lines.push(line),
                            (None, None) => {}
                        }
                    }
                    if let Some(lines) = rewritten {
                        op.extra_text = lines.finish();
                    }
                }
            }
        }
    }
    if let Some(Section::Ok { value }) = &mut p.stacks {
        for thread in &mut value.list {
            if thread.tid != p.pid {
                thread.tid = 0;
            }
            for frame in &mut thread.frames {
                if frame.function.is_some() {
                    frame.address = 0;
                }
                if let Some(call) = &mut frame.call {
                    for request in &mut call.requests {
                        *request = number(*request);
                    }
                }
            }
        }
    }
}

/// Takes out of a dump what differs between ranks in one state.
fn normalize(p: &mut ProcessDump, rank: i32) {
    if let Some(Section::Ok { value }) = &mut p.stacks {
        for thread in value.list.iter_mut().filter(|t| t.tid == p.pid) {
            thread.tid = MAIN_TID;
        }
    }
    p.pid = 0;
    p.global_rank = 0;
    p.host = None;
    if let Section::Ok { value } = &mut p.communicators {
        for c in &mut value.list {
            if c.local_rank == i64::from(rank) {
                c.local_rank = SAME_AS_GLOBAL;
            }
        }
    }
}

/// What a peer's rank becomes in a relative state: its distance from the
/// rank, plus this (far below any rank a DLL reports).
const RELATIVE: i64 = i64::MIN / 2;

/// A state's key: its normal form, and its form.
fn key_of(dump: &ProcessDump, relative: bool) -> Vec<u8> {
    let mut key = serde_json::to_vec(dump).unwrap_or_default();
    key.push(u8::from(relative));
    key
}

/// The peers of each communicator whose local rank is the rank's own
/// global one (marked in the normal form), each with what to do to it.
fn peers_on_moving_comms(p: &mut ProcessDump, mut each: impl FnMut(&mut i64, i64)) {
    let Section::Ok { value } = &mut p.communicators else {
        return;
    };
    for c in value
        .list
        .iter_mut()
        .filter(|c| c.local_rank == SAME_AS_GLOBAL)
    {
        let size = c.size;
        c.for_each_peer_mut(|peer| each(peer, size));
    }
}

/// `dump` (a normal form) with its peers relative to rank `rank`, but an
/// operation whose peer is one of `hubs`, which stays as it is and fixed in
/// a run; None where it has no peer to make relative (both forms are one).
fn relative_form(dump: &ProcessDump, rank: i32, hubs: &HashSet<Hub>) -> Option<ProcessDump> {
    let mut relative = dump.clone();
    let mut changed = false;
    let Section::Ok { value } = &mut relative.communicators else {
        return None;
    };
    for c in value
        .list
        .iter_mut()
        .filter(|c| c.local_rank == SAME_AS_GLOBAL)
    {
        let (size, id) = (c.size, c.unique_id);
        let is_hub = |peer: i64| !hubs.is_empty() && hubs.contains(&(id, peer));
        c.for_each_queue_mut(|q| {
            for (i, op) in q.operations.iter_mut().enumerate() {
                if (0..size).contains(&op.desired_local_rank) && is_hub(op.desired_local_rank) {
                    q.fixed_in_run.push(u32::try_from(i).unwrap_or(u32::MAX));
                    continue;
                }
                for peer in mqs_core::model::peers_mut(op) {
                    if (0..size).contains(peer) {
                        *peer = RELATIVE + (*peer - i64::from(rank)).rem_euclid(size);
                        changed = true;
                    }
                }
            }
        });
    }
    changed.then_some(relative)
}

/// Puts back what [`normalize`] (and, for a relative state,
/// [`relative_form`]) took out, the pid, rank and counters set.
fn restore(p: &mut ProcessDump, relative: bool) {
    if relative {
        let rank = i64::from(p.global_rank);
        peers_on_moving_comms(p, |peer, size| {
            if (RELATIVE..RELATIVE + size.max(0)).contains(peer) {
                *peer = (rank + (*peer - RELATIVE)).rem_euclid(size);
            }
        });
    }
    if let Some(Section::Ok { value }) = &mut p.stacks {
        for thread in value.list.iter_mut().filter(|t| t.tid == MAIN_TID) {
            thread.tid = p.pid;
        }
    }
    let rank = i64::from(p.global_rank);
    if let Section::Ok { value } = &mut p.communicators {
        for c in &mut value.list {
            if c.local_rank == SAME_AS_GLOBAL {
                c.local_rank = rank;
            }
        }
    }
}

#[cfg(test)]
mod tests;
