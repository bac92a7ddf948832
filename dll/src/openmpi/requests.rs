//! PML requests: decoding one, scanning the request free lists, and turning
//! a request into a pending operation.

use std::collections::HashMap;

use mqs_abi::{OpStatus, PendingOperation};

use crate::access::ProcessAccess;
use crate::by_key::ByKey;
use crate::iteration::CommInfo;
use crate::openmpi::communicators::Comm;
use crate::openmpi::layout::{Layout, Ob1Layout};
use crate::openmpi::lists;
use crate::target::{ReadError, Sizes, Spans, Target, View};
use crate::walk::{self, Stop};

/// `ompi_request_type_t`: OMPI_REQUEST_PML.
const OMPI_REQUEST_PML: i64 = 0;
/// `ompi_request_state_t`.
pub const STATE_INVALID: i64 = 0;
pub const STATE_INACTIVE: i64 = 1;
pub const STATE_ACTIVE: i64 = 2;
pub const STATE_CANCELLED: i64 = 3;
/// `mca_pml_base_request_type_t`.
const PML_SEND: u64 = 1;
const PML_RECV: u64 = 2;
/// `MPI_ANY_TAG` and `MPI_ANY_SOURCE` in Open MPI.
pub const ANY_TAG: i64 = -1;
pub const ANY_SOURCE: i64 = -1;
/// `REQUEST_COMPLETED` in `req_complete` (a pointer-sized flag in 4.x).
const REQUEST_COMPLETED: u64 = 1;

/// What kind of PML request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Send,
    Recv,
    /// IPROBE, PROBE, IMPROBE, MPROBE (3..=6): receives that match but
    /// do not consume.
    Probe(u64),
    Other(u64),
}

impl Kind {
    fn from_raw(v: u64) -> Kind {
        match v {
            PML_SEND => Kind::Send,
            PML_RECV => Kind::Recv,
            3..=6 => Kind::Probe(v),
            other => Kind::Other(other),
        }
    }

    pub fn is_receive(self) -> bool {
        matches!(self, Kind::Recv | Kind::Probe(_))
    }
}

/// One decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub addr: u64,
    /// Its list item's `next` pointer as read (the list it is on: a free
    /// list's, or one of ob1's queues).
    pub link: Option<u64>,
    pub kind: Kind,
    pub ompi_type: i64,
    pub state: i64,
    pub complete: bool,
    pub pml_complete: Option<bool>,
    pub comm: u64,
    pub peer: i64,
    pub tag: i64,
    pub buffer: u64,
    pub count: u64,
    pub datatype: u64,
    pub sequence: Option<u64>,
    pub st_source: i64,
    pub st_tag: i64,
    pub st_ucount: Option<u64>,
    pub st_cancelled: Option<bool>,
    pub send_buffer: u64,
    pub bytes_packed: u64,
    pub send_mode: i64,
    pub ob1_matched: Option<bool>,
    pub ob1_delivered: Option<u64>,
    pub ob1_received: Option<u64>,
}

/// Gaps between needed fields shorter than this are read through rather
/// than split into another fetch. A fetch costs the debugger a callback, a
/// handle check and a cache lookup, far more than copying a few hundred
/// bytes; and a second fetch per request would take a posted queue of
/// 100,000 receives past the per-call budget ([`crate::target::Budget`]).
/// So a request (the convertor between its base fields and its
/// send/receive fields is 264 bytes in Open MPI 4.1) is read in one span.
pub const MAX_GAP: u64 = 512;

/// The parts of a request to read: every field [`decode`] uses (ob1's too
/// when their debug info is there), its list link and its object class.
pub fn spans(layout: &Layout, sizes: &Sizes) -> Spans {
    let r = &layout.request;
    let ptr = u64::from(sizes.pointer);
    let size_t = u64::from(sizes.size_t);
    let status = r.status;
    let mut fields = vec![
        (layout.list.item_next, ptr),
        (r.pml_type, 4),
        (r.ompi_type, 4),
        (r.state, 4),
        (r.complete, ptr),
        (r.comm, ptr),
        (r.peer, 4),
        (r.tag, 4),
        (r.addr, ptr),
        (r.count, size_t),
        (r.datatype, ptr),
        (status.saturating_add(r.status_source), 4),
        (status.saturating_add(r.status_tag), 4),
        (r.send_addr, ptr),
        (r.send_bytes_packed, size_t),
        (r.send_mode, 4),
    ];
    let optional = [
        layout.obj_class.map(|o| (o, ptr)),
        r.pml_complete.map(|o| (o, 4)),
        r.sequence.map(|o| (o, 8)),
        r.status_ucount.map(|o| (status.saturating_add(o), size_t)),
        r.status_cancelled.map(|o| (status.saturating_add(o), 4)),
        r.recv_bytes_packed.map(|o| (o, size_t)),
    ];
    fields.extend(optional.into_iter().flatten());
    if let Ok(ob1) = &layout.ob1 {
        let ob1_fields = [
            ob1.send_req_recv.map(|o| (o, ptr)),
            ob1.send_bytes_delivered.map(|o| (o, size_t)),
            ob1.recv_bytes_received.map(|o| (o, size_t)),
        ];
        fields.extend(ob1_fields.into_iter().flatten());
    }
    Spans::cover(&fields, MAX_GAP)
}

