//! MPICH 4.1+'s debugger queues (`MPIR_Debugq` lists behind
//! `MPIR_Sendq_head`, `MPIR_Recvq_head`, `MPIR_Unexpq_head`) on synthetic
//! memory built from the entry's definition (`{req; tag, rank,
//! context_id; buf; count; next, prev}`): no 4.1 source or build is
//! reachable here. Entries are pushed at the head of each list, as 4.0's
//! `MPIR_Sendq` are, so the newest comes first in memory.

use std::sync::Arc;

use mqs_abi::{OpClass, OpStatus, PendingOperation, ReturnCode};

use super::layout::{Device, Layout, Queues};
use super::Mpich;
use crate::iteration::{AnyProcess, Process};
use crate::target::{ByteOrder, Sizes, Target};
use crate::testing::{FakeImage, FakeProcess};

const LIST: u64 = 0x1000;
const SENDQ: u64 = 0x1100;
const RECVQ: u64 = 0x1108;
const UNEXPQ: u64 = 0x1110;
const WORLD: u64 = 0x2000;
const GROUP: u64 = 0x3000;
const LPIDS: u64 = 0x3100;
const ENTRIES: u64 = 0x4000;
const REQUESTS: u64 = 0x5000;

/// A ch4 image of 4.1's shape: the device's request part exists (and is
/// not what the queues are read from), `MPIR_Debugq` has no datatype.
fn image() -> FakeImage {
    let mut i = FakeImage::new();
    i.add_type("MPIR_Comm_list", 16, &[("sequence_number", 0), ("head", 8)]);
    i.add_type(
        "MPIR_Comm",
        256,
        &[
            ("handle", 0),
            ("context_id", 4),
            ("recvcontext_id", 6),
            ("remote_size", 8),
            ("rank", 12),
            ("local_group", 16),
            ("remote_group", 24),
            ("name", 64),
            ("errhandler", 128),
            ("comm_next", 200),
        ],
    );
    super::test_image::add_group_and_request_types(&mut i);
    i.add_type(
        "MPIR_Debugq",
        56,
        &[
            ("req", 0),
            ("tag", 8),
            ("rank", 12),
            ("context_id", 16),
            ("buf", 24),
            ("count", 32),
            ("next", 40),
            ("prev", 48),
        ],
    );
    for (name, addr) in [
        ("MPIR_All_communicators", LIST),
        ("MPIR_Sendq_head", SENDQ),
        ("MPIR_Recvq_head", RECVQ),
        ("MPIR_Unexpq_head", UNEXPQ),
    ] {
        i.symbols.insert(name.into(), addr);
    }
    i
}

/// One entry: (request address, tag, rank, context id, buf, count).
type Entry = (u64, i32, i32, u16, u64, u64);

/// A 2-rank world seen from rank 0, and the three lists, each given
/// oldest first and linked newest first.
fn process(lists: [&[Entry]; 3]) -> FakeProcess {
    let mut p = FakeProcess::new();
    p.write_u64(LIST, 1);
    p.write_u64(LIST + 8, WORLD);
    p.write_u32(WORLD, 0x4400_0000);
    p.write_u16(WORLD + 4, 0);
    p.write_u16(WORLD + 6, 0);
    p.write_u32(WORLD + 8, 2);
    p.write_u32(WORLD + 12, 0);
    p.write_u64(WORLD + 16, GROUP);
    p.write_u64(WORLD + 24, GROUP);
    p.map(WORLD + 64, b"MPI_COMM_WORLD\0".to_vec());
    p.write_u64(WORLD + 200, 0);
    p.map(WORLD + 215, vec![0; 41]);
    p.write_u32(GROUP, 2);
    p.write_u64(GROUP + 8, LPIDS);
    p.map(GROUP + 16, vec![0; 16]);
    p.write_u64(LPIDS, 0);
    p.write_u64(LPIDS + 16, 1);
    let mut at = ENTRIES;
    for (list, head) in lists.into_iter().zip([SENDQ, RECVQ, UNEXPQ]) {
        let mut next = 0;
        for &(req, tag, rank, ctx, buf, count) in list {
            p.write_u64(at, req);
            p.write_u32(at + 8, tag as u32);
            p.write_u32(at + 12, rank as u32);
            p.write_u32(at + 16, u32::from(ctx));
            p.write_u64(at + 24, buf);
            p.write_u64(at + 32, count);
            p.write_u64(at + 40, next);
            p.write_u64(at + 48, 0);
            // A pending request whose device part holds nothing of it.
            p.map(req, vec![0xee; 128]);
            p.write_u32(req, 1);
            p.write_u32(req + 4, 1);
            p.write_u32(req + 24, u32::MAX);
            p.write_u32(req + 28, u32::MAX);
            next = at;
            at += 64;
        }
        p.write_u64(head, next);
    }
    p
}

