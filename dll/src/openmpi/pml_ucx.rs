//! Open MPI's `pml ucx` (4.1 and 5.0): it keeps no queues of its own, so
//! its pending operations are read from UCX's worker
//! (`ompi_pml_ucx.ucp_worker`, [`crate::ucx`]) and decoded by its tag
//! layout (`pml_ucx_request.h`): MPI tag 24 bits | source 20 | context 20,
//! high to low, the mask saying which of them a receive matches. The
//! context is the communicator's `c_contextid` in 4.1 and its `c_index` in
//! 5.0 ([`TagContext`]); the rest is the same in both.
//!
//! Sends come from UCX's request pool ([`crate::ucx::sends`]): a send's tag
//! names its communicator (its source field is the sender's own rank), its
//! endpoint its destination: the member of the communicator whose
//! `ompi_proc_t` holds that endpoint (`proc_endpoints`, as
//! `mca_pml_ucx_get_ep` put it there). The function a send completes with
//! (`send.cb`) says how Open MPI started it, and so where its MPI request
//! is: right behind the UCP request for `MPI_Isend`, the persistent
//! request for `MPI_Start`, none for a blocking `MPI_Ssend`.
//!
//! For the backend: each communicator's queue made from one read of the
//! worker per stop, with what it cannot list said.

use crate::ucx::operations::{self, Tag};
use crate::ucx::version_name;
use std::collections::HashMap;

use crate::access::{ImageAccess, ProcessAccess};
use crate::by_key::ByKey;
use crate::iteration::CommInfo;
use crate::target::Spans;
use crate::target::Target;
use crate::types::{ty, Missing};
use crate::ucx::layout::SendLayout;
use crate::ucx::layout::UcxLayout;
use crate::ucx::matching;
use crate::ucx::sends;
use crate::walk::{AddrSet, Stop, MAX_LIST_ITEMS};

use mqs_abi::{OpClass, OpStatus, PendingOperation};

use crate::iteration::{Context, Queue, QueueOf, Setup};
use crate::messages;

use super::communicators::Comm;
use super::groups::{self, Member};
use super::layout::Layout;
use super::lists::{self, FreeListSpec};
use super::{keep_tag, OpenMpi, Pending};

/// The PML's module, a data symbol, and the field that holds the worker.
pub const SYM_MODULE: &str = "ompi_pml_ucx";
pub const MODULE_TYPE: &str = "mca_pml_ucx_module_t";
pub const MODULE_WORKER: &str = "ucp_worker";
/// The class of every `ompi_request_t`: a nonblocking receive's MPI
/// request lies right after its UCP request and was constructed with it.
pub const SYM_REQUEST_CLASS: &str = "ompi_request_t_class";
pub const REQUEST_TYPE: &str = "ompi_request_t";
pub const REQUEST_CALLBACK_DATA: &str = "req_complete_cb_data";

/// The tag's fields, low to high (`PML_UCX_CONTEXT_BITS`,
/// `PML_UCX_RANK_BITS`; the MPI tag takes the 24 bits left).
const CONTEXT_BITS: u32 = 20;
const RANK_BITS: u32 = 20;
const CONTEXT_MASK: u64 = (1 << CONTEXT_BITS) - 1;
const SOURCE_MASK: u64 = ((1 << RANK_BITS) - 1) << CONTEXT_BITS;
/// `PML_UCX_TAG_MASK`: the mask bits of a receive for a specific tag (bit
/// 63 is in every mask, to keep internal negative tags apart).
const TAG_MASK: u64 = 0x7fff_ff00_0000_0000;

/// Which field of the communicator the tag's context is
/// (`PML_UCX_MAKE_SEND_TAG`, `PML_UCX_MAKE_RECV_TAG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagContext {
    /// `c_contextid` (4.1: a 32-bit id, the communicator table's index).
    ContextId,
    /// `c_index` (5.0: the table's index, local to the process; 5.0's
    /// `c_contextid` is the 128-bit extended id, which the tag cannot hold).
    Index,
}

impl TagContext {
    /// From the communicator's DWARF (`index`: where
    /// `ompi_communicator_t` has `c_index`, if it does). An Open MPI 5
    /// (`major` from the PML component's version) whose communicator lacks
    /// it cannot be decoded.
    pub fn resolve(index: Option<u64>, major: Option<i64>) -> Result<TagContext, Missing> {
        match (index, major) {
            (Some(_), _) => Ok(TagContext::Index),
            (None, Some(m)) if m >= 5 => Err(Missing::Field(COMM_TYPE, COMM_INDEX)),
            (None, _) => Ok(TagContext::ContextId),
        }
    }

