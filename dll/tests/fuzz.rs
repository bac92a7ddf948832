//! Fuzzing: this build's DLL, in the real host's session, over recorded
//! Open MPI processes (`dll/tests/data`) corrupted at random, with
//! mutations aimed at the links of Open MPI's lists (`opal_list_item_t`):
//! the shared machinery of `common/fuzzing.rs` (budgets, a time limit per
//! case, saved seeds: `MQS_FUZZ_CASES`, `MQS_FUZZ_SEED`, `MQS_FUZZ_SEEDS`;
//! failing seeds are kept in `$CARGO_TARGET_TMPDIR/fuzz-failures.txt`).

mod common;

use std::sync::OnceLock;

use common::fuzzing::{self, field, read_u64, Base, ListLink};
use common::session::{recording, recordings, Recorded};
use mqs_tests::Family;

/// The `next` links of Open MPI's list items: a word of a region read
/// whose value is another item whose `prev` leads back.
fn opal_links(process: &Recorded, regions: &[(u64, usize)]) -> Vec<ListLink> {
    let log = &process.symbols;
    let next = field(log, "opal_list_item_t", "opal_list_next").unwrap_or(16);
    let prev = field(log, "opal_list_item_t", "opal_list_prev").unwrap_or(24);
    let inside = |v: u64| regions.iter().any(|&(a, n)| v >= a && v < a + n as u64);
    let mut links = Vec::new();
    for &(start, n) in regions {
        let mut a = start.div_ceil(8) * 8;
        while a + 8 <= start + n as u64 {
            if let Some(v) = read_u64(&process.target, a).filter(|&v| v % 8 == 0 && inside(v)) {
                let item = a.wrapping_sub(next);
                if read_u64(&process.target, v.wrapping_add(prev)) == Some(item) {
                    let before = read_u64(&process.target, item.wrapping_add(prev));
                    links.push(ListLink {
                        at: a,
                        item,
                        before: before.unwrap_or(item),
                    });
                }
            }
            a += 8;
        }
    }
    links
}

fn bases() -> &'static [Base] {
    static B: OnceLock<Vec<Base>> = OnceLock::new();
    B.get_or_init(|| {
        recordings(Family::OpenMpi)
            .flat_map(|plan| {
                recording(plan.name)
                    .processes
                    .iter()
                    .map(|p| fuzzing::base(plan.name, p, &opal_links))
            })
            .collect()
    })
}

#[test]
fn corrupted_processes_never_crash_hang_or_read_without_bound() {
    fuzzing::fuzz("fuzz", bases());
}

/// Layouts with a type missing: every one gives a clean has_queues failure
/// naming it, or (for optional ones) a dump that still works.
#[test]
fn each_missing_type_fails_cleanly_with_its_name() {
    let process = &recording("queues").processes[0];
    for name in process.symbols.types.keys() {
        let mut log = process.symbols.clone();
        log.types.remove(name);
        let d = fuzzing::with_symbols(process, log);
        match &d.added {
            Ok(()) => assert!(!d.comms().is_empty(), "without {name}"),
            Err(e) => {
                let bare = name.strip_prefix("struct ").unwrap_or(name);
                assert!(e.contains(bare), "without {name}: {e}");
                assert!(e.contains("debug information"), "without {name}: {e}");
            }
        }
    }
}