fn queue(p: &FakeProcess, class: OpClass) -> (ReturnCode, Vec<PendingOperation>) {
    let image = image();
    let layout = Layout::resolve(&image).expect("layout");
    assert_eq!(
        (layout.queues, layout.device),
        (Queues::Debugq, Device::Ch4)
    );
    let backend = Mpich::new(Arc::new(layout));
    assert_eq!(backend.backend_name(), "mpich-debugq");
    let mut process = Process::new(std::ptr::null(), backend, Sizes::LP64, ByteOrder::probe(p));
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    s.check(&image, p).expect("check");
    s.update_communicators(p, None).expect("communicators");
    assert_eq!(s.setup_communicators(), ReturnCode::Ok);
    assert_eq!(s.current_comm().unwrap().name, "MPI_COMM_WORLD");
    let rc = s.setup_operations(p, class).expect("setup");
    let mut ops = Vec::new();
    if rc == ReturnCode::Ok {
        while let Some(op) = s.next_operation().unwrap() {
            ops.push(op);
        }
    }
    (rc, ops)
}

#[test]
fn the_three_lists_oldest_first_with_entries_fields_and_global_ranks() {
    let sends: &[Entry] = &[
        (REQUESTS, 99, 1, 0, 0x7000, 16),
        (REQUESTS + 0x100, 5, 1, 0, 0x8000, 100_000),
    ];
    let posted: &[Entry] = &[
        (REQUESTS + 0x200, 7, 1, 0, 0x9000, 4),
        (REQUESTS + 0x300, -1, -2, 0, 0xa000, 2),
        // Another communicator's: not listed here.
        (REQUESTS + 0x400, 11, 0, 3, 0xb000, 8),
    ];
    let unexpected: &[Entry] = &[(REQUESTS + 0x500, 3000, 1, 0, 0xc000, 4)];
    let p = process([sends, posted, unexpected]);

    let (rc, ops) = queue(&p, OpClass::PendingSends);
    assert_eq!(rc, ReturnCode::Ok);
    let got: Vec<_> = ops
        .iter()
        .map(|o| {
            (
                o.desired_global_rank,
                o.desired_tag,
                o.buffer,
                o.desired_length,
            )
        })
        .collect();
    assert_eq!(got, [(1, Some(99), 0x7000, -1), (1, Some(5), 0x8000, -1)]);
    assert_eq!(ops[0].status, OpStatus::Pending);
    assert!(
        ops[1]
            .extra_text
            .contains(&"100000 elements (datatype not recorded)".to_string()),
        "{:?}",
        ops[1].extra_text
    );

    let (rc, ops) = queue(&p, OpClass::PendingReceives);
    assert_eq!(rc, ReturnCode::Ok);
    let got: Vec<_> = ops
        .iter()
        .map(|o| {
            (
                o.desired_local_rank,
                o.desired_global_rank,
                o.desired_tag,
                o.buffer,
                o.actual_local_rank,
            )
        })
        .collect();
    assert_eq!(
        got,
        [(1, 1, Some(7), 0x9000, -1), (-1, -1, None, 0xa000, -1)]
    );
    assert_eq!(
        ops[1].extra_text,
        [
            format!("receive request {:#x}", REQUESTS + 0x300),
            "2 elements (datatype not recorded)".to_string(),
            "posted #2 in MPICH matching order".to_string(),
        ]
    );

    let (rc, ops) = queue(&p, OpClass::UnexpectedMessages);
    assert_eq!(rc, ReturnCode::Ok);
    let got: Vec<_> = ops
        .iter()
        .map(|o| {
            (
                o.actual_global_rank,
                o.actual_tag,
                o.buffer,
                o.system_buffer,
            )
        })
        .collect();
    assert_eq!(got, [(1, 3000, 0xc000, true)]);
}

