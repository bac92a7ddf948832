//! Replays processes recorded from live Open MPI 4.1.4 jobs (the fixtures
//! in tests/fixtures, hung in known states) through the DLL's C entry
//! points, and checks both the recorded dump and the fixtures' documented
//! state, independently of each other.

mod common;

use common::host::{self, Dump, Image, Process, Queue};
use common::snapshot::Snapshot;
use mqs_abi::{OpStatus, PendingOperation};

fn replay(name: &str) -> (Snapshot, Dump, u64) {
    let snap = Snapshot::load(&common::data(name)).unwrap_or_default();
    assert!(!snap.memory.is_empty(), "snapshot {name} missing or empty");
    let mut image = Image::new(snap.fake_image());
    let (rc, msg) = host::setup_image(&mut image);
    assert_eq!(rc, 0, "image_has_queues: {msg:?}");
    assert_eq!(msg, None);
    let mut process = Process::new(
        Box::new(snap.fake_process()),
        &mut image,
        snap.type_sizes,
        snap.global_rank,
    );
    let mut dump = host::dump(&mut process);
    dump.image_rc = rc;
    let fetches = process.fetches.get();
    host::destroy_image(&mut image);
    (snap, dump, fetches)
}

fn ops<'d>(dump: &'d Dump, comm: &str, class: usize) -> &'d [PendingOperation] {
    let c = dump.comm(comm);
    assert!(c.is_some(), "no communicator {comm}");
    c.map_or(&[], |c| c.queues[class].ops())
}

const SENDS: usize = 0;
const RECVS: usize = 1;
const UNEXP: usize = 2;

#[test]
fn recorded_dumps_are_reproduced() {
    for name in [
        "queues-rank0.json",
        "queues-rank1.json",
        "queues3-rank0.json",
        "queues3-rank1.json",
        "intercomm-rank0.json",
        "intercomm-rank1.json",
        "release-queues3-rank0.json",
        "release-queues3-rank1.json",
    ] {
        let (snap, dump, fetches) = replay(name);
        assert_eq!(Some(dump.to_json()), snap.expected, "{name}");
        // The shipped DLL needs ~200 fetches for 4 operations; the budget
        // here is what makes a dump cheap enough to repeat.
        assert!(fetches < 150, "{name}: {fetches} fetches");
    }
}

#[test]
fn queues_rank0_matches_the_fixture() {
    let (_, d, _) = replay("queues-rank0.json");
    let names: Vec<_> = d.comms.iter().map(|c| c.comm.name.as_str()).collect();
    // Sorted by context id; MPI_COMM_NULL is not a communicator.
    assert_eq!(
        names,
        [
            "MPI_COMM_WORLD",
            "MPI_COMM_SELF",
            "mqs-dup",
            "mqs-split",
            "mqs-wait"
        ]
    );
    let ids: Vec<_> = d.comms.iter().map(|c| c.comm.unique_id).collect();
    assert_eq!(ids, [0, 1, 3, 4, 5]);
    let split = d
        .comm("mqs-split")
        .map(|c| (c.comm.local_rank, c.group.clone()));
    assert_eq!(split, Some((1, Ok(vec![1, 0]))));

    let world = ops(&d, "MPI_COMM_WORLD", RECVS);
    assert_eq!(world.len(), 1);
    let r = &world[0];
    assert_eq!((r.desired_local_rank, r.desired_global_rank), (-1, -1));
    assert_eq!((r.desired_tag, r.desired_length), (Some(8), 32));
    assert_eq!(r.status, OpStatus::Pending);
    assert_eq!(r.extra_text[1], "8 x MPI_INT");

    let dup = ops(&d, "mqs-dup", RECVS);
    assert_eq!(dup.len(), 1);
    assert_eq!(
        (
            dup[0].desired_local_rank,
            dup[0].desired_tag,
            dup[0].desired_length
        ),
        (1, Some(7), 16)
    );
    let split = ops(&d, "mqs-split", RECVS);
    assert_eq!(split.len(), 1);
    // From split rank 0, which is world rank 1; ANY_TAG.
    assert_eq!(
        (split[0].desired_local_rank, split[0].desired_global_rank),
        (0, 1)
    );
    assert_eq!((split[0].desired_tag, split[0].desired_length), (None, 8));
    let wait = ops(&d, "mqs-wait", RECVS);
    assert_eq!(wait.len(), 1);
    assert_eq!(
        (
            wait[0].desired_local_rank,
            wait[0].desired_tag,
            wait[0].desired_length
        ),
        (-1, Some(1000), 4)
    );

    let unexpected = ops(&d, "MPI_COMM_WORLD", UNEXP);
    let got: Vec<_> = unexpected
        .iter()
        .map(|o| {
            (
                o.desired_local_rank,
                o.desired_global_rank,
                o.desired_tag,
                o.desired_length,
                o.status,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, 1, Some(99), 64, OpStatus::Pending),
            (1, 1, Some(5), 400_000, OpStatus::Pending)
        ]
    );
    assert!(unexpected[0].extra_text[0].starts_with("eager message"));
    assert!(unexpected[1].extra_text[0].starts_with("rendezvous"));
    assert!(unexpected.iter().all(|o| o.system_buffer));
    for c in &d.comms {
        assert!(c.queues[SENDS].ops().is_empty(), "rank 0 sends nothing");
        assert!(matches!(c.queues[UNEXP], Queue::Ops(_)));
    }
}

