//! MPICH ch3:nemesis's shared-memory transport, read from the receive
//! side: what arrived at this rank and was not handled yet by its
//! progress engine.
//!
//! Every local process owns cells of 64 KiB in one shared region
//! (`MPID_nem_mem_region`). A sender fills one of its free cells (a
//! `MPID_nem_pkt_header_t`: `source`, `dest`, `datalen`, `seqno`; then
//! the payload) and appends it to the receiver's receive queue
//! (`my_recvQ`): cells linked through `next`, relative pointers (offsets
//! from `MPID_nem_asymm_base_addr`, 0 when every process maps the region
//! at the same address; a relative NULL ends the list). The receiver
//! moves `head` to its own `my_head` before it takes cells from there, so
//! the queue starts at whichever of the two is set. A sender that finds
//! the tail taken but has not linked its cell yet leaves it reachable from
//! `tail` only. Each pair of local processes also has a fast box: one cell
//! (a cache line after its `flag`) the sender fills while the flag is 0 and
//! sets the flag after. Per sender, cells carry consecutive `seqno`s
//! (`MPID_nem_recv_seqno[source]` is the next one the receiver handles),
//! whichever way they went: that is the order they are handled in.
//!
//! A cell's payload starts with a ch3 packet (`MPIDI_CH3_Pkt_t`): its type,
//! its match (`tag`, `rank` in the communicator, `context_id`) and the
//! message's size (`data_sz`; a rendezvous request to send announces the
//! full size). Packet types are the values of MPICH 4.0's enumeration,
//! which a debugger cannot be asked for: other versions are not decoded.
//!
//! Every walk is bounded: the queue by a cap and the set of cells seen,
//! the fast boxes by the number of local processes; every rank is checked
//! against the region's counts and every length against the cell.

use crate::access::ProcessAccess;
use crate::mpich::layout::NemesisLayout;
use crate::target::{sign_extend, Spans, Target, View};
use crate::transit::{self, Message, Protocol, Scan};
use crate::walk::{AddrSet, Stop, MAX_LIST_ITEMS};

/// MPICH 4.0's `MPIDI_CH3_Pkt_type_t` values of the packets that start a
/// message (ch3's `mpidpkt.h` with `USE_EAGER_SHORT` and dynamic processes,
/// then nemesis's own after `MPIDI_CH3_PKT_END_CH3`).
const PKT_EAGER_SEND: u64 = 0;
const PKT_EAGERSHORT_SEND: u64 = 1;
const PKT_EAGER_SYNC_SEND: u64 = 2;
const PKT_READY_SEND: u64 = 4;
const PKT_RNDV_REQ_TO_SEND: u64 = 5;
const PKT_LMT_RTS: u64 = 40;

/// `MPID_NEM_CELL_LEN`: a cell's size, header included.
const CELL_LEN: u64 = 64 * 1024;
/// Most processes of a job and of a node believed.
const MAX_PROCS: u64 = 1 << 22;
const MAX_LOCAL: u64 = 1 << 12;

/// The symbols of one process this reader needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NemesisSymbols {
    pub region: Option<u64>,
    pub base: Option<u64>,
    pub seqno: Option<u64>,
}

pub const SYM_REGION: &str = "MPID_nem_mem_region";
pub const SYM_BASE: &str = "MPID_nem_asymm_base_addr";
pub const SYM_SEQNO: &str = "MPID_nem_recv_seqno";

/// One cell found, before it is put in order.
#[derive(Debug, Clone)]
struct Cell {
    at: u64,
    /// The sender's global rank.
    source: u64,
    /// How far after the next expected seqno from its sender.
    ahead: u64,
    datalen: u64,
    fast_box: bool,
    note: Option<&'static str>,
    /// The first bytes of its payload, read with its header: the packet.
    packet: Vec<u8>,
}

/// What a cell's packet says.
enum Packet {
    Message {
        ctx: u64,
        rank: i64,
        tag: i64,
        size: u64,
        protocol: Protocol,
        /// Bytes of the message in this cell, and where they are.
        arrived: u64,
        data: u64,
    },
    /// Not the start of a message (protocol traffic, one-sided, ...).
    Other,
    /// Too short for the packet, or not a packet.
    Short,
}