    /// The field's name.
    pub fn field(self) -> &'static str {
        match self {
            TagContext::ContextId => COMM_CONTEXTID,
            TagContext::Index => COMM_INDEX,
        }
    }

    /// The context a communicator's operations carry in their tags: its
    /// [`Comm::id`], which is `c_index` where the type has it and
    /// `c_contextid` otherwise, the field this tag layout names either way.
    pub fn of(self, comm: &Comm) -> u64 {
        comm.id
    }
}

pub const COMM_TYPE: &str = "ompi_communicator_t";
pub const COMM_INDEX: &str = "c_index";
pub const COMM_CONTEXTID: &str = "c_contextid";

/// Decodes a receive's tag and mask (a message's tag with a full mask).
pub fn decode(tag: u64, mask: u64) -> Tag {
    let shift = CONTEXT_BITS + RANK_BITS;
    Tag {
        context: tag & CONTEXT_MASK,
        source: (mask & SOURCE_MASK == SOURCE_MASK)
            .then_some(((tag & SOURCE_MASK) >> CONTEXT_BITS) as i64),
        // An arithmetic shift: negative MPI tags keep their sign.
        tag: (mask & TAG_MASK != 0).then_some((tag as i64) >> shift),
    }
}

/// Messages a matched probe took out of UCX's lists (`MPI_Mprobe`,
/// `MPI_Improbe`): Open MPI keeps each in an `ompi_message_t` from this
/// free list until `MPI_Mrecv`, its `req_ptr` UCX's descriptor.
pub const SYM_MESSAGES: &str = "ompi_message_free_list";
pub const MESSAGE_TYPE: &str = "ompi_message_t";
pub const MESSAGE_COMM: &str = "comm";
pub const MESSAGE_REQ: &str = "req_ptr";
pub const LIFO_TYPE: &str = "opal_lifo_t";
pub const LIFO_HEAD: &str = "opal_lifo_head";
pub const LIFO_GHOST: &str = "opal_lifo_ghost";
/// The head is an `opal_counted_pointer_t`, a union whose `data` struct
/// holds the item pointer beside a counter (in an order of its own).
pub const COUNTED_TYPE: &str = "opal_counted_pointer_t";
pub const COUNTED_ITEM: &str = "data.item";

/// Where the messages a matched probe holds are, and their layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Messages {
    /// `&ompi_message_free_list`.
    pub free_list: u64,
    pub size: u64,
    pub comm: u64,
    pub req_ptr: u64,
    /// `opal_lifo_t`, the free list's first member (so at its offset 0):
    /// the free elements' stack; `lifo_head` is where its top item's
    /// pointer lies.
    pub lifo_head: u64,
    pub lifo_ghost: u64,
}

fn resolve_messages<I: ImageAccess>(image: &I) -> Result<Messages, Missing> {
    let free_list = image
        .find_symbol(SYM_MESSAGES)
        .ok_or(Missing::Symbol(SYM_MESSAGES))?;
    let m = ty(image, MESSAGE_TYPE)?;
    let lifo = ty(image, LIFO_TYPE)?;
    let counted = ty(image, COUNTED_TYPE)?;
    Ok(Messages {
        free_list,
        size: m.size()?,
        comm: m.field(MESSAGE_COMM)?,
        req_ptr: m.field(MESSAGE_REQ)?,
        lifo_head: lifo.field(LIFO_HEAD)? + counted.field(COUNTED_ITEM)?,
        lifo_ghost: lifo.field(LIFO_GHOST)?,
    })
}

/// The functions Open MPI has UCX call when a send completes, by how it
/// started the send (`pml_ucx.c`, `pml_ucx_request.c`; the same in 4.1
/// and 5.0).
pub const FN_SEND_NONBLOCKING: [&str; 2] = [
    "mca_pml_ucx_send_completion",
    "mca_pml_ucx_send_nbx_completion",
];
pub const FN_SEND_PERSISTENT: &str = "mca_pml_ucx_psend_completion";
pub const FN_SEND_BLOCKING: &str = "mca_pml_ucx_send_completion_empty";
pub const FN_SEND_BUFFERED: [&str; 2] = [
    "mca_pml_ucx_bsend_completion",
    "mca_pml_ucx_bsend_nbx_completion",
];

