//! Our DLL against Open MPI's own, both loaded by our host on the same
//! stopped process of live Open MPI 4.1.4 jobs: they must agree on every
//! field both report, except for the known defects of Open MPI's DLL listed
//! in `KNOWN`, where ours must give the correct value; ours must also list
//! every unexpected message the fixture left, exactly, which Open MPI's DLL
//! cannot.

use std::path::PathBuf;

use mqs_abi::OpStatus;
use mqs_host::dump::{CommunicatorDump, Operation, ProcessDump, Queue, Section};
use mqs_host::inspect::{dump_with_each_dll, Options};
use mqs_tests::{Job, Mpi};

/// Open MPI 4.1.4's DLL reads these -1 values as 32-bit unsigned.
const U32_MINUS_1: i64 = 4_294_967_295;

/// The differences Open MPI's DLL is known to have, each allowed only in
/// the direction stated (theirs wrong, ours right).
const KNOWN: &[&str] = &[
    "ANY_SOURCE reported as 4294967295 instead of -1",
    "ANY_TAG reported as tag 4294967295 instead of tag_wild",
    "MPI_COMM_NULL listed as a communicator (size 0, rank 4294967294); ours omits it",
    "actual_* of pending receives filled from an unset status; ours leaves them -1",
    "intercommunicator peers' global ranks translated through the local group",
    "extra_text: 'Data: <datatype size> instances of MPI datatype' cut to 'MPI_'",
    "no unexpected messages: mqs_no_information",
];

fn our_dll() -> PathBuf {
    mqs_tests::our_dll(false)
}

fn their_dll(mpi: Mpi) -> PathBuf {
    mpi.prefix()
        .expect("Open MPI")
        .join("lib/openmpi/libompi_dbg_msgq.so")
}

fn communicators(dump: &ProcessDump) -> &[CommunicatorDump] {
    match &dump.communicators {
        Section::Ok { value } => &value.list,
        other => panic!("no communicators from {}: {other:?}", dump.dll.path),
    }
}