/// Reads what waits in the transport of a process: its fast boxes and its
/// receive queue, in the order its progress engine would handle them (per
/// sender, by sequence number). Keys are context ids.
pub fn scan<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &NemesisLayout,
    syms: &NemesisSymbols,
    ctx_size: u8,
) -> Scan {
    let mut out = Scan::default();
    let Some(region) = syms.region else {
        out.unlisted.add(transit::not_listed("nemesis"));
        return out;
    };
    let found = match cells(t, n, syms, region) {
        Ok(f) => f,
        Err(s) => {
            out.cut_in("nemesis", s);
            return out;
        }
    };
    if found.netmod {
        out.unlisted
            .add(transit::not_listed("the nemesis netmod (other nodes)"));
    }
    if let Some(s) = found.stop {
        out.cut_in("nemesis", s);
    }
    let mut short = 0usize;
    let mut order = 0u32;
    for c in found.cells {
        match packet(t, n, &c, ctx_size) {
            Packet::Message {
                ctx,
                rank,
                tag,
                size,
                protocol,
                arrived,
                data,
            } => {
                let place = if c.fast_box {
                    "nemesis fast box"
                } else {
                    "nemesis receive queue"
                };
                out.by_key.push(
                    ctx,
                    Message {
                        place,
                        source: rank,
                        tag,
                        length: size,
                        arrived,
                        protocol,
                        seq: None,
                        buffer: if arrived > 0 { data } else { 0 },
                        at: c.at,
                        note: c.note,
                        order,
                    },
                );
                order = order.saturating_add(1);
            }
            Packet::Other => {}
            Packet::Short => short += 1,
        }
    }
    if short > 0 {
        let what = if short == 1 { "cell" } else { "cells" };
        out.unlisted
            .add(format!("{short} nemesis {what} not decoded"));
    }
    out
}

/// The cells found, in order; why the queue's walk ended early; whether
/// the process has peers on other nodes (reached through a netmod).
struct Found {
    cells: Vec<Cell>,
    stop: Option<Stop>,
    netmod: bool,
}