/// How Open MPI started a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// `MPI_Isend` and its kin: the MPI request is right behind the UCP one.
    Nonblocking,
    /// `MPI_Start` of a persistent send: the request behind points to it.
    Persistent,
    /// A blocking `MPI_Ssend` (or `MPI_Send` where UCX lacks
    /// `ucp_tag_send_nbr`): no MPI request.
    Blocking,
    /// `MPI_Bsend`: complete for MPI, its copy in flight.
    Buffered,
}

/// Where each send completion function is, as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completions(pub Vec<(u64, Started)>);

impl Completions {
    fn resolve<I: ImageAccess>(image: &I) -> Completions {
        let named = FN_SEND_NONBLOCKING
            .iter()
            .map(|f| (*f, Started::Nonblocking))
            .chain([
                (FN_SEND_PERSISTENT, Started::Persistent),
                (FN_SEND_BLOCKING, Started::Blocking),
            ])
            .chain(FN_SEND_BUFFERED.iter().map(|f| (*f, Started::Buffered)));
        Completions(
            named
                .filter_map(|(name, how)| Some((image.find_function(name)?, how)))
                .collect(),
        )
    }

    /// How the send that completes with `callback` was started.
    pub fn of(&self, callback: u64) -> Option<Started> {
        self.0
            .iter()
            .find(|(at, _)| *at == callback && callback != 0)
            .map(|(_, how)| *how)
    }
}

/// Where an `ompi_proc_t` keeps its endpoints: the `proc_endpoints` array,
/// which ends where `padding` begins (its length,
/// `OMPI_PROC_ENDPOINT_TAG_MAX`, and the PML's slot in it are configure's
/// choice, in no type: every slot is compared).
pub const PROC_TYPE: &str = "ompi_proc_t";
pub const PROC_ENDPOINTS: &str = "proc_endpoints";
pub const PROC_PADDING: &str = "padding";

/// `ompi_proc_t.proc_endpoints`: offset and number of slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEndpoints {
    pub offset: u64,
    pub count: u64,
}

fn resolve_endpoints<I: ImageAccess>(image: &I, pointer: u64) -> Result<ProcEndpoints, Missing> {
    let p = ty(image, PROC_TYPE)?;
    let offset = p.field(PROC_ENDPOINTS)?;
    let end = p.field(PROC_PADDING)?;
    let count = end.saturating_sub(offset) / pointer.max(1);
    if count == 0 || count > 64 {
        return Err(Missing::Field(PROC_TYPE, PROC_ENDPOINTS));
    }
    Ok(ProcEndpoints { offset, count })
}

/// What reading pml ucx's sends needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReading {
    pub layout: SendLayout,
    pub endpoints: ProcEndpoints,
    pub completions: Completions,
}

/// What reading pml ucx needs, resolved when a process is found to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmlUcx {
    pub layout: UcxLayout,
    /// What the tag's context field holds.
    pub context: TagContext,
    /// `&ompi_pml_ucx.ucp_worker`.
    pub worker_at: u64,
    /// `ompi_request_t_class` and where an object keeps its class: tells a
    /// nonblocking receive (an MPI request behind its UCP request) from a
    /// blocking one (on the stack, no MPI request).
    pub request_class: Option<(u64, u64)>,
    /// `ompi_request_t.req_complete_cb_data`: a persistent receive's
    /// started request points back at the persistent request (the handle
    /// the user waits on) through it.
    pub callback_data: Option<u64>,
    /// UCX's version, from the library's code.
    pub version: Option<[u32; 3]>,
    /// Messages held by matched probes, or why they cannot be read.
    pub messages: Result<Messages, Missing>,
    /// Sends in UCX's request pool, or why they cannot be read.
    pub sends: Result<SendReading, Missing>,
}

impl PmlUcx {
    /// "UCX 1.13.1" (or "UCX (version unknown)").
    pub fn name(&self) -> String {
        version_name(self.version)
    }
}

