//! Fuzzing: this build's DLL, in the real host's session, over recorded
//! Open MPI processes (`dll/tests/data`) corrupted at random, with
//! mutations aimed at the links of Open MPI's lists (`opal_list_item_t`):
//! the shared machinery of `common/fuzzing.rs` (budgets, a time limit per
//! case, saved seeds: `MQS_FUZZ_CASES`, `MQS_FUZZ_SEED`, `MQS_FUZZ_SEEDS`;
//! failing seeds are kept in `$CARGO_TARGET_TMPDIR/fuzz-failures.txt`).

mod common;

use std::sync::OnceLock;

use common::fuzzing::{self, Base};
use common::session::recording;
use mqs_tests::Family;

fn bases() -> &'static [Base] {
    static B: OnceLock<Vec<Base>> = OnceLock::new();
    B.get_or_init(|| fuzzing::bases(Family::OpenMpi, &fuzzing::opal_links))
}

#[test]
fn corrupted_processes_never_crash_hang_or_read_without_bound() {
    fuzzing::fuzz("fuzz", bases());
}

/// Layouts with a type missing: every one gives a clean has_queues failure
/// naming it, or (for optional ones) a dump that still works.
#[test]
fn each_missing_type_fails_cleanly_with_its_name() {
    for recorded in ["queues", "ompi5-queues"] {
        missing_types_fail_cleanly(&recording(recorded).processes[0]);
    }
}

fn missing_types_fail_cleanly(process: &common::session::Recorded) {
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
