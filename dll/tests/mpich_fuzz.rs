//! The MPICH backend, in the real host's session, on MPICH 4.0.2 jobs
//! of tests/fixtures/queues.c recorded live (`mpich-queues2`: 2 ranks with
//! 2 extra operations; `mpich-queues8`: 8 ranks, derived datatypes; both
//! ch3; `mpich-ch4-queues3`: ch4:ofi, 3 ranks, active messages only;
//! `scripts/record-snapshots`): each replays to its recorded dump and to
//! the fixture's known contents (`mqs_tests::contents::mpich_queues`);
//! corrupted at random (`common/fuzzing.rs`, with mutations aimed at the
//! links of MPICH's lists: communicators, the device's receive queues, the
//! debugger's send queue) the DLL always returns, never panics, never
//! iterates without end and keeps its reads bounded; a communicator list
//! cut at any link (the communicator freed, or its memory reused) ends
//! cleanly; every type missing in turn fails with its name or still dumps.

mod common;

use std::collections::HashSet;
use std::sync::OnceLock;

use common::fuzzing::{self, field, read_u64, symbol, Base, ListLink, Position};
use common::session::{check_known, check_replay, our_dll, recording, recordings, run, Recorded};
use mqs_core::model::Section;
use mqs_tests::{contents, Family};
use serde_json::Value;

/// Most items followed on one list while looking for links.
const MAX_ITEMS: usize = 10_000;

/// The next links of the items of the list whose first item's address is
/// at `head_at`, `next` bytes into each item.
fn chain(p: &Recorded, head_at: u64, next: u64, out: &mut Vec<ListLink>) {
    let mut seen = HashSet::new();
    let Some(mut item) = read_u64(&p.target, head_at) else {
        return;
    };
    let mut before = item;
    while item != 0 && seen.len() < MAX_ITEMS && seen.insert(item) {
        let at = item + next;
        out.push(ListLink { at, item, before });
        before = item;
        match read_u64(&p.target, at) {
            Some(n) => item = n,
            None => break,
        }
    }
}

/// The lists the MPICH backend walks, from their heads: the communicators
/// (`MPIR_All_communicators`), the device's posted and unexpected receive
/// requests (behind `MPID_Recvq_*_head_ptr`) and the debugger's send queue
/// (`MPIR_Sendq_head`).
fn mpich_links(p: &Recorded, _regions: &[(u64, usize)]) -> Vec<ListLink> {
    let log = &p.symbols;
    let mut links = Vec::new();
    if let (Some(all), Some(head), Some(next)) = (
        symbol(log, "MPIR_All_communicators"),
        field(log, "MPIR_Comm_list", "head"),
        field(log, "MPIR_Comm", "comm_next"),
    ) {
        chain(p, all + head, next, &mut links);
    }
    if let Some(next) = field(log, "MPIR_Request", "next") {
        for sym in [
            "MPID_Recvq_posted_head_ptr",
            "MPID_Recvq_unexpected_head_ptr",
        ] {
            if let Some(head_at) = symbol(log, sym).and_then(|s| read_u64(&p.target, s)) {
                chain(p, head_at, next, &mut links);
            }
        }
    }
    if let (Some(head), Some(next)) = (
        symbol(log, "MPIR_Sendq_head"),
        field(log, "MPIR_Sendq", "next"),
    ) {
        chain(p, head, next, &mut links);
    }
    links
}

fn bases() -> &'static [Base] {
    static B: OnceLock<Vec<Base>> = OnceLock::new();
    B.get_or_init(|| fuzzing::bases(Family::Mpich, &mpich_links, &nemesis_positions))
}

