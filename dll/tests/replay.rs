//! Replays Open MPI 4.1.4 jobs recorded live (the fixtures in
//! tests/fixtures, hung in their documented states; `scripts/record-
//! snapshots`) through this build's DLL in the real host's session, and
//! checks two things independently: the replay equals what the dump that
//! recorded them printed, and our DLL's output is what the fixture left
//! (`mqs_tests::contents`, operation by operation and in order).

mod common;

use common::session::{check_known, check_replay, recording, recordings, replay, Dumped};
use mqs_tests::{contents, Family};

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
    for plan in recordings(Family::OpenMpi) {
        // Open MPI's own DLL needs ~200 fetches for 4 operations; this
        // bound is what keeps a dump cheap enough to repeat.
        check_replay(plan.name, 400);
    }
}

#[test]
fn replays_hold_what_the_fixtures_left() {
    let mut checked = 0;
    for plan in recordings(Family::OpenMpi) {
        if let Some(expected) = known(plan.name) {
            checked += check_known(plan.name, &expected);
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
