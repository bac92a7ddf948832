//! Fuzzing: this build's DLL, in the real host's session, over recorded
//! Open MPI processes (`dll/tests/data`) corrupted at random, with
//! mutations aimed at the links of Open MPI's lists (`opal_list_item_t`):
//! the shared machinery of `common/fuzzing.rs` (budgets, a time limit per
//! case, saved seeds: `MQS_FUZZ_CASES`, `MQS_FUZZ_SEED`, `MQS_FUZZ_SEEDS`;
//! failing seeds are kept in `$CARGO_TARGET_TMPDIR/fuzz-failures.txt`).

mod common;

use std::sync::OnceLock;

use std::collections::HashSet;

use common::fuzzing::{self, field, read_u64, symbol, Base, Position};
use common::session::{recording, Recorded};
use mqs_tests::Family;

fn bases() -> &'static [Base] {
    static B: OnceLock<Vec<Base>> = OnceLock::new();
    B.get_or_init(|| fuzzing::bases(Family::OpenMpi, &fuzzing::opal_links, &sm_positions))
}

/// The shared-memory BTL's names in Open MPI 4.1 (vader) and 5.0 (sm):
/// its component symbol, component, endpoint, fragment header and FIFO
/// types.
const SM_NAMES: [[&str; 5]; 2] = [
    [
        "mca_btl_vader_component",
        "mca_btl_vader_component_t",
        "mca_btl_vader_endpoint_t",
        "mca_btl_vader_hdr_t",
        "vader_fifo_t",
    ],
    [
        "mca_btl_sm_component",
        "mca_btl_sm_component_t",
        "mca_btl_sm_endpoint_t",
        "mca_btl_sm_hdr_t",
        "sm_fifo_t",
    ],
];

/// Most entries followed while looking for fields.
const MAX_ENTRIES: usize = 4096;
/// An empty FIFO.
const FIFO_FREE: u64 = u64::MAX - 1;

/// The fields of the shared-memory BTL the DLL reads messages in transit
/// through: the component's box count and size, the FIFO's head and tail,
/// every fragment's link, length, flags and box pointer, every known box's
/// read position and sequence, and the header (size, tag, sequence) of
/// every entry of every box.
fn sm_positions(p: &Recorded) -> Vec<Position> {
    let log = &p.symbols;
    let mem = &p.target;
    let at = |a: u64, width: u8| Position { at: a, width };
    let mut out = Vec::new();
    for [sym, comp_t, ep_t, hdr_t, fifo_t] in SM_NAMES {
        let Some(comp) = symbol(log, sym) else {
            continue;
        };
        let f = |ty: &str, name: &str| field(log, ty, name);
        let (Some(endpoints), Some(known), Some(count), Some(fifo), Some(size_off)) = (
            f(comp_t, "endpoints"),
            f(comp_t, "fbox_in_endpoints"),
            f(comp_t, "num_fbox_in_endpoints"),
            f(comp_t, "my_fifo"),
            f(comp_t, "fbox_size"),
        ) else {
            continue;
        };
        let (Some(fbox_in), Some(seg_base)) = (f(ep_t, "fbox_in"), f(ep_t, "segment_base")) else {
            continue;
        };
        let ep_size = log
            .types
            .get(ep_t)
            .and_then(|t| t.as_ref())
            .and_then(|t| t.size)
            .unwrap_or(0);
        let hdr_size = log
            .types
            .get(hdr_t)
            .and_then(|t| t.as_ref())
            .and_then(|t| t.size)
            .unwrap_or(0);
        let u32_at = |a: u64| read_u64(mem, a).map(|v| v & 0xffff_ffff);
        out.push(at(comp + count, 4));
        out.push(at(comp + size_off, 4));
        let ring = u32_at(comp + size_off).unwrap_or(0);
        let mut boxes = HashSet::new();
        let mut entries = |buffer: u64, start: u64, out: &mut Vec<Position>| {
            if !boxes.insert(buffer) || !(64..=1 << 20).contains(&ring) {
                return;
            }
            let first = start & 0x7fff_ffff;
            let mut pos = first;
            for _ in 0..ring / 32 {
                let Some(h) = read_u64(mem, buffer + pos) else {
                    return;
                };
                if (h >> 32) & 0xffff == 0 {
                    return;
                }
                out.extend([
                    at(buffer + pos, 4),
                    at(buffer + pos + 4, 2),
                    at(buffer + pos + 6, 2),
                ]);
                let mut next = (pos + 8 + (h & 0xffff_ffff) + 31) & !31;
                if next >= ring {
                    next = 32;
                }
                if next == first {
                    return;
                }
                pos = next;
            }
        };
        // The boxes the rank knows.
        let list = read_u64(mem, comp + known).unwrap_or(0);
        for i in 0..u32_at(comp + count).unwrap_or(0).min(64) {
            let Some(ep) = read_u64(mem, list + 8 * i) else {
                continue;
            };
            out.extend([at(ep + fbox_in + 16, 4), at(ep + fbox_in + 20, 2)]);
            let buffer = read_u64(mem, ep + fbox_in).unwrap_or(0);
            let start = u32_at(ep + fbox_in + 16).unwrap_or(32);
            entries(buffer, start, &mut out);
        }
        // The FIFO, and the boxes its fragments announce.
        let Some(q) = read_u64(mem, comp + fifo) else {
            continue;
        };
        let (Some(head), Some(tail)) = (f(fifo_t, "fifo_head"), f(fifo_t, "fifo_tail")) else {
            continue;
        };
        out.extend([at(q + head, 8), at(q + tail, 8)]);
        let eps = read_u64(mem, comp + endpoints).unwrap_or(0);
        let relative = |v: u64| {
            read_u64(mem, eps + (v >> 32) * ep_size + seg_base).map(|b| b + (v & 0xffff_ffff))
        };
        let (Some(next), Some(len), Some(flags), Some(fbox_base)) = (
            f(hdr_t, "next"),
            f(hdr_t, "len"),
            f(hdr_t, "flags"),
            f(hdr_t, "fbox_base"),
        ) else {
            continue;
        };
        let mut seen = HashSet::new();
        let mut cur = read_u64(mem, q + head).unwrap_or(FIFO_FREE);
        while cur != FIFO_FREE && seen.insert(cur) && seen.len() < MAX_ENTRIES {
            let Some(hdr) = relative(cur) else {
                break;
            };
            out.extend([
                at(hdr + next, 8),
                at(hdr + len, 4),
                at(hdr + flags, 1),
                at(hdr + fbox_base, 8),
                // ob1's header type, context and sequence after it.
                at(hdr + hdr_size, 1),
                at(hdr + hdr_size + 2, 2),
                at(hdr + hdr_size + 12, 2),
            ]);
            if read_u64(mem, hdr + flags).is_some_and(|v| v & 4 != 0) {
                if let Some(b) = read_u64(mem, hdr + fbox_base).and_then(relative) {
                    entries(b, 32, &mut out);
                }
            }
            cur = read_u64(mem, hdr + next).unwrap_or(FIFO_FREE);
        }
    }
    out
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
