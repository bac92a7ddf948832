//! The walks over a UCP worker's tag-matching state (`ucp_worker.tm`):
//! the expected requests (the wildcard queue and every hash bucket, merged
//! in posting order by their sequence numbers) and the unexpected
//! descriptors in arrival order. Every walk is bounded (a cap, a cycle
//! check, each pointer checked before it is followed); what the tags mean
//! is the MPI's business.

use crate::access::ProcessAccess;
use crate::target::{ReadError, Target, View};
use crate::walk::{AddrSet, Stop, MAX_LIST_ITEMS};

use super::layout::{rdesc_flags, UcxLayout, HASH_BUCKETS, RDESC_ALL_LIST};
use super::layout::{RD_FLAGS_BYTES, RD_LENGTH_BYTES, RD_PAYLOAD_BYTES};

/// One expected (posted) receive request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted {
    /// The `ucp_request_t`.
    pub request: u64,
    pub tag: u64,
    pub mask: u64,
    /// UCP's posting sequence number (`recv.tag.sn`).
    pub sn: u64,
    pub buffer: u64,
    /// Bytes the receive can take.
    pub length: u64,
    /// From the wildcard queue (its mask is not full), else a hash bucket.
    pub wild: bool,
    /// The pointer-sized words at the [`Tail`] offsets past the request's
    /// end, when asked for (where an MPI keeps its own request behind
    /// UCP's).
    pub tail: [Option<u64>; 2],
}

/// Offsets past a request's end of pointer-sized words to read with it.
pub type Tail = [Option<u64>; 2];

/// The expected requests, in posting order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    pub posted: Vec<Posted>,
    pub stop: Option<Stop>,
    /// The worker's own count of expected requests
    /// (`expected.sw_all_count`), when it disagrees with what the walk
    /// found: the queues were not read whole (or the bucket count is not
    /// UCX's).
    pub disagrees: Option<u64>,
}

/// How an unexpected message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Its data came whole with the header.
    EagerOnly,
    /// The first of several eager fragments.
    EagerFirst,
    /// A rendezvous request to send (RTS): only the header came.
    Rendezvous,
    /// Flags this DLL does not know.
    Other(u64),
}

/// One unexpected message (a `ucp_recv_desc_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unexpected {
    pub descriptor: u64,
    pub tag: u64,
    pub protocol: Protocol,
    /// The message's full length in bytes, where its header says.
    pub length: Option<u64>,
    /// Sent synchronously: the sender waits for it to be matched.
    pub sync: bool,
}

/// Reads every expected request of the worker at `worker`, sorted by
/// sequence number (UCP's posting order), at most `cap`.
pub fn expected<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    l: &UcxLayout,
    worker: u64,
    tail: Tail,
    cap: usize,
) -> Expected {
    let mut out = Expected::default();
    let cap = cap.min(MAX_LIST_ITEMS);
    let tm = worker.saturating_add(l.worker_tm);
    let fields = l
        .tm_wildcard
        .max(l.tm_hash)
        .max(l.tm_count)
        .saturating_add(l.rq_size.max(8));
    let v = match t
        .check_ptr(tm, t.ptr_align(), fields)
        .and_then(|a| t.view(a, fields))
    {
        Ok(v) => v,
        Err(e) => {
            out.stop = Some(Stop::from_read(e, tm));
            return out;
        }
    };
    let count = v.u32(l.tm_count).ok();
    let hash = v.ptr(l.tm_hash).unwrap_or(0);
    let mut seen = AddrSet::default();
    let mut walk = Queues {
        t,
        l,
        tail,
        cap,
        seen: &mut seen,
        out: &mut out,
    };
    let wildcard = tm + l.tm_wildcard + l.rq_queue;
    let (head, ptail) = (
        v.ptr(l.tm_wildcard + l.rq_queue + l.qh_head),
        v.ptr(l.tm_wildcard + l.rq_queue + l.qh_ptail),
    );
    match (head, ptail) {
        (Ok(head), Ok(ptail)) => walk.queue(wildcard, head, ptail, true),
        (Err(e), _) | (_, Err(e)) => walk.stop(Stop::from_read(e, wildcard)),
    }
    if walk.out.stop.is_none() {
        walk.buckets(hash);
    }
    out.posted.sort_by_key(|p| (p.sn, p.request));
    if out.stop.is_none() {
        if let Some(n) = count.filter(|&n| n != out.posted.len() as u64) {
            out.disagrees = Some(n);
        }
    }
    out
}

