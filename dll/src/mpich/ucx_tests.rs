//! The unit tests of [`super`] (MPICH's ch4:ucx netmod) on synthetic
//! images and memory: the workers found and decoded, the tag layouts, sends'
//! lengths, the messages matched probes hold.

use super::*;
use crate::mpich::objects::{
    ALLOC_DIRECT, ALLOC_DIRECT_SIZE, ALLOC_INDIRECT, ALLOC_INDIRECT_SIZE, ALLOC_NUM_ALLOCATED,
};
use crate::target::{ByteOrder, Sizes};
use crate::testing::{FakeImage, FakeProcess};
use crate::ucx::layout::HASH_BUCKETS;

const GLOBAL: u64 = 0x50_0000;
const PROCESS: u64 = 0x60_0000;

/// UCX's types (shaped like 1.13.1's) and the netmod's and MPICH's,
/// as 4.0.2 lays them out on x86-64 (`MPIDI_CH4_MAX_VCIS` 64 contexts
/// of 64 bytes, `num_vnis` after them).
fn image() -> FakeImage {
    let mut i = crate::ucx::layout::tests::image();
    i.add_type(
        ucx_names::REQUEST,
        200,
        &[
            ("recv.queue", 48),
            ("recv.buffer", 56),
            ("recv.length", 72),
            ("recv.tag.tag", 120),
            ("recv.tag.tag_mask", 128),
            ("recv.tag.sn", 136),
            (REQUEST_USER_DATA, 160),
        ],
    );
    i.types
        .retain(|t| t.0 != ucx_names::REQUEST || t.2.contains_key(REQUEST_USER_DATA));
    i.add_type(
        GLOBAL_TYPE,
        8 + 64 * 64 + 8,
        &[
            ("context", 0),
            (GLOBAL_CTX, 8),
            (GLOBAL_NUM_VNIS, 8 + 64 * 64),
        ],
    );
    i.add_type(CONTEXT_TYPE, 64, &[(CONTEXT_WORKER, 0), ("if_address", 8)]);
    i.add_type(PROCESS_TYPE, 256, &[(PROCESS_TAG_BITS, 100)]);
    i.symbols.insert(SYM_GLOBAL.to_string(), GLOBAL);
    i.symbols.insert(SYM_PROCESS.to_string(), PROCESS);
    i
}

fn target(p: &FakeProcess) -> Target<'_, FakeProcess> {
    Target::new(p, Sizes::LP64, ByteOrder::Same)
}

fn netmod(i: &FakeImage) -> Netmod {
    let p = FakeProcess::new();
    resolve(i, &target(&p))
        .expect("ucx netmod")
        .expect("resolved")
}

/// A worker at `worker` (its hash at `worker + 0x8_0000`) whose
/// wildcard queue holds `reqs` (address, tag, mask), in this order,
/// and whose unexpected list holds eager messages `msgs` (address,
/// tag, length).
fn add_worker(
    p: &mut FakeProcess,
    l: &UcxLayout,
    worker: u64,
    reqs: &[(u64, u64, u64)],
    msgs: &[(u64, u64, u32)],
) {
    let hash = worker + 0x8_0000;
    p.map(worker, vec![0; 0x1000]);
    let tm = worker + l.worker_tm;
    p.write_u64(tm + l.tm_hash, hash);
    p.map(hash, vec![0; (HASH_BUCKETS * l.rq_size) as usize]);
    for i in 0..HASH_BUCKETS {
        let q = hash + i * l.rq_size + l.rq_queue;
        p.write_u64(q + l.qh_ptail, q + l.qh_head);
    }
    let wq = tm + l.tm_wildcard + l.rq_queue;
    let mut prev = wq + l.qh_head;
    for (sn, &(r, tag, mask)) in reqs.iter().enumerate() {
        p.map(r, vec![0; l.req_size as usize]);
        p.write_u64(r + l.req_tag, tag);
        p.write_u64(r + l.req_mask, mask);
        p.write_u64(r + l.req_sn, sn as u64);
        p.write_u64(r + l.req_buffer, r + 0x800);
        p.write_u64(r + l.req_length, 16);
        p.write_u64(r + 160, r + 0x900);
        p.write_u64(prev, r + l.req_queue);
        prev = r + l.req_queue + l.qe_next;
    }
    p.write_u64(wq + l.qh_ptail, prev);
    p.write_u32(tm + l.tm_count, reqs.len() as u32);
    let head = tm + l.tm_unexpected;
    let link = l.rd_tag_list + l.list_size;
    let mut prev = head;
    for &(d, tag, length) in msgs {
        p.map(d, vec![0; 0x200]);
        p.write_u16(
            d + l.rd_flags,
            crate::ucx::layout::rdesc_flags::EAGER_ONLY as u16,
        );
        p.write_u32(d + l.rd_length, length + 8);
        p.write_u32(d + l.rd_payload, 8);
        p.write_u64(d + l.rd_size, tag);
        p.write_u64(prev + l.list_next, d + link);
        prev = d + link;
    }
    p.write_u64(prev + l.list_next, head);
}