/// Resolves what pml ucx needs, or says plainly why it cannot be read:
/// "UCX 1.13.1 not supported: field recv.tag.sn of ucp_request_t missing".
/// `ompi` is Open MPI's version, from the PML component.
pub fn resolve<I: ImageAccess, P: ProcessAccess + ?Sized>(
    image: &I,
    t: &Target<'_, P>,
    layout: &Layout,
    ompi: Option<(i64, i64, i64)>,
) -> Result<PmlUcx, String> {
    let version = crate::ucx::version_of(image, t);
    let unsupported = |m: Missing| crate::ucx::unreadable(version, m);
    crate::ucx::check_version(version)?;
    let context = TagContext::resolve(layout.comm.index, ompi.map(|v| v.0)).map_err(|m| {
        let (a, b, c) = ompi.unwrap_or_default();
        format!("Open MPI {a}.{b}.{c}'s pml ucx not supported: {m} missing")
    })?;
    let module = image
        .find_symbol(SYM_MODULE)
        .ok_or(Missing::Symbol(SYM_MODULE))
        .map_err(unsupported)?;
    let worker = ty(image, MODULE_TYPE)
        .and_then(|m| m.field(MODULE_WORKER))
        .map_err(unsupported)?;
    let ucx = UcxLayout::resolve(image).map_err(unsupported)?;
    let request_class = layout
        .obj_class
        .and_then(|off| Some((image.find_symbol(SYM_REQUEST_CLASS)?, off)));
    Ok(PmlUcx {
        layout: ucx,
        context,
        worker_at: module + worker,
        request_class,
        callback_data: ty(image, REQUEST_TYPE)
            .ok()
            .and_then(|r| r.opt(REQUEST_CALLBACK_DATA)),
        version,
        messages: resolve_messages(image),
        sends: SendLayout::resolve(image).and_then(|layout| {
            Ok(SendReading {
                layout,
                endpoints: resolve_endpoints(image, u64::from(t.sizes.pointer))?,
                completions: Completions::resolve(image),
            })
        }),
    })
}

/// One operation read from UCX, keyed by its communicator's context id.
#[derive(Debug, Clone)]
pub enum Op {
    Recv {
        posted: matching::Posted,
        decoded: Tag,
        /// The MPI request the UCP one stands for.
        mpi_request: MpiRequest,
        /// Its place in UCX's matching order on its communicator (from 1).
        number: usize,
    },
    Unexpected {
        message: matching::Unexpected,
        decoded: Tag,
    },
    /// A message a matched probe took (`ompi_message_t` at `holder`),
    /// waiting for `MPI_Mrecv`.
    Probed {
        message: matching::Unexpected,
        decoded: Tag,
        holder: u64,
    },
    /// A send UCX's request pool holds.
    Send {
        send: sends::Send,
        decoded: Tag,
        mpi_request: SendRequest,
        /// Its destination's rank in the communicator, once found from its
        /// endpoint ([`peers`]); None when no member holds it.
        peer: Option<i64>,
    },
}

/// The MPI request a send's UCP request stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendRequest {
    /// A nonblocking send's, right behind it.
    Plain(u64),
    /// The persistent request that started it (`MPI_Start`).
    Persistent(u64),
    /// None: a blocking send.
    Blocking,
    /// `MPI_Bsend`'s: complete already; this is its copy in flight.
    Buffered,
    /// Cannot tell (its completion function is none of pml ucx's known).
    Unknown,
}

/// The MPI request a receive's UCP request stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiRequest {
    /// A nonblocking receive's, right behind it.
    Plain(u64),
    /// The persistent request that started it (`MPI_Start`), which the
    /// one behind it points back to: the handle the user has.
    Persistent(u64),
    /// None: a blocking receive's UCP request, on the caller's stack.
    Blocking,
    /// Cannot tell (`ompi_request_t_class` or the object's class field
    /// not found).
    Unknown,
}

/// What one stop's reading of the worker found, by context id.
#[derive(Debug, Default)]
pub struct Scan {
    pub posted: ByKey<Op>,
    pub unexpected: ByKey<Op>,
    /// Messages matched probes hold, by communicator address.
    pub probed: ByKey<Op>,
    pub posted_stop: Option<Stop>,
    pub unexpected_stop: Option<Stop>,
    /// The worker's count of expected requests, where the walk found
    /// another number.
    pub disagrees: Option<(u64, usize)>,
    /// The worker could not be found (`ucp_worker` NULL or unreadable).
    pub no_worker: Option<String>,
    /// Sends in UCX's request pool, by context id, and why the walk of the
    /// pool ended early.
    pub sends: ByKey<Op>,
    pub sends_stop: Option<Stop>,
    /// The context runs UCX's new protocols: no send is found.
    pub new_protocols: bool,
}