/// One walk over the expected queues: what it found and what it saw.
struct Queues<'w, 'a, P: ProcessAccess + ?Sized> {
    t: &'w Target<'a, P>,
    l: &'w UcxLayout,
    tail: Tail,
    cap: usize,
    seen: &'w mut AddrSet,
    out: &'w mut Expected,
}

impl<P: ProcessAccess + ?Sized> Queues<'_, '_, P> {
    fn stop(&mut self, stop: Stop) {
        self.out.stop.get_or_insert(stop);
    }

    /// The hash's buckets, read in one go; each non-empty one walked.
    fn buckets(&mut self, hash: u64) {
        let (t, l) = (self.t, self.l);
        let Some(bytes) = HASH_BUCKETS.checked_mul(l.rq_size) else {
            return self.stop(Stop::Corrupt);
        };
        let v = match t
            .check_ptr(hash, t.ptr_align(), bytes)
            .and_then(|a| t.view(a, bytes))
        {
            Ok(v) => v,
            Err(e) => return self.stop(Stop::from_read(e, hash)),
        };
        for i in 0..HASH_BUCKETS {
            let at = i * l.rq_size + l.rq_queue;
            let (Ok(head), Ok(ptail)) = (v.ptr(at + l.qh_head), v.ptr(at + l.qh_ptail)) else {
                return self.stop(Stop::Corrupt);
            };
            self.queue(hash + at, head, ptail, false);
            if self.out.stop.is_some() {
                return;
            }
        }
    }

    /// The queue whose head is at `queue`: from `head` to the element
    /// whose link `ptail` points into (the last element's `next` is
    /// stale). Empty when `ptail` points at the head itself.
    fn queue(&mut self, queue: u64, head: u64, ptail: u64, wild: bool) {
        let (t, l) = (self.t, self.l);
        if ptail == queue + l.qh_head {
            return;
        }
        let mut elem = head;
        loop {
            let Some(request) = elem.checked_sub(l.req_queue) else {
                return self.stop(Stop::BadPointer(elem));
            };
            if !self.seen.insert(elem) {
                return self.stop(Stop::Cycle(elem));
            }
            if self.out.posted.len() >= self.cap {
                return self.stop(Stop::Limit(self.cap));
            }
            // With the MPI's word behind the request, in the same read;
            // without it if that is beyond readable memory.
            let whole = l.request_read();
            let behind = self.tail.iter().flatten().map(|o| o + 8).max();
            let len = whole + behind.unwrap_or(0);
            let v = match t.check_ptr(request, t.ptr_align(), len).and_then(|a| {
                t.view(a, len).or_else(|e| {
                    if len > whole {
                        t.view(a, whole)
                    } else {
                        Err(e)
                    }
                })
            }) {
                Ok(v) => v,
                Err(e) => return self.stop(Stop::from_read(e, elem)),
            };
            let read = || -> Result<Posted, ReadError> {
                Ok(Posted {
                    request,
                    tag: v.u64(l.req_tag)?,
                    mask: v.u64(l.req_mask)?,
                    sn: v.u64(l.req_sn)?,
                    buffer: v.ptr(l.req_buffer)?,
                    length: v.size_t(l.req_length)?,
                    wild,
                    tail: self
                        .tail
                        .map(|o| o.and_then(|o| v.ptr(l.req_size + o).ok())),
                })
            };
            match read() {
                Ok(p) => self.out.posted.push(p),
                Err(e) => return self.stop(Stop::from_read(e, elem)),
            }
            if elem + l.qe_next == ptail {
                return;
            }
            match v.ptr(l.req_queue + l.qe_next) {
                Ok(next) => elem = next,
                Err(e) => return self.stop(Stop::from_read(e, elem)),
            }
        }
    }
}

