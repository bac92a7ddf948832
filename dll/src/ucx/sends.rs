//! The sends a UCP worker has in flight, read from its request pool
//! (`ucp_worker.req_mp`): UCX 1.13 keeps a send that waits for its receiver
//! (rendezvous, synchronous) on no list unless its endpoint uses indirect
//! request ids (peer error handling), but every UCP request the library
//! allocates comes from this pool. The pool (`ucs_mpool_t`) has a list of
//! chunks, each an array of `num_elems` elements of `elem_size` bytes
//! rounded up to `alignment`; each element starts with a header
//! (`ucs_mpool_elem_t`) that holds the next free element while it is free
//! and the pool's own address while it is in use. So the requests in use
//! are the elements whose header is the pool's address: no walk of the
//! free list is needed. Of those, a tag send (`UCP_REQUEST_FLAG_SEND_TAG`)
//! not yet completed is a send in flight; one completed is held by its
//! owner, not yet waited for (a completed request its owner had freed goes
//! back to the pool at once).
//!
//! Requests an MPI puts elsewhere are not in the pool (a request the
//! caller passes in `ucp_request_param_t.request`, as Open MPI's blocking
//! `MPI_Send` does with one on its stack), and an eager send that
//! completed at once never had a request. Every walk is bounded: chunks,
//! elements per chunk, bytes per chunk, elements in all; every pointer is
//! checked before it is followed.

use crate::access::ProcessAccess;
use crate::target::{Target, MAX_READ};
use crate::walk::{AddrSet, Stop, MAX_LIST_ITEMS};

use super::layout::REQ_FLAGS_BYTES;
use super::layout::{request_flags, SendLayout, MPC_NUM_ELEMS_BYTES, PROTO_ENABLE_BYTES};

/// Most chunks a pool may have (128 requests each, by UCX's default: 8
/// million requests).
pub const MAX_CHUNKS: usize = 1 << 16;
/// Largest element alignment taken for real (UCX uses the cache line).
pub const MAX_ALIGNMENT: u64 = 1 << 12;
/// Largest element taken for real (a UCP request and the MPI's behind it).
pub const MAX_ELEMENT: u64 = 1 << 16;

/// Offsets of pointer-sized words to read behind a request (in the memory
/// UCX hands the MPI right after its `ucp_request_t`).
pub type Tail = [Option<u64>; 2];

/// One tag send in flight (its `ucp_request_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Send {
    pub request: u64,
    /// `send.ep`: the endpoint, which names the peer.
    pub ep: u64,
    pub tag: u64,
    pub buffer: u64,
    /// Bytes.
    pub length: u64,
    /// Synchronous: it completes when the receiver has matched it.
    pub sync: bool,
    /// Its owner freed it before it completed.
    pub released: bool,
    /// Completed, its owner not yet told (not yet waited for).
    pub completed: bool,
    /// `send.cb`, the function UCX calls when it completes: who started it.
    pub callback: u64,
    /// The pointer-sized words at the [`Tail`] offsets behind the request.
    pub tail: [Option<u64>; 2],
}

/// What the pool holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sends {
    /// In address order (UCX records no order in which sends began).
    pub sends: Vec<Send>,
    pub stop: Option<Stop>,
    /// The context runs UCX's new protocols (`UCX_PROTO_ENABLE=y`), whose
    /// requests carry no mark of a tag send: none listed.
    pub new_protocols: bool,
}

