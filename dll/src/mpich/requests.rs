//! MPICH's queues of requests: walking them (bounded, cycle-checked, one
//! fetch per request), decoding a request, and turning what was found into
//! pending operations.
//!
//! - The device's receive queues (4.0): requests linked through
//!   `MPIR_Request.next`, NULL-terminated, in posting (= matching) order
//!   for the posted queue and arrival order for the unexpected one.
//! - The debugger's queues (`MPIR_Sendq` in 4.0, `MPIR_Debugq` in 4.1+):
//!   entries holding the request and its tag, rank and context id, which
//!   MPICH puts at the head of the list: newest first, so they are
//!   reversed here into the order they were made.

use mqs_abi::Part::{Dec, Hex, Lit, Text};
use mqs_abi::{LinesBuf, OpStatus, PendingOperation};

use crate::access::ProcessAccess;
use crate::by_key::ByKey;
use crate::iteration::CommInfo;
use crate::mpich::communicators::Comm;
use crate::mpich::datatypes::{count_line, Datatype};
use crate::mpich::layout::{EntryLayout, Layout, RequestDevice};
use crate::target::{sign_extend, ReadError, Spans, Target, View};
use crate::walk::{AddrSet, Stop, Visited, MAX_LIST_ITEMS};

/// MPICH's `MPI_ANY_SOURCE` and `MPI_ANY_TAG`.
pub const ANY_SOURCE: i64 = -2;
pub const ANY_TAG: i64 = -1;
/// ch3's message types (`dev.state & 3`).
pub const MSG_EAGER: u64 = 1;
pub const MSG_RNDV: u64 = 2;
const MSG_SELF: u64 = 3;
/// ch4's `MPIDIG_REQ_RTS` flag in the active-message request's status.
const CH4_REQ_RTS: u64 = 1 << 7;

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub addr: u64,
    pub kind: i64,
    /// The completion counter: 0 once complete.
    pub cc: i64,
    pub tag: Option<i64>,
    pub rank: Option<i64>,
    pub ctx: Option<u64>,
    pub buffer: Option<u64>,
    pub count: Option<u64>,
    pub datatype: Option<u32>,
    pub st_source: i64,
    pub st_tag: i64,
    pub st_count: Option<u64>,
    pub st_cancelled: bool,
    /// ch3: the message's size in bytes (unexpected messages).
    pub data_size: Option<u64>,
    /// ch3: eager, rendezvous or self message.
    pub msg_type: Option<u64>,
    /// ch4: the active-message extension, to read its flags.
    pub ext: Option<u64>,
}

/// Decodes a request from a view of its first `layout.request.read` bytes.
pub fn decode<P: ProcessAccess + ?Sized>(
    v: &View<'_, '_, P>,
    layout: &Layout,
) -> Result<Request, ReadError> {
    let r = &layout.request;
    let aint = layout.aint_size;
    let ctx_size = layout.comm.ctx_size;
    let count_lo = r.st_count_lo.and_then(|o| v.u32(o).ok());
    let count_hi = r.st_count_hi.and_then(|o| v.u32(o).ok());
    let mut req = Request {
        addr: v.addr,
        kind: v.int(r.kind)?,
        cc: v.int(r.cc)?,
        tag: None,
        rank: None,
        ctx: None,
        buffer: None,
        count: None,
        datatype: None,
        st_source: v.int(r.st_source)?,
        st_tag: v.int(r.st_tag)?,
        st_count: count_lo.map(|lo| lo | (count_hi.unwrap_or(0) >> 1) << 32),
        st_cancelled: count_hi.is_some_and(|hi| hi & 1 != 0),
        data_size: None,
        msg_type: None,
        ext: None,
    };
    match r.device {
        RequestDevice::Ch3 {
            tag,
            rank,
            rank_size,
            ctx,
            user_buf,
            user_count,
            datatype,
            recv_data_sz,
            state,
        } => {
            req.tag = Some(v.i32(tag)?);
            req.rank = Some(sign_extend(v.uint(rank, rank_size)?, rank_size));
            req.ctx = Some(v.uint(ctx, ctx_size)?);
            req.buffer = Some(v.ptr(user_buf)?);
            req.count = Some(v.uint(user_count, aint)?);
            req.datatype = Some(v.u32(datatype)? as u32);
            req.data_size = recv_data_sz.and_then(|o| v.uint(o, aint).ok());
            req.msg_type = state.and_then(|o| v.u32(o).ok()).map(|s| s & 3);
        }
        RequestDevice::Ch4 {
            buffer,
            count,
            datatype,
            source,
            ctx,
            tag,
            ext,
            ..
        } => {
            req.tag = Some(v.i32(tag)?);
            req.rank = Some(v.i32(source)?);
            req.ctx = Some(v.uint(ctx, ctx_size)?);
            req.buffer = Some(v.ptr(buffer)?);
            req.count = Some(v.uint(count, aint)?);
            req.datatype = Some(v.u32(datatype)? as u32);
            req.ext = ext.and_then(|o| v.ptr(o).ok()).filter(|&p| p != 0);
        }
        RequestDevice::None => {}
    }
    Ok(req)
}