/// Reads the worker's unexpected descriptors in arrival order, at most
/// `cap`: one read per descriptor (its list link is inside it, the payload
/// header right behind it).
pub fn unexpected<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    l: &UcxLayout,
    worker: u64,
    cap: usize,
) -> (Vec<Unexpected>, Option<Stop>) {
    let head = worker
        .saturating_add(l.worker_tm)
        .saturating_add(l.tm_unexpected);
    let cap = cap.min(MAX_LIST_ITEMS);
    let link = l.rd_tag_list + RDESC_ALL_LIST * l.list_size;
    let len = l.descriptor_read();
    let mut out = Vec::new();
    let mut seen = AddrSet::default();
    // A worker pointer near the top of the address space (a corrupt
    // one) puts the list's head past it.
    let Some(first) = head.checked_add(l.list_next) else {
        return (out, Some(Stop::BadPointer(head)));
    };
    let mut at = match t.read_ptr(first) {
        Ok(next) => next,
        Err(e) => return (out, Some(Stop::from_read(e, head))),
    };
    while at != head {
        let Some(desc) = at.checked_sub(link) else {
            return (out, Some(Stop::BadPointer(at)));
        };
        if !seen.insert(at) {
            return (out, Some(Stop::Cycle(at)));
        }
        if out.len() >= cap {
            return (out, Some(Stop::Limit(cap)));
        }
        let read = t
            .check_ptr(desc, t.ptr_align(), len)
            .and_then(|a| t.view(a, len))
            .and_then(|v| Ok((decode_descriptor(&v, l)?, v.ptr(link + l.list_next)?)));
        match read {
            Ok((message, next)) => {
                out.push(message);
                at = next;
            }
            Err(e) => return (out, Some(Stop::from_read(e, desc))),
        }
    }
    (out, None)
}

/// A descriptor read with its payload header ([`UcxLayout::descriptor_read`]
/// bytes at its address).
fn decode_descriptor<P: ProcessAccess + ?Sized>(
    v: &View<'_, '_, P>,
    l: &UcxLayout,
) -> Result<Unexpected, ReadError> {
    let flags = v.uint(l.rd_flags, RD_FLAGS_BYTES)?;
    let length = v.uint(l.rd_length, RD_LENGTH_BYTES)?;
    let payload = v.uint(l.rd_payload, RD_PAYLOAD_BYTES)?;
    let hdr = l.rd_size;
    let (protocol, size) = if flags & rdesc_flags::EAGER_ONLY != 0 {
        (Protocol::EagerOnly, length.checked_sub(payload))
    } else if flags & rdesc_flags::EAGER != 0 {
        (Protocol::EagerFirst, Some(v.u64(hdr + l.ef_total)?))
    } else if flags & rdesc_flags::RNDV != 0 {
        (Protocol::Rendezvous, Some(v.u64(hdr + l.rts_size)?))
    } else {
        (Protocol::Other(flags), None)
    };
    Ok(Unexpected {
        descriptor: v.addr,
        tag: v.u64(hdr)?,
        protocol,
        length: size,
        sync: flags & rdesc_flags::EAGER_SYNC != 0,
    })
}

