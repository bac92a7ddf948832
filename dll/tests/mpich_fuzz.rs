//! The MPICH backend on processes recorded from live MPICH 4.0.2 ch3 jobs
//! of tests/fixtures/queues.c (`dll/tests/data/mpich/`, recorded with
//! `dll/examples/record_snapshot.rs`): each replays to its recorded dump
//! and to the fixture's documented state; corrupted at random (bit flips,
//! pointers to NULL, misaligned, dangling or into the structures to make
//! cycles, huge counts, unmapped pages, wrong layouts) the DLL always
//! returns, never panics, never iterates without end and keeps its reads
//! bounded; a communicator freed while the list is read ends the list
//! cleanly; every type missing in turn fails with its name or still dumps.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use common::host::{self, Dump, Image, Process, Queue};
use common::mutate::{apply, mutate_layout, mutation, Mutation};
use common::snapshot::{from_hex, Snapshot};
use mqs_abi::{OpStatus, PendingOperation};
use mqs_dll::errors::DllError;
use mqs_dll::testing::FakeProcess;
use proptest::prelude::*;

const SNAPSHOTS: [&str; 4] = [
    "mpich/queues2-rank0.json",
    "mpich/queues2-rank1.json",
    "mpich/queues8-rank1.json",
    "mpich/queues8-rank2.json",
];

/// Most fetches one corrupted session may make (a clean one needs about
/// 60).
const MAX_FETCHES: u64 = 20_000;
/// Corrupted sessions to run (PROPTEST_CASES overrides).
const CASES_DEFAULT: u32 = 5000;

static CASES: AtomicU64 = AtomicU64::new(0);
static MAX_SEEN: AtomicU64 = AtomicU64::new(0);

struct Loaded {
    snap: Snapshot,
    memory: FakeProcess,
    regions: Vec<(u64, usize)>,
}

fn snapshots() -> &'static Vec<Loaded> {
    static S: OnceLock<Vec<Loaded>> = OnceLock::new();
    S.get_or_init(|| {
        SNAPSHOTS
            .iter()
            .map(|n| {
                let snap = Snapshot::load(&common::data(n)).unwrap_or_else(|e| panic!("{e}"));
                let regions = snap
                    .memory
                    .iter()
                    .map(|r| (r.addr, from_hex(&r.hex).len()))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                Loaded {
                    memory: snap.fake_process(),
                    snap,
                    regions,
                }
            })
            .collect()
    })
}

fn run(snap: &Snapshot, memory: FakeProcess) -> (Dump, u64) {
    let mut image = Image::new(snap.fake_image());
    let (rc, msg) = host::setup_image(&mut image);
    let mut process = Process::new(
        Box::new(memory),
        &mut image,
        snap.type_sizes,
        snap.global_rank,
    );
    let mut dump = host::dump(&mut process);
    dump.image_rc = rc;
    dump.image_message = msg;
    let fetches = process.fetches.get();
    host::destroy_image(&mut image);
    (dump, fetches)
}

fn ops<'d>(dump: &'d Dump, comm: &str, class: usize) -> &'d [PendingOperation] {
    let c = dump
        .comm(comm)
        .unwrap_or_else(|| panic!("no communicator {comm}"));
    match &c.queues[class] {
        Queue::Ops(o) => o,
        other => panic!("{comm} queue {class}: {other:?}"),
    }
}

const SENDS: usize = 0;
const RECVS: usize = 1;
const UNEXP: usize = 2;

/// (local rank, global rank, tag, bytes) of a queue.
fn summary(ops: &[PendingOperation]) -> Vec<(i64, i64, Option<i64>, i64)> {
    ops.iter()
        .map(|o| {
            (
                o.desired_local_rank,
                o.desired_global_rank,
                o.desired_tag,
                o.desired_length,
            )
        })
        .collect()
}