/// Reads the worker's expected and unexpected queues once, and the
/// messages matched probes hold.
pub fn scan<P: ProcessAccess + ?Sized>(t: &Target<'_, P>, pml: &PmlUcx, ompi: &Layout) -> Scan {
    let mut out = Scan::default();
    let worker = match t.read_ptr(pml.worker_at) {
        Ok(w) if w != 0 => w,
        Ok(_) => {
            out.no_worker = Some("ompi_pml_ucx.ucp_worker is NULL".to_string());
            return out;
        }
        Err(e) => {
            out.no_worker = Some(format!("ompi_pml_ucx.ucp_worker: {e}"));
            return out;
        }
    };
    let tail = [pml.request_class.map(|(_, off)| off), pml.callback_data];
    let expected = matching::expected(t, &pml.layout, worker, tail, MAX_LIST_ITEMS);
    out.posted_stop = expected.stop;
    out.disagrees = expected.disagrees.map(|n| (n, expected.posted.len()));
    let mut numbers: HashMap<u64, usize> = HashMap::new();
    for posted in expected.posted {
        let decoded = decode(posted.tag, posted.mask);
        let number = numbers.entry(decoded.context).or_default();
        *number += 1;
        let number = *number;
        let mpi_request = match (pml.request_class, posted.tail) {
            (Some((class, _)), [Some(found), handle]) if found == class => {
                match handle.filter(|&h| h != 0) {
                    Some(persistent) => MpiRequest::Persistent(persistent),
                    None => MpiRequest::Plain(posted.request + pml.layout.req_size),
                }
            }
            (Some(_), _) => MpiRequest::Blocking,
            (None, _) => MpiRequest::Unknown,
        };
        out.posted.push(
            decoded.context,
            Op::Recv {
                posted,
                decoded,
                mpi_request,
                number,
            },
        );
    }
    let (unexpected, stop) = matching::unexpected(t, &pml.layout, worker, MAX_LIST_ITEMS);
    out.unexpected_stop = stop;
    for message in unexpected {
        let decoded = decode(message.tag, !0);
        out.unexpected
            .push(decoded.context, Op::Unexpected { message, decoded });
    }
    if let Ok(r) = &pml.sends {
        let found = sends::held(
            t,
            &r.layout,
            worker,
            [pml.callback_data, None],
            MAX_LIST_ITEMS,
        );
        out.sends_stop = found.stop;
        out.new_protocols = found.new_protocols;
        for send in found.sends {
            let decoded = decode(send.tag, !0);
            let mpi_request = match r.completions.of(send.callback) {
                Some(Started::Nonblocking) => SendRequest::Plain(send.request + r.layout.req_size),
                Some(Started::Persistent) => match send.tail[0].filter(|&h| h != 0) {
                    Some(handle) => SendRequest::Persistent(handle),
                    None => SendRequest::Plain(send.request + r.layout.req_size),
                },
                Some(Started::Blocking) => SendRequest::Blocking,
                Some(Started::Buffered) => SendRequest::Buffered,
                None => SendRequest::Unknown,
            };
            out.sends.push(
                decoded.context,
                Op::Send {
                    send,
                    decoded,
                    mpi_request,
                    peer: None,
                },
            );
        }
    }
    if let Ok(m) = &pml.messages {
        for (holder, comm, message) in probed(t, pml, ompi, m) {
            let decoded = decode(message.tag, !0);
            out.probed.push(
                comm,
                Op::Probed {
                    message,
                    decoded,
                    holder,
                },
            );
        }
    }
    out
}

/// The messages matched probes hold: every `ompi_message_t` of the free
/// list that is not on its stack of free ones, with a communicator and a
/// UCX descriptor, as (holder, communicator, message). Nothing when the
/// free stack cannot be walked whole (which are free would be a guess).
fn probed<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    pml: &PmlUcx,
    ompi: &Layout,
    m: &Messages,
) -> Vec<(u64, u64, matching::Unexpected)> {
    let mut free = AddrSet::default();
    let ghost = m.free_list + m.lifo_ghost;
    let Ok(mut cur) = t.read_ptr(m.free_list + m.lifo_head) else {
        return Vec::new();
    };
    while cur != ghost {
        if !free.insert(cur) || free.len() > MAX_LIST_ITEMS {
            return Vec::new();
        }
        match t.read_ptr(cur.saturating_add(ompi.list.item_next)) {
            Ok(next) => cur = next,
            Err(_) => return Vec::new(),
        }
    }
    let spec = FreeListSpec {
        list: &ompi.list,
        free_list: &ompi.free_list,
        obj_class: ompi.obj_class,
    };
    let mut held = Vec::new();
    let _ = lists::free_list(
        t,
        spec,
        m.free_list,
        &Spans::whole(m.size),
        MAX_LIST_ITEMS,
        |at, v| {
            if free.contains(&at) {
                return;
            }
            if let (Ok(comm), Ok(desc)) = (v.ptr(m.comm), v.ptr(m.req_ptr)) {
                if comm != 0 && desc != 0 {
                    held.push((at, comm, desc));
                }
            }
        },
    );
    held.into_iter()
        .filter_map(|(at, comm, desc)| {
            let message = matching::descriptor(t, &pml.layout, desc).ok()?;
            Some((at, comm, message))
        })
        .collect()
}