#[test]
fn a_cycle_in_a_list_cuts_it_with_a_note() {
    let posted: &[Entry] = &[
        (REQUESTS, 7, 1, 0, 0x9000, 4),
        (REQUESTS + 0x100, 8, 1, 0, 0xa000, 4),
    ];
    let mut p = process([&[], posted, &[]]);
    // The oldest entry (the list's last) points back at the newest.
    p.write_u64(ENTRIES + 40, ENTRIES + 64);
    let (rc, ops) = queue(&p, OpClass::PendingReceives);
    assert_eq!(rc, ReturnCode::Ok);
    assert_eq!(ops.len(), 2);
    assert!(
        ops[1]
            .extra_text
            .iter()
            .any(|l| l.starts_with("list cut: cycle")),
        "{:?}",
        ops[1].extra_text
    );
}

/// The same image without 4.1's receive queue symbol and with ch4's
/// `MPIDI_global` is 4.0 ch4: queues of requests linked through `next`.
/// Device queues are walked without a set of every address; one with a
/// cycle is cut at its first repeat all the same, each request once.
#[test]
fn a_device_queue_with_a_cycle_is_cut_at_its_first_repeat() {
    use super::requests::walk_requests;
    use crate::walk::Stop;

    let mut image = image();
    image.symbols.remove("MPIR_Recvq_head");
    image.symbols.insert("MPIDI_global".into(), 0x1200);
    let layout = Layout::resolve(&image).expect("layout");
    assert_eq!(
        (layout.queues, layout.device),
        (Queues::Device, Device::Ch4)
    );
    const HEAD: u64 = 0x1300;
    // Queues of `mu` requests before a cycle of `lambda`, and one without.
    for (mu, lambda) in [(0, 1), (0, 5), (3, 1), (3, 4), (20, 7), (7, 20), (40, 0)] {
        let n = mu + lambda;
        let mut p = FakeProcess::new();
        let at = |i: u64| REQUESTS + 0x100 * i;
        p.write_u64(HEAD, at(0));
        for i in 0..n {
            p.map(at(i), vec![0; 128]);
            let next = match (i + 1 < n, lambda) {
                (true, _) => at(i + 1),
                (false, 0) => 0,
                (false, _) => at(mu),
            };
            p.write_u64(at(i) + 8, next);
            // The active-message tag, for telling the requests apart.
            p.write_u32(at(i) + 64 + 20 + 8, i as u32);
        }
        let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
        let mut scan = walk_requests(&t, &layout, HEAD);
        assert_eq!(scan.total, n as usize, "mu {mu} lambda {lambda}");
        let want = if lambda == 0 {
            None
        } else {
            Some(Stop::Cycle(at(mu)))
        };
        assert_eq!(scan.stop, want, "mu {mu} lambda {lambda}");
        let tags: Vec<i64> = scan.by_ctx.take(0).iter().map(|f| f.tag).collect();
        assert_eq!(tags, (0..n as i64).collect::<Vec<_>>());
    }
}