#[test]
fn recorded_mpich_processes_replay_to_their_dumps_and_the_fixture() {
    for (loaded, name) in snapshots().iter().zip(SNAPSHOTS) {
        let (dump, fetches) = run(&loaded.snap, loaded.memory.clone());
        assert_eq!(dump.image_rc, 0, "{name}: {:?}", dump.image_message);
        let mut json = dump.to_json();
        // Recorded without the image fields.
        let expected = loaded.snap.expected.clone();
        if let (Some(obj), Some(exp)) = (json.as_object_mut(), expected.as_ref()) {
            obj.retain(|k, _| exp.get(k).is_some());
        }
        assert_eq!(Some(json), expected, "{name}");
        let names: Vec<&str> = dump.comms.iter().map(|c| c.comm.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "MPI_COMM_WORLD",
                "MPI_COMM_SELF",
                "mqs-wait",
                "mqs-split",
                "mqs-dup"
            ],
            "{name}: MPICH's own communicators hidden, the rest by context id"
        );
        let ops_total: usize = dump
            .comms
            .iter()
            .map(|c| c.queues.iter().map(|q| q.ops().len()).sum::<usize>())
            .sum();
        eprintln!(
            "{name}: {fetches} fetches for {} communicators and {ops_total} operations",
            dump.comms.len()
        );
        assert!(fetches < 120, "{name}: {fetches} fetches");
    }
    let s = snapshots();
    // 2 ranks, N=2: rank 0.
    let (d, _) = run(&s[0].snap, s[0].memory.clone());
    assert_eq!(
        summary(ops(&d, "MPI_COMM_WORLD", RECVS)),
        [(-1, -1, Some(8), 32)]
    );
    let unexp = ops(&d, "MPI_COMM_WORLD", UNEXP);
    assert_eq!(
        summary(unexp),
        [(1, 1, Some(99), 64), (1, 1, Some(5), 400_000)]
    );
    assert_eq!(unexp[0].status, OpStatus::Complete);
    assert_eq!(unexp[1].status, OpStatus::Pending);
    assert!(
        unexp[1].extra_text.iter().any(|l| l.contains("rendezvous")),
        "{:?}",
        unexp[1].extra_text
    );
    assert_eq!(summary(ops(&d, "mqs-split", RECVS)), [(0, 1, None, 8)]);
    assert_eq!(
        summary(ops(&d, "mqs-dup", RECVS)),
        [
            (1, 1, Some(7), 16),
            (1, 1, Some(1_000_000), 4),
            (1, 1, Some(1_000_001), 4)
        ]
    );
    assert_eq!(
        summary(ops(&d, "mqs-dup", UNEXP)),
        [(1, 1, Some(3000), 4), (1, 1, Some(3001), 4)]
    );
    // Rank 1: sends in the order they were started.
    let (d, _) = run(&s[1].snap, s[1].memory.clone());
    assert_eq!(
        summary(ops(&d, "MPI_COMM_WORLD", SENDS)),
        [(0, 0, Some(99), 64), (0, 0, Some(5), 400_000)]
    );
    assert_eq!(
        summary(ops(&d, "mqs-dup", SENDS)),
        [(0, 0, Some(3000), 4), (0, 0, Some(3001), 4)]
    );
    // 8 ranks: rank 1's unexpected messages from ranks 2-7, 16 bytes each.
    let (d, _) = run(&s[2].snap, s[2].memory.clone());
    let mut from: Vec<(i64, i64, Option<i64>, i64)> = summary(ops(&d, "mqs-dup", UNEXP));
    from.sort_unstable();
    let want: Vec<_> = (2..8).map(|r| (r, r, Some(40 + r), 16)).collect();
    assert_eq!(from, want);
    // Rank 2: derived datatypes by name and size, through the reversed split.
    let (d, _) = run(&s[3].snap, s[3].memory.clone());
    let recv = ops(&d, "mqs-split", RECVS);
    assert_eq!(summary(recv), [(7, 0, Some(22), 32)]);
    assert!(
        recv[0].extra_text.iter().any(|l| l == "2 x mqs-pair"),
        "{:?}",
        recv[0].extra_text
    );
    let send = ops(&d, "mqs-dup", SENDS);
    assert_eq!(summary(send), [(1, 1, Some(42), 16)]);
    assert!(
        send[0].extra_text.iter().any(|l| l == "1 x mqs-vec"),
        "{:?}",
        send[0].extra_text
    );
}

fn check_codes(d: &Dump) -> Result<(), TestCaseError> {
    let internal = DllError::Internal.code();
    let mut codes = vec![d.image_rc, d.process_rc, d.update_rc];
    codes.extend(d.comm_error);
    for c in &d.comms {
        if let Err(e) = c.group {
            codes.push(e);
        }
        for q in &c.queues {
            if let Queue::Error(e, _) = q {
                codes.push(*e);
            }
        }
    }
    prop_assert!(
        !codes.contains(&internal),
        "a panic was caught inside the DLL: {d:?}"
    );
    prop_assert!(!codes.contains(&-1), "an endless iteration: {d:?}");
    for c in &d.comms {
        prop_assert!(c.comm.size >= 0);
        prop_assert!(c.comm.name.len() < 64);
        if let Ok(g) = &c.group {
            prop_assert!(!g.contains(&i32::MIN));
        }
        for op in c.queues.iter().flat_map(|q| q.ops()) {
            prop_assert!(op.extra_text.len() <= 5);
            prop_assert!(op.extra_text.iter().all(|l| l.len() < 64));
            prop_assert!(op.desired_length >= -1);
        }
    }
    Ok(())
}

