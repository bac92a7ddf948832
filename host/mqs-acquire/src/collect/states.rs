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

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use mqs_core::model::{DumpStats, ProcessDump, Section};

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
    /// States of one rank that may yet become relative, by their relative
    /// form's key, the oldest first out past [`MAX_PENDING`].
    #[serde(skip)]
    pending: HashMap<Vec<u8>, Pending>,
    #[serde(skip)]
    pending_order: std::collections::VecDeque<Vec<u8>>,
}

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

/// Ranks `rank..rank + count` with pids `pid..pid + count` on one host,
/// repeated `blocks` times, each block `every` ranks and pids after the one
/// before: a halo exchange's ranks inside a row, row after row, whose
/// edges are states of their own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The front end's key of the host.
    pub host: String,
    pub rank: i32,
    pub pid: i32,
    pub count: u32,
    #[serde(default = "one_block", skip_serializing_if = "is_one_block")]
    pub blocks: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub every: u32,
    /// Counters left at home ([`States::with_detail`]) are not sent.
    #[serde(default, skip_serializing_if = "is_unset")]
    pub stats: DumpStats,
}

fn one_block() -> u32 {
    1
}

fn is_one_block(blocks: &u32) -> bool {
    *blocks == 1
}

fn is_zero(every: &u32) -> bool {
    *every == 0
}

fn is_unset(stats: &DumpStats) -> bool {
    *stats == DumpStats::default()
}

impl Run {
    /// How many ranks it stands for.
    fn ranks(&self) -> usize {
        self.count as usize * self.blocks.max(1) as usize
    }

    /// Whether it is one rank alone.
    fn is_single(&self) -> bool {
        self.count == 1 && self.blocks <= 1
    }

    /// Its blocks, each a run of consecutive ranks.
    fn each_block(&self) -> impl Iterator<Item = Run> + '_ {
        (0..self.blocks.max(1)).map(move |b| self.block(b))
    }

    /// Its block `b` (from 0).
    fn block(&self, b: u32) -> Run {
        let shift = i32::try_from(u64::from(b) * u64::from(self.every)).unwrap_or(i32::MAX);
        Run {
            rank: self.rank.saturating_add(shift),
            pid: self.pid.saturating_add(shift),
            blocks: 1,
            every: 0,
            ..self.clone()
        }
    }

    /// Its last block.
    fn last_block(&self) -> Run {
        self.block(self.blocks.max(1) - 1)
    }
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
        normalize(&mut process, rank);
        let run = Run {
            host: host.to_string(),
            rank,
            pid,
            count: 1,
            blocks: 1,
            every: 0,
            stats,
        };
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
        let relative = relative_form(&dump, rank);
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
            let Some(last) = list.last_mut() else {
                list.push(run);
                continue;
            };
            if run.blocks > 1 {
                list.push(run);
            } else if last.blocks <= 1 && continues(last, &run) {
                last.count += run.count;
            } else if last.blocks > 1 && continues(&last.last_block(), &run) {
                // Its last block goes on past the others' length: a run of
                // its own again.
                let mut block = last.last_block();
                last.blocks -= 1;
                if last.blocks == 1 {
                    last.every = 0;
                }
                block.count += run.count;
                list.push(block);
            } else {
                list.push(run);
            }
            fold_last(list);
        }
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
        for run in self.list.iter_mut().flat_map(|s| &mut s.runs) {
            if run.host == OWN_HOST {
                run.host = key.to_string();
            }
        }
    }

    /// One dump per run of consecutive ranks (a block), standing for its
    /// ranks (a compact job's, see [`ProcessDump::run_len`]), with the key
    /// of its host.
    pub fn runs(self) -> Vec<(String, ProcessDump)> {
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
                out.push((run.host, p));
            }
        }
        out
    }

    /// Every rank's dump, with the key of the host it was read on.
    pub fn expand(self) -> Vec<(String, ProcessDump)> {
        let mut out = Vec::with_capacity(self.ranks());
        for (host, run) in self.runs() {
            for p in run.split_run() {
                out.push((host.clone(), p));
            }
        }
        out
    }
}

