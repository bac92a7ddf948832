//! Replays Open MPI 4.1.4 jobs recorded live (the fixtures in
//! tests/fixtures, hung in their documented states; `scripts/record-
//! snapshots`) through this build's DLL in the real host's session, and
//! checks two things independently: the replay equals what the dump that
//! recorded them printed, and our DLL's output is what the fixture left
//! (`mqs_tests::contents`, operation by operation and in order).

mod common;

use common::session::{recording, recordings, replay, Dumped};
use mqs_tests::contents;
use serde_json::Value;

/// The fixture's known contents for a recording, if it has them.
fn known(name: &str) -> Option<Vec<contents::Process>> {
    match name {
        "queues" => Some(contents::queues(3, true)),
        "queues-release" => Some(contents::queues(3, false)),
        "intercomm" => Some(contents::intercomm()),
        "progress" => Some(contents::progress()),
        _ => None,
    }
}

fn replayed(name: &'static str) -> Vec<(i32, Dumped)> {
    let rec = recording(name);
    rec.processes
        .iter()
        .map(|p| p.member.identity)
        .zip(replay(rec))
        .collect()
}

#[test]
fn replays_equal_the_dumps_that_recorded_them() {
    for plan in recordings() {
        let rec = recording(plan.name);
        assert!(!rec.processes.is_empty(), "{}: no processes", plan.name);
        for (identity, d) in replayed(plan.name) {
            let what = format!("{} process {identity}", plan.name);
            assert_eq!(d.added, Ok(()), "{what}");
            assert!(d.unreadable.is_empty(), "{what}: {:?}", d.unreadable);
            let live = rec.expected(identity);
            assert_eq!(d.json(), live["communicators"], "{what}");
            let new = d
                .new_processes
                .as_ref()
                .map(|n| serde_json::to_value(n).unwrap_or_default());
            assert_eq!(new.unwrap_or(Value::Null), live["new_processes"], "{what}");
            assert_eq!(
                d.spawn_breakpoint.map_or(Value::Null, Value::from),
                live["spawn_breakpoint"],
                "{what}"
            );
            // Open MPI's own DLL needs ~200 fetches for 4 operations; this
            // bound is what keeps a dump cheap enough to repeat.
            assert!(d.fetches < 400, "{what}: {} fetches", d.fetches);
        }
    }
}

#[test]
fn replays_hold_what_the_fixtures_left() {
    let mut checked = 0;
    for plan in recordings() {
        let Some(expected) = known(plan.name) else {
            continue;
        };
        let got = replayed(plan.name);
        assert_eq!(got.len(), expected.len(), "{}: processes", plan.name);
        for process in &expected {
            let d = got
                .iter()
                .find(|(id, _)| i64::from(*id) == process.rank)
                .map(|(_, d)| d)
                .unwrap_or_else(|| panic!("{}: no rank {}", plan.name, process.rank));
            if let Err(e) = contents::check_ours(process, &d.json()) {
                panic!("{} ({}):\n{e}", plan.name, plan.fixture);
            }
            checked += process.operations();
        }
    }
    // queues 3 (15; 10 without unexpected), intercomm 8, progress 5: a
    // guard against lists that lost their operations.
    assert_eq!(checked, 38, "operations checked");
}

#[test]
fn unexpected_messages_are_in_system_buffers() {
    for (identity, d) in replayed("queues") {
        for c in d.comms() {
            for op in common::session::ops(&c.unexpected) {
                assert!(op.system_buffer, "rank {identity} {}: {op:?}", c.name);
            }
        }
    }
}

#[test]
fn release_build_says_receives_are_in_posting_order() {
    let got = replayed("queues-release");
    let (_, rank0) = got.iter().find(|(id, _)| *id == 0).expect("rank 0");
    let dup = common::session::ops(&rank0.comm("mqs-dup").receives);
    assert_eq!(dup.len(), 4);
    for op in dup {
        assert!(
            op.extra_text
                .last()
                .is_some_and(|l| l.starts_with("order: by posting sequence")),
            "{op:?}"
        );
    }
}