/// The fields of nemesis the DLL reads messages in transit through: the
/// region's counts and rank, the receive queue's head, tail and own head,
/// every queued and boxed cell's link, sender, length, sequence number and
/// packet type, every fast box's flag, and the next sequence number
/// expected from each sender.
fn nemesis_positions(p: &Recorded) -> Vec<Position> {
    let log = &p.symbols;
    let mem = &p.target;
    let at = |a: u64, width: u8| Position { at: a, width };
    let mut out = Vec::new();
    let Some(region) = symbol(log, "MPID_nem_mem_region") else {
        return out;
    };
    let r = |name: &str| field(log, "MPID_nem_mem_region_t", name);
    let (Some(num_local), Some(num_procs), Some(local_rank), Some(ext), Some(recvq), Some(boxes)) = (
        r("num_local"),
        r("num_procs"),
        r("local_rank"),
        r("ext_procs"),
        r("my_recvQ"),
        r("mailboxes"),
    ) else {
        return out;
    };
    out.extend([
        at(region + num_local, 4),
        at(region + num_procs, 4),
        at(region + local_rank, 4),
        at(region + ext, 4),
    ]);
    let q = |name: &str| field(log, "MPID_nem_queue_t", name);
    let c = |name: &str| field(log, "MPID_nem_cell_t", name);
    let h = |name: &str| field(log, "MPID_nem_pkt_header_t", name);
    let (Some(head), Some(tail), Some(my_head)) = (q("head"), q("tail"), q("my_head")) else {
        return out;
    };
    let (Some(next), Some(header), Some(payload)) = (c("next"), c("header"), c("payload")) else {
        return out;
    };
    let (Some(source), Some(datalen), Some(seqno)) = (h("source"), h("datalen"), h("seqno")) else {
        return out;
    };
    let cell = |a: u64| {
        [
            at(a + next, 8),
            at(a + header + source, 4),
            at(a + header + datalen, 8),
            at(a + header + seqno, 2),
            at(a + payload, 4),
        ]
    };
    let base = symbol(log, "MPID_nem_asymm_base_addr")
        .and_then(|s| read_u64(&p.target, s))
        .unwrap_or(0);
    if let Some(queue) = read_u64(mem, region + recvq) {
        out.extend([
            at(queue + head, 8),
            at(queue + tail, 8),
            at(queue + my_head, 8),
        ]);
        let mut rel = read_u64(mem, queue + my_head)
            .filter(|&v| v != 0)
            .or_else(|| read_u64(mem, queue + head))
            .unwrap_or(0);
        let mut seen = HashSet::new();
        while rel != 0 && seen.insert(rel) && seen.len() < MAX_ITEMS {
            let a = rel.wrapping_add(base);
            out.extend(cell(a));
            rel = read_u64(mem, a + next).unwrap_or(0);
        }
    }
    let count = |off: u64| read_u64(mem, region + off).map_or(0, |v| v & 0xffff_ffff);
    let inbox = field(log, "MPID_nem_fbox_arrays_t", "in")
        .and_then(|o| read_u64(mem, region + boxes + o))
        .unwrap_or(0);
    let flag = field(log, "MPID_nem_fastbox_t", "flag").unwrap_or(0);
    for i in 0..count(num_local).min(64) {
        if let Some(fbox) = read_u64(mem, inbox + 8 * i).filter(|&b| b != 0) {
            out.push(at(fbox + flag, 4));
            out.extend(cell(fbox + my_head));
        }
    }
    if let Some(seqnos) = symbol(log, "MPID_nem_recv_seqno").and_then(|s| read_u64(mem, s)) {
        for i in 0..count(num_procs).min(64) {
            out.push(at(seqnos + 2 * i, 2));
        }
    }
    out
}

/// The fixture's contents for each MPICH recording.
/// What the fixture left, where `contents` describes it (ch4:ucx's
/// queues are checked exactly by tests/e2e/ucx.rs; its replay equals its
/// recording here).
fn known(name: &str) -> Option<Vec<contents::Process>> {
    match name {
        "mpich-queues2" => Some(contents::mpich_queues(2, 2)),
        "mpich-queues8" => Some(contents::mpich_queues(8, 0)),
        "mpich-ch4-queues3" => Some(contents::mpich_ch4_queues(3, 2)),
        "mpich-spin-ring" => Some(contents::spin_ring(3, contents::SpinMpi::Mpich)),
        "mpich-ucx-queues" => None,
        other => panic!("{other}: no known contents"),
    }
}

#[test]
fn mpich_replays_equal_the_dumps_that_recorded_them() {
    let mut names = Vec::new();
    for plan in recordings(Family::Mpich) {
        // spin_ring keeps 45 sends per rank, each a request read, and 45
        // messages in transit, each a cell read.
        let bound = if plan.fixture == "spin_ring" {
            300
        } else {
            120
        };
        let most = check_replay(plan.name, bound);
        eprintln!("{}: at most {most} fetches per process", plan.name);
        names.push(plan.name);
    }
    assert_eq!(
        names,
        [
            "mpich-queues2",
            "mpich-queues8",
            "mpich-ucx-queues",
            "mpich-ch4-queues3",
            "mpich-spin-ring"
        ]
    );
}

#[test]
fn mpich_replays_hold_what_the_fixture_left() {
    let mut checked = 0;
    for plan in recordings(Family::Mpich) {
        if let Some(expected) = known(plan.name) {
            checked += check_known(plan.name, &expected);
        }
    }
    // 2 ranks, N = 2: rank 0 has 10, rank 1 has 6; 8 ranks: rank 0 has 6,
    // rank 1 has 10, ranks 2-7 have 3 each; ch4, 3 ranks, N = 2: 10, 7
    // and 3 (its empty unexpected queues are not available: messages in
    // transit on ch4 are not read); spin_ring, 3 ranks of 112 (WORLD 1
    // receive, 19 unexpected and 24 in transit, 24 sends; mqs-spin 2
    // receives, 21 in transit, 21 sends). A guard against lists that lost
    // their operations.
    assert_eq!(
        checked,
        10 + 6 + 6 + 10 + 6 * 3 + 10 + 7 + 3 + 3 * 112,
        "operations checked"
    );
}

