//! Unexpected messages: what arrived before a matching receive was posted.
//!
//! ob1 keeps them per peer of each communicator: `unexpected_frags` (in
//! arrival order, which within one peer is sequence order) and
//! `frags_cant_match` (arrived out of sequence, waiting for an earlier one;
//! a ring of rings ordered by sequence). Each is an `mca_pml_ob1_recv_frag_t`
//! holding a copy of the match header and the data that came with it: the
//! whole message for an eager send, only the rendezvous header (which
//! carries the full length) for a large one.

use mqs_abi::{OpStatus, PendingOperation};

use crate::access::ProcessAccess;
use crate::iteration::CommInfo;
use crate::openmpi::communicators::Comm;
use crate::openmpi::layout::{Layout, Ob1Layout};
use crate::openmpi::lists;
use crate::openmpi::ob1_comm::{list_is_empty, peer_view, Ob1Comm};
use crate::target::{ReadError, Sizes, Spans, Target, View};
use crate::walk::{self, Stop};

/// ob1 header types (`MCA_BTL_TAG_PML + n`), also the BTL tags its
/// fragments are sent with.
pub(crate) const HDR_MATCH: u64 = 0x41;
pub(crate) const HDR_RNDV: u64 = 0x42;
pub(crate) const HDR_RGET: u64 = 0x43;

/// One unexpected message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frag {
    pub addr: u64,
    pub hdr_type: u64,
    pub ctx: u64,
    pub src: i64,
    pub tag: i64,
    pub seq: u64,
    /// Full message length in bytes.
    pub length: u64,
    /// Bytes of the message that arrived with the fragment.
    pub arrived: u64,
    /// Where those bytes are (the MPI's buffer), 0 if none.
    pub buffer: u64,
    /// On `frags_cant_match`: arrived ahead of its turn.
    pub out_of_sequence: bool,
}

/// Segments read with a fragment's header: eager and rendezvous fragments
/// of the shared-memory and TCP transports have one; more are read apart.
const SEGMENTS_WITH_HEADER: u64 = 2;

/// The parts of a fragment to read: its list link, the match or rendezvous
/// header's fields, the segment count and the first segments (a fragment is
/// 656 bytes in Open MPI 4.1, mostly segment and buffer arrays).
pub fn frag_spans(layout: &Layout, ob1: &Ob1Layout, sizes: &Sizes) -> Spans {
    let ptr = u64::from(sizes.pointer);
    let hdr = ob1.frag_hdr;
    let segments = SEGMENTS_WITH_HEADER.min(ob1.frag_max_segments);
    let fields = [
        (layout.list.item_next, ptr),
        (hdr.saturating_add(ob1.hdr_type), 1),
        (hdr.saturating_add(ob1.hdr_ctx), 2),
        (hdr.saturating_add(ob1.hdr_src), 4),
        (hdr.saturating_add(ob1.hdr_tag), 4),
        (hdr.saturating_add(ob1.hdr_seq), 2),
        (hdr.saturating_add(ob1.rndv_msg_length), 8),
        (ob1.frag_num_segments, u64::from(sizes.size_t)),
        (ob1.frag_segments, segments.saturating_mul(ob1.seg_size)),
    ];
    Spans::cover(&fields, crate::openmpi::requests::MAX_GAP)
}

/// Reads and decodes the fragment at `addr` (its [`frag_spans`]).
pub fn read_frag<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    ob1: &Ob1Layout,
    spans: &Spans,
    addr: u64,
    out_of_sequence: bool,
) -> Result<Frag, ReadError> {
    let at = t.check_ptr(addr, t.ptr_align(), ob1.frag_size)?;
    let v = t.view_spans(at, spans)?;
    decode_frag(t, ob1, &v, out_of_sequence)
}

/// Decodes a fragment from a view of its [`frag_spans`]; segments beyond
/// those are read now.
pub fn decode_frag<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    ob1: &Ob1Layout,
    v: &View<'_, '_, P>,
    out_of_sequence: bool,
) -> Result<Frag, ReadError> {
    let at = t.check_ptr(v.addr, t.ptr_align(), ob1.frag_size)?;
    let hdr = ob1.frag_hdr;
    let hdr_type = v.u8(hdr + ob1.hdr_type)?;
    let nseg = v.size_t(ob1.frag_num_segments)?.min(ob1.frag_max_segments);
    // The segments not read with the header, in one more fetch.
    let rest = if nseg > SEGMENTS_WITH_HEADER {
        let first = ob1.frag_segments + SEGMENTS_WITH_HEADER * ob1.seg_size;
        let len = (nseg - SEGMENTS_WITH_HEADER) * ob1.seg_size;
        Some(t.view_spans(at, &Spans::cover(&[(first, len)], 0))?)
    } else {
        None
    };
    let mut total: u64 = 0;
    for i in 0..nseg {
        let off = ob1.frag_segments + i * ob1.seg_size + ob1.seg_len;
        let len = match &rest {
            Some(r) if i >= SEGMENTS_WITH_HEADER => r.u64(off)?,
            _ => v.u64(off)?,
        };
        total = total.saturating_add(len);
    }
    let seg0 = if nseg > 0 {
        v.ptr(ob1.frag_segments + ob1.seg_addr)?
    } else {
        0
    };
    let (length, arrived, header_len) = match hdr_type {
        HDR_MATCH => {
            let payload = total.saturating_sub(ob1.match_hdr_len);
            (payload, payload, ob1.match_hdr_len)
        }
        HDR_RNDV | HDR_RGET => {
            let full = v.u64(hdr + ob1.rndv_msg_length)?;
            let arrived = if hdr_type == HDR_RNDV {
                total.saturating_sub(ob1.rndv_hdr_len).min(full)
            } else {
                0
            };
            (full, arrived, ob1.rndv_hdr_len)
        }
        _ => (total, total, 0),
    };
    Ok(Frag {
        addr: at,
        hdr_type,
        ctx: v.u16(hdr + ob1.hdr_ctx)?,
        src: v.i32(hdr + ob1.hdr_src)?,
        tag: v.i32(hdr + ob1.hdr_tag)?,
        seq: v.u16(hdr + ob1.hdr_seq)?,
        length,
        arrived,
        buffer: if seg0 != 0 && arrived > 0 {
            seg0.saturating_add(header_len)
        } else {
            0
        },
        out_of_sequence,
    })
}