/// Reads and decodes the request at `addr` (one fetch).
pub fn read_request<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    addr: u64,
) -> Result<Request, ReadError> {
    let len = layout.request.read;
    let v = t.view(t.check_ptr(addr, t.ptr_align(), len)?, len)?;
    decode(&v, layout)
}

/// One operation found on a queue: its request, and the matching fields
/// the queue entry records (for the debugger's queues).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The request, or why it could not be read.
    pub request: Result<Request, ReadError>,
    pub req_addr: u64,
    pub tag: i64,
    pub rank: i64,
    pub ctx: u64,
    /// From a 4.1+ entry: the buffer and element count it records.
    pub entry_buf: Option<u64>,
    pub entry_count: Option<u64>,
}

/// Everything on one queue, grouped by context id, in queue order.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub by_ctx: ByKey<Found>,
    pub stop: Option<Stop>,
    pub total: usize,
}

impl Scan {
    fn push(&mut self, f: Found) {
        self.total += 1;
        self.by_ctx.push(f.ctx, f);
    }
}

/// Walks a device queue of requests whose head pointer is at `head_at`.
pub fn walk_requests<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    head_at: u64,
) -> Scan {
    // Queues of 100,000s are walked without a set of every address; a
    // cycle (corrupt or changing memory) is walked again with one, to cut
    // the list at its first repeat.
    let scan = walk_requests_with(t, layout, head_at, Visited::brent());
    match scan.stop {
        Some(Stop::Cycle(_)) => walk_requests_with(t, layout, head_at, Visited::exact()),
        _ => scan,
    }
}

fn walk_requests_with<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    head_at: u64,
    mut seen: Visited,
) -> Scan {
    let mut scan = Scan::default();
    let mut cur = match t.read_ptr(head_at) {
        Ok(p) => p,
        Err(e) => {
            scan.stop = Some(Stop::from_read(e, head_at));
            return scan;
        }
    };
    let len = layout.request.read;
    let whole = Spans::whole(len);
    // One buffer for every request of the queue, viewed in place.
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    while cur != 0 {
        if let Err(e) = t.check_ptr(cur, t.ptr_align(), len) {
            scan.stop = Some(Stop::from_read(e, cur));
            break;
        }
        if !seen.insert(cur) {
            scan.stop = Some(Stop::Cycle(cur));
            break;
        }
        if scan.total >= MAX_LIST_ITEMS {
            scan.stop = Some(Stop::Limit(MAX_LIST_ITEMS));
            break;
        }
        if let Err(e) = t.read_into(cur, &mut buf) {
            scan.stop = Some(Stop::from_read(e, cur));
            break;
        }
        let v = t.view_within(cur, &buf, &whole);
        let next = v.ptr(layout.request.next);
        let request = decode(&v, layout);
        let (tag, rank, ctx) = match &request {
            Ok(r) => (
                r.tag.unwrap_or(-1),
                r.rank.unwrap_or(-1),
                r.ctx.unwrap_or(u64::MAX),
            ),
            Err(_) => (-1, -1, u64::MAX),
        };
        scan.push(Found {
            request,
            req_addr: cur,
            tag,
            rank,
            ctx,
            entry_buf: None,
            entry_count: None,
        });
        match next {
            Ok(n) => cur = n,
            Err(e) => {
                scan.stop = Some(Stop::from_read(e, cur));
                break;
            }
        }
    }
    scan
}

