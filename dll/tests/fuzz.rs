//! Property tests: the DLL, driven through its C entry points over recorded
//! Open MPI processes whose memory is corrupted at random (bit flips,
//! pointers to NULL, misaligned, dangling, or back into the structures to
//! make cycles, huge counts, unmapped pages), always returns, never panics
//! (a caught panic would show as the Internal error code), never produces
//! an endless iteration, and keeps its reads bounded.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use common::host::{self, Dump, Image, Process, Queue};
use common::mutate::{apply, mutate_layout, mutation, Mutation};
use common::snapshot::{from_hex, Snapshot};
use mqs_dll::errors::DllError;
use mqs_dll::testing::FakeProcess;
use proptest::prelude::*;

const SNAPSHOTS: [&str; 9] = [
    "queues-rank0.json",
    "queues-rank1.json",
    "queues3-rank0.json",
    "queues3-rank1.json",
    "intercomm-rank0.json",
    "intercomm-rank1.json",
    "release-queues3-rank0.json",
    "release-queues3-rank1.json",
    "spawn-parent.json",
];

/// Most fetches one corrupted session may make. A clean session needs
/// about 100; corruption can lengthen walks only through memory that
/// exists, which a snapshot keeps small.
const MAX_FETCHES: u64 = 20_000;

static CASES: AtomicU64 = AtomicU64::new(0);
static MAX_SEEN: AtomicU64 = AtomicU64::new(0);

/// A snapshot, its memory ready to clone, and its regions (address, length).
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
                let snap = Snapshot::load(&common::data(n)).unwrap_or_default();
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
        if let Ok(g) = &c.group {
            // Every slot written: the DLL never writes fewer (or more, which
            // the fake could not see, but the size is what it reported).
            prop_assert!(!g.contains(&i32::MIN));
        }
        for op in c.queues.iter().flat_map(|q| q.ops()) {
            prop_assert!(op.extra_text.len() <= 5);
            prop_assert!(op.extra_text.iter().all(|l| l.len() < 64));
        }
    }
    Ok(())
}

/// Corrupted sessions to run (PROPTEST_CASES overrides).
const CASES_DEFAULT: u32 = 5000;

fn session(which: usize, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let loaded = &snapshots()[which];
    let snap = &loaded.snap;
    prop_assume!(!snap.memory.is_empty());
    let mut fake = loaded.memory.clone();
    for m in mutations {
        apply(&loaded.regions, &mut fake, m);
    }
    let layout_changed = mutations
        .iter()
        .any(|m| matches!(m, Mutation::Layout { .. }));
    let types = mutate_layout(snap, mutations);
    let mut image = Image::new(types.fake_image());
    let (rc, _) = host::setup_image(&mut image);
    if !layout_changed {
        prop_assert_eq!(rc, 0);
    }
    prop_assert_ne!(rc, DllError::Internal.code());
    let mut process = Process::new(
        Box::new(fake),
        &mut image,
        snap.type_sizes,
        snap.global_rank,
    );
    let d = host::dump(&mut process);
    host::destroy_image(&mut image);
    let fetches = process.fetches.get();
    CASES.fetch_add(1, Ordering::Relaxed);
    MAX_SEEN.fetch_max(fetches, Ordering::Relaxed);
    prop_assert!(fetches <= MAX_FETCHES, "{} fetches", fetches);
    check_codes(&d)
}

#[test]
fn corrupted_processes_never_crash_hang_or_read_without_bound() {
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
        "fuzz: {} corrupted sessions over {} recorded processes, at most {} fetches in one",
        CASES.load(Ordering::Relaxed),
        SNAPSHOTS.len(),
        MAX_SEEN.load(Ordering::Relaxed)
    );
    assert!(result.is_ok(), "{result:?}");
    assert!(CASES.load(Ordering::Relaxed) >= u64::from(cases));
}

/// Wild type tables: every type missing in turn still gives a clean
/// has_queues failure with a message naming it, never a crash.
#[test]
fn each_missing_type_fails_cleanly_with_its_name() {
    let snap = &snapshots()[0].snap;
    for (name, _) in snap.types.iter() {
        let mut s = snap.clone();
        s.types.remove(name);
        let mut image = Image::new(s.fake_image());
        let (rc, msg) = host::setup_image(&mut image);
        if rc == 0 {
            // Optional types (ob1, sparse groups, opal_proc_t...): the dump
            // still works.
            let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
            let d = host::dump(&mut process);
            assert_eq!(d.process_rc, 0, "without {name}");
            assert!(!d.comms.is_empty(), "without {name}");
        } else {
            assert_eq!(rc, DllError::MissingType.code(), "without {name}");
            let msg = msg.unwrap_or_default();
            assert!(msg.contains(name.as_str()), "{msg}");
            assert_eq!(msg.matches("%s").count(), 1, "{msg}");
            assert!(msg.contains("debug information"), "{msg}");
        }
        host::destroy_image(&mut image);
    }
}
