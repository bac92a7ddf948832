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

/// One corruption, relative to the snapshot's recorded regions.
#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit.
    Flip {
        region: usize,
        offset: usize,
        bit: u8,
    },
    /// Overwrite an aligned 8-byte word (a pointer, a count, a size).
    Word {
        region: usize,
        offset: usize,
        value: Value,
    },
    /// Overwrite an aligned 4-byte word (an int count, rank, tag).
    Int {
        region: usize,
        offset: usize,
        value: u32,
    },
    /// Unmap the page under a region's byte.
    Unmap { region: usize, offset: usize },
    /// A debugger reporting a wrong layout: one field offset (or, for
    /// `field == usize::MAX`, a type's size) replaced.
    Layout { ty: usize, field: usize, value: u64 },
}

#[derive(Debug, Clone)]
enum Value {
    Zero,
    Raw(u64),
    /// Somewhere in a recorded region (possibly making a cycle).
    Into {
        region: usize,
        offset: usize,
    },
    /// A recorded region's address plus a small misalignment.
    Misaligned {
        region: usize,
        delta: u8,
    },
    Huge,
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Zero),
        any::<u64>().prop_map(Value::Raw),
        (any::<usize>(), any::<usize>())
            .prop_map(|(region, offset)| Value::Into { region, offset }),
        (any::<usize>(), 1u8..8).prop_map(|(region, delta)| Value::Misaligned { region, delta }),
        Just(Value::Huge),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>(), 0u8..8).prop_map(|(region, offset, bit)| Mutation::Flip {
            region,
            offset,
            bit
        }),
        (any::<usize>(), any::<usize>(), value()).prop_map(|(region, offset, value)| {
            Mutation::Word {
                region,
                offset,
                value,
            }
        }),
        (
            any::<usize>(),
            any::<usize>(),
            prop_oneof![Just(u32::MAX), Just(0x7fff_ffff), Just(0), any::<u32>()]
        )
            .prop_map(|(region, offset, value)| Mutation::Int {
                region,
                offset,
                value
            }),
        (any::<usize>(), any::<usize>())
            .prop_map(|(region, offset)| Mutation::Unmap { region, offset }),
        (
            any::<usize>(),
            prop_oneof![Just(usize::MAX), any::<usize>()],
            prop_oneof![0u64..4096, Just(0x7fff_ffff), Just(0)]
        )
            .prop_map(|(ty, field, value)| Mutation::Layout { ty, field, value }),
    ]
}

fn apply(regions: &[(u64, usize)], p: &mut FakeProcess, m: &Mutation) {
    if regions.is_empty() {
        return;
    }
    let at = |region: usize, offset: usize, align: usize| {
        let (addr, len) = regions[region % regions.len()];
        let off = (offset % len) / align * align;
        addr + off as u64
    };
    match m {
        Mutation::Flip {
            region,
            offset,
            bit,
        } => {
            let a = at(*region, *offset, 1);
            let mut b = [0u8; 1];
            if mqs_dll::callbacks::ProcessAccess::fetch(p, a, &mut b) {
                p.map(a, vec![b[0] ^ (1 << bit)]);
            }
        }
        Mutation::Word {
            region,
            offset,
            value,
        } => {
            let a = at(*region, *offset, 8);
            let v = match value {
                Value::Zero => 0,
                Value::Raw(v) => *v,
                Value::Into { region, offset } => at(*region, *offset, 8),
                Value::Misaligned { region, delta } => at(*region, 0, 1) + u64::from(*delta),
                Value::Huge => u64::MAX / 3,
            };
            p.write_u64(a, v);
        }
        Mutation::Int {
            region,
            offset,
            value,
        } => {
            let a = at(*region, *offset, 4);
            p.write_u32(a, *value);
        }
        Mutation::Unmap { region, offset } => {
            let a = at(*region, *offset, 1);
            p.unmap(a);
        }
        Mutation::Layout { .. } => {}
    }
}

/// Applies the layout mutations to a copy of the snapshot's types.
fn mutate_layout(snap: &Snapshot, mutations: &[Mutation]) -> Snapshot {
    let mut s = snap.clone();
    let names: Vec<String> = s.types.keys().cloned().collect();
    for m in mutations {
        let Mutation::Layout { ty, field, value } = m else {
            continue;
        };
        let Some(t) = names
            .get(ty % names.len().max(1))
            .and_then(|n| s.types.get_mut(n))
        else {
            continue;
        };
        if *field == usize::MAX || t.fields.is_empty() {
            t.size = *value;
        } else {
            let keys: Vec<String> = t.fields.keys().cloned().collect();
            if let Some(slot) = t.fields.get_mut(&keys[field % keys.len()]) {
                *slot = *value;
            }
        }
    }
    s
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