/// Walks one of the debugger's queues (`MPIR_Sendq`/`MPIR_Debugq` entries)
/// whose head pointer is at `head_at`: each entry in one fetch, its
/// request in another; returned oldest first.
pub fn walk_entries<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    e: &EntryLayout,
    head_at: u64,
) -> Scan {
    let mut scan = Scan::default();
    let mut cur = match t.read_ptr(head_at) {
        Ok(p) => p,
        Err(err) => {
            scan.stop = Some(Stop::from_read(err, head_at));
            return scan;
        }
    };
    let len = e.size.max(e.next + u64::from(t.sizes.pointer));
    let mut seen = AddrSet::default();
    let mut found = Vec::new();
    while cur != 0 {
        if let Err(err) = t.check_ptr(cur, t.ptr_align(), len) {
            scan.stop = Some(Stop::from_read(err, cur));
            break;
        }
        if !seen.insert(cur) {
            scan.stop = Some(Stop::Cycle(cur));
            break;
        }
        if found.len() >= MAX_LIST_ITEMS {
            scan.stop = Some(Stop::Limit(MAX_LIST_ITEMS));
            break;
        }
        let v = match t.view(cur, len) {
            Ok(v) => v,
            Err(err) => {
                scan.stop = Some(Stop::from_read(err, cur));
                break;
            }
        };
        let fields = (|| -> Result<(u64, i64, i64, u64, u64), ReadError> {
            Ok((
                v.ptr(e.req)?,
                v.int(e.tag)?,
                v.int(e.rank)?,
                // An int in the entry, whatever the context id's own width.
                v.u32(e.ctx)?,
                v.ptr(e.next)?,
            ))
        })();
        let (req_addr, tag, rank, ctx, next) = match fields {
            Ok(f) => f,
            Err(err) => {
                scan.stop = Some(Stop::from_read(err, cur));
                break;
            }
        };
        let request = read_request(t, layout, req_addr);
        if request == Err(ReadError::Budget) {
            scan.stop = Some(Stop::Budget);
            break;
        }
        found.push(Found {
            request,
            req_addr,
            tag,
            rank,
            ctx,
            entry_buf: e.buf.and_then(|o| v.ptr(o).ok()),
            entry_count: e.count.and_then(|o| v.uint(o, 8.min(t.sizes.pointer)).ok()),
        });
        cur = next;
    }
    for f in found.into_iter().rev() {
        scan.push(f);
    }
    scan
}

/// Which queue an operation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Send,
    Posted,
    Unexpected,
}