/// The ranks in `comm` of the destinations of `ops`' sends, found from
/// their endpoints: each member of its remote group (the local group of an
/// intracommunicator) whose `ompi_proc_t` holds one of the endpoints, in
/// any slot of `proc_endpoints`. A member Open MPI has not made a proc for
/// yet (a sentinel) has no endpoint. Reads each member's endpoints once,
/// and stops when every endpoint is placed.
pub fn peers<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    ompi: &Layout,
    e: &ProcEndpoints,
    comm: &Comm,
    ops: &mut [Op],
) {
    let mut wanted: HashMap<u64, Option<i64>> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Send { send, .. } if send.ep != 0 => Some((send.ep, None)),
            _ => None,
        })
        .collect();
    if wanted.is_empty() {
        return;
    }
    let group = comm
        .addr
        .checked_add(ompi.comm.remote_group)
        .ok_or(crate::target::ReadError::OutOfRange)
        .and_then(|a| t.read_ptr(a));
    let Ok(members) = group.and_then(|g| groups::group_members(t, ompi, g, 0)) else {
        return;
    };
    let psize = u64::from(t.sizes.pointer);
    let bytes = e.count * psize;
    let mut left = wanted.len();
    for (rank, member) in members.into_iter().enumerate() {
        let Member::Ptr(proc_) = member else {
            continue;
        };
        if proc_ & 1 != 0 {
            continue;
        }
        let Ok(v) = proc_
            .checked_add(e.offset)
            .ok_or(crate::target::ReadError::OutOfRange)
            .and_then(|a| t.check_ptr(a, t.ptr_align(), bytes))
            .and_then(|a| t.view(a, bytes))
        else {
            continue;
        };
        for slot in 0..e.count {
            let Ok(ep) = v.ptr(slot * psize) else {
                continue;
            };
            if let Some(found @ None) = wanted.get_mut(&ep) {
                *found = Some(rank as i64);
                left -= 1;
            }
        }
        if left == 0 {
            break;
        }
    }
    for op in ops {
        if let Op::Send { send, peer, .. } = op {
            *peer = wanted.get(&send.ep).copied().flatten();
        }
    }
}

impl Op {
    /// The MPI tag, for the filter of Open MPI's own operations.
    pub fn tag(&self) -> Option<i64> {
        match self {
            Op::Recv { decoded, .. }
            | Op::Unexpected { decoded, .. }
            | Op::Probed { decoded, .. }
            | Op::Send { decoded, .. } => decoded.tag,
        }
    }

