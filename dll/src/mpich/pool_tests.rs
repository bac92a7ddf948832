//! MPICH 4.0 built without debugger support (Debian's `libmpich12`): no
//! communicator list, no send queue, no pointers to the device's queue
//! heads. The communicators are the objects in use in MPICH's pools
//! (`MPIR_Comm_builtin`, and `MPIR_Comm_mem`'s direct block and indirect
//! blocks), each proven by the handle its place gives and a reference
//! count above 0; the active-message queues are VCI 0's lists in
//! `MPIDI_global`. Synthetic memory, laid out by the types given here.

use std::sync::Arc;

use mqs_abi::{OpClass, PendingOperation, ReturnCode};

use super::layout::{Device, Layout, Queues};
use super::Mpich;
use crate::iteration::{AnyProcess, Process};
use crate::target::{ByteOrder, Sizes};
use crate::testing::{FakeImage, FakeProcess};

const BUILTIN: u64 = 0x1_0000;
const MEM: u64 = 0x2_0000;
const DIRECT: u64 = 0x3_0000;
const INDIRECT: u64 = 0x4_0000;
const BLOCK: u64 = 0x5_0000;
const GLOBAL: u64 = 0x6_0000;
const GROUP: u64 = 0x7_0000;
const LPIDS: u64 = 0x7_1000;
const REQUESTS: u64 = 0x8_0000;
const COMM: u64 = 256;
/// `per_vci` in `MPIDI_CH4_Global_t`, and the lists in `MPIDI_per_vci_t`.
const PER_VCI: u64 = 64;
const POSTED: u64 = 8;
const UNEXP: u64 = 16;

fn image() -> FakeImage {
    let mut i = FakeImage::new();
    i.add_type(
        "MPIR_Comm",
        COMM,
        &[
            ("handle", 0),
            ("ref_count", 4),
            ("context_id", 8),
            ("recvcontext_id", 10),
            ("remote_size", 12),
            ("rank", 16),
            ("local_group", 24),
            ("remote_group", 32),
            ("name", 64),
            ("errhandler", 128),
            ("comm_next", 200),
        ],
    );
    super::test_image::add_group_and_request_types(&mut i);
    i.add_type(
        "MPIR_Object_alloc_t",
        128,
        &[
            ("avail", 0),
            ("initialized", 8),
            ("indirect", 16),
            ("indirect_size", 24),
            ("num_allocated", 28),
            ("num_avail", 32),
            ("kind", 36),
            ("size", 40),
            ("direct", 48),
            ("direct_size", 56),
        ],
    );
    i.add_type(
        "MPIDI_CH4_Global_t",
        PER_VCI + 64,
        &[("n_vcis", 60), ("per_vci", PER_VCI)],
    );
    i.add_type(
        "MPIDI_per_vci_t",
        64,
        &[
            ("progress_count", 4),
            ("posted_list", POSTED),
            ("unexp_list", UNEXP),
        ],
    );
    for (name, addr) in [
        ("MPIR_Comm_builtin", BUILTIN),
        ("MPIR_Comm_mem", MEM),
        ("MPIDI_global", GLOBAL),
    ] {
        i.symbols.insert(name.into(), addr);
    }
    i
}

/// A communicator object: its handle, reference count, context id, size,
/// rank and name (its group: the 2-rank world's).
fn comm(p: &mut FakeProcess, at: u64, handle: u32, refs: u32, ctx: u16, name: &str) {
    p.map(at, vec![0; COMM as usize]);
    p.write_u32(at, handle);
    p.write_u32(at + 4, refs);
    p.write_u16(at + 8, ctx);
    p.write_u16(at + 10, ctx);
    p.write_u32(at + 12, 2);
    p.write_u32(at + 16, 0);
    p.write_u64(at + 24, GROUP);
    p.write_u64(at + 32, GROUP);
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    p.map(at + 64, n);
}