/// Context of one conversion: the communicator, the datatype, notes.
#[derive(Debug)]
pub struct OpContext<'a> {
    pub comm: &'a Comm,
    pub datatype: Option<&'a Datatype>,
    /// Collective traffic on the communicator's internal context.
    pub internal: bool,
    /// Posted #k in matching order (posted receives).
    pub order: Option<usize>,
    /// A line to add (the ch4 completeness note).
    pub note: Option<&'a str>,
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The pending operation for something found on a queue.
pub fn to_operation(found: &Found, class: Class, cx: &OpContext<'_>) -> PendingOperation {
    let req = found.request.as_ref().ok();
    let comm = cx.comm;
    let rank = found.rank;
    let any_source = class == Class::Posted && rank < 0;
    let local = if any_source { -1 } else { rank };
    let global = if any_source {
        -1
    } else {
        comm.peer_global(rank)
    };
    let tag_wild = class == Class::Posted && found.tag == ANY_TAG;
    let count = req.and_then(|r| r.count).or(found.entry_count);
    let buffer = req.and_then(|r| r.buffer).or(found.entry_buf).unwrap_or(0);
    let datatype = req.and_then(|r| r.datatype);
    let bytes = match (count, cx.datatype) {
        (Some(n), Some(d)) => n.checked_mul(d.size).map(clamp),
        _ => None,
    };
    let complete = req.is_some_and(|r| r.cc == 0);
    let mut op = PendingOperation {
        status: if complete {
            OpStatus::Complete
        } else {
            OpStatus::Pending
        },
        desired_local_rank: local,
        desired_global_rank: global,
        desired_tag: (!tag_wild).then_some(found.tag),
        desired_length: bytes.unwrap_or(-1),
        system_buffer: false,
        buffer,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: mqs_abi::Lines::new(),
    };
    // One buffer for all the lines: an operation of 100,000 is made
    // with one allocation for its text.
    let mut lines = LinesBuf::with_capacity(160);
    let what = match class {
        Class::Send => "send",
        Class::Posted => "receive",
        Class::Unexpected => "unexpected message",
    };
    match req {
        Some(r) => lines.push_parts(&[Lit(what), Lit(" request "), Hex(r.addr)]),
        None => lines.push_parts(&[
            Lit(what),
            Lit(" request "),
            Hex(found.req_addr),
            Lit(" (unreadable)"),
        ]),
    }
    match class {
        Class::Send => {
            if let Some(n) = count {
                count_of(&mut lines, n, cx.datatype, datatype);
            }
            op.actual_local_rank = op.desired_local_rank;
            op.actual_global_rank = op.desired_global_rank;
            op.actual_tag = found.tag;
            op.actual_length = op.desired_length;
            lines.push(if complete {
                "complete, not yet waited for or freed"
            } else {
                "waiting for the receiver"
            });
        }
        Class::Posted => {
            if let Some(n) = count {
                count_of(&mut lines, n, cx.datatype, datatype);
            }
            if let Some(r) = req.filter(|_| complete) {
                op.actual_local_rank = r.st_source;
                op.actual_global_rank = comm.peer_global(r.st_source);
                op.actual_tag = r.st_tag;
                op.actual_length = r.st_count.map(clamp).unwrap_or(-1);
                lines.push("complete, not yet waited for or freed");
            }
            if let Some(k) = cx.order {
                lines.push_parts(&[
                    Lit("posted #"),
                    Dec(k as u64),
                    Lit(" in MPICH matching order"),
                ]);
            }
        }
        Class::Unexpected => {
            // The message is here: its source, tag and (announced) size.
            op.system_buffer = true;
            // ch4: received as bytes into MPICH's own buffer.
            let size = req.and_then(|r| r.data_size).or(count);
            op.desired_length = size.map(clamp).unwrap_or(-1);
            op.actual_local_rank = rank;
            op.actual_global_rank = global;
            op.actual_tag = found.tag;
            op.actual_length = op.desired_length;
            let kind = req.and_then(|r| r.msg_type);
            match (kind, size) {
                (Some(MSG_EAGER), Some(n)) => {
                    lines.push_parts(&[Lit("eager message, all "), Dec(n), Lit(" bytes arrived")])
                }
                (Some(MSG_RNDV), Some(n)) => lines.push_parts(&[
                    Lit("rendezvous message: "),
                    Dec(n),
                    Lit(" bytes announced, sent once matched"),
                ]),
                (Some(MSG_SELF), _) => lines.push("message from this process to itself"),
                (None, Some(n)) if complete => {
                    lines.push_parts(&[Lit("all "), Dec(n), Lit(" bytes arrived")])
                }
                _ => lines.push("message still arriving"),
            }
        }
    }
    if req.is_some_and(|r| r.st_cancelled) {
        lines.push("cancelled");
    }
    if cx.internal {
        lines.push("collective traffic (MPICH-internal context)");
    }
    if let Some(note) = cx.note {
        lines.push(note);
    }
    op.extra_text = lines.finish_first(5);
    op
}

/// "N x TYPE", or, where MPICH records no datatype (4.1+ debugger
/// queue entries), the bare count.
fn count_of(lines: &mut LinesBuf, n: u64, dt: Option<&Datatype>, handle: Option<u32>) {
    match (handle, dt) {
        (Some(_), Some(d)) if !d.name.is_empty() => {
            lines.push_parts(&[Dec(n), Lit(" x "), Text(&d.name)])
        }
        (Some(h), dt) => lines.push(&count_line(n, dt, h)),
        (None, _) => lines.push_parts(&[Dec(n), Lit(" elements (datatype not recorded)")]),
    }
}

/// ch4: whether an unexpected active message is a rendezvous one (its
/// extension's flags say RTS), read on demand.
pub fn ch4_is_rts<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    req: &Request,
) -> Option<bool> {
    let RequestDevice::Ch4 {
        ext_status: Some(off),
        ..
    } = layout.request.device
    else {
        return None;
    };
    let ext = req.ext?;
    let status = t
        .check_ptr(ext, 4, off + 8)
        .and_then(|a| t.read_uint(a + off, 8))
        .ok()?;
    Some(status & CH4_REQ_RTS != 0)
}