/// Reads the tag sends held (in flight, or completed and not yet freed)
/// among the requests of the worker at `worker`, at most `cap` elements
/// looked at.
pub fn held<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    l: &SendLayout,
    worker: u64,
    tail: Tail,
    cap: usize,
) -> Sends {
    let mut out = Sends::default();
    if let Some((context, proto)) = l.proto_enable {
        let on = worker
            .checked_add(context)
            .ok_or(crate::target::ReadError::OutOfRange)
            .and_then(|a| t.read_ptr(a))
            .and_then(|c| t.check_ptr(c, t.ptr_align(), proto + 4))
            .and_then(|c| t.read_uint(c + proto, PROTO_ENABLE_BYTES));
        if matches!(on, Ok(v) if v != 0) {
            out.new_protocols = true;
            return out;
        }
    }
    let Some(pool) = worker.checked_add(l.worker_req_mp) else {
        out.stop = Some(Stop::BadPointer(worker));
        return out;
    };
    let data = match t
        .check_ptr(pool, t.ptr_align(), l.mp_data + 8)
        .and_then(|a| t.read_ptr(a + l.mp_data))
        .and_then(|d| t.check_ptr(d, t.ptr_align(), l.mpd_size))
        .and_then(|d| t.view(d, l.mpd_size))
    {
        Ok(v) => v,
        Err(e) => {
            out.stop = Some(Stop::from_read(e, pool));
            return out;
        }
    };
    let (Ok(elem_size), Ok(alignment), Ok(first)) = (
        data.size_t(l.mpd_elem_size),
        data.size_t(l.mpd_alignment),
        data.ptr(l.mpd_chunks),
    ) else {
        out.stop = Some(Stop::Corrupt);
        return out;
    };
    // ucs_mpool_elem_total_size: the element size rounded up to the
    // alignment, a power of two.
    let sane = alignment.is_power_of_two()
        && alignment <= MAX_ALIGNMENT
        && elem_size >= l.elem_header + l.req_size
        && elem_size <= MAX_ELEMENT;
    if !sane {
        out.stop = Some(Stop::Corrupt);
        return out;
    }
    let stride = (elem_size + alignment - 1) & !(alignment - 1);
    let cap = cap.min(MAX_LIST_ITEMS);
    let mut seen = AddrSet::default();
    let mut chunk = first;
    let mut looked = 0usize;
    while chunk != 0 {
        if !seen.insert(chunk) {
            out.stop = Some(Stop::Cycle(chunk));
            break;
        }
        if seen.len() > MAX_CHUNKS {
            out.stop = Some(Stop::Limit(MAX_CHUNKS));
            break;
        }
        // Not aligned: UCX's chunk allocator puts the chunk behind a
        // 4-byte header of its own (`ucs_mpool_hugetlb_malloc`).
        let header = t
            .check_ptr(chunk, 1, l.mpc_size)
            .and_then(|c| t.view(c, l.mpc_size));
        let (next, elems, count) = match header.and_then(|v| {
            Ok((
                v.ptr(l.mpc_next)?,
                v.ptr(l.mpc_elems)?,
                v.uint(l.mpc_num_elems, MPC_NUM_ELEMS_BYTES)?,
            ))
        }) {
            Ok(h) => h,
            Err(e) => {
                out.stop = Some(Stop::from_read(e, chunk));
                break;
            }
        };
        if count
            .checked_mul(stride)
            .is_none_or(|b| b > MAX_READ as u64)
        {
            out.stop = Some(Stop::Corrupt);
            break;
        }
        if looked.saturating_add(count as usize) > cap {
            out.stop = Some(Stop::Limit(cap));
            break;
        }
        looked += count as usize;
        if count > 0 {
            if let Err(stop) = elements(t, l, pool, elems, count, stride, tail, &mut out.sends) {
                out.stop = Some(stop);
                break;
            }
        }
        chunk = next;
    }
    out.sends.sort_by_key(|s| s.request);
    out
}