/// Rank 0 of 2: the builtins in use; a direct block of 4 (in use, freed,
/// in use but at the wrong place, never used); one indirect block of 2
/// (the second in use); a posted receive and an unexpected message on
/// VCI 0.
fn process() -> FakeProcess {
    let mut p = FakeProcess::new();
    comm(&mut p, BUILTIN, 0x4400_0000, 3, 0, "MPI_COMM_WORLD");
    // Context ids as MPICH allocates them: multiples of 16 (the low bits
    // say collective, subcommunicator and local communicator).
    comm(&mut p, BUILTIN + COMM, 0x4400_0001, 1, 16, "MPI_COMM_SELF");
    comm(&mut p, BUILTIN + 2 * COMM, 0x4400_0002, 1, 32, "");
    comm(&mut p, DIRECT, 0x8400_0000, 1, 48, "mine");
    comm(&mut p, DIRECT + COMM, 0x8400_0001, 0, 64, "freed");
    comm(&mut p, DIRECT + 2 * COMM, 0x8400_0007, 1, 80, "misplaced");
    comm(&mut p, DIRECT + 3 * COMM, 0x8400_0003, 0, 0, "");
    comm(&mut p, BLOCK, 0xc400_0000, 0, 0, "");
    comm(&mut p, BLOCK + COMM, 0xc400_0001, 2, 96, "indirect");
    p.map(MEM, vec![0; 128]);
    p.write_u64(MEM + 16, INDIRECT);
    p.write_u32(MEM + 24, 1);
    p.write_u32(MEM + 28, 6);
    p.write_u32(MEM + 40, COMM as u32);
    p.write_u64(MEM + 48, DIRECT);
    p.write_u32(MEM + 56, 4);
    p.write_u64(INDIRECT, BLOCK);
    p.write_u32(GROUP, 2);
    p.write_u64(GROUP + 8, LPIDS);
    p.map(GROUP + 16, vec![0; 16]);
    p.write_u64(LPIDS, 0);
    p.write_u64(LPIDS + 16, 1);
    p.map(GLOBAL, vec![0; (PER_VCI + 64) as usize]);
    p.write_u32(GLOBAL + 60, 1);
    // (request, tag, source, context id): one each on "mine".
    for (req, tag, src, head) in [
        (REQUESTS, 7u32, 1u32, POSTED),
        (REQUESTS + 0x100, 3000, 1, UNEXP),
    ] {
        p.map(req, vec![0; 128]);
        p.write_u32(req, 1);
        p.write_u32(req + 4, 1);
        p.write_u32(req + 24, u32::MAX);
        p.write_u32(req + 28, u32::MAX);
        p.write_u64(req + 64, 0x9000);
        p.write_u64(req + 72, 4);
        p.write_u32(req + 84, src);
        p.write_u16(req + 88, 48);
        p.write_u32(req + 92, tag);
        p.write_u64(GLOBAL + PER_VCI + head, req);
    }
    p
}

fn session(p: &FakeProcess) -> Process<Mpich> {
    let image = image();
    let layout = Layout::resolve(&image).expect("layout");
    assert!(layout.comm_list.is_none() && layout.comm_pool.is_some());
    assert_eq!(
        (layout.queues, layout.device),
        (Queues::Device, Device::Ch4)
    );
    let mut process = Process::new(
        std::ptr::null(),
        Mpich::new(Arc::new(layout)),
        Sizes::LP64,
        ByteOrder::probe(p),
    );
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    s.check(&image, p).expect("check");
    s.update_communicators(p, None).expect("communicators");
    process
}

fn names(s: &mut dyn AnyProcess<FakeImage>) -> Vec<String> {
    let mut out = Vec::new();
    assert_eq!(s.setup_communicators(), ReturnCode::Ok);
    while let Ok(c) = s.current_comm() {
        out.push(c.name);
        if s.next_communicator().unwrap() != ReturnCode::Ok {
            break;
        }
    }
    out
}

fn queue(
    s: &mut dyn AnyProcess<FakeImage>,
    p: &FakeProcess,
    comm: &str,
    class: OpClass,
) -> (ReturnCode, Vec<PendingOperation>) {
    assert_eq!(s.setup_communicators(), ReturnCode::Ok);
    while s.current_comm().unwrap().name != comm {
        assert_eq!(s.next_communicator().unwrap(), ReturnCode::Ok);
    }
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
fn communicators_in_use_are_found_in_the_pools_by_handle_and_reference_count() {
    let p = process();
    let mut process = session(&p);
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    // MPICH's copy of the world is its own (hidden); the freed, the
    // misplaced and the never used are not communicators.
    assert_eq!(
        names(s),
        ["MPI_COMM_WORLD", "MPI_COMM_SELF", "mine", "indirect"]
    );
}

#[test]
fn vci0s_active_message_queues_are_read_from_mpich_globals() {
    let p = process();
    let mut process = session(&p);
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    let (rc, ops) = queue(s, &p, "mine", OpClass::PendingReceives);
    assert_eq!(rc, ReturnCode::Ok);
    let got: Vec<_> = ops
        .iter()
        .map(|o| (o.desired_global_rank, o.desired_tag, o.buffer))
        .collect();
    assert_eq!(got, [(1, Some(7), 0x9000)]);
    let (rc, ops) = queue(s, &p, "mine", OpClass::UnexpectedMessages);
    assert_eq!(rc, ReturnCode::Ok);
    let got: Vec<_> = ops
        .iter()
        .map(|o| (o.desired_global_rank, o.desired_tag))
        .collect();
    assert_eq!(got, [(1, Some(3000))]);
}

#[test]
fn without_a_send_queue_sends_are_not_available() {
    let p = process();
    let mut process = session(&p);
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    let (rc, ops) = queue(s, &p, "mine", OpClass::PendingSends);
    assert_ne!(rc, ReturnCode::Ok);
    assert!(ops.is_empty());
}

#[test]
fn an_allocator_of_another_object_size_is_not_read() {
    let mut p = process();
    p.write_u32(MEM + 40, 1000);
    let image = image();
    let layout = Layout::resolve(&image).expect("layout");
    let mut process = Process::new(
        std::ptr::null(),
        Mpich::new(Arc::new(layout)),
        Sizes::LP64,
        ByteOrder::probe(&p),
    );
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    assert!(s.check(&image, &p).is_err());
}