#[test]
fn queues_rank1_matches_the_fixture() {
    let (_, d, _) = replay("queues-rank1.json");
    let sends = ops(&d, "MPI_COMM_WORLD", SENDS);
    // The eager tag-99 send went out inline and has no request left; the
    // rendezvous one waits for its receiver.
    assert_eq!(sends.len(), 1);
    let s = &sends[0];
    assert_eq!(
        (s.desired_local_rank, s.desired_global_rank, s.desired_tag),
        (0, 0, Some(5))
    );
    assert_eq!((s.desired_length, s.actual_length), (400_000, 400_000));
    assert_eq!(s.status, OpStatus::Pending);
    assert_eq!(s.extra_text[1], "mode: standard");
    assert_eq!(s.extra_text[2], "100000 x MPI_INT");
    assert!(s.extra_text[0].starts_with("send request 0x"));
    let dup = ops(&d, "mqs-dup", RECVS);
    assert_eq!(dup.len(), 1);
    assert_eq!(
        (
            dup[0].desired_local_rank,
            dup[0].desired_tag,
            dup[0].desired_length
        ),
        (0, Some(11), 32)
    );
    for c in &d.comms {
        assert!(
            c.queues[UNEXP].ops().is_empty(),
            "rank 1 has no unexpected messages"
        );
    }
}

#[test]
fn queues_with_extra_operations_keep_matching_order() {
    let (_, d, _) = replay("queues3-rank0.json");
    let tags: Vec<_> = ops(&d, "mqs-dup", RECVS)
        .iter()
        .map(|o| o.desired_tag)
        .collect();
    // Recorded when queues.c gave its extra receives tags 2000+i.
    assert_eq!(tags, [Some(7), Some(2000), Some(2001), Some(2002)]);
    let unexpected: Vec<_> = ops(&d, "mqs-dup", UNEXP)
        .iter()
        .map(|o| (o.desired_tag, o.desired_length))
        .collect();
    assert_eq!(
        unexpected,
        [(Some(3000), 4), (Some(3001), 4), (Some(3002), 4)]
    );
}

#[test]
fn intercommunicator_peers_are_remote_group_ranks() {
    let (_, d, _) = replay("intercomm-rank0.json");
    let inter = d
        .comm("mqs-inter")
        .map(|c| (c.comm.size, c.comm.local_rank, c.group.clone()));
    assert_eq!(inter, Some((2, 0, Ok(vec![0, 2]))));
    let recv = ops(&d, "mqs-inter", RECVS);
    assert_eq!(recv.len(), 1);
    // Remote rank 0 of the odd group is world rank 1.
    assert_eq!(
        (
            recv[0].desired_local_rank,
            recv[0].desired_global_rank,
            recv[0].desired_tag
        ),
        (0, 1, Some(21))
    );
    let unexpected = ops(&d, "mqs-inter", UNEXP);
    assert_eq!(unexpected.len(), 1);
    assert_eq!(
        (
            unexpected[0].desired_global_rank,
            unexpected[0].desired_tag,
            unexpected[0].desired_length
        ),
        (1, Some(22), 400_000)
    );
    assert!(d.comm("MPI COMMUNICATOR 4 DUP FROM 3").is_some());

    let (_, d, _) = replay("intercomm-rank1.json");
    let sends = ops(&d, "mqs-inter", SENDS);
    assert_eq!(sends.len(), 1);
    assert_eq!(
        (
            sends[0].desired_local_rank,
            sends[0].desired_global_rank,
            sends[0].desired_tag
        ),
        (0, 0, Some(22))
    );
}

#[test]
fn release_build_degrades_gracefully() {
    let (_, d, _) = replay("release-queues3-rank0.json");
    for c in &d.comms {
        assert_eq!(c.queues[UNEXP], Queue::NoInformation, "{}", c.comm.name);
    }
    let dup = ops(&d, "mqs-dup", RECVS);
    let tags: Vec<_> = dup.iter().map(|o| o.desired_tag).collect();
    // Recorded when queues.c gave its extra receives tags 2000+i.
    assert_eq!(tags, [Some(7), Some(2000), Some(2001), Some(2002)]);
    assert!(dup.iter().all(|o| o
        .extra_text
        .last()
        .is_some_and(|l| l.starts_with("order: by posting sequence"))));
    let (_, d, _) = replay("release-queues3-rank1.json");
    let sends = ops(&d, "MPI_COMM_WORLD", SENDS);
    assert_eq!(sends.len(), 1);
    assert_eq!(
        (sends[0].desired_tag, sends[0].desired_length),
        (Some(5), 400_000)
    );
}