fn cells<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &NemesisLayout,
    syms: &NemesisSymbols,
    region: u64,
) -> Result<Found, Stop> {
    let r = t
        .check_ptr(region, t.ptr_align(), n.region_read)
        .and_then(|a| t.view(a, n.region_read))
        .map_err(|e| Stop::from_read(e, region))?;
    let corrupt = |_| Stop::Corrupt;
    let count = |off: u64| -> Result<u64, Stop> {
        u64::try_from(r.int(off).map_err(corrupt)?).map_err(|_| Stop::Corrupt)
    };
    let num_local = count(n.num_local)?;
    let num_procs = count(n.num_procs)?;
    let local_rank = count(n.local_rank)?;
    if num_local == 0 || num_local > MAX_LOCAL || num_procs < num_local || num_procs > MAX_PROCS {
        return Err(Stop::Corrupt);
    }
    let netmod = r.int(n.ext_procs).map_err(corrupt)? > 0;
    // Global ranks by local rank, and the next seqno by global rank.
    let int = u64::from(t.sizes.int);
    let local_procs = r.ptr(n.local_procs).map_err(corrupt)?;
    let procs = t
        .check_ptr(local_procs, int, num_local * int)
        .and_then(|a| t.view(a, num_local * int))
        .map_err(|e| Stop::from_read(e, local_procs))?;
    let seq_sym = syms.seqno.ok_or(Stop::Corrupt)?;
    let seq_at = t
        .read_ptr(seq_sym)
        .map_err(|e| Stop::from_read(e, seq_sym))?;
    let seqnos = t
        .check_ptr(seq_at, 2, num_procs * 2)
        .and_then(|a| t.view(a, num_procs * 2))
        .map_err(|e| Stop::from_read(e, seq_at))?;
    let expected = |source: u64| -> Option<u64> {
        (source < num_procs)
            .then(|| seqnos.u16(source * 2).ok())
            .flatten()
    };
    let base = match syms.base {
        Some(b) => t.read_ptr(b).map_err(|e| Stop::from_read(e, b))?,
        None => 0,
    };
    // The fast boxes, one per local sender.
    let mut boxed = Vec::new();
    let psize = u64::from(t.sizes.pointer);
    let inbox = r.ptr(n.mailboxes_in).map_err(corrupt)?;
    let boxes = t
        .check_ptr(inbox, psize, num_local * psize)
        .and_then(|a| t.view(a, num_local * psize))
        .map_err(|e| Stop::from_read(e, inbox))?;
    for i in 0..num_local {
        if i == local_rank {
            continue;
        }
        let fbox = boxes.ptr(i * psize).map_err(corrupt)?;
        if fbox == 0 {
            continue;
        }
        let flag = t
            .check_ptr(fbox.saturating_add(n.fbox_flag), 4, int)
            .and_then(|a| t.read_int(a))
            .map_err(|e| Stop::from_read(e, fbox))?;
        if flag == 0 {
            continue;
        }
        let source =
            u64::try_from(procs.int(i * int).map_err(corrupt)?).map_err(|_| Stop::Corrupt)?;
        // The box's cell starts a cache line after its flag, the line
        // `my_head` of a queue starts (`MPID_NEM_CACHE_LINE_LEN`).
        let at = fbox.checked_add(n.q_my_head).ok_or(Stop::Corrupt)?;
        if let (_, Some(c)) = cell(t, n, at, Some((i, source)), None, &expected)? {
            boxed.push(c);
        }
    }
    // The receive queue.
    let queue = r.ptr(n.my_recvq).map_err(corrupt)?;
    let qlen = n.q_head.max(n.q_tail).max(n.q_my_head) + psize;
    let q = t
        .check_ptr(queue, t.ptr_align(), qlen)
        .and_then(|a| t.view(a, qlen))
        .map_err(|e| Stop::from_read(e, queue))?;
    let head = q.ptr(n.q_head).map_err(corrupt)?;
    let my_head = q.ptr(n.q_my_head).map_err(corrupt)?;
    let tail = q.ptr(n.q_tail).map_err(corrupt)?;
    let mut rel = if my_head != 0 { my_head } else { head };
    let mut seen = AddrSet::default();
    let mut queued = Vec::new();
    let mut last = 0;
    let mut stop = None;
    while rel != 0 {
        if !seen.insert(rel) {
            stop = Some(Stop::Cycle(rel));
            break;
        }
        if seen.len() > MAX_LIST_ITEMS {
            stop = Some(Stop::Limit(MAX_LIST_ITEMS));
            break;
        }
        let at = rel.wrapping_add(base);
        match cell(t, n, at, None, None, &expected) {
            Ok((next, found)) => {
                queued.extend(found);
                last = rel;
                rel = next;
            }
            Err(s) => {
                stop = Some(s);
                break;
            }
        }
    }
    // A sender that took the tail and has not linked its cell yet.
    if stop.is_none() && tail != 0 && tail != last && !seen.contains(&tail) {
        let at = tail.wrapping_add(base);
        let note = Some("not linked yet: its writer stopped");
        if let (_, Some(c)) = cell(t, n, at, None, note, &expected)? {
            queued.push(c);
        }
    }
    // Per sender in seqno order: each fast box's cell goes before the
    // first queued cell of its sender that comes after it.
    for c in boxed {
        let at = queued
            .iter()
            .position(|q| q.source == c.source && q.ahead > c.ahead)
            .unwrap_or(queued.len());
        queued.insert(at, c);
    }
    Ok(Found {
        cells: queued,
        stop,
        netmod,
    })
}