/// The descriptor at `desc`, one no list holds any more (a message an MPI
/// took out with a matched probe, `ucp_tag_probe_nb` with remove).
pub fn descriptor<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    l: &UcxLayout,
    desc: u64,
) -> Result<Unexpected, ReadError> {
    let len = l.descriptor_read();
    let v = t.view(t.check_ptr(desc, t.ptr_align(), len)?, len)?;
    decode_descriptor(&v, l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{ByteOrder, Sizes};
    use crate::testing::FakeProcess;
    use crate::ucx::layout::tests::image;

    const WORKER: u64 = 0x10_0000;
    const HASH: u64 = 0x20_0000;

    fn layout() -> UcxLayout {
        UcxLayout::resolve(&image()).unwrap()
    }

    fn target(p: &FakeProcess) -> Target<'_, FakeProcess> {
        Target::new(p, Sizes::LP64, ByteOrder::Same)
    }

    /// A worker with empty queues: every head's tail pointing at itself.
    fn empty_worker(l: &UcxLayout) -> FakeProcess {
        let mut p = FakeProcess::new();
        p.map(WORKER, vec![0; 0x1000]);
        let tm = WORKER + l.worker_tm;
        let wq = tm + l.tm_wildcard + l.rq_queue;
        p.write_u64(wq + l.qh_ptail, wq + l.qh_head);
        p.write_u64(tm + l.tm_hash, HASH);
        p.map(HASH, vec![0; (HASH_BUCKETS * l.rq_size) as usize]);
        for i in 0..HASH_BUCKETS {
            let q = HASH + i * l.rq_size + l.rq_queue;
            p.write_u64(q + l.qh_ptail, q + l.qh_head);
        }
        let u = tm + l.tm_unexpected;
        p.write_u64(u, u);
        p.write_u64(u + l.list_next, u);
        p
    }

    /// Puts requests (address, tag, mask, sn) on the queue at `queue`, in
    /// this order, and counts them in the worker.
    fn fill(p: &mut FakeProcess, l: &UcxLayout, queue: u64, reqs: &[(u64, u64, u64, u64)]) {
        let mut prev_link = queue + l.qh_head;
        for &(r, tag, mask, sn) in reqs {
            p.map(r, vec![0; (l.req_size + 16) as usize]);
            p.write_u64(r + l.req_tag, tag);
            p.write_u64(r + l.req_mask, mask);
            p.write_u64(r + l.req_sn, sn);
            p.write_u64(r + l.req_buffer, r + 0x1000);
            p.write_u64(r + l.req_length, 4 * sn + 4);
            // The last element's next is stale in UCX: junk here.
            p.write_u64(r + l.req_queue + l.qe_next, 0xdead_beef);
            p.write_u64(prev_link, r + l.req_queue);
            prev_link = r + l.req_queue + l.qe_next;
        }
        p.write_u64(queue + l.qh_ptail, prev_link);
        let count = WORKER + l.worker_tm + l.tm_count;
        let mut n = [0u8; 8];
        assert!(crate::access::ProcessAccess::fetch(p, count, &mut n));
        let was = u32::from_ne_bytes(n[..4].try_into().unwrap());
        p.write_u32(count, was + reqs.len() as u32);
    }

    fn bucket(l: &UcxLayout, i: u64) -> u64 {
        HASH + i * l.rq_size + l.rq_queue
    }

    #[test]
    fn queues_merge_in_posting_order() {
        let l = layout();
        let mut p = empty_worker(&l);
        let wild = WORKER + l.worker_tm + l.tm_wildcard + l.rq_queue;
        fill(
            &mut p,
            &l,
            wild,
            &[(0x30_0000, 1, 2, 1), (0x30_1000, 3, 4, 4)],
        );
        fill(
            &mut p,
            &l,
            bucket(&l, 5),
            &[(0x31_0000, 5, !0, 0), (0x31_1000, 6, !0, 3)],
        );
        fill(&mut p, &l, bucket(&l, 1023), &[(0x32_0000, 7, !0, 2)]);
        let e = expected(&target(&p), &l, WORKER, [None; 2], 100);
        assert_eq!(e.stop, None);
        assert_eq!(e.disagrees, None);
        let sns: Vec<_> = e.posted.iter().map(|p| (p.sn, p.wild, p.tag)).collect();
        assert_eq!(
            sns,
            [
                (0, false, 5),
                (1, true, 1),
                (2, false, 7),
                (3, false, 6),
                (4, true, 3)
            ]
        );
        assert_eq!(e.posted[1].request, 0x30_0000);
        assert_eq!(e.posted[1].buffer, 0x30_0000 + 0x1000);
        assert_eq!(e.posted[4].length, 20);
        // One fetch for the worker, one for the buckets, one per request.
        assert_eq!(target(&p).fetches(), 0);
        let t = target(&p);
        let _ = expected(&t, &l, WORKER, [None; 2], 100);
        assert_eq!(t.fetches(), 2 + 5);
    }

    #[test]
    fn a_count_that_disagrees_is_said() {
        let l = layout();
        let mut p = empty_worker(&l);
        fill(&mut p, &l, bucket(&l, 9), &[(0x31_0000, 5, !0, 0)]);
        p.write_u32(WORKER + l.worker_tm + l.tm_count, 3);
        let e = expected(&target(&p), &l, WORKER, [None; 2], 100);
        assert_eq!(e.posted.len(), 1);
        assert_eq!(e.disagrees, Some(3));
    }

    #[test]
    fn corrupt_queues_end_the_walk_with_a_reason() {
        let l = layout();
        let mut p = empty_worker(&l);
        let q = bucket(&l, 2);
        let reqs = [
            (0x31_0000, 5, !0, 0),
            (0x31_1000, 6, !0, 1),
            (0x31_2000, 7, !0, 2),
        ];
        fill(&mut p, &l, q, &reqs);
        // A cycle: the last one's tail never comes, its next goes back.
        let mut cyclic = p.clone();
        cyclic.write_u64(q + l.qh_ptail, 0x50_0000);
        cyclic.write_u64(0x31_2000 + l.req_queue + l.qe_next, 0x31_0000 + l.req_queue);
        let e = expected(&target(&cyclic), &l, WORKER, [None; 2], 100);
        assert_eq!(e.stop, Some(Stop::Cycle(0x31_0000 + l.req_queue)));
        assert_eq!(e.posted.len(), 3);
        // A pointer into unmapped memory.
        let mut wild = p.clone();
        wild.write_u64(0x31_0000 + l.req_queue + l.qe_next, 0x77_0000);
        let e = expected(&target(&wild), &l, WORKER, [None; 2], 100);
        assert!(matches!(e.stop, Some(Stop::Unreadable(_))), "{:?}", e.stop);
        assert_eq!(e.posted.len(), 1);
        // NULL and misaligned pointers.
        for bad in [0u64, 0x31_0003] {
            let mut b = p.clone();
            b.write_u64(0x31_0000 + l.req_queue + l.qe_next, bad);
            let e = expected(&target(&b), &l, WORKER, [None; 2], 100);
            assert!(
                matches!(e.stop, Some(Stop::BadPointer(_))),
                "{bad:#x}: {:?}",
                e.stop
            );
        }
        // The cap.
        let e = expected(&target(&p), &l, WORKER, [None; 2], 2);
        assert_eq!(e.stop, Some(Stop::Limit(2)));
        assert_eq!(e.posted.len(), 2);
        // A hash pointer to nowhere.
        let mut h = p.clone();
        h.write_u64(WORKER + l.worker_tm + l.tm_hash, 0x99_0000);
        let e = expected(&target(&h), &l, WORKER, [None; 2], 100);
        assert!(matches!(e.stop, Some(Stop::Unreadable(_))), "{:?}", e.stop);
        // An unreadable worker.
        let e = expected(&target(&p), &l, 0x66_0000, [None; 2], 100);
        assert!(e.stop.is_some());
        assert!(e.posted.is_empty());
    }

    #[test]
    fn every_bit_flip_of_the_queues_ends_promptly() {
        let l = layout();
        let mut p = empty_worker(&l);
        let wild = WORKER + l.worker_tm + l.tm_wildcard + l.rq_queue;
        fill(
            &mut p,
            &l,
            wild,
            &[(0x30_0000, 1, 2, 1), (0x30_1000, 3, 4, 4)],
        );
        fill(
            &mut p,
            &l,
            bucket(&l, 5),
            &[(0x31_0000, 5, !0, 0), (0x31_1000, 6, !0, 3)],
        );
        let words = [
            wild + l.qh_head,
            wild + l.qh_ptail,
            bucket(&l, 5) + l.qh_head,
            bucket(&l, 5) + l.qh_ptail,
            0x30_0000 + l.req_queue,
            0x31_0000 + l.req_queue,
            WORKER + l.worker_tm + l.tm_hash,
        ];
        for w in words {
            for bit in 0..64 {
                let mut b = p.clone();
                let mut v = [0u8; 8];
                assert!(crate::access::ProcessAccess::fetch(&b, w, &mut v));
                b.write_u64(w, u64::from_ne_bytes(v) ^ (1 << bit));
                let t = target(&b);
                let e = expected(&t, &l, WORKER, [None; 2], 1000);
                assert!(e.posted.len() <= 1000);
                assert!(t.fetches() <= 2 + 1001, "{w:#x} bit {bit}: {}", t.fetches());
            }
        }
    }

    /// Puts descriptors (address, flags, length, payload offset, tag,
    /// header length field) on the unexpected list, in arrival order.
    fn unexpected_list(
        p: &mut FakeProcess,
        l: &UcxLayout,
        descs: &[(u64, u16, u32, u32, u64, u64)],
    ) {
        let head = WORKER + l.worker_tm + l.tm_unexpected;
        let link = l.rd_tag_list + RDESC_ALL_LIST * l.list_size;
        let mut prev = head;
        for &(d, flags, length, payload, tag, hdr_len) in descs {
            p.map(d, vec![0; l.descriptor_read() as usize]);
            p.write_u16(d + l.rd_flags, flags);
            p.write_u32(d + l.rd_length, length);
            p.write_u32(d + l.rd_payload, payload);
            p.write_u64(d + l.rd_size, tag);
            let off = if u64::from(flags) & rdesc_flags::RNDV != 0 {
                l.rts_size
            } else {
                l.ef_total
            };
            p.write_u64(d + l.rd_size + off, hdr_len);
            p.write_u64(prev + l.list_next, d + link);
            p.write_u64(d + link, prev);
            prev = d + link;
        }
        p.write_u64(prev + l.list_next, head);
        p.write_u64(head, prev);
    }

    #[test]
    fn unexpected_messages_in_arrival_order_with_their_lengths() {
        let l = layout();
        let mut p = empty_worker(&l);
        let only = (rdesc_flags::EAGER | rdesc_flags::EAGER_ONLY) as u16;
        let first = rdesc_flags::EAGER as u16;
        let sync = (rdesc_flags::EAGER | rdesc_flags::EAGER_ONLY | rdesc_flags::EAGER_SYNC) as u16;
        let rndv = rdesc_flags::RNDV as u16;
        unexpected_list(
            &mut p,
            &l,
            &[
                (0x40_0000, only, 8 + 64, 8, 99, 0),
                (0x40_1000, rndv, 41, 41, 5, 400_000),
                (0x40_2000, first, 8000, 24, 6, 100_000),
                (0x40_3000, sync, 24 + 4, 24, 7, 0),
                (0x40_4000, 0, 0, 0, 8, 0),
            ],
        );
        let t = target(&p);
        let (u, stop) = unexpected(&t, &l, WORKER, 100);
        assert_eq!(stop, None);
        // The head's link, then one read per descriptor.
        assert_eq!(t.fetches(), 1 + 5);
        let got: Vec<_> = u
            .iter()
            .map(|m| (m.tag, m.protocol, m.length, m.sync))
            .collect();
        assert_eq!(
            got,
            [
                (99, Protocol::EagerOnly, Some(64), false),
                (5, Protocol::Rendezvous, Some(400_000), false),
                (6, Protocol::EagerFirst, Some(100_000), false),
                (7, Protocol::EagerOnly, Some(4), true),
                (8, Protocol::Other(0), None, false),
            ]
        );
        // A cycle and the cap end the walk.
        let link = l.rd_tag_list + RDESC_ALL_LIST * l.list_size;
        let mut c = p.clone();
        c.write_u64(0x40_2000 + link + l.list_next, 0x40_0000 + link);
        let (u, stop) = unexpected(&target(&c), &l, WORKER, 100);
        assert_eq!(stop, Some(Stop::Cycle(0x40_0000 + link)));
        assert_eq!(u.len(), 3);
        let (u, stop) = unexpected(&target(&p), &l, WORKER, 2);
        assert_eq!(stop, Some(Stop::Limit(2)));
        assert_eq!(u.len(), 2);
        // An empty list.
        let (u, stop) = unexpected(&target(&empty_worker(&l)), &l, WORKER, 10);
        assert!(u.is_empty() && stop.is_none());
    }

    #[test]
    fn a_worker_at_the_top_of_the_address_space_is_a_bad_pointer() {
        // A corrupt worker pointer puts the unexpected list's head past
        // the end of the address space: a stop, not an overflow.
        let l = layout();
        let p = empty_worker(&l);
        let (u, stop) = unexpected(&target(&p), &l, u64::MAX - 8, 10);
        assert!(u.is_empty());
        assert!(matches!(stop, Some(Stop::BadPointer(_))), "{stop:?}");
    }
}