/// Every unexpected message of one communicator: peer by peer (in rank
/// order), each peer's in arrival order then its out-of-sequence ones.
pub fn frags<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    ob1: &Ob1Layout,
    oc: &Ob1Comm,
) -> (Vec<Frag>, Option<Stop>) {
    let mut stop = oc.stop;
    let mut out = Vec::new();
    let mut budget = walk::MAX_LIST_ITEMS;
    let spans = frag_spans(layout, ob1, &t.sizes);
    // Fragments in list order, read or not: the first budget error ends
    // them, any other error is noted and skipped.
    let take_all = |read: Vec<(u64, Result<Frag, ReadError>)>,
                    stop: &mut Option<Stop>,
                    out: &mut Vec<Frag>| {
        for (item, frag) in read {
            match frag {
                Ok(f) => out.push(f),
                Err(ReadError::Budget) => {
                    *stop = stop.or(Some(Stop::Budget));
                    return;
                }
                Err(_) => *stop = stop.or(Some(Stop::Unreadable(item))),
            }
        }
    };
    for &(_, proc_addr) in &oc.procs {
        if t.exhausted() {
            stop = stop.or(Some(Stop::Budget));
            break;
        }
        let Some(view) = peer_view(t, ob1, proc_addr, &mut stop) else {
            continue;
        };
        if list_is_empty(&view, layout, ob1.proc_unexpected_frags) != Some(true) {
            // Each fragment is read with its list link: one fetch apiece.
            let mut read = Vec::new();
            let w = lists::opal_list_read(
                t,
                &layout.list,
                proc_addr + ob1.proc_unexpected_frags,
                budget,
                &spans,
                |item, v| read.push((item, v.and_then(|v| decode_frag(t, ob1, &v, false)))),
            );
            budget = budget.saturating_sub(w.items.len());
            stop = stop.or(w.stop);
            take_all(read, &mut stop, &mut out);
        }
        let head = ob1
            .proc_frags_cant_match
            .and_then(|off| view.ptr(off).ok())
            .unwrap_or(0);
        if head != 0 {
            let w = walk::ring(t, head, layout.list.item_next, ob1.frag_size, budget);
            budget = budget.saturating_sub(w.items.len());
            stop = stop.or(w.stop);
            let mut ring_items = w.items.clone();
            // Each element may head a ring of consecutive sequence numbers.
            if let Some(range_off) = ob1.frag_range {
                for &elem in &w.items {
                    let range = t.read_ptr(elem + range_off).unwrap_or(0);
                    if range != 0 {
                        let r = walk::ring(t, range, layout.list.item_next, ob1.frag_size, budget);
                        budget = budget.saturating_sub(r.items.len());
                        stop = stop.or(r.stop);
                        ring_items.extend(r.items);
                    }
                }
            }
            let start = out.len();
            let mut read = Vec::new();
            for &item in &ring_items {
                let frag = read_frag(t, ob1, &spans, item, true);
                let spent = frag == Err(ReadError::Budget);
                read.push((item, frag));
                if spent {
                    break;
                }
            }
            take_all(read, &mut stop, &mut out);
            out[start..].sort_by_key(|f| f.seq);
        }
    }
    (out, stop)
}

/// The pending operation for an unexpected message.
pub fn to_operation(frag: &Frag, comm: &Comm, expected_ctx: Option<u64>) -> PendingOperation {
    let length = i64::try_from(frag.length).unwrap_or(i64::MAX);
    let global = comm.peer_global(frag.src);
    let kind = match frag.hdr_type {
        HDR_MATCH => "eager".to_string(),
        HDR_RNDV => "rendezvous".to_string(),
        HDR_RGET => "rendezvous (RDMA get)".to_string(),
        other => format!("header type {other:#x}"),
    };
    let mut lines = vec![format!("{kind} message, fragment {:#x}", frag.addr)];
    if frag.hdr_type != HDR_MATCH {
        lines.push(format!("{} of {} bytes arrived", frag.arrived, frag.length));
    }
    lines.push(if frag.out_of_sequence {
        format!(
            "sequence {} (out of order: waits for earlier ones)",
            frag.seq
        )
    } else {
        format!("sequence {}", frag.seq)
    });
    if let Some(ctx) = expected_ctx {
        if ctx & 0xffff != frag.ctx {
            lines.push(format!("header names context {}", frag.ctx));
        }
    }
    PendingOperation {
        status: OpStatus::Pending,
        desired_local_rank: frag.src,
        desired_global_rank: global,
        desired_tag: Some(frag.tag),
        desired_length: length,
        system_buffer: true,
        buffer: frag.buffer,
        actual_local_rank: frag.src,
        actual_global_rank: global,
        actual_tag: frag.tag,
        actual_length: length,
        extra_text: lines.into(),
    }
}
