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
}

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
}

/// Ranks `rank..rank + count` with pids `pid..pid + count` on one host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The front end's key of the host.
    pub host: String,
    pub rank: i32,
    pub pid: i32,
    pub count: u32,
    pub stats: DumpStats,
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
        self.list
            .iter()
            .flat_map(|s| &s.runs)
            .map(|r| r.count as usize)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Adds one rank's dump, read on host `host` (its key).
    pub fn add(&mut self, host: &str, mut process: ProcessDump) {
        let (pid, rank) = (process.pid, process.global_rank);
        let stats = std::mem::take(&mut process.stats);
        if self.view_only {
            strip_per_rank_detail(&mut process);
        }
        normalize(&mut process, rank);
        let run = Run {
            host: host.to_string(),
            rank,
            pid,
            count: 1,
            stats,
        };
        self.add_runs(process, vec![run]);
    }

    /// Adds every state of `other` (a child's), and its levels one level
    /// below this sender's.
    pub fn merge(&mut self, other: States) {
        absorb_levels(&mut self.levels, &other.levels, 1);
        for state in other.list {
            self.add_runs(state.dump, state.runs);
        }
    }

    fn add_runs(&mut self, dump: ProcessDump, runs: Vec<Run>) {
        let same = self
            .last
            .filter(|&at| self.list.get(at).is_some_and(|s| s.dump == dump));
        let at = match same {
            Some(at) => at,
            None => {
                let key = serde_json::to_vec(&dump).unwrap_or_default();
                match self.index.get(&key) {
                    Some(&at) => at,
                    None => {
                        self.index.insert(key, self.list.len());
                        self.list.push(State {
                            dump,
                            runs: Vec::new(),
                        });
                        self.list.len() - 1
                    }
                }
            }
        };
        self.last = Some(at);
        let list = &mut self.list[at].runs;
        for run in runs {
            match list.last_mut() {
                Some(last) if continues(last, &run) => last.count += run.count,
                _ => list.push(run),
            }
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

    /// One dump per run, standing for the run's ranks (a compact job's,
    /// see [`ProcessDump::run_len`]), with the key of its host.
    pub fn runs(self) -> Vec<(String, ProcessDump)> {
        let mut out = Vec::new();
        for state in self.list {
            for run in state.runs {
                let mut p = state.dump.clone();
                p.pid = run.pid;
                p.global_rank = run.rank;
                p.stats = run.stats;
                p.run_len = run.count.max(1);
                restore(&mut p);
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

/// Puts back what [`normalize`] took out, the pid, rank and counters set.
fn restore(p: &mut ProcessDump) {
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