fn session(which: usize, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let loaded = &snapshots()[which];
    let snap = &loaded.snap;
    let mut fake = loaded.memory.clone();
    for m in mutations {
        apply(&loaded.regions, &mut fake, m);
    }
    let layout_changed = mutations
        .iter()
        .any(|m| matches!(m, Mutation::Layout { .. }));
    let types = mutate_layout(snap, mutations);
    let (d, fetches) = run(&types, fake);
    if !layout_changed {
        prop_assert_eq!(d.image_rc, 0);
    }
    CASES.fetch_add(1, Ordering::Relaxed);
    MAX_SEEN.fetch_max(fetches, Ordering::Relaxed);
    prop_assert!(fetches <= MAX_FETCHES, "{} fetches", fetches);
    check_codes(&d)
}

#[test]
fn corrupted_mpich_processes_never_crash_hang_or_read_without_bound() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES_DEFAULT);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (
        0usize..SNAPSHOTS.len(),
        prop::collection::vec(mutation(), 1..24),
    );
    let result = runner.run(&strategy, |(which, mutations)| session(which, &mutations));
    eprintln!(
        "mpich fuzz: {} corrupted sessions over {} recorded processes, at most {} fetches in one",
        CASES.load(Ordering::Relaxed),
        SNAPSHOTS.len(),
        MAX_SEEN.load(Ordering::Relaxed)
    );
    assert!(result.is_ok(), "{result:?}");
    assert!(CASES.load(Ordering::Relaxed) >= u64::from(cases));
}

/// The addresses of the communicators on the list, in list order, and the
/// offset of `comm_next`.
fn comm_list(loaded: &Loaded) -> (Vec<u64>, u64) {
    let snap = &loaded.snap;
    let head_off = snap.types["MPIR_Comm_list"].fields["head"];
    let next_off = snap.types["MPIR_Comm"].fields["comm_next"];
    let read = |addr: u64| {
        let mut b = [0u8; 8];
        assert!(mqs_dll::access::ProcessAccess::fetch(
            &loaded.memory,
            addr,
            &mut b
        ));
        u64::from_le_bytes(b)
    };
    let mut cur = read(snap.symbols["MPIR_All_communicators"] + head_off);
    let mut list = Vec::new();
    while cur != 0 && list.len() < 100 {
        list.push(cur);
        cur = read(cur + next_off);
    }
    (list, next_off)
}

#[test]
fn a_communicator_freed_mid_walk_ends_the_list_cleanly() {
    let loaded = &snapshots()[0];
    let (list, next_off) = comm_list(loaded);
    assert!(list.len() >= 10, "{list:x?}");
    let (clean, _) = run(&loaded.snap, loaded.memory.clone());
    for cut in 1..list.len() {
        // The communicator after `cut - 1` freed: its memory gone (a
        // dangling next pointer), or reused (a pointer back into the list).
        for bad in [0xdead_0000_u64, list[0], list[cut - 1]] {
            let mut fake = loaded.memory.clone();
            fake.write_u64(list[cut - 1] + next_off, bad);
            let (d, _) = run(&loaded.snap, fake);
            assert_eq!((d.process_rc, d.update_rc), (0, 0), "cut {cut} {bad:#x}");
            assert!(d.comm_error.is_none(), "cut {cut}");
            // What remains is a subset of the clean list, unchanged.
            for c in &d.comms {
                let same = clean
                    .comms
                    .iter()
                    .find(|k| k.comm.unique_id == c.comm.unique_id);
                assert_eq!(Some(c), same, "cut {cut} {bad:#x}");
            }
        }
    }
}

#[test]
fn each_missing_mpich_type_fails_cleanly_with_its_name() {
    let snap = &snapshots()[0].snap;
    for name in snap.types.keys() {
        let mut s = snap.clone();
        s.types.remove(name);
        let (d, _) = run(&s, s.fake_process());
        if d.image_rc == 0 {
            // Optional types (groups, datatypes, the VC table...): the dump
            // still works, perhaps with less.
            assert_eq!(d.process_rc, 0, "without {name}");
            assert!(!d.comms.is_empty(), "without {name}");
        } else {
            assert_eq!(d.image_rc, DllError::MissingType.code(), "without {name}");
            let msg = d.image_message.unwrap_or_default();
            assert!(msg.contains(name.as_str()), "{msg}");
            assert_eq!(msg.matches("%s").count(), 1, "{msg}");
            assert!(msg.contains("MPICH"), "{msg}");
        }
    }
}
