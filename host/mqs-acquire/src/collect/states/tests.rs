//! The states' tests: runs, blocks, relative states, levels.

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
    // Blocks merged from children go on as one run of blocks.
    let mut parent = States::with_detail(false);
    parent.merge(rows(0..12));
    parent.merge(rows(12..24));
    assert_eq!(parent.ranks(), 24);
    let inner: Vec<(i32, u32, u32)> = parent.list[1]
        .runs
        .iter()
        .map(|r| (r.rank, r.blocks, r.every))
        .collect();
    assert_eq!(inner, [(1, 6, 4)]);
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

/// Runs with pids only: each with its host.
fn with_hosts(dumps: Vec<(Option<String>, ProcessDump)>) -> Vec<(String, ProcessDump)> {
    dumps
        .into_iter()
        .map(|(h, p)| (h.expect("a run with pids"), p))
        .collect()
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
        .flat_map(|(h, p)| {
            let h = h.expect("a run with pids");
            p.split_run().into_iter().map(move |p| (h.clone(), p))
        })
        .collect();
    assert_eq!(json(expanded), json(ranks));
}

#[test]
fn a_ring_that_all_wait_on_rank_0_keeps_that_peer_fixed_and_expands_exactly() {
    // Each rank receives from the one before it and has a message from
    // rank 0 waiting: rank 0 is a hub, the ring's peer relative.
    let size = 24;
    let rank = |r: i64| {
        let pid = 100 + (r % 12) as i32;
        ring_rank_with(pid, r as i32, size, (r + size - 1) % size, 0)
    };
    let ranks: Vec<(String, ProcessDump)> = (0..size)
        .map(|r| ((if r < 12 { "a" } else { "b" }).to_owned(), rank(r)))
        .collect();
    let states_of = |host: &str, hubs: bool| {
        let mine: Vec<ProcessDump> = ranks
            .iter()
            .filter(|(h, _)| h == host)
            .map(|(_, p)| p.clone())
            .collect();
        let mut states = States::new();
        if hubs {
            states.find_hubs(&mine);
        }
        for p in mine {
            states.add(host, p);
        }
        states
    };
    let mut parent = states_of("a", true);
    parent.merge(states_of("b", true));
    // The ring (rank 0 in it: its own message from itself is the hub's),
    // and rank 1, both of whose peers are rank 0.
    assert_eq!(parent.list.len(), 2, "{:#?}", parent.list);
    assert_eq!(parent.list.iter().filter(|s| s.relative).count(), 1);
    let wire = serde_json::to_vec(&parent).unwrap();
    let back: States = serde_json::from_slice(&wire).unwrap();
    let runs = back.runs();
    assert!(runs
        .iter()
        .any(|(_, p)| p.run_len == 12 && p.run_shifts_peers));
    let mut expanded: Vec<(String, ProcessDump)> = runs
        .into_iter()
        .flat_map(|(h, p)| {
            let h = h.expect("a run with pids");
            p.split_run().into_iter().map(move |p| (h.clone(), p))
        })
        .collect();
    expanded.sort_by_key(|(_, p)| p.global_rank);
    assert_eq!(json(expanded), json(ranks.clone()));
    // Written out rank by rank (`--json`), the job of runs is the JSON of
    // the expanded job, byte for byte.
    let back: States = serde_json::from_slice(&wire).unwrap();
    let job = mqs_core::model::JobDump {
        schema_version: mqs_core::model::SCHEMA_VERSION,
        launcher: None,
        processes: back.runs().into_iter().map(|(_, p)| p).collect(),
        failures: Vec::new(),
    };
    assert!(job.is_compact());
    let mut whole = job.clone();
    whole.expand();
    assert_eq!(whole.processes.len(), 24);
    assert_eq!(
        serde_json::to_string_pretty(&job.each_rank()).unwrap(),
        serde_json::to_string_pretty(&whole).unwrap()
    );
    // Without hubs every rank's message from rank 0 is at a distance of
    // its own: no two ranks share a state.
    let mut parent = states_of("a", false);
    parent.merge(states_of("b", false));
    assert_eq!(parent.list.len(), 24);
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
    let got = json(with_hosts(parent.expand()));
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
        .map(|(h, p)| {
            (
                h.expect("a run with pids"),
                serde_json::to_value(&p).unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expected);
}

/// Rows of 10 ranks on 4 hosts of 25 (rows cross hosts): the first and
/// last of each row (edges) wait on tag 9, the others on tag 1; rank 42
/// is stopped by a signal. Each host's states by number, the parent
/// merging them in the order they answer.
fn rows_by_number() -> (States, Vec<(String, i32, i32)>) {
    let mut parent = States::with_detail(false).by_number(true);
    let mut hosts: Vec<States> = Vec::new();
    let mut members = Vec::new();
    for h in 0..4 {
        let mut host = States::with_detail(false).by_number(true);
        let name = format!("h{h}");
        for rank in h * 25..(h + 1) * 25 {
            let tag = if rank % 10 == 0 || rank % 10 == 9 {
                9
            } else {
                1
            };
            // Pids restart on every host, and jump once inside one.
            let pid = 300 + rank % 25 + if rank % 25 > 12 { 50 } else { 0 };
            let mut p = dump(pid, rank, tag, 0.5);
            if rank == 42 {
                p.os_state = Some(mqs_core::interface::OsState::new('T', None));
            }
            members.push((name.clone(), pid, rank));
            host.add(&name, p);
        }
        host.own_host_is(&name);
        hosts.push(host);
    }
    for at in [2, 0, 3, 1] {
        parent.merge(std::mem::take(&mut hosts[at]));
    }
    parent.in_rank_order();
    (parent, members)
}

#[test]
fn ranks_by_number_make_one_run_of_blocks_across_hosts_and_a_roll_call_names_them() {
    let (states, members) = rows_by_number();
    let inner = states
        .list
        .iter()
        .find(|s| s.runs.iter().any(|r| r.rank == 1))
        .expect("the inner ranks' state");
    // Rows 0-9 inside: ranks 1-8, 11-18, ... one run of 10 blocks but for
    // rank 42, stopped, in a state of its own.
    let shapes: Vec<(i32, u32, u32, u32, bool)> = inner
        .runs
        .iter()
        .map(|r| (r.rank, r.count, r.blocks, r.every, r.by_number))
        .collect();
    assert_eq!(
        shapes,
        vec![
            (1, 8, 4, 10, true),
            (41, 1, 1, 0, true),
            (43, 6, 1, 0, true),
            (51, 8, 5, 10, true)
        ],
        "{:?}",
        inner.runs
    );
    let stopped = states
        .list
        .iter()
        .find(|s| s.runs.iter().any(|r| r.rank == 42))
        .expect("the stopped rank's state");
    assert_eq!(stopped.runs.len(), 1);
    let run = &stopped.runs[0];
    assert_eq!(
        (run.host.as_str(), run.pid, run.by_number),
        ("h1", 300 + 17 + 50, false)
    );
    // The roll call: every other rank's host and pid, once.
    let mut roll: Vec<(String, i32, i32)> = states
        .roll
        .iter()
        .flat_map(|r| {
            r.members()
                .map(move |(pid, rank)| (r.host.clone(), pid, rank))
        })
        .collect();
    roll.sort_by_key(|m| m.2);
    let others: Vec<(String, i32, i32)> = members.iter().filter(|m| m.2 != 42).cloned().collect();
    assert_eq!(roll, others);
    // A run a host where pids go on, broken at rank 42 and the pid jump.
    let shapes: Vec<(&str, i32, i32, u32)> = states
        .roll
        .iter()
        .map(|r| (r.host.as_str(), r.rank, r.pid, r.count))
        .collect();
    assert_eq!(
        shapes,
        [
            ("h0", 0, 300, 13),
            ("h0", 13, 363, 12),
            ("h1", 25, 300, 13),
            ("h1", 38, 363, 4),
            ("h1", 43, 368, 7),
            ("h2", 50, 300, 13),
            ("h2", 63, 363, 12),
            ("h3", 75, 300, 13),
            ("h3", 88, 363, 12)
        ]
    );
    // Through the wire, runs by number name no host or pid.
    let text = serde_json::to_string(&states).unwrap();
    assert!(
        text.contains(r#"{"rank":1,"count":8,"blocks":4,"every":10,"by_number":true}"#),
        "{text}"
    );
    let back: States = serde_json::from_str(&text).unwrap();
    let mut got: Vec<(Option<String>, i32, i32)> = back
        .expand()
        .into_iter()
        .map(|(h, p)| (h, p.pid, p.global_rank))
        .collect();
    got.sort_by_key(|m| m.2);
    let want: Vec<(Option<String>, i32, i32)> = members
        .iter()
        .map(|(h, pid, rank)| match rank {
            42 => (Some(h.clone()), *pid, *rank),
            _ => (None, 0, *rank),
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn without_by_number_runs_keep_their_hosts_and_pids() {
    let mut states = States::with_detail(false);
    for rank in 0..6 {
        states.add("a", dump(100 + rank, rank, 1, 0.5));
    }
    assert!(states.roll.is_empty());
    assert_eq!(states.list[0].runs.len(), 1);
    assert_eq!(states.list[0].runs[0].pid, 100);
    assert!(!states.list[0].runs[0].by_number);
}