/// A process with `workers` (one per VCI) and MPICH's tag width 31.
fn process(n: &Netmod, workers: &[u64]) -> FakeProcess {
    let mut p = FakeProcess::new();
    p.map(GLOBAL, vec![0; 0x2000]);
    p.map(PROCESS, vec![0; 0x100]);
    p.write_u32(PROCESS + 100, 31);
    p.write_u32(GLOBAL + n.num_vnis, workers.len() as u32);
    for (vci, &w) in workers.iter().enumerate() {
        p.write_u64(GLOBAL + n.ctx + vci as u64 * n.ctx_size + n.worker, w);
    }
    p
}

/// `MPIDI_UCX_init_tag` with 16 rank bits.
fn tag(ctx: u64, rank: u64, tag: u64) -> u64 {
    (ctx << 48) | (rank << 32) | tag
}

#[test]
fn no_netmod_without_its_globals_and_every_missing_name_said() {
    let base = image();
    let n = netmod(&base);
    assert_eq!(
        (n.ctx, n.ctx_size, n.num_vnis, n.max_vcis),
        (8, 64, 4104, 64)
    );
    assert_eq!(n.tag_bits_at, PROCESS + 100);
    assert_eq!(n.user_data, Some(160));
    let p = FakeProcess::new();
    let t = target(&p);
    let mut i = base.clone();
    i.symbols.remove(SYM_GLOBAL);
    assert!(resolve(&i, &t).is_none(), "not the ucx netmod");
    let err = |i: &FakeImage| resolve(i, &t).unwrap().unwrap_err();
    let mut i = base.clone();
    i.symbols.remove(SYM_PROCESS);
    assert_eq!(
        err(&i),
        "MPICH's ucx netmod not supported: symbol MPIR_Process missing"
    );
    for (name, field) in [
        (GLOBAL_TYPE, GLOBAL_CTX),
        (GLOBAL_TYPE, GLOBAL_NUM_VNIS),
        (CONTEXT_TYPE, CONTEXT_WORKER),
        (PROCESS_TYPE, PROCESS_TAG_BITS),
    ] {
        let mut i = base.clone();
        i.remove_type(name);
        assert_eq!(
            err(&i),
            format!("MPICH's ucx netmod not supported: type {name} missing")
        );
        let mut i = base.clone();
        assert!(i.remove_field(name, field));
        assert_eq!(
            err(&i),
            format!("MPICH's ucx netmod not supported: field {field} of {name} missing")
        );
    }
    // UCX's own: named with UCX's version (unknown here: no code).
    let mut i = base.clone();
    i.remove_type(ucx_names::WORKER);
    assert_eq!(
        err(&i),
        "UCX (version unknown)'s types are not known here: type ucp_worker_t missing \
         (libucp.so.0 has no debug information: install its debug symbols, point \
         --debug-dir at them, or add its type pack)"
    );
    // Another of UCX's types missing: a layout we do not know.
    let mut i = base.clone();
    i.remove_type(ucx_names::REQUEST);
    assert_eq!(
        err(&i),
        format!(
            "UCX (version unknown) not supported: type {} missing",
            ucx_names::REQUEST
        )
    );
    // user_data only names the request.
    let mut i = base.clone();
    assert!(i.remove_field(ucx_names::REQUEST, REQUEST_USER_DATA));
    assert_eq!(netmod(&i).user_data, None);
}