/// Decodes a request from a view of its [`spans`] (views cut short lose
/// only the optional fields).
pub fn decode<P: ProcessAccess + ?Sized>(
    view: &View<'_, '_, P>,
    layout: &Layout,
) -> Result<Request, ReadError> {
    let r = &layout.request;
    let kind = Kind::from_raw(view.u32(r.pml_type)?);
    let status = r.status;
    let ob1: Option<&Ob1Layout> = layout.ob1.as_ref().ok();
    let is_send = kind == Kind::Send;
    Ok(Request {
        addr: view.addr,
        link: view.ptr(layout.list.item_next).ok(),
        kind,
        ompi_type: view.i32(r.ompi_type)?,
        state: view.i32(r.state)?,
        complete: view.ptr(r.complete)? == REQUEST_COMPLETED,
        pml_complete: r
            .pml_complete
            .and_then(|o| view.i32(o).ok())
            .map(|v| v != 0),
        comm: view.ptr(r.comm)?,
        peer: view.i32(r.peer)?,
        tag: view.i32(r.tag)?,
        buffer: view.ptr(r.addr)?,
        count: view.size_t(r.count)?,
        datatype: view.ptr(r.datatype)?,
        sequence: r.sequence.and_then(|o| view.u64(o).ok()),
        st_source: view.i32(status + r.status_source)?,
        st_tag: view.i32(status + r.status_tag)?,
        st_ucount: r.status_ucount.and_then(|o| view.size_t(status + o).ok()),
        st_cancelled: r
            .status_cancelled
            .and_then(|o| view.i32(status + o).ok())
            .map(|v| v != 0),
        send_buffer: if is_send {
            view.ptr(r.send_addr).unwrap_or(0)
        } else {
            0
        },
        bytes_packed: if is_send {
            view.size_t(r.send_bytes_packed).unwrap_or(0)
        } else {
            r.recv_bytes_packed
                .and_then(|o| view.size_t(o).ok())
                .unwrap_or(0)
        },
        send_mode: if is_send {
            view.i32(r.send_mode).unwrap_or(-1)
        } else {
            -1
        },
        ob1_matched: if is_send {
            ob1.and_then(|o| o.send_req_recv)
                .and_then(|off| view.ptr(off).ok())
                .map(|p| p != 0)
        } else {
            None
        },
        ob1_delivered: if is_send {
            ob1.and_then(|o| o.send_bytes_delivered)
                .and_then(|off| view.size_t(off).ok())
        } else {
            None
        },
        ob1_received: if is_send {
            None
        } else {
            ob1.and_then(|o| o.recv_bytes_received)
                .and_then(|off| view.size_t(off).ok())
        },
    })
}

/// Whether a request is a live point-to-point request worth showing.
pub fn is_live(req: &Request) -> bool {
    req.ompi_type == OMPI_REQUEST_PML && matches!(req.state, STATE_ACTIVE | STATE_CANCELLED)
}

/// All live requests of one free list, grouped by communicator.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub by_comm: ByKey<Request>,
    pub stop: Option<Stop>,
}

/// Scans one of the request free lists (`mca_pml_base_send_requests` or
/// `..._recv_requests`): every request ever allocated, kept if live.
pub fn scan_free_list<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    fl_addr: u64,
) -> Scan {
    let mut scan = Scan::default();
    let spans = spans(layout, &t.sizes);
    let spec = lists::FreeListSpec {
        list: &layout.list,
        free_list: &layout.free_list,
        obj_class: layout.obj_class,
    };
    scan.stop = lists::free_list(t, spec, fl_addr, &spans, walk::MAX_LIST_ITEMS, |_, view| {
        if let Ok(req) = decode(view, layout) {
            if is_live(&req) {
                scan.by_comm.push(req.comm, req);
            }
        }
    });
    // Held for the rest of the stop: without the spare room of growing.
    scan.by_comm.shrink_to_fit();
    scan
}

/// A datatype's name and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datatype {
    pub name: String,
    pub size: u64,
}

/// Datatypes read so far (they are few and shared by many requests).
pub type DatatypeCache = HashMap<u64, Option<Datatype>>;

/// Reads a datatype's name and size, cached.
pub fn datatype<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    cache: &mut DatatypeCache,
    addr: u64,
) -> Option<Datatype> {
    read_datatype(t, layout, cache, addr).clone()
}