    pub fn to_operation(&self, comm: &Comm, ucx: &str) -> PendingOperation {
        let global = |s: i64| comm.peer_global(s);
        let (op, lines) = match self {
            Op::Recv {
                posted,
                decoded,
                mpi_request,
                number,
            } => {
                let request = match mpi_request {
                    MpiRequest::Plain(r) => mqs_abi::request_line("receive", *r),
                    MpiRequest::Persistent(r) => mqs_abi::request_line("persistent receive", *r),
                    MpiRequest::Unknown => format!("UCP request at {:#x}", posted.request),
                    MpiRequest::Blocking => format!(
                        "{}UCP request on the stack at {:#x}",
                        mqs_abi::BLOCKING_RECEIVE,
                        posted.request
                    ),
                };
                let order = operations::posted_line(posted, *number, ucx, "");
                (
                    operations::posted(posted, decoded, global),
                    vec![request, order],
                )
            }
            Op::Probed {
                message,
                decoded,
                holder,
            } => (
                operations::message(message, decoded, global, OpStatus::Complete),
                operations::probe_lines(message, *holder, ucx),
            ),
            Op::Unexpected { message, decoded } => (
                operations::message(message, decoded, global, OpStatus::Pending),
                operations::arrival_lines(message, ucx, ""),
            ),
            Op::Send {
                send,
                decoded,
                mpi_request,
                peer,
            } => {
                let request = match mpi_request {
                    SendRequest::Plain(r) => mqs_abi::request_line("send", *r),
                    SendRequest::Persistent(r) => mqs_abi::request_line("persistent send", *r),
                    SendRequest::Blocking => "blocking send: no MPI request".to_string(),
                    SendRequest::Buffered => "buffered send: complete for MPI".to_string(),
                    SendRequest::Unknown => "MPI request not known".to_string(),
                };
                let mut lines = vec![request];
                lines.extend(operations::send_lines(send, ucx, peer.is_some()));
                let mut op = operations::send(send, decoded, *peer, global);
                op.system_buffer = *mpi_request == SendRequest::Buffered;
                (op, lines)
            }
        };
        PendingOperation {
            extra_text: lines.into(),
            ..op
        }
    }
}

/// What a send queue under pml ucx cannot show: said for an empty queue
/// (never an empty queue that would look complete), and as the last line
/// of a queue with sends ([`SENDS_NOT_LISTED`]).
pub const SENDS_NOT_LISTED: &str = "sends completed locally under UCX are not listed";
pub const SENDS_WHY: &str = "an eager send that completed at once has no request, and a \
     blocking MPI_Send's request lies on its caller's stack, in no list; none of UCX's \
     requests is a send on this communicator";

// The glue of the backend: a queue of a communicator as pml ucx shows it.

impl OpenMpi {
    /// A queue of `comm` under pml ucx, from the worker read once per
    /// stop (again when a communicator is asked for twice).
    pub(super) fn read_ucx<P: ProcessAccess + ?Sized>(
        &mut self,
        cx: &Context,
        t: &Target<'_, P>,
        pml: &PmlUcx,
        comm: &Comm,
        class: OpClass,
    ) -> Setup<Self> {
        let ucx = pml.name();
        let context = pml.context.of(comm);
        let layout = &self.layout;
        let scan = self.cache.ucx.get(
            |s| match class {
                OpClass::PendingSends => &s.sends,
                OpClass::PendingReceives => &s.posted,
                OpClass::UnexpectedMessages => &s.unexpected,
            },
            &[context],
            || scan(t, pml, layout),
        );
        if let Some(why) = &scan.no_worker {
            messages::set_no_information_reason(&format!("pml ucx ({ucx}): {why}"));
            return Ok(None);
        }
        let posted = match class {
            OpClass::PendingSends => {
                let ops = scan.sends.take(context);
                let (stop, new_protocols) = (scan.sends_stop, scan.new_protocols);
                return Ok(Some(send_queue(
                    cx,
                    t,
                    layout,
                    pml,
                    comm,
                    (ops, stop, new_protocols),
                )));
            }
            OpClass::PendingReceives => true,
            OpClass::UnexpectedMessages => false,
        };
        let (ops, stop) = if posted {
            // Receives in UCX's order, then the messages matched probes
            // took (matched already, as ob1's DLL view shows them).
            let mut ops = scan.posted.take(context);
            ops.extend(scan.probed.take(comm.addr));
            (ops, scan.posted_stop)
        } else {
            (scan.unexpected.take(context), scan.unexpected_stop)
        };
        let mut queue = queue(cx, ops, stop);
        if let (true, Some((counted, read))) = (posted, scan.disagrees) {
            queue.unseen = Some(format!(
                "pml ucx ({ucx}): the worker counts {counted} posted receives, the walk found {read}"
            ));
            queue.partial = Some(format!("UCX counts {counted} posted receives, {read} read"));
        }
        Ok(Some(queue))
    }
}