#[test]
fn every_vcis_worker_is_read_and_decoded() {
    let n = netmod(&image());
    let l = n.layout;
    let (w0, w1) = (0x100_0000, 0x200_0000);
    let mut p = process(&n, &[w0, w1]);
    let specific = !(0b11u64 << 29);
    let any_source = specific & !(0xffff << 32);
    add_worker(
        &mut p,
        &l,
        w0,
        &[
            (0x110_0000, tag(5, 1, 7), specific),
            (0x110_1000, tag(6, 0, 8), any_source),
            (0x110_2000, tag(5, 0, 0), any_source & !0x0fff_ffff),
        ],
        &[(0x120_0000, tag(5, 1, 99), 64)],
    );
    add_worker(&mut p, &l, w1, &[(0x210_0000, tag(5, 3, 9), specific)], &[]);
    let t = target(&p);
    let mut s = scan(&t, &n);
    assert_eq!(s.no_worker, None);
    assert_eq!((s.posted_stop, s.unexpected_stop), (None, None));
    assert!(s.disagrees.is_empty());
    let five: Vec<_> = s
        .posted
        .take(5)
        .into_iter()
        .map(|op| match op {
            Op::Recv {
                decoded,
                vci,
                number,
                mpi_request,
                ..
            } => (decoded.source, decoded.tag, vci, number, mpi_request),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        five,
        [
            (Some(1), Some(7), 0, 1, Some(0x110_0900)),
            (None, None, 0, 2, Some(0x110_2900)),
            (Some(3), Some(9), 1, 1, Some(0x210_0900)),
        ]
    );
    assert_eq!(s.posted.take(6).len(), 1);
    match &s.unexpected.take(5)[..] {
        [Op::Unexpected {
            message, decoded, ..
        }] => {
            assert_eq!((decoded.source, decoded.tag), (Some(1), Some(99)));
            assert_eq!(message.length, Some(64));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_sends_buffer_and_length_come_from_its_ucp_request() {
    let mut i = image();
    let req = i.fields_of(ucx_names::REQUEST).unwrap();
    req.insert(ucx_names::REQ_SEND_BUFFER.to_string(), 32);
    req.insert(ucx_names::REQ_SEND_LENGTH.to_string(), 48);
    i.add_type(MPIR_REQUEST, 400, &[(MPIR_REQUEST_DEV, 80)]);
    i.add_type(DEVREQ_TYPE, 300, &[(DEVREQ_CH4, 16)]);
    let n = netmod(&i);
    assert_eq!((n.mpir_ucp_request, n.send), (Some(96), Some((32, 48))));
    let (mpir, ucp) = (0x70_0000, 0x71_0000);
    let mut p = FakeProcess::new();
    p.map(mpir, vec![0; 0x200]);
    p.map(ucp, vec![0; 0x200]);
    // The netmod holds the memory right behind the ucp_request_t.
    p.write_u64(mpir + 96, ucp + 200);
    p.write_u64(ucp + 32, 0x1234_5000);
    p.write_u64(ucp + 48, 400_000);
    assert_eq!(send_of(&target(&p), &n, mpir), Some((0x1234_5000, 400_000)));
    // No UCP request, or one that cannot be read: unknown.
    p.write_u64(mpir + 96, 0);
    assert_eq!(send_of(&target(&p), &n, mpir), None);
    p.write_u64(mpir + 96, 0x99_0000);
    assert_eq!(send_of(&target(&p), &n, mpir), None);
    // Without the fields, unknown too.
    p.write_u64(mpir + 96, ucp + 200);
    assert_eq!(send_of(&target(&p), &netmod(&image()), mpir), None);
}

/// An eager descriptor at `d` of a message with `tag` and `length`.
fn descriptor(p: &mut FakeProcess, l: &UcxLayout, d: u64, tag: u64, length: u32) {
    p.map(d, vec![0; 0x200]);
    p.write_u16(
        d + l.rd_flags,
        crate::ucx::layout::rdesc_flags::EAGER_ONLY as u16,
    );
    p.write_u32(d + l.rd_length, length + 8);
    p.write_u32(d + l.rd_payload, 8);
    p.write_u64(d + l.rd_size, tag);
}

#[test]
fn messages_matched_probes_hold_are_found_among_mpichs_requests() {
    const MEM: u64 = 0x80_0000;
    let base = image();
    let n = netmod(&base);
    assert!(
        matches!(n.pools, Err(Missing::Symbol(SYM_REQUEST_MEM))),
        "{:?}",
        n.pools
    );
    let mut i = base.clone();
    i.symbols.insert(SYM_REQUEST_MEM.to_string(), MEM);
    i.add_type(
        ALLOC_TYPE,
        128,
        &[
            ("avail", 0),
            (ALLOC_INDIRECT, 16),
            (ALLOC_INDIRECT_SIZE, 24),
            (ALLOC_NUM_ALLOCATED, 28),
            (ALLOC_DIRECT, 48),
            (ALLOC_DIRECT_SIZE, 56),
        ],
    );
    i.add_type(
        MPIR_REQUEST,
        256,
        &[
            ("handle", 0),
            (REQUEST_REF_COUNT, 4),
            (REQUEST_KIND, 8),
            (MPIR_REQUEST_DEV, 80),
        ],
    );
    i.add_type(DEVREQ_TYPE, 100, &[(DEVREQ_CH4, 16)]);
    let n = netmod(&i);
    let pools = n.pools.expect("pools");
    assert_eq!(pools.handle, 96);
    // Every name said when missing.
    for (name, field) in [
        (ALLOC_TYPE, ALLOC_INDIRECT),
        (ALLOC_TYPE, ALLOC_NUM_ALLOCATED),
        (MPIR_REQUEST, REQUEST_KIND),
        (MPIR_REQUEST, REQUEST_REF_COUNT),
        (DEVREQ_TYPE, DEVREQ_CH4),
    ] {
        let mut j = i.clone();
        assert!(j.remove_field(name, field));
        assert_eq!(netmod(&j).pools, Err(Missing::Field(name, field)));
    }
    let l = n.layout;
    let w = 0x100_0000;
    let mut p = process(&n, &[w]);
    add_worker(&mut p, &l, w, &[], &[]);
    let (direct, indirect, block) = (0x90_0000, 0x91_0000, 0x92_0000);
    p.map(MEM, vec![0; 128]);
    p.write_u64(MEM + 48, direct);
    p.write_u32(MEM + 56, 3);
    p.write_u64(MEM + 16, indirect);
    p.write_u32(MEM + 24, 1);
    p.write_u32(MEM + 28, 3 + 2);
    p.map(direct, vec![0; 3 * 256]);
    p.map(indirect, vec![0; 8]);
    p.write_u64(indirect, block);
    p.map(block, vec![0; 2 * 256]);
    let object = |p: &mut FakeProcess, at: u64, kind: u32, refs: u32, desc: u64| {
        p.write_u32(at + 4, refs);
        p.write_u32(at + 8, kind);
        p.write_u64(at + 96, desc);
    };
    // In use, freed (its fields stale), a receive; in the indirect
    // block one more in use.
    object(&mut p, direct, 11, 2, 0xa0_0000);
    object(&mut p, direct + 256, 11, 0, 0xa1_0000);
    object(&mut p, direct + 512, 2, 1, 0xa2_0000);
    object(&mut p, block + 256, 11, 1, 0xa3_0000);
    descriptor(&mut p, &l, 0xa0_0000, tag(5, 1, 77), 16);
    descriptor(&mut p, &l, 0xa3_0000, tag(6, 0, 5), 8);
    let mut s = scan(&target(&p), &n);
    assert_eq!(s.probed_unread, None);
    /// (holder, source, tag, length).
    type Held = (u64, Option<i64>, Option<i64>, Option<u64>);
    let held = |ops: Vec<Op>| -> Vec<Held> {
        ops.into_iter()
            .map(|op| match op {
                Op::Probed {
                    message,
                    decoded,
                    holder,
                } => (holder, decoded.source, decoded.tag, message.length),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        held(s.probed.take(5)),
        [(direct, Some(1), Some(77), Some(16))]
    );
    assert_eq!(
        held(s.probed.take(6)),
        [(block + 256, Some(0), Some(5), Some(8))]
    );
    // A corrupt allocator is said, not followed.
    p.write_u32(MEM + 28, 1 << 22);
    let s = scan(&target(&p), &n);
    assert_eq!(
        s.probed_unread.as_deref(),
        Some("MPIR_Request_mem[0]: 1 blocks of 4194301 requests")
    );
}

#[test]
fn what_stops_the_reading_is_said() {
    let n = netmod(&image());
    let said = |p: &FakeProcess| scan(&target(p), &n).no_worker.unwrap_or_default();
    let mut p = process(&n, &[0]);
    assert_eq!(said(&p), "MPIDI_UCX_global.ctx[0].worker is NULL");
    p.write_u32(GLOBAL + n.num_vnis, 0);
    assert_eq!(said(&p), "MPIDI_UCX_global.num_vnis is 0, not 1 to 64");
    p.write_u32(GLOBAL + n.num_vnis, 65);
    assert_eq!(said(&p), "MPIDI_UCX_global.num_vnis is 65, not 1 to 64");
    p.write_u32(PROCESS + 100, 40);
    assert_eq!(
        said(&p),
        "MPIR_Process.tag_bits is 40, not a width the ucx netmod reports"
    );
    // A worker that cannot be read ends its walks, with the reason.
    let mut p = process(&n, &[0x100_0000]);
    let s = scan(&target(&p), &n);
    assert_eq!(s.no_worker, None);
    assert!(s.posted_stop.is_some() && s.unexpected_stop.is_some());
    p.unmap(PROCESS);
    assert!(
        said(&p).starts_with("MPIR_Process.tag_bits: "),
        "{}",
        said(&p)
    );
}

/// `MPIDI_UCX_recv_tag` and `MPIDI_UCX_tag_mask` as MPICH 4.0.2
/// builds them (-1: MPI_ANY_SOURCE, -1: MPI_ANY_TAG, as in mpi.h),
/// for `rank_bits` and the tag width MPICH was told.
fn make_recv(tag: i64, src: i64, ctx: u64, rank_bits: u32, tag_bits: u32) -> (u64, u64) {
    let tag_field = 48 - rank_bits;
    let rank_mask = ((1u64 << rank_bits) - 1) << tag_field;
    let mut bits = ctx << rank_bits;
    if src != -1 {
        bits |= src as u64 & ((1 << rank_bits) - 1);
    }
    bits <<= tag_field;
    if tag != -1 {
        bits |= tag as u64 & ((1 << tag_field) - 1);
    }
    let mut mask = !0u64;
    // MPIR_TAG_CLEAR_ERROR_BITS: ~(ERROR_BIT ^ PROC_FAILURE_BIT), ints.
    mask &= !(((1u64 << (tag_bits - 1)) ^ (1u64 << (tag_bits - 2))) as i32 as i64 as u64);
    if tag == -1 {
        // MPIR_TAG_USABLE_BITS, an int.
        mask &= !(((1u64 << (tag_bits - 3)) - 1) as i32 as i64 as u64);
    }
    if src == -1 {
        mask &= !rank_mask;
    }
    (bits, mask)
}

/// `MPIDI_UCX_init_tag`, a send's tag.
fn make_send(tag: u64, rank: u64, ctx: u64, rank_bits: u32) -> u64 {
    let tag_field = 48 - rank_bits;
    (((ctx << rank_bits) | rank) << tag_field) | (tag & ((1 << tag_field) - 1))
}

#[test]
fn the_tag_field_follows_from_the_width_mpich_was_told() {
    let default = TagLayout::from_tag_bits(31).unwrap();
    assert_eq!((default.tag_field, default.rank_bits()), (32, 16));
    let wide = TagLayout::from_tag_bits(24).unwrap();
    assert_eq!((wide.tag_field, wide.rank_bits()), (24, 24));
    assert_eq!(TagLayout::from_tag_bits(16).unwrap().rank_bits(), 32);
    for bad in [-1, 0, 15, 32, 64] {
        assert_eq!(TagLayout::from_tag_bits(bad), None, "{bad}");
    }
}

#[test]
fn receive_tags_decode_into_context_source_and_tag() {
    for (rank_bits, tag_bits) in [(16, 31), (24, 24), (32, 16)] {
        let layout = TagLayout::from_tag_bits(tag_bits as i64).unwrap();
        let max_tag = (1i64 << (tag_bits - 3)) - 1;
        let max_rank = (1i64 << rank_bits) - 1;
        let cases = [
            ((7, 1, 3), (3, Some(1), Some(7))),
            ((8, -1, 0), (0, None, Some(8))),
            ((-1, 0, 5), (5, Some(0), None)),
            ((-1, -1, 0xffff), (0xffff, None, None)),
            ((max_tag, max_rank, 1), (1, Some(max_rank), Some(max_tag))),
            ((0, 2, 0x8001), (0x8001, Some(2), Some(0))),
        ];
        for ((tag, src, ctx), (c, s, t)) in cases {
            let (bits, mask) = make_recv(tag, src, ctx, rank_bits, tag_bits);
            assert_ne!(mask, !0, "never a full mask");
            assert_eq!(
                layout.decode(bits, mask),
                Tag {
                    context: c,
                    source: s,
                    tag: t
                },
                "rank bits {rank_bits}: tag {tag} src {src} ctx {ctx}"
            );
        }
    }
}

#[test]
fn message_tags_decode_with_a_full_mask() {
    let layout = TagLayout::from_tag_bits(31).unwrap();
    for (tag, rank, ctx) in [(99, 1, 0), (5, 0xffff, 0xffff), (0, 0, 0), (1000, 3, 4)] {
        let d = layout.decode(make_send(tag, rank, ctx, 16), !0);
        assert_eq!(
            d,
            Tag {
                context: ctx,
                source: Some(rank as i64),
                tag: Some(tag as i64)
            }
        );
    }
    // MPICH's error bits are not part of the tag shown.
    let errored = make_send(42 | (1 << 30) | (1 << 29), 1, 2, 16);
    assert_eq!(layout.decode(errored, !0).tag, Some(42));
}