/// Reads a datatype's name and size into the cache, once; what the cache
/// holds for it.
pub fn read_datatype<'c, P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    cache: &'c mut DatatypeCache,
    addr: u64,
) -> &'c Option<Datatype> {
    if cache.contains_key(&addr) {
        return &cache[&addr];
    }
    let d = &layout.datatype;
    let read = || -> Result<Datatype, ReadError> {
        let at = t.check_ptr(addr, t.ptr_align(), d.read_size)?;
        let v = t.view(at, d.read_size)?;
        Ok(Datatype {
            name: v.chars(d.name, d.name_len)?,
            size: v.size_t(d.size)?,
        })
    };
    cache.entry(addr).or_insert(read().ok())
}

/// `mca_pml_base_send_mode_t` in words.
pub fn send_mode_name(mode: i64) -> String {
    match mode {
        0 => "synchronous".into(),
        1 => "complete (internal)".into(),
        2 => "buffered".into(),
        3 => "ready".into(),
        4 => "standard".into(),
        other => format!("unknown ({other})"),
    }
}

/// "N x NAME", or what is known of the datatype.
pub fn count_line(count: u64, dt: Option<&Datatype>, dt_addr: u64) -> String {
    match dt {
        Some(d) if !d.name.is_empty() => format!("{count} x {}", d.name),
        Some(d) => format!("{count} x derived datatype of {} bytes", d.size),
        None => format!("{count} x datatype at {dt_addr:#x} (unreadable)"),
    }
}

/// Whether a tag is internal (collectives and the like use negative tags).
pub fn is_internal_tag(tag: i64) -> bool {
    tag < 0 && tag != ANY_TAG
}

/// The pending operation for a request on `comm`. `order` is a line that
/// says how the queue is ordered; `extra` any further note.
pub fn to_operation(
    req: &Request,
    comm: &Comm,
    dt: Option<&Datatype>,
    order: Option<String>,
) -> PendingOperation {
    let unit = dt.map(|d| d.size);
    let desired_length = unit
        .and_then(|u| u.checked_mul(req.count))
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
        .unwrap_or(-1);
    let mut op = PendingOperation {
        status: OpStatus::Pending,
        desired_local_rank: req.peer,
        desired_global_rank: comm.peer_global(req.peer),
        desired_tag: (req.tag != ANY_TAG).then_some(req.tag),
        desired_length,
        system_buffer: false,
        buffer: req.buffer,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: mqs_abi::Lines::new(),
    };
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut lines = Vec::new();
    match req.kind {
        Kind::Send => {
            lines.push(mqs_abi::request_line("send", req.addr));
            lines.push(format!("mode: {}", send_mode_name(req.send_mode)));
            lines.push(count_line(req.count, dt, req.datatype));
            // Buffered sends (and packed non-contiguous data) send from a
            // buffer of the MPI's, not the user's.
            op.system_buffer =
                req.send_mode == 2 || (req.send_buffer != 0 && req.send_buffer != req.buffer);
            op.actual_local_rank = req.peer;
            op.actual_global_rank = op.desired_global_rank;
            op.actual_tag = req.tag;
            op.actual_length = clamp(req.bytes_packed);
            op.status = if req.complete {
                OpStatus::Complete
            } else if req.ob1_matched == Some(true) {
                OpStatus::Matched
            } else {
                OpStatus::Pending
            };
            lines.push(match op.status {
                OpStatus::Complete => "complete, not yet waited for or freed".to_string(),
                OpStatus::Matched => match req.ob1_delivered {
                    Some(n) => format!(
                        "matched by the receiver; {n} of {} bytes sent",
                        req.bytes_packed
                    ),
                    None => "matched by the receiver".to_string(),
                },
                _ => "waiting for the receiver".to_string(),
            });
        }
        _ => {
            let what = match req.kind {
                Kind::Probe(3) => "iprobe",
                Kind::Probe(4) => "probe",
                Kind::Probe(5) => "improbe",
                Kind::Probe(6) => "mprobe",
                _ => "receive",
            };
            lines.push(mqs_abi::request_line(what, req.addr));
            lines.push(count_line(req.count, dt, req.datatype));
            let matched = req.st_tag != ANY_TAG;
            op.status = if req.complete {
                OpStatus::Complete
            } else if matched {
                OpStatus::Matched
            } else {
                OpStatus::Pending
            };
            if op.status != OpStatus::Pending {
                op.actual_local_rank = req.st_source;
                op.actual_global_rank = comm.peer_global(req.st_source);
                op.actual_tag = req.st_tag;
                op.actual_length = match (op.status, req.st_ucount) {
                    (OpStatus::Complete, Some(n)) => clamp(n),
                    _ => clamp(req.bytes_packed),
                };
                lines.push(match (op.status, req.ob1_received) {
                    (OpStatus::Complete, _) => "complete, not yet waited for or freed".to_string(),
                    (_, Some(n)) => format!("matched; {n} of {} bytes received", req.bytes_packed),
                    _ => "matched; data still arriving".to_string(),
                });
            }
        }
    }
    if req.state == STATE_CANCELLED || req.st_cancelled == Some(true) {
        lines.push("cancelled".to_string());
    }
    if let Some(order) = order {
        lines.push(order);
    }
    op.extra_text = lines.into();
    op
}