/// `comm`'s sends in UCX's request pool as taken out of this stop's scan
/// (with why its walk ended early, and whether UCX runs its new
/// protocols), their destinations found from their endpoints; what the
/// pool cannot hold said for an empty queue, and as the last line
/// otherwise.
fn send_queue<P: ProcessAccess + ?Sized>(
    cx: &Context,
    t: &Target<'_, P>,
    layout: &Layout,
    pml: &PmlUcx,
    comm: &Comm,
    (mut ops, stop, new_protocols): (Vec<Op>, Option<Stop>, bool),
) -> QueueOf<OpenMpi> {
    let ucx = pml.name();
    let why = match &pml.sends {
        Err(m) => format!("{ucx}'s request pool cannot be read ({m} missing)"),
        Ok(_) if new_protocols => format!(
            "{ucx} runs its new protocols (UCX_PROTO_ENABLE), whose requests \
             mark no tag send"
        ),
        Ok(_) => SENDS_WHY.to_string(),
    };
    if let Ok(r) = &pml.sends {
        peers(t, layout, &r.endpoints, comm, &mut ops);
    }
    let mut queue = queue(cx, ops, stop);
    queue.unseen = Some(format!("pml ucx ({ucx}): {}: {why}", SENDS_NOT_LISTED));
    queue.partial = Some(SENDS_NOT_LISTED.to_string());
    queue
}

/// A queue of UCX's operations, Open MPI's internal ones left out unless
/// asked for.
fn queue(cx: &Context, ops: Vec<Op>, stop: Option<Stop>) -> QueueOf<OpenMpi> {
    let items = ops
        .into_iter()
        .filter(|op| op.tag().is_none_or(|tag| keep_tag(cx, tag)))
        .map(Pending::Ucx)
        .collect();
    Queue::new(Vec::new(), items, stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PML_UCX_MAKE_RECV_TAG`, as Open MPI 4.1 builds a receive's tag and
    /// mask (-1: MPI_ANY_SOURCE, -2: MPI_ANY_TAG, as in mpi.h).
    fn make_recv(tag: i64, src: i64, ctx: u64) -> (u64, u64) {
        let mut mask = if src == -1 {
            0x8000_0000_000f_ffff
        } else {
            0x8000_00ff_ffff_ffff
        };
        let mut t = (((src as u64) & 0xfffff) << 20) | ctx;
        if tag != -2 {
            mask |= TAG_MASK;
            t |= (tag as u64) << 40;
        }
        (t, mask)
    }

    /// `PML_UCX_MAKE_SEND_TAG`.
    fn make_send(tag: i64, rank: u64, ctx: u64) -> u64 {
        ((tag as u64) << 40) | (rank << 20) | ctx
    }

    #[test]
    fn receive_tags_decode_into_communicator_source_and_tag() {
        let cases = [
            ((7, 1, 3), (3, Some(1), Some(7))),
            ((8, -1, 0), (0, None, Some(8))),
            ((-2, 0, 5), (5, Some(0), None)),
            ((-2, -1, 0xfffff), (0xfffff, None, None)),
            ((0x7f_ffff, 0xfffff, 1), (1, Some(0xfffff), Some(0x7f_ffff))),
            // Collectives' negative tags keep their sign.
            ((-12, 1, 2), (2, Some(1), Some(-12))),
        ];
        for ((tag, src, ctx), (c, s, t)) in cases {
            let (bits, mask) = make_recv(tag, src, ctx);
            let d = decode(bits, mask);
            assert_eq!(
                d,
                Tag {
                    context: c,
                    source: s,
                    tag: t
                },
                "tag {tag} src {src} ctx {ctx}"
            );
        }
    }

    #[test]
    fn the_context_is_c_index_where_the_communicator_has_it() {
        assert_eq!(
            TagContext::resolve(None, Some(4)),
            Ok(TagContext::ContextId)
        );
        assert_eq!(TagContext::resolve(None, None), Ok(TagContext::ContextId));
        assert_eq!(
            TagContext::resolve(Some(48), Some(5)),
            Ok(TagContext::Index)
        );
        assert_eq!(TagContext::resolve(Some(48), None), Ok(TagContext::Index));
        let missing = TagContext::resolve(None, Some(5)).unwrap_err();
        assert_eq!(missing.to_string(), "field c_index of ompi_communicator_t");
        assert_eq!(TagContext::Index.field(), "c_index");
        assert_eq!(TagContext::ContextId.field(), "c_contextid");
    }

    #[test]
    fn message_tags_decode_with_a_full_mask() {
        for (tag, rank, ctx) in [(99, 1, 0), (5, 0xfffff, 0xfffff), (-17, 3, 4), (0, 0, 0)] {
            let d = decode(make_send(tag, rank, ctx), !0);
            assert_eq!(d.context, ctx);
            assert_eq!(d.source, Some(rank as i64));
            assert_eq!(d.tag, Some(tag));
        }
    }
}