fn operations<'a>(queue: &'a Section<Queue>, what: &str) -> &'a [Operation] {
    match queue {
        Section::Ok { value } => {
            assert!(
                value.truncated.is_none(),
                "{what}: truncated: {:?}",
                value.truncated
            );
            &value.operations
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// Their operation with the known defects corrected, for comparison.
fn corrected(op: &Operation) -> Operation {
    let mut op = op.clone();
    if op.desired_local_rank == U32_MINUS_1 {
        op.desired_local_rank = -1;
    }
    if op.desired_tag == Some(U32_MINUS_1) {
        op.desired_tag = None;
    }
    op
}

/// For an intercommunicator, the true MPI_COMM_WORLD rank of a peer
/// (remote group, local rank) — None for intracommunicators.
type RemoteWorld<'a> = &'a dyn Fn(i64) -> Option<i64>;

/// Compares what both DLLs report of one queue: same operations (as sets
/// keyed by buffer: theirs come in allocation order), same fields.
fn compare_queue(
    what: &str,
    theirs: &[Operation],
    ours: &[Operation],
    is_send: bool,
    remote_world: RemoteWorld<'_>,
) {
    let key = |op: &Operation| (op.buffer, op.desired_tag, op.desired_length);
    let mut theirs: Vec<Operation> = theirs.iter().map(corrected).collect();
    let mut ours = ours.to_vec();
    theirs.sort_by_key(key);
    ours.sort_by_key(key);
    assert_eq!(
        theirs.len(),
        ours.len(),
        "{what}: theirs {theirs:#?}\nours {ours:#?}"
    );
    for (t, o) in theirs.iter().zip(&ours) {
        let fields = |op: &Operation| {
            (
                op.status,
                op.desired_local_rank,
                op.desired_global_rank,
                op.desired_tag,
                op.desired_length,
                op.system_buffer,
                op.buffer,
            )
        };
        let mut t = t.clone();
        if let Some(world) = remote_world(t.desired_local_rank) {
            // Known defect: theirs translates through the wrong group.
            assert_eq!(
                o.desired_global_rank, world,
                "{what}: ours translates the remote peer"
            );
            t.desired_global_rank = world;
            if is_send {
                t.actual_global_rank = world;
            }
        }
        let t = &t;
        assert_eq!(fields(t), fields(o), "{what}");
        // The actual_* fields mean something once matched, and for sends.
        if is_send || t.status != OpStatus::Pending {
            let actual = |op: &Operation| {
                (
                    op.actual_local_rank,
                    op.actual_global_rank,
                    op.actual_tag,
                    op.actual_length,
                )
            };
            assert_eq!(actual(t), actual(o), "{what} actual");
        } else {
            assert_eq!(
                (o.actual_local_rank, o.actual_tag, o.actual_length),
                (-1, -1, -1),
                "{what}: ours leaves a pending receive's actual fields unset"
            );
        }
        // Ours names the datatype and count correctly.
        assert!(
            o.extra_text.iter().any(|l| l.contains(" x MPI_")),
            "{what}: datatype missing from {:?}",
            o.extra_text
        );
    }
}

/// Cross-checks one process; returns our dump for further checks.
/// `remote_world(comm, peer)` gives the world rank of a remote peer of an
/// intercommunicator of the fixture.
fn cross_check(mpi: Mpi, pid: u32) -> ProcessDump {
    cross_check_with(mpi, pid, &|_, _| None)
}

fn cross_check_with(
    mpi: Mpi,
    pid: u32,
    remote_world: &dyn Fn(&str, i64) -> Option<i64>,
) -> ProcessDump {
    let dumps = dump_with_each_dll(
        pid as i32,
        &[their_dll(mpi), our_dll()],
        &Options::default(),
    )
    .expect("both DLLs dump the same stopped process");
    let (theirs, ours) = (&dumps[0], &dumps[1]);
    // Ours names itself and, once it has seen the image, the MPI it found.
    assert!(
        ours.dll.version.contains("mqs") && ours.dll.version.contains("detected: Open MPI"),
        "{}",
        ours.dll.version
    );
    let ours_comms = communicators(ours);
    for t in communicators(theirs) {
        if t.name == "MPI_COMM_NULL" {
            assert_eq!(
                (t.size, t.local_rank),
                (0, U32_MINUS_1 - 1),
                "their MPI_COMM_NULL"
            );
            assert!(!ours_comms.iter().any(|o| o.name == "MPI_COMM_NULL"));
            continue;
        }
        let what = format!("pid {pid} {} (id {})", t.name, t.unique_id);
        let o = ours_comms
            .iter()
            .find(|o| o.unique_id == t.unique_id)
            .unwrap_or_else(|| panic!("{what}: missing from ours"));
        assert_eq!(
            (&o.name, o.size, o.local_rank, &o.group),
            (&t.name, t.size, t.local_rank, &t.group),
            "{what}"
        );
        compare_queue(
            &format!("{what} sends"),
            operations(&t.sends, &what),
            operations(&o.sends, &what),
            true,
            &|peer| remote_world(&t.name, peer),
        );
        compare_queue(
            &format!("{what} receives"),
            operations(&t.receives, &what),
            operations(&o.receives, &what),
            false,
            &|peer| remote_world(&t.name, peer),
        );
        assert!(
            matches!(t.unexpected, Section::NotAvailable { .. }),
            "{what}: theirs now has unexpected messages? {:?}",
            t.unexpected
        );
    }
    // Ours lists nothing theirs does not (but MPI_COMM_NULL).
    for o in ours_comms {
        assert!(
            communicators(theirs)
                .iter()
                .any(|t| t.unique_id == o.unique_id),
            "ours lists {} (id {}) that theirs does not",
            o.name,
            o.unique_id
        );
    }
    ours.clone()
}

/// (source local rank, tag, length) of the unexpected messages of a
/// communicator in our dump.
fn unexpected(dump: &ProcessDump, comm: &str) -> Vec<(i64, Option<i64>, i64)> {
    let c = communicators(dump)
        .iter()
        .find(|c| c.name == comm)
        .unwrap_or_else(|| panic!("no {comm}"));
    operations(&c.unexpected, comm)
        .iter()
        .map(|op| (op.desired_local_rank, op.desired_tag, op.desired_length))
        .collect()
}

fn all_unexpected(dump: &ProcessDump) -> usize {
    communicators(dump)
        .iter()
        .map(|c| operations(&c.unexpected, &c.name).len())
        .sum()
}

#[test]
fn queues_fixture_agrees_and_shows_unexpected_messages() {
    eprintln!("known differences of Open MPI's DLL: {KNOWN:#?}");
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &["3"]).expect("launch");
    let rank0 = cross_check(Mpi::OpenMpiG, job.rank_pid(0).unwrap());
    // Exactly the messages rank 1 left at rank 0, in arrival order.
    assert_eq!(
        unexpected(&rank0, "MPI_COMM_WORLD"),
        vec![(1, Some(99), 64), (1, Some(5), 400_000)]
    );
    assert_eq!(
        unexpected(&rank0, "mqs-dup"),
        vec![(1, Some(3000), 4), (1, Some(3001), 4), (1, Some(3002), 4)]
    );
    assert_eq!(all_unexpected(&rank0), 5);
    let rank1 = cross_check(Mpi::OpenMpiG, job.rank_pid(1).unwrap());
    assert_eq!(all_unexpected(&rank1), 0);
    job.shutdown().unwrap();
}

#[test]
fn intercomm_fixture_agrees_and_translates_remote_ranks() {
    let job = Job::launch(Mpi::OpenMpiG, "intercomm", 4, &[]).expect("launch");
    for (rank, pid) in job.rank_pids() {
        // mqs-inter joins the even world ranks with the odd ones: remote
        // local rank r is world rank 2r+1 seen from an even rank, 2r from
        // an odd one.
        let parity = i64::from(rank % 2);
        let remote_world = move |comm: &str, peer: i64| {
            (comm == "mqs-inter" && peer >= 0).then_some(2 * peer + 1 - parity)
        };
        let ours = cross_check_with(Mpi::OpenMpiG, pid, &remote_world);
        let expected: Vec<(i64, Option<i64>, i64)> = if rank == 0 {
            // World rank 1's pending rendezvous send, remote rank 0 in mqs-inter.
            vec![(0, Some(22), 400_000)]
        } else {
            vec![]
        };
        assert_eq!(unexpected(&ours, "mqs-inter"), expected, "rank {rank}");
    }
    job.shutdown().unwrap();
}

#[test]
fn ring_fixture_agrees() {
    let job = Job::launch(Mpi::OpenMpiG, "ring", 3, &[]).expect("launch");
    for (rank, pid) in job.rank_pids() {
        // The ranks enter their blocking receive just after READY: give them
        // a moment rather than race them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let ours = cross_check(Mpi::OpenMpiG, pid);
            let world = communicators(&ours)
                .iter()
                .find(|c| c.name == "MPI_COMM_WORLD")
                .unwrap();
            let receives = operations(&world.receives, "ring").to_vec();
            // The blocking receive of the deadlock, from the left neighbour.
            let found = receives.iter().any(|op| {
                op.desired_local_rank == i64::from((rank + 2) % 3)
                    && op.desired_tag == Some(42)
                    && op.desired_length == 4
            });
            if found {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "rank {rank}: {receives:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    job.shutdown().unwrap();
}

#[test]
fn release_build_agrees_and_says_why_unexpected_is_unavailable() {
    let job = Job::launch(Mpi::OpenMpiRelease, "queues", 2, &[]).expect("launch");
    let ours = cross_check(Mpi::OpenMpiRelease, job.rank_pid(0).unwrap());
    for comm in communicators(&ours) {
        match &comm.unexpected {
            Section::NotAvailable { reason } => {
                assert!(reason.contains("debug"), "{}: {reason}", comm.name)
            }
            other => panic!(
                "{}: unexpected queue without ob1 debug info: {other:?}",
                comm.name
            ),
        }
    }
    job.shutdown().unwrap();
}