/// The cell at `at`, its header and packet in one fetch: its `next`, and
/// the cell with its header checked against the region (None: one the
/// receiver is handling now, or has). A queued cell names its sender by
/// global rank; a fast box's by local rank, `boxed` (the box's local rank
/// and the global rank it stands for).
fn cell<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &NemesisLayout,
    at: u64,
    boxed: Option<(u64, u64)>,
    note: Option<&'static str>,
    expected: &dyn Fn(u64) -> Option<u64>,
) -> Result<(u64, Option<Cell>), Stop> {
    let len = n.cell_payload + n.pkt_size;
    let v = t
        .check_ptr(at, t.ptr_align(), len)
        .and_then(|a| t.view(a, len))
        .map_err(|e| Stop::from_read(e, at))?;
    let corrupt = |_| Stop::Corrupt;
    let next = v.ptr(n.cell_next).map_err(corrupt)?;
    let named = u64::try_from(v.int(n.cell_source).map_err(corrupt)?).map_err(|_| Stop::Corrupt)?;
    let source = match boxed {
        Some((local, global)) if named == local => global,
        // A box holding another sender's cell.
        Some(_) => return Err(Stop::Corrupt),
        None => named,
    };
    let seqno = v.u16(n.cell_seqno).map_err(corrupt)?;
    let datalen = u64::try_from(sign_extend(
        v.uint(n.cell_datalen, t.sizes.pointer).map_err(corrupt)?,
        t.sizes.pointer,
    ))
    .map_err(|_| Stop::Corrupt)?;
    let first = expected(source).ok_or(Stop::Corrupt)?;
    let ahead = seqno.wrapping_sub(first) & 0xffff;
    if ahead >= 0x8000 {
        // Behind the next expected: the receiver took it already (a fast
        // box is freed only once its packet is handled).
        return Ok((next, None));
    }
    let packet = v
        .bytes(n.cell_payload, n.pkt_size)
        .map_err(corrupt)?
        .to_vec();
    Ok((
        next,
        Some(Cell {
            at,
            source,
            ahead,
            datalen,
            fast_box: boxed.is_some(),
            note,
            packet,
        }),
    ))
}

/// The packet a cell starts with, never read past the cell's data.
fn packet<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &NemesisLayout,
    c: &Cell,
    ctx_size: u8,
) -> Packet {
    if c.datalen < n.pkt_size || c.datalen > CELL_LEN.saturating_sub(n.cell_payload) {
        return Packet::Short;
    }
    let payload = c.at.saturating_add(n.cell_payload);
    let v = t.view_within(payload, &c.packet, &Spans::whole(n.pkt_size));
    let Ok(kind) = v.u32(0) else {
        return Packet::Short;
    };
    let (fields, protocol) = match kind {
        PKT_EAGER_SEND | PKT_EAGER_SYNC_SEND | PKT_READY_SEND => (n.send, Protocol::Eager),
        PKT_EAGERSHORT_SEND => (n.short, Protocol::Eager),
        PKT_RNDV_REQ_TO_SEND => (n.send, Protocol::Rendezvous),
        PKT_LMT_RTS => (n.lmt_rts, Protocol::Rendezvous),
        _ => return Packet::Other,
    };
    let psize = t.sizes.pointer;
    decode(&v, n, fields, protocol, kind, c, payload, ctx_size, psize).unwrap_or(Packet::Short)
}

#[allow(clippy::too_many_arguments)]
fn decode<P: ProcessAccess + ?Sized>(
    v: &View<'_, '_, P>,
    n: &NemesisLayout,
    (matched, data_sz): (u64, u64),
    protocol: Protocol,
    kind: u64,
    c: &Cell,
    payload: u64,
    ctx_size: u8,
    psize: u8,
) -> Option<Packet> {
    let p = n.parts;
    let tag = v.i32(matched + p.tag).ok()?;
    let rank = sign_extend(v.uint(matched + p.rank, p.rank_size).ok()?, p.rank_size);
    let ctx = v.uint(matched + p.ctx, ctx_size).ok()?;
    // `data_sz` is an intptr_t.
    let size = u64::try_from(sign_extend(v.ptr(data_sz).ok()?, psize)).ok()?;
    // The data after the packet in this cell (a short eager message's is
    // inside the packet).
    let (arrived, data) = match (protocol, kind) {
        (Protocol::Eager, PKT_EAGERSHORT_SEND) => (size, 0),
        (Protocol::Eager, _) => (
            size.min(c.datalen - n.pkt_size),
            payload.saturating_add(n.pkt_size),
        ),
        _ => (0, 0),
    };
    Some(Packet::Message {
        ctx,
        rank,
        tag,
        size,
        protocol,
        arrived,
        data,
    })
}