/// Makes the last run of `list` the next block of the one before it: one
/// block as long as each of that run's, on the same host with the same
/// counters, as far after its last block (in ranks and pids alike) as its
/// blocks are apart (any distance past its end, if it has one block).
fn fold_last(list: &mut Vec<Run>) {
    let [.., before, last] = list.as_mut_slice() else {
        return;
    };
    if last.blocks > 1
        || last.count != before.count
        || last.host != before.host
        || last.stats != before.stats
        || before.rank < 0
    {
        return;
    }
    let end = before.last_block();
    let apart = i64::from(last.rank) - i64::from(end.rank);
    if apart != i64::from(last.pid) - i64::from(end.pid) || apart <= i64::from(before.count) {
        return;
    }
    let Ok(apart) = u32::try_from(apart) else {
        return;
    };
    if before.blocks > 1 && apart != before.every {
        return;
    }
    before.every = apart;
    before.blocks += 1;
    list.pop();
}

/// Whether `next` extends `run`: the next rank and pid on the same host,
/// with equal counters.
fn continues(run: &Run, next: &Run) -> bool {
    let count = i32::try_from(run.count).unwrap_or(i32::MAX);
    run.host == next.host
        && run.rank >= 0
        && next.rank == run.rank.saturating_add(count)
        && next.pid == run.pid.saturating_add(count)
        && run.stats == next.stats
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
                    if op
                        .extra_text
                        .iter()
                        .any(|l| mqs_abi::request_of(l).is_some())
                    {
                        let mut lines = mqs_abi::Lines::new();
                        for line in op.extra_text.iter() {
                            match (mqs_abi::request_of(line), line.rsplit_once(" request 0x")) {
                                (Some(address), Some((head, _))) => {
                                    lines.push(&mqs_abi::request_line(head, number(address)));
                                }
                                _ => lines.push(line),
                            }
                        }
                        op.extra_text = lines;
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

/// `dump` (a normal form) with its peers relative to rank `rank`; None
/// where it has no peer to make relative (both forms are one).
fn relative_form(dump: &ProcessDump, rank: i32) -> Option<ProcessDump> {
    let mut relative = dump.clone();
    let mut changed = false;
    peers_on_moving_comms(&mut relative, |peer, size| {
        if (0..size).contains(peer) {
            *peer = RELATIVE + (*peer - i64::from(rank)).rem_euclid(size);
            changed = true;
        }
    });
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
mod tests {
    use super::*;

    fn dump(pid: i32, rank: i32, tag: i64, elapsed: f64) -> ProcessDump {
        let mut p: ProcessDump = serde_json::from_value(serde_json::json!({
            "pid": pid, "global_rank": rank, "executable": "a",
            "dll": {"path": "d", "version": "v", "compatibility": 2},
            "communicators": {"status": "ok", "list": [{
                "unique_id": 1, "name": "MPI_COMM_WORLD", "size": 1000, "local_rank": rank,
                "group": null,
                "sends": {"status": "ok", "operations": []},
                "receives": {"status": "ok", "operations": [{
                    "status": "pending", "desired_local_rank": 1, "desired_global_rank": 1,
                    "desired_tag": tag, "desired_length": 4, "system_buffer": false,
                    "buffer": 0, "actual_local_rank": -1, "actual_global_rank": -1,
                    "actual_tag": -1, "actual_length": -1, "extra_text": []}]},
                "unexpected": {"status": "not_available", "reason": "r"}}]},
            "stats": {"fetches": 3, "fetched_bytes": 4, "syscalls": 0, "elapsed_ms": elapsed}
        }))
        .unwrap();
        p.host = None;
        p
    }

    /// Rank `rank`'s dump as a real job gives it: its own buffer and
    /// request addresses, frame addresses (ASLR) and thread ids, its
    /// MPI_Wait waiting on the request its receive names.
    fn real(rank: i32) -> ProcessDump {
        let pid = 5000 + 7 * rank;
        let base = 0x7f00_0000_0000u64 + (rank as u64) * 0x10_0000;
        let mut p = dump(pid, rank, 7, 1.0);
        let request = base + 0x40;
        if let Section::Ok { value } = &mut p.communicators {
            let Section::Ok { value: q } = &mut value.list[0].receives else {
                unreachable!()
            };
            q.operations[0].buffer = base + 0x80;
            q.operations[0]
                .extra_text
                .push(&mqs_abi::request_line("receive", request));
        }
        let frame = |f: &str, address: u64, requests: Vec<u64>| {
            serde_json::json!({"address": address, "function": f, "offset": 12,
                "object": "libmpi.so", "file": null, "line": null,
                "call": if requests.is_empty() { serde_json::Value::Null } else {
                    serde_json::json!({"mpi": "openmpi", "ints": [], "requests": requests})}})
        };
        p.stacks = Some(
            serde_json::from_value(serde_json::json!({"status": "ok", "list": [
                {"tid": pid, "name": "app", "frames": [
                    frame("poll", base + 1, vec![]),
                    frame("MPI_Wait", base + 2, vec![request]),
                    frame("main", base + 3, vec![])], "truncated": null},
                {"tid": pid + 3 + rank, "name": "progress", "frames": [
                    frame("epoll_wait", base + 4, vec![])], "truncated": null}]}))
            .unwrap(),
        );
        p
    }

    /// Rows of 4 ranks: the first of each row (an edge) waits on tag 9,
    /// the others on tag 1; pids follow ranks, counters are left home.
    fn rows(ranks: std::ops::Range<i32>) -> States {
        let mut states = States::with_detail(false);
        for rank in ranks {
            let tag = if rank % 4 == 0 { 9 } else { 1 };
            states.add("a", dump(100 + rank, rank, tag, 0.5));
        }
        states
    }

    #[test]
    fn a_state_broken_at_every_row_travels_as_one_run_of_blocks() {
        let states = rows(0..12);
        assert_eq!(states.list.len(), 2);
        let inner = &states.list[1].runs;
        assert_eq!(inner.len(), 1, "{inner:?}");
        assert_eq!(
            (
                inner[0].rank,
                inner[0].count,
                inner[0].blocks,
                inner[0].every
            ),
            (1, 3, 3, 4)
        );
        let edges = &states.list[0].runs;
        assert_eq!(
            (edges.len(), edges[0].count, edges[0].blocks, edges[0].every),
            (1, 1, 3, 4)
        );
        // On the wire: runs without counters (they were left home).
        let runs = serde_json::to_string(&states.list[1].runs).unwrap();
        assert_eq!(
            runs,
            r#"[{"host":"a","rank":1,"pid":101,"count":3,"blocks":3,"every":4}]"#
        );
        let text = serde_json::to_string(&states).unwrap();
        let back: States = serde_json::from_str(&text).unwrap();
        let ranks: Vec<(i32, i32)> = back
            .expand()
            .into_iter()
            .map(|(_, p)| (p.global_rank, p.pid))
            .collect();
        let mut want: Vec<(i32, i32)> = (0..12).map(|r| (r, 100 + r)).collect();
        want.sort_by_key(|&(r, _)| (r % 4 != 0, r));
        assert_eq!(
            ranks, want,
            "edges first (their state came first), then the rest"
        );
    }

    #[test]
    fn a_block_that_goes_on_past_the_others_is_a_run_again() {
        let mut states = States::with_detail(false);
        for rank in [1, 2, 5, 6, 7] {
            states.add("a", dump(100 + rank, rank, 1, 0.5));
        }
        let runs: Vec<(i32, u32, u32)> = states.list[0]
            .runs
            .iter()
            .map(|r| (r.rank, r.count, r.blocks))
            .collect();
        assert_eq!(runs, [(1, 2, 1), (5, 3, 1)]);
        assert_eq!(states.ranks(), 5);
        // Blocks merged from children keep their shape.
        let mut parent = States::with_detail(false);
        parent.merge(rows(0..12));
        parent.merge(rows(12..24));
        assert_eq!(parent.ranks(), 24);
        let inner: Vec<(i32, u32, u32)> = parent.list[1]
            .runs
            .iter()
            .map(|r| (r.rank, r.blocks, r.every))
            .collect();
        assert_eq!(inner, [(1, 3, 4), (13, 3, 4)]);
    }

    #[test]
    fn ranks_whose_views_are_equal_share_a_state_without_per_rank_detail() {
        let mut detailed = States::with_detail(true);
        let mut viewed = States::with_detail(false);
        for rank in 0..4 {
            detailed.add("a", real(rank));
            viewed.add("a", real(rank));
        }
        assert_eq!(detailed.list.len(), 4, "addresses differ: a state each");
        assert_eq!(viewed.list.len(), 1, "one state for the view");
        // Detail kept: each rank back exactly, its main thread's id too.
        for (i, (_, p)) in detailed.expand().into_iter().enumerate() {
            let want = real(i as i32);
            assert_eq!(
                serde_json::to_value(&p).unwrap(),
                serde_json::to_value(&want).unwrap()
            );
        }
        // Without: what the analysis reads stays, the request its wait
        // names still the one its receive names.
        for (i, (_, p)) in viewed.expand().into_iter().enumerate() {
            let rank = i as i32;
            assert_eq!((p.pid, p.global_rank), (5000 + 7 * rank, rank));
            let Some(Section::Ok { value }) = &p.stacks else {
                panic!("stacks")
            };
            assert_eq!(value.list[0].tid, p.pid, "the main thread's id is the pid");
            assert_eq!(value.list[1].tid, 0);
            let wait = value.list[0].frames[1].call.as_ref().unwrap();
            let Section::Ok { value: comms } = &p.communicators else {
                panic!("communicators")
            };
            let Section::Ok { value: q } = &comms.list[0].receives else {
                panic!("receives")
            };
            let named: Vec<u64> = q.operations[0]
                .extra_text
                .iter()
                .filter_map(mqs_abi::request_of)
                .collect();
            assert_eq!(named, wait.requests);
            assert_eq!(q.operations[0].buffer, 0);
            assert_eq!(value.list[0].frames[0].address, 0);
        }
    }

    /// Rank `rank` of `size` receiving from `peer` on MPI_COMM_WORLD, and
    /// with an unexpected message from the rank after it.
    fn ring_rank(pid: i32, rank: i32, size: i64, peer: i64) -> ProcessDump {
        ring_rank_with(pid, rank, size, peer, (i64::from(rank) + 1) % size)
    }

    /// [`ring_rank`], the unexpected message from `next`.
    fn ring_rank_with(pid: i32, rank: i32, size: i64, peer: i64, next: i64) -> ProcessDump {
        let op = |peer: i64, status: &str| {
            serde_json::json!({"status": status, "desired_local_rank": peer,
                "desired_global_rank": peer, "desired_tag": 10, "desired_length": 4,
                "system_buffer": false, "buffer": 0, "actual_local_rank": -1,
                "actual_global_rank": -1, "actual_tag": -1, "actual_length": -1,
                "extra_text": []})
        };
        serde_json::from_value(serde_json::json!({
            "pid": pid, "global_rank": rank, "executable": "a",
            "dll": {"path": "d", "version": "v", "compatibility": 2},
            "communicators": {"status": "ok", "list": [{
                "unique_id": 1, "name": "MPI_COMM_WORLD", "size": size, "local_rank": rank,
                "group": null,
                "sends": {"status": "ok", "operations": []},
                "receives": {"status": "ok", "operations": [op(peer, "pending")]},
                "unexpected": {"status": "ok", "operations": [op(next, "pending")]}}]},
            "stats": {"fetches": 3, "fetched_bytes": 4, "syscalls": 0, "elapsed_ms": 1.0}
        }))
        .unwrap()
    }

    fn json(dumps: Vec<(String, ProcessDump)>) -> Vec<(String, serde_json::Value)> {
        dumps
            .into_iter()
            .map(|(h, p)| (h, serde_json::to_value(&p).unwrap()))
            .collect()
    }

    #[test]
    fn a_ring_is_one_relative_state_and_expands_to_every_rank_exactly() {
        let size = 12;
        let ranks: Vec<(String, ProcessDump)> = (0..size)
            .map(|r| {
                let host = if r < 6 { "a" } else { "b" };
                let pid = 100 + (r % 6) as i32;
                (
                    host.to_owned(),
                    ring_rank(pid, r as i32, size, (r + size - 1) % size),
                )
            })
            .collect();
        let mut parent = States::new();
        let mut child = States::new();
        for (host, p) in ranks.clone() {
            if host == "a" {
                parent.add(&host, p);
            } else {
                child.add(&host, p);
            }
        }
        parent.merge(child);
        assert_eq!(parent.list.len(), 1, "{:#?}", parent.list);
        assert!(parent.list[0].relative);
        assert_eq!(parent.list[0].runs.len(), 2, "a run per host");
        let wire = serde_json::to_vec(&parent).unwrap();
        let back: States = serde_json::from_slice(&wire).unwrap();
        // A run stands for its ranks with their own peers.
        let runs = back.runs();
        assert_eq!(runs.len(), 2);
        assert!(runs
            .iter()
            .all(|(_, p)| p.run_len == 6 && p.run_shifts_peers));
        let expanded: Vec<(String, ProcessDump)> = runs
            .into_iter()
            .flat_map(|(h, p)| p.split_run().into_iter().map(move |p| (h.clone(), p)))
            .collect();
        assert_eq!(json(expanded), json(ranks));
    }

    #[test]
    fn a_ring_of_one_rank_per_host_becomes_one_state_as_hosts_merge() {
        let size = 6;
        let mut parent = States::new();
        for r in 0..size {
            let mut host = States::new();
            host.add(
                &format!("h{r}"),
                ring_rank(100, r as i32, size, (r + 1) % size),
            );
            parent.merge(host);
        }
        assert_eq!(parent.list.len(), 1, "{:#?}", parent.list);
        assert_eq!(parent.ranks(), 6);
        let got = json(parent.expand());
        let want: Vec<(String, serde_json::Value)> = (0..size)
            .map(|r| {
                let p = ring_rank(100, r as i32, size, (r + 1) % size);
                (format!("h{r}"), serde_json::to_value(&p).unwrap())
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn ranks_that_all_wait_for_one_rank_stay_one_state_as_they_are() {
        let mut states = States::new();
        for r in 1..8 {
            states.add("a", ring_rank_with(100 + r, r, 8, 0, 0));
        }
        assert_eq!(states.list.len(), 1);
        assert!(!states.list[0].relative);
        let runs = states.runs();
        assert_eq!(runs.len(), 1);
        assert!(!runs[0].1.run_shifts_peers);
    }

    #[test]
    fn levels_add_up_one_level_below_their_sender() {
        let leaf = |bytes, ms| {
            let mut s = States::new();
            s.own_level(bytes, ms);
            s
        };
        let mut middle = States::new();
        middle.merge(leaf(0, 2.0));
        middle.merge(leaf(0, 5.0));
        middle.own_level(300, 1.5);
        let mut root = States::new();
        root.merge(middle);
        root.merge(leaf(0, 1.0));
        root.own_level(900, 4.0);
        let got: Vec<(u64, u64, f64)> = root
            .levels
            .iter()
            .map(|l| (l.collectors, l.bytes_received, l.merge_ms))
            .collect();
        assert_eq!(got, vec![(1, 900, 4.0), (2, 300, 1.5), (2, 0, 5.0)]);
    }

    #[test]
    fn equal_states_travel_once_and_expand_to_every_rank_exactly() {
        let mut parent = States::new();
        let mut child = States::new();
        let mut expected = Vec::new();
        for rank in 0..10 {
            let (host, tag) = if rank < 6 { ("a", 7) } else { ("b", 8) };
            let p = dump(100 + rank, rank, tag, 1.0);
            expected.push((host.to_string(), serde_json::to_value(&p).unwrap()));
            if rank < 6 {
                parent.add(host, p);
            } else {
                child.add(host, p);
            }
        }
        // A rank whose counters differ is a run of its own.
        let odd = dump(110, 10, 8, 2.5);
        expected.push(("b".into(), serde_json::to_value(&odd).unwrap()));
        child.add("b", odd);
        parent.merge(child);
        assert_eq!(parent.list.len(), 2, "two states");
        assert_eq!(parent.list[0].runs.len(), 1);
        assert_eq!(parent.list[1].runs.len(), 2);
        assert_eq!(parent.ranks(), 11);
        // Through the wire and back.
        let wire = serde_json::to_vec(&parent).unwrap();
        let back: States = serde_json::from_slice(&wire).unwrap();
        let got: Vec<(String, serde_json::Value)> = back
            .expand()
            .into_iter()
            .map(|(h, p)| (h, serde_json::to_value(&p).unwrap()))
            .collect();
        assert_eq!(got, expected);
    }
}