#[test]
fn every_mpich_process_has_links_to_bend() {
    for b in bases() {
        // At least the communicator list (MPICH's own communicators
        // included) and every receive queue the fixture leaves.
        assert!(
            b.links.len() >= 8,
            "{} process {}: {:?}",
            b.name,
            b.process.member.identity,
            b.links
        );
    }
}

#[test]
fn corrupted_mpich_processes_never_crash_hang_or_read_without_bound() {
    fuzzing::fuzz("mpich-fuzz", bases());
}

/// The addresses of the communicators on the list, in list order, and the
/// offset of `comm_next`.
fn comm_list(p: &Recorded) -> (Vec<u64>, u64) {
    let mut links = Vec::new();
    let log = &p.symbols;
    let all = symbol(log, "MPIR_All_communicators").expect("MPIR_All_communicators");
    let head = field(log, "MPIR_Comm_list", "head").expect("MPIR_Comm_list.head");
    let next = field(log, "MPIR_Comm", "comm_next").expect("MPIR_Comm.comm_next");
    chain(p, all + head, next, &mut links);
    (links.iter().map(|l| l.item).collect(), next)
}

/// The communicators of one session of `p`, as JSON, with its memory as
/// recorded but for `patch` (the word at an address, set to a value).
fn comms_with(p: &Recorded, patch: Option<(u64, u64)>) -> Result<Vec<Value>, String> {
    let mut target = p.target.clone();
    if let Some((at, value)) = patch {
        target.insert(at, &value.to_le_bytes());
    }
    let input = common::session::Input {
        image: p.executable.clone(),
        symbols: Box::new(p.symbols.clone()),
        target: Box::new(&target),
        identity: p.member.identity,
    };
    let d = run(our_dll(), vec![input])
        .map_err(|e| e.to_string())?
        .pop()
        .ok_or("no process")?;
    d.added.clone()?;
    match &d.communicators {
        Section::Ok { value } => Ok(value
            .list
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or_default())
            .collect()),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn a_communicator_freed_mid_walk_ends_the_list_cleanly() {
    let p = recording("mpich-queues2").rank(0);
    let (list, next) = comm_list(p);
    // Ours and MPICH's own: WORLD, SELF, ICOMM_WORLD, the fixture's three
    // and their node subcommunicators.
    assert!(list.len() >= 10, "{list:x?}");
    let clean = comms_with(p, None).expect("a clean session");
    assert_eq!(clean.len(), 5, "{clean:#?}");
    let mut fewest = clean.len();
    for cut in 1..list.len() {
        // The communicator after `cut - 1` freed: its memory gone (a
        // dangling next pointer), or reused (a pointer back into the list).
        for bad in [0xdead_0000_u64, list[0], list[cut - 1]] {
            let what = format!("cut after {cut} at {bad:#x}");
            let got = comms_with(p, Some((list[cut - 1] + next, bad)))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            fewest = fewest.min(got.len());
            // What remains is part of the clean list, unchanged.
            for c in &got {
                let same = clean.iter().find(|k| k["unique_id"] == c["unique_id"]);
                assert_eq!(Some(c), same, "{what}");
            }
        }
    }
    assert!(fewest < clean.len(), "no cut shortened the list");
}

#[test]
fn each_missing_mpich_type_fails_cleanly_with_its_name() {
    for name in ["mpich-queues2", "mpich-ch4-queues3"] {
        missing_types_fail_cleanly(recording(name).rank(0));
    }
}

fn missing_types_fail_cleanly(p: &Recorded) {
    let mut failed = 0;
    for name in p.symbols.types.keys() {
        let mut log = p.symbols.clone();
        log.types.remove(name);
        let d = fuzzing::with_symbols(p, log);
        match &d.added {
            // Optional types (groups, datatypes, the VC table...): the
            // dump still works, perhaps with less.
            Ok(()) => assert!(!d.comms().is_empty(), "without {name}"),
            Err(e) => {
                failed += 1;
                let bare = name.strip_prefix("struct ").unwrap_or(name);
                assert!(e.contains(bare), "without {name}: {e}");
                assert!(e.contains("MPICH"), "without {name}: {e}");
            }
        }
    }
    assert!(failed > 0, "no type is required?");
}