/// The `count` elements at `elems`, `stride` bytes apart, read in one go:
/// the tag sends among those in use.
#[allow(clippy::too_many_arguments)]
fn elements<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    l: &SendLayout,
    pool: u64,
    elems: u64,
    count: u64,
    stride: u64,
    tail: Tail,
    out: &mut Vec<Send>,
) -> Result<(), Stop> {
    let bytes = count * stride;
    let v = t
        .check_ptr(elems, t.ptr_align(), bytes)
        .and_then(|a| t.view(a, bytes))
        .map_err(|e| Stop::from_read(e, elems))?;
    for i in 0..count {
        let at = i * stride;
        // In use: its header is the pool's address.
        if v.ptr(at) != Ok(pool) {
            continue;
        }
        let r = at + l.elem_header;
        let Ok(flags) = v.uint(r + l.req_flags, REQ_FLAGS_BYTES) else {
            continue;
        };
        if flags & request_flags::SEND_TAG == 0 {
            continue;
        }
        // Words behind the request, within its element only.
        let behind = |o: Option<u64>| {
            let off = r.checked_add(l.req_size)?.checked_add(o?)?;
            if off + 8 > at + stride {
                return None;
            }
            v.ptr(off).ok()
        };
        let read = || -> Result<Send, crate::target::ReadError> {
            Ok(Send {
                request: elems + r,
                ep: v.ptr(r + l.send_ep)?,
                tag: v.u64(r + l.send_tag)?,
                buffer: v.ptr(r + l.send_buffer)?,
                length: v.size_t(r + l.send_length)?,
                sync: flags & request_flags::SYNC != 0,
                released: flags & request_flags::RELEASED != 0,
                completed: flags & request_flags::COMPLETED != 0,
                callback: v.ptr(r + l.send_cb)?,
                tail: tail.map(behind),
            })
        };
        if let Ok(send) = read() {
            out.push(send);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{ByteOrder, Sizes};
    use crate::testing::FakeProcess;
    use crate::ucx::layout::tests::send_image;

    const WORKER: u64 = 0x10_0000;
    const DATA: u64 = 0x11_0000;
    const CONTEXT: u64 = 0x12_0000;
    /// Chunks as UCX places them: behind the allocator's 4-byte header.
    const CHUNK_A: u64 = 0x20_0004;
    const CHUNK_B: u64 = 0x30_0004;
    /// 8 bytes of header, 200 of UCP request, 48 of the MPI's.
    const ELEM_SIZE: u64 = 256;
    const ALIGN: u64 = 64;
    const SEND_TAG: u32 = request_flags::SEND_TAG as u32;
    const SYNC: u32 = request_flags::SYNC as u32;

    fn layout() -> SendLayout {
        SendLayout::resolve(&send_image()).unwrap()
    }

    fn target(p: &FakeProcess) -> Target<'_, FakeProcess> {
        Target::new(p, Sizes::LP64, ByteOrder::Same)
    }

    fn pool(l: &SendLayout) -> u64 {
        WORKER + l.worker_req_mp
    }

    /// Element `k` of the chunk at `chunk` (its elements start so that
    /// each request, behind its 8-byte header, is aligned).
    fn elem(chunk: u64, k: u64) -> u64 {
        (chunk & !(ALIGN - 1)) + ALIGN - 8 + k * ELEM_SIZE
    }

    fn add_chunk(p: &mut FakeProcess, l: &SendLayout, chunk: u64, next: u64, count: u32) {
        p.map(
            chunk,
            vec![0; (ALIGN + u64::from(count) * ELEM_SIZE) as usize],
        );
        p.write_u64(chunk + l.mpc_next, next);
        p.write_u64(chunk + l.mpc_elems, elem(chunk, 0));
        p.write_u32(chunk + l.mpc_num_elems, count);
    }

    /// An element: its header, and a request with `flags`, sent on `ep`
    /// with `tag`, `length` bytes, and `word` as the MPI's first word.
    #[allow(clippy::too_many_arguments)]
    fn put(
        p: &mut FakeProcess,
        l: &SendLayout,
        e: u64,
        header: u64,
        flags: u32,
        ep: u64,
        tag: u64,
        length: u64,
    ) {
        let r = e + 8;
        p.write_u64(e, header);
        p.write_u32(r + l.req_flags, flags);
        p.write_u64(r + l.send_ep, ep);
        p.write_u64(r + l.send_tag, tag);
        p.write_u64(r + l.send_buffer, 0x7000_0000 + tag);
        p.write_u64(r + l.send_length, length);
        p.write_u64(r + l.send_cb, 0x4000_1000);
        p.write_u64(r + l.req_size, r + l.req_size);
    }

    /// Two chunks: A of 4 elements, B of 3: three sends in flight and one
    /// completed among free elements and a receive.
    fn process(l: &SendLayout) -> FakeProcess {
        let mut p = FakeProcess::new();
        p.map(WORKER, vec![0; 0x1000]);
        p.write_u64(WORKER + 0x68, CONTEXT);
        p.map(CONTEXT, vec![0; 0x400]);
        p.write_u64(pool(l) + l.mp_data, DATA);
        p.map(DATA, vec![0; 64]);
        p.write_u64(DATA + l.mpd_elem_size, ELEM_SIZE - 8);
        p.write_u64(DATA + l.mpd_alignment, ALIGN);
        p.write_u64(DATA + l.mpd_chunks, CHUNK_B);
        add_chunk(&mut p, l, CHUNK_B, CHUNK_A, 3);
        add_chunk(&mut p, l, CHUNK_A, 0, 4);
        let mp = pool(l);
        // A synchronous send in flight; a free element with a stale send;
        // a completed send not yet waited for; a receive.
        put(
            &mut p,
            l,
            elem(CHUNK_A, 0),
            mp,
            SEND_TAG | SYNC,
            0xe1,
            79,
            400_000,
        );
        put(
            &mut p,
            l,
            elem(CHUNK_A, 1),
            elem(CHUNK_A, 2),
            SEND_TAG,
            0xe1,
            1,
            8,
        );
        put(&mut p, l, elem(CHUNK_A, 2), mp, SEND_TAG | 1, 0xe1, 2, 8);
        put(&mut p, l, elem(CHUNK_A, 3), mp, 1 << 17, 0, 3, 8);
        // A send its owner freed; the last free element; a plain send.
        put(&mut p, l, elem(CHUNK_B, 0), mp, SEND_TAG | 2, 0xe2, 5, 64);
        put(&mut p, l, elem(CHUNK_B, 1), 0, SEND_TAG, 0xe2, 6, 8);
        put(&mut p, l, elem(CHUNK_B, 2), mp, SEND_TAG, 0xe3, 7, 100_000);
        p
    }

    #[test]
    fn the_sends_held_are_the_tag_sends_in_use() {
        let l = layout();
        let p = process(&l);
        let t = target(&p);
        let s = held(&t, &l, WORKER, [Some(0), Some(100)], 1000);
        assert_eq!((s.stop, s.new_protocols), (None, false));
        let got: Vec<_> = s
            .sends
            .iter()
            .map(|s| (s.ep, s.tag, s.length, s.sync, s.released, s.completed))
            .collect();
        assert_eq!(
            got,
            [
                (0xe1, 79, 400_000, true, false, false),
                (0xe1, 2, 8, false, false, true),
                (0xe2, 5, 64, false, true, false),
                (0xe3, 7, 100_000, false, false, false),
            ]
        );
        let first = &s.sends[0];
        assert_eq!(first.request, elem(CHUNK_A, 0) + 8);
        assert_eq!(first.buffer, 0x7000_0000 + 79);
        assert_eq!(first.callback, 0x4000_1000);
        // The MPI's word behind the request; one beyond the element is
        // not read.
        assert_eq!(first.tail, [Some(first.request + l.req_size), None]);
        // The context, the pool, its data, then a header and the elements
        // of each chunk.
        assert_eq!(t.fetches(), 2 + 2 + 2 * 2);
    }

    #[test]
    fn the_new_protocols_are_said() {
        let l = layout();
        let mut p = process(&l);
        p.write_u32(CONTEXT + 0x288, 1);
        let s = held(&target(&p), &l, WORKER, [None; 2], 1000);
        assert!(s.new_protocols && s.sends.is_empty());
        // Without the switch in the types, the pool is read.
        let mut l2 = l;
        l2.proto_enable = None;
        assert_eq!(
            held(&target(&p), &l2, WORKER, [None; 2], 1000).sends.len(),
            4
        );
    }

    #[test]
    fn corrupt_pools_end_the_walk_with_a_reason() {
        let l = layout();
        let p = process(&l);
        let walk = |p: &FakeProcess| held(&target(p), &l, WORKER, [None; 2], 1000);
        // A loop of chunks: each read once.
        let mut c = p.clone();
        c.write_u64(CHUNK_A + l.mpc_next, CHUNK_B);
        let s = walk(&c);
        assert_eq!(s.stop, Some(Stop::Cycle(CHUNK_B)));
        assert_eq!(s.sends.len(), 4);
        // A chunk that says it holds more than can be read.
        for count in [u32::MAX, 1 << 20] {
            let mut c = p.clone();
            c.write_u32(CHUNK_A + l.mpc_num_elems, count);
            let s = walk(&c);
            assert!(
                matches!(s.stop, Some(Stop::Corrupt | Stop::Unreadable(_))),
                "{count}: {:?}",
                s.stop
            );
        }
        // Sizes that cannot be UCX's.
        for (field, value) in [
            (l.mpd_alignment, 0),
            (l.mpd_alignment, 48),
            (l.mpd_alignment, 1 << 20),
            (l.mpd_elem_size, 8),
            (l.mpd_elem_size, 1 << 40),
        ] {
            let mut c = p.clone();
            c.write_u64(DATA + field, value);
            let s = walk(&c);
            assert_eq!(s.stop, Some(Stop::Corrupt), "{field} = {value}");
            assert!(s.sends.is_empty());
        }
        // Pointers to nowhere, NULL, misaligned.
        for (at, bad) in [
            (pool(&l) + l.mp_data, 0x99_0000),
            (pool(&l) + l.mp_data, 0),
            (DATA + l.mpd_chunks, 0x99_0000),
            (DATA + l.mpd_chunks, 2),
            (CHUNK_B + l.mpc_elems, 0x99_0000),
            (CHUNK_B + l.mpc_next, 0x99_0000),
        ] {
            let mut c = p.clone();
            c.write_u64(at, bad);
            let s = walk(&c);
            assert!(s.stop.is_some(), "{at:#x} = {bad:#x}");
        }
        // The cap: chunk B's 3 elements fit, A's 4 more do not.
        let s = held(&target(&p), &l, WORKER, [None; 2], 5);
        assert_eq!(s.stop, Some(Stop::Limit(5)));
        assert_eq!(s.sends.len(), 2);
        // An unreadable worker.
        let s = held(&target(&p), &l, 0x66_0000, [None; 2], 1000);
        assert!(s.stop.is_some() && s.sends.is_empty());
    }

    #[test]
    fn every_bit_flip_of_the_pool_ends_promptly() {
        let l = layout();
        let p = process(&l);
        let words = [
            pool(&l) + l.mp_data,
            DATA + l.mpd_elem_size,
            DATA + l.mpd_alignment,
            DATA + l.mpd_chunks,
            CHUNK_A + l.mpc_next,
            CHUNK_A + l.mpc_elems,
            CHUNK_A + l.mpc_num_elems,
            CHUNK_B + l.mpc_next,
            CHUNK_B + l.mpc_elems,
            CHUNK_B + l.mpc_num_elems,
            elem(CHUNK_A, 0),
            elem(CHUNK_B, 1),
        ];
        for w in words {
            for bit in 0..64 {
                let mut b = p.clone();
                let mut v = [0u8; 8];
                assert!(crate::access::ProcessAccess::fetch(&b, w, &mut v));
                b.write_u64(w, u64::from_ne_bytes(v) ^ (1 << bit));
                let t = target(&b);
                let s = held(&t, &l, WORKER, [Some(0), None], 1000);
                assert!(s.sends.len() <= 7, "{w:#x} bit {bit}");
                assert!(
                    t.fetches() <= 4 + 2 * 3,
                    "{w:#x} bit {bit}: {}",
                    t.fetches()
                );
            }
        }
    }
}
