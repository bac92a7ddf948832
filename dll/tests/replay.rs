//! Replays Open MPI 4.1.4 and 5.0.7 jobs recorded live (the fixtures in
//! tests/fixtures, hung in their documented states; `scripts/record-
//! snapshots`) through this build's DLL in the real host's session, and
//! checks two things independently: the replay equals what the dump that
//! recorded them printed, and our DLL's output is what the fixture left
//! (`mqs_tests::contents`, operation by operation and in order).

mod common;

use common::session::{check_known, check_replay, recording, recordings, replay, Dumped};
use mqs_abi::OpStatus;
use mqs_core::model::Section;
use mqs_tests::contents::SpinMpi;
use mqs_tests::{contents, Family};

/// The fixture's known contents for a recording, if it has them.
fn known(name: &str) -> Option<Vec<contents::Process>> {
    match name {
        "queues" => Some(contents::queues(3, true)),
        "queues-release" => Some(contents::queues(3, false)),
        "ompi5-queues" => Some(contents::queues(3, true)),
        "intercomm" => Some(contents::intercomm()),
        "progress" => Some(contents::progress()),
        "spin-ring" | "ompi5-spin-ring" => Some(contents::spin_ring(3, SpinMpi::OpenMpi(true))),
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
    // queues 3 (15; 10 without unexpected; 15 on Open MPI 5), intercomm 8,
    // progress 5, spin_ring on 4.1 and 5.0 (3 ranks of 73: WORLD 2
    // receives, 19 unexpected and 24 in transit, 4 sends; mqs-spin 2
    // receives, 21 in transit, 1 send): a guard against lists that lost
    // their operations.
    assert_eq!(
        checked,
        15 + 10 + 15 + 8 + 5 + 2 * 3 * 73,
        "operations checked"
    );
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

/// A PML other than ob1 (the recorded component's name patched to it):
/// each communicator's sends and receives are "cannot tell" with the PML
/// named where none is seen, and marked incomplete where some are (the
/// base free lists); never an empty queue that would mean "none".
#[test]
fn another_pml_is_named_per_queue_instead_of_empty_queues() {
    let p = &recording("queues").processes[0];
    let at = common::fuzzing::symbol(&p.symbols, "mca_pml_base_selected_component")
        .expect("the selected PML's component");
    // mca_base_component_t: the component's name is 84 bytes in.
    let was = common::fuzzing::read_u64(&p.target, at + 84).expect("its name");
    assert_eq!(&was.to_le_bytes()[..4], b"ob1\0");
    for (pml, why) in [("ucx", "inside UCX"), ("cm", "matches in its MTL")] {
        let mut target = p.target.clone();
        let mut name = [0u8; 8];
        name[..pml.len()].copy_from_slice(pml.as_bytes());
        target.insert(at + 84, &name);
        let input = common::session::Input {
            image: p.executable.clone(),
            symbols: Box::new(p.symbols.clone()),
            target: Box::new(&target),
            identity: p.member.identity,
        };
        let d = common::session::run(common::session::our_dll(), vec![input])
            .expect("a session")
            .pop()
            .expect("one process");
        let (mut unknown, mut partial) = (0, 0);
        for c in d.comms() {
            for (what, section) in [("sends", &c.sends), ("receives", &c.receives)] {
                let what = format!("{pml}: {} {what}", c.name);
                match section {
                    Section::NotAvailable { reason } => {
                        assert!(reason.contains(why), "{what}: {reason}");
                        unknown += 1;
                    }
                    Section::Ok { value } => {
                        let last = value.operations.last().expect("never an empty queue");
                        let said = last.extra_text.join(" | ");
                        let note = format!("queue can be incomplete: PML {pml}");
                        assert!(said.contains(&note), "{what}: {said}");
                        partial += 1;
                    }
                    Section::Error { message } => panic!("{what}: {message}"),
                }
            }
            // Under cm only ob1's unexpected messages could be read; under
            // ucx they are UCX's, which cannot be read here either.
            let unexpected_why = if pml == "ucx" { why } else { "not ob1" };
            match &c.unexpected {
                Section::NotAvailable { reason } => {
                    assert!(reason.contains(unexpected_why), "{reason}")
                }
                other => panic!("{pml}: {} unexpected: {other:?}", c.name),
            }
        }
        // Rank 0 of queues has receives on the free lists and empty sends.
        assert!(unknown > 0 && partial > 0, "{pml}: {unknown} {partial}");
    }
}

/// A recorded Open MPI 4.1.4 job under pml ucx (queues 3): rank 0's
/// receives and unexpected messages, read from UCX's worker, are the
/// fixture's exactly, in UCX's matching and arrival order; rank 1's
/// rendezvous `MPI_Isend`, read from UCX's request pool, is pending, and
/// its eager ones on mqs-dup, which did not complete at once, are complete
/// and not yet waited for (as ob1 shows them); every other send queue is
/// "cannot tell", with the reason.
#[test]
fn a_ucx_replay_holds_the_fixtures_receives_and_unexpected_messages() {
    let got = replayed("ucx-queues");
    let (_, rank0) = got.iter().find(|(id, _)| *id == 0).expect("rank 0");
    let rows = |queue: &Section<mqs_core::model::Queue>| -> Vec<(i64, Option<i64>, i64)> {
        common::session::ops(queue)
            .iter()
            .map(|o| (o.desired_global_rank, o.desired_tag, o.desired_length))
            .collect()
    };
    let receives = [
        ("MPI_COMM_WORLD", vec![(-1, Some(8), 32)]),
        (
            "mqs-dup",
            vec![
                (1, Some(7), 16),
                (1, Some(1_000_000), 4),
                (1, Some(1_000_001), 4),
                (1, Some(1_000_002), 4),
            ],
        ),
        ("mqs-split", vec![(1, None, 8)]),
        ("mqs-wait", vec![(-1, Some(1000), 4)]),
    ];
    for (comm, want) in receives {
        assert_eq!(rows(&rank0.comm(comm).receives), want, "{comm} receives");
    }
    let unexpected = [
        (
            "MPI_COMM_WORLD",
            vec![(1, Some(99), 64), (1, Some(5), 400_000)],
        ),
        (
            "mqs-dup",
            vec![(1, Some(3000), 4), (1, Some(3001), 4), (1, Some(3002), 4)],
        ),
    ];
    for (comm, want) in unexpected {
        assert_eq!(
            rows(&rank0.comm(comm).unexpected),
            want,
            "{comm} unexpected"
        );
    }
    let (_, rank1) = got.iter().find(|(id, _)| *id == 1).expect("rank 1");
    let sends = |comm: &str| -> Vec<(OpStatus, i64, Option<i64>, i64)> {
        let mut ops: Vec<_> = common::session::ops(&rank1.comm(comm).sends)
            .iter()
            .map(|o| {
                (
                    o.status,
                    o.desired_global_rank,
                    o.desired_tag,
                    o.desired_length,
                )
            })
            .collect();
        // In the pool's address order: UCX records none of starting.
        ops.sort_by_key(|o| o.2);
        ops
    };
    assert_eq!(
        sends("MPI_COMM_WORLD"),
        [(OpStatus::Pending, 0, Some(5), 400_000)]
    );
    assert_eq!(
        sends("mqs-dup"),
        [3000, 3001, 3002].map(|tag| (OpStatus::Complete, 0, Some(tag), 4))
    );
    for (rank, dump) in [(0, rank0), (1, rank1)] {
        for c in dump.comms() {
            match &c.sends {
                Section::NotAvailable { reason } => assert!(
                    reason.contains("sends completed locally under UCX are not listed"),
                    "rank {rank} {}: {reason}",
                    c.name
                ),
                Section::Ok { .. }
                    if rank == 1 && ["MPI_COMM_WORLD", "mqs-dup"].contains(&c.name.as_str()) => {}
                other => panic!("rank {rank} {} sends: {other:?}", c.name),
            }
        }
    }
}

/// Each UCX type, and each field of a UCP request the DLL reads by path,
/// taken out of the recorded job in turn: every communicator's receives and
/// unexpected messages say UCX cannot be read, naming what is missing,
/// never an empty queue; a type or field only sends need takes the sends
/// alone, named the same way (rank 1, whose `MPI_Isend` the request pool
/// holds).
#[test]
fn each_missing_ucx_type_or_field_is_named() {
    use mqs_dll::ucx::layout::names as n;
    let sender = &recording("ucx-queues").rank(1);
    let sends_only = [n::MPOOL, n::MPOOL_DATA, n::MPOOL_CHUNK, n::MPOOL_ELEM];
    let check_sends = |log: mqs_acquire::snapshot::SymbolLog, missing: &str| {
        let d = common::fuzzing::with_symbols(sender, log);
        assert_eq!(d.added, Ok(()), "without {missing}");
        for c in d.comms() {
            assert!(
                matches!(c.receives, Section::Ok { .. }),
                "without {missing}: {} receives {:?}",
                c.name,
                c.receives
            );
            match &c.sends {
                Section::NotAvailable { reason } => assert!(
                    reason.contains(&format!("request pool cannot be read ({missing} missing)")),
                    "without {missing}: {}: {reason}",
                    c.name
                ),
                other => panic!("without {missing}: {} sends {other:?}", c.name),
            }
        }
    };
    for name in sends_only {
        let mut log = sender.symbols.clone();
        assert!(log.types.remove(name).is_some(), "{name} recorded");
        check_sends(log, &format!("type {name}"));
    }
    for field in [
        n::REQ_FLAGS,
        n::REQ_SEND_EP,
        n::REQ_SEND_BUFFER,
        n::REQ_SEND_LENGTH,
        n::REQ_SEND_TAG,
        n::REQ_SEND_CB,
    ] {
        let mut log = sender.symbols.clone();
        let t = log.types.get_mut(n::REQUEST).unwrap().as_mut().unwrap();
        let before = t.fields.len();
        t.fields.retain(|(f, _)| f != field);
        assert_eq!(t.fields.len(), before - 1, "{field} recorded once");
        check_sends(log, &format!("field {field} of {}", n::REQUEST));
    }
    // Without UCX's context type the switch of the new protocols is not
    // read, and the pool is.
    let mut log = sender.symbols.clone();
    assert!(log.types.remove(n::CONTEXT).is_some());
    let d = common::fuzzing::with_symbols(sender, log);
    assert!(matches!(d.comm("MPI_COMM_WORLD").sends, Section::Ok { .. }));

    let process = &recording("ucx-queues").rank(0);
    let ucx_types: Vec<&String> = process
        .symbols
        .types
        .keys()
        .filter(|t| t.starts_with("ucp_") || t.starts_with("ucs_") || *t == "mca_pml_ucx_module_t")
        .filter(|t| !sends_only.contains(&t.as_str()) && *t != n::CONTEXT)
        .collect();
    assert!(ucx_types.len() >= 10, "{ucx_types:?}");
    let check = |log: mqs_acquire::snapshot::SymbolLog, missing: &str| {
        // Without the worker's type libucp has no types at all: the user
        // is told to add them; any other name is a layout not known.
        let why = if missing == format!("type {}", n::WORKER) {
            format!("{missing} missing (libucp.so.0 has no debug information")
        } else {
            format!("not supported: {missing} missing")
        };
        let d = common::fuzzing::with_symbols(process, log);
        assert_eq!(d.added, Ok(()), "without {missing}");
        for c in d.comms() {
            match &c.receives {
                Section::NotAvailable { reason } => assert!(
                    reason.contains("inside UCX") && reason.contains(&why),
                    "without {missing}: {}: {reason}",
                    c.name
                ),
                other => panic!("without {missing}: {} receives {other:?}", c.name),
            }
            // Unexpected messages are UCX's as well: the same reason, not
            // ob1's (not even selected).
            match &c.unexpected {
                Section::NotAvailable { reason } => assert!(
                    reason.contains("inside UCX")
                        && reason.contains(&why)
                        && !reason.contains("ob1"),
                    "without {missing}: {} unexpected: {reason}",
                    c.name
                ),
                other => panic!("without {missing}: {} unexpected {other:?}", c.name),
            }
        }
    };
    for name in ucx_types {
        let mut log = process.symbols.clone();
        log.types.remove(name);
        check(log, &format!("type {name}"));
    }
    for field in [
        n::REQ_QUEUE,
        n::REQ_BUFFER,
        n::REQ_LENGTH,
        n::REQ_TAG,
        n::REQ_MASK,
        n::REQ_SN,
    ] {
        let mut log = process.symbols.clone();
        let t = log.types.get_mut(n::REQUEST).unwrap().as_mut().unwrap();
        let before = t.fields.len();
        t.fields.retain(|(f, _)| f != field);
        assert_eq!(t.fields.len(), before - 1, "{field} recorded once");
        check(log, &format!("field {field} of {}", n::REQUEST));
    }
}
