//! MPICH 4.0's ch4 `ucx` netmod: it keeps no queues of its own (a receive
//! goes straight to `ucp_tag_recv_nbx`, an unexpected message stays in
//! UCX), so its posted receives and unexpected messages are read from UCX's
//! workers, one per VCI (`MPIDI_UCX_global.ctx[vci].worker`, `num_vnis` of
//! them), with the walks of [`crate::ucx`], and decoded by the netmod's tag
//! layout (`ucx_types.h`, `MPIDI_UCX_init_tag`, `MPIDI_UCX_recv_tag`,
//! `MPIDI_UCX_tag_mask` in `ucx_impl.h`), high to low:
//!
//! ```text
//! context id (16) | source rank (RANK_BITS) | tag (64 - 16 - RANK_BITS)
//! ```
//!
//! The context is the receiver's `recvcontext_id` (plus 1 for MPICH's
//! collectives, as everywhere in MPICH); the source is the sender's rank in
//! the communicator. A receive's mask clears the rank field for
//! MPI_ANY_SOURCE and the tag's usable bits for MPI_ANY_TAG; it always
//! clears MPICH's two tag error bits, so no receive's mask is full and
//! every one lands in UCX's wildcard queue.
//!
//! `RANK_BITS` is `--with-ch4-ucx-rankbits` (16 to 32, 16 by default), a
//! macro no type records: the netmod tells MPICH its tag width
//! (`MPIR_Process.tag_bits`), which is the tag field's width when that is
//! below 31 and 31 for the default 16 rank bits (and for 17, which this DLL
//! cannot tell from 16: it takes the default).
//!
//! For the backend: what the workers hold of each communicator's queue,
//! from one read of them per stop (`UcxFound`).

use crate::ucx::operations::{self, Tag};
use crate::ucx::version_name;
use std::collections::HashMap;

use mqs_abi::{OpStatus, PendingOperation};

use crate::access::{ImageAccess, ProcessAccess};
use crate::by_key::ByKey;
use crate::iteration::CommInfo;
use crate::target::Target;
use crate::types::{ty, Missing};
use crate::ucx::layout::{names as ucx_names, UcxLayout};
use crate::ucx::matching;
use crate::walk::{Stop, MAX_LIST_ITEMS};

use super::communicators::Comm;
use super::objects::{self, AllocFields, Cut, ALLOC_TYPE};
use super::requests::Class;
use super::Mpich;

/// The netmod's globals: the UCP context and one worker per VCI.
pub const SYM_GLOBAL: &str = "MPIDI_UCX_global";
pub const GLOBAL_TYPE: &str = "MPIDI_UCX_global_t";
pub const GLOBAL_CTX: &str = "ctx";
pub const GLOBAL_NUM_VNIS: &str = "num_vnis";
pub const CONTEXT_TYPE: &str = "MPIDI_UCX_context_t";
pub const CONTEXT_WORKER: &str = "worker";
/// MPICH's process-wide state: the tag width the netmod reported.
pub const SYM_PROCESS: &str = "MPIR_Process";
pub const PROCESS_TYPE: &str = "MPIR_Process_t";
pub const PROCESS_TAG_BITS: &str = "tag_bits";
/// `ucp_request_t.user_data`: the netmod passes its `MPIR_Request` as the
/// receive's user data (optional: only the request line needs it).
pub const REQUEST_USER_DATA: &str = "user_data";

/// The line a send whose length came from UCX carries.
pub const SEND_FROM_UCX: &str = "ch4 native send: buffer and length from UCX's request";

/// `MPIDI_UCX_CONTEXT_ID_BITS`.
const CONTEXT_BITS: u32 = 16;
/// `MPIR_TAG_BITS_DEFAULT`: the tag width MPICH is told when the tag field
/// is wider.
const TAG_BITS_DEFAULT: u32 = 31;
/// The tag field of the default `CH4_UCX_RANKBITS` (16).
const DEFAULT_TAG_FIELD: u32 = 64 - CONTEXT_BITS - 16;

/// The netmod's tag layout in one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagLayout {
    /// Bits of the tag field (`MPIDI_UCX_TAG_BITS`), 16 to 32.
    pub tag_field: u32,
    /// `MPIR_Process.tag_bits`: where MPICH's two error bits are (its top
    /// two), cleared from a tag shown.
    pub tag_bits: u32,
}

impl TagLayout {
    /// From `MPIR_Process.tag_bits`; None for a width the netmod cannot
    /// have reported.
    pub fn from_tag_bits(tag_bits: i64) -> Option<TagLayout> {
        let tag_bits = u32::try_from(tag_bits).ok()?;
        let tag_field = match tag_bits {
            TAG_BITS_DEFAULT => DEFAULT_TAG_FIELD,
            16..TAG_BITS_DEFAULT => tag_bits,
            _ => return None,
        };
        Some(TagLayout {
            tag_field,
            tag_bits,
        })
    }

    fn rank_bits(self) -> u32 {
        64 - CONTEXT_BITS - self.tag_field
    }

    fn rank_mask(self) -> u64 {
        ((1u64 << self.rank_bits()) - 1) << self.tag_field
    }

    /// Decodes a receive's tag and mask (a message's tag with a full mask).
    pub fn decode(self, tag: u64, mask: u64) -> Tag {
        let rank_mask = self.rank_mask();
        let field = tag & ((1u64 << self.tag_field) - 1);
        // MPIR_TAG_ERROR_BIT and MPIR_TAG_PROC_FAILURE_BIT.
        let errors = (0b11u64 << self.tag_bits) >> 2;
        Tag {
            context: tag >> (64 - CONTEXT_BITS),
            source: (mask & rank_mask == rank_mask)
                .then_some(((tag & rank_mask) >> self.tag_field) as i64),
            // MPI_ANY_TAG clears every usable bit of the mask, bit 0 first.
            tag: (mask & 1 != 0).then_some((field & !errors) as i64),
        }
    }
}
/// Where an `MPIR_Request` keeps its UCP request: `dev.ch4` is a union
/// whose `netmod` member, a union, holds the netmod's `ucx`
/// (`MPIDI_UCX_request_t`, a union whose `ucp_request` starts it), so
/// the pointer is at `dev` + `ch4`.
pub const MPIR_REQUEST: &str = "MPIR_Request";
pub const MPIR_REQUEST_DEV: &str = "dev";
pub const DEVREQ_TYPE: &str = "MPIDI_Devreq_t";
pub const DEVREQ_CH4: &str = "ch4";
/// MPICH's request objects, one allocator per VCI (`MPIR_Request_mem`,
/// `MPIR_Object_alloc_t`: a direct block and indirect blocks of the same
/// number of objects each), where a message `MPI_Mprobe` took lives in a
/// request of kind mprobe whose `dev.ch4` holds UCX's message handle (the
/// descriptor).
pub const SYM_REQUEST_MEM: &str = "MPIR_Request_mem";
pub const REQUEST_KIND: &str = "kind";
pub const REQUEST_REF_COUNT: &str = "ref_count";
/// `MPIR_REQUEST_KIND__MPROBE` in MPICH 4.0's `MPIR_Request_kind_t`
/// (enumerators are not in reach of a DLL).
pub const KIND_MPROBE: i64 = 11;

/// Where MPICH's request objects are, for the messages matched probes
/// hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pools {
    /// `&MPIR_Request_mem`, and one allocator's size and fields.
    pub mem: u64,
    pub alloc: AllocFields,
    /// `MPIR_Request`: its size, `kind`, `ref_count`, and where `dev.ch4`
    /// holds the message handle.
    pub req_size: u64,
    pub kind: u64,
    pub ref_count: u64,
    pub handle: u64,
}

fn resolve_pools<I: ImageAccess>(image: &I) -> Result<Pools, Missing> {
    let mem = image
        .find_symbol(SYM_REQUEST_MEM)
        .ok_or(Missing::Symbol(SYM_REQUEST_MEM))?;
    let a = ty(image, ALLOC_TYPE)?;
    let r = ty(image, MPIR_REQUEST)?;
    let d = ty(image, DEVREQ_TYPE)?;
    Ok(Pools {
        mem,
        alloc: AllocFields::resolve(&a)?,
        req_size: r.size()?,
        kind: r.field(REQUEST_KIND)?,
        ref_count: r.field(REQUEST_REF_COUNT)?,
        handle: r.field(MPIR_REQUEST_DEV)? + d.field(DEVREQ_CH4)?,
    })
}

/// What reading the netmod needs, resolved once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netmod {
    pub layout: UcxLayout,
    /// `&MPIDI_UCX_global`, and where in it the workers' array and count
    /// are.
    pub global: u64,
    pub ctx: u64,
    pub ctx_size: u64,
    pub worker: u64,
    pub num_vnis: u64,
    /// How many contexts the array holds (`MPIDI_CH4_MAX_VCIS`), from the
    /// type's size.
    pub max_vcis: u64,
    /// `&MPIR_Process.tag_bits`.
    pub tag_bits_at: u64,
    /// `ucp_request_t.user_data`, if the type has it.
    pub user_data: Option<u64>,
    /// Where an `MPIR_Request` holds its UCP request's pointer, and the
    /// send's buffer and length in the `ucp_request_t`, if the types say.
    pub mpir_ucp_request: Option<u64>,
    pub send: Option<(u64, u64)>,
    /// MPICH's request objects, for the messages matched probes hold, or
    /// what is missing to find them.
    pub pools: Result<Pools, Missing>,
    pub version: Option<[u32; 3]>,
}

impl Netmod {
    /// "UCX 1.13.1" (or "UCX (version unknown)").
    pub fn name(&self) -> String {
        version_name(self.version)
    }
}

/// None when the image has no ucx netmod (no `MPIDI_UCX_global`); else
/// what reading it needs, or why it cannot be read ("UCX 1.13.1 not
/// supported: field recv.tag.sn of ucp_request_t missing").
pub fn resolve<I: ImageAccess, P: ProcessAccess + ?Sized>(
    image: &I,
    t: &Target<'_, P>,
) -> Option<Result<Netmod, String>> {
    let global = image.find_symbol(SYM_GLOBAL)?;
    let version = crate::ucx::version_of(image, t);
    let ucx = |m: Missing| crate::ucx::unreadable(version, m);
    let netmod = |m: Missing| format!("MPICH's ucx netmod not supported: {m} missing");
    Some((|| {
        crate::ucx::check_version(version)?;
        let layout = UcxLayout::resolve(image).map_err(ucx)?;
        let (ctx, num_vnis, global_size) = ty(image, GLOBAL_TYPE)
            .and_then(|g| Ok((g.field(GLOBAL_CTX)?, g.field(GLOBAL_NUM_VNIS)?, g.size()?)))
            .map_err(netmod)?;
        let (worker, ctx_size) = ty(image, CONTEXT_TYPE)
            .and_then(|c| Ok((c.field(CONTEXT_WORKER)?, c.size()?)))
            .map_err(netmod)?;
        let process = image
            .find_symbol(SYM_PROCESS)
            .ok_or(Missing::Symbol(SYM_PROCESS))
            .map_err(netmod)?;
        let tag_bits = ty(image, PROCESS_TYPE)
            .and_then(|p| p.field(PROCESS_TAG_BITS))
            .map_err(netmod)?;
        // The array ends where the count begins, or with the struct.
        let end = if num_vnis > ctx {
            num_vnis
        } else {
            global_size
        };
        let max_vcis = end.saturating_sub(ctx) / ctx_size.max(1);
        let request = ty(image, ucx_names::REQUEST).ok();
        let user_data = request.as_ref().and_then(|r| r.opt(REQUEST_USER_DATA));
        let send = request.as_ref().and_then(|r| {
            Some((
                r.opt(ucx_names::REQ_SEND_BUFFER)?,
                r.opt(ucx_names::REQ_SEND_LENGTH)?,
            ))
        });
        let mpir_ucp_request = ty(image, MPIR_REQUEST)
            .ok()
            .and_then(|r| r.opt(MPIR_REQUEST_DEV))
            .zip(ty(image, DEVREQ_TYPE).ok().and_then(|d| d.opt(DEVREQ_CH4)))
            .map(|(dev, ch4)| dev + ch4);
        Ok(Netmod {
            layout,
            global,
            ctx,
            ctx_size,
            worker,
            num_vnis,
            max_vcis: max_vcis.max(1),
            tag_bits_at: process + tag_bits,
            user_data,
            mpir_ucp_request,
            send,
            pools: resolve_pools(image),
            version,
        })
    })())
}

/// A send in progress: (buffer, length in bytes) from the UCP request of
/// the `MPIR_Request` at `request` (UCX hands the netmod the memory right
/// behind its `ucp_request_t`). None when that cannot be read.
pub fn send_of<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &Netmod,
    request: u64,
) -> Option<(u64, u64)> {
    let (buffer, length) = n.send?;
    let user = t
        .read_ptr(request.checked_add(n.mpir_ucp_request?)?)
        .ok()
        .filter(|&p| p != 0)?;
    let ucp = user.checked_sub(n.layout.req_size)?;
    let v = t
        .check_ptr(ucp, t.ptr_align(), n.layout.req_size)
        .and_then(|a| t.view(a, n.layout.req_size))
        .ok()?;
    Some((v.ptr(buffer).ok()?, v.u64(length).ok()?))
}

/// One operation read from UCX.
#[derive(Debug, Clone)]
pub enum Op {
    Recv {
        posted: matching::Posted,
        decoded: Tag,
        /// The VCI whose worker holds it.
        vci: u64,
        /// Its place in its worker's matching order on its context (from 1).
        number: usize,
        /// The `MPIR_Request` the netmod gave as the receive's user data.
        mpi_request: Option<u64>,
    },
    Unexpected {
        message: matching::Unexpected,
        decoded: Tag,
        vci: u64,
    },
    /// A message a matched probe took, held by the mprobe request at
    /// `holder` until `MPI_Mrecv`.
    Probed {
        message: matching::Unexpected,
        decoded: Tag,
        holder: u64,
    },
}

/// What one stop's reading of the workers found, by context id.
#[derive(Debug, Default)]
pub struct Scan {
    pub posted: ByKey<Op>,
    pub unexpected: ByKey<Op>,
    pub posted_stop: Option<Stop>,
    pub unexpected_stop: Option<Stop>,
    /// Workers whose count of expected requests is not what the walk
    /// found: (vci, counted, read).
    pub disagrees: Vec<(u64, u64, usize)>,
    /// Why the workers or the tag layout could not be read.
    pub no_worker: Option<String>,
    /// Messages matched probes hold, by context id (among the receives).
    pub probed: ByKey<Op>,
    /// Why they could not all be read (None: they were).
    pub probed_unread: Option<String>,
}

/// Reads every VCI's worker once.
pub fn scan<P: ProcessAccess + ?Sized>(t: &Target<'_, P>, n: &Netmod) -> Scan {
    let mut out = Scan::default();
    let tags = match t.read_int(n.tag_bits_at) {
        Ok(bits) => match TagLayout::from_tag_bits(bits) {
            Some(tags) => tags,
            None => {
                out.no_worker = Some(format!(
                    "MPIR_Process.tag_bits is {bits}, not a width the ucx netmod reports"
                ));
                return out;
            }
        },
        Err(e) => {
            out.no_worker = Some(format!("MPIR_Process.tag_bits: {e}"));
            return out;
        }
    };
    let vcis = match t.read_int(n.global + n.num_vnis) {
        Ok(v) if v >= 1 && (v as u64) <= n.max_vcis => v as u64,
        Ok(v) => {
            out.no_worker = Some(format!(
                "MPIDI_UCX_global.num_vnis is {v}, not 1 to {}",
                n.max_vcis
            ));
            return out;
        }
        Err(e) => {
            out.no_worker = Some(format!("MPIDI_UCX_global.num_vnis: {e}"));
            return out;
        }
    };
    let mut numbers: HashMap<(u64, u64), usize> = HashMap::new();
    for vci in 0..vcis {
        let at = n.global + n.ctx + vci * n.ctx_size + n.worker;
        let worker = match t.read_ptr(at) {
            Ok(w) if w != 0 => w,
            Ok(_) => {
                out.no_worker = Some(format!("MPIDI_UCX_global.ctx[{vci}].worker is NULL"));
                return out;
            }
            Err(e) => {
                out.no_worker = Some(format!("MPIDI_UCX_global.ctx[{vci}].worker: {e}"));
                return out;
            }
        };
        let expected = matching::expected(t, &n.layout, worker, [None, None], MAX_LIST_ITEMS);
        out.posted_stop = out.posted_stop.or(expected.stop);
        if let Some(counted) = expected.disagrees {
            out.disagrees.push((vci, counted, expected.posted.len()));
        }
        for posted in expected.posted {
            let decoded = tags.decode(posted.tag, posted.mask);
            let number = numbers.entry((vci, decoded.context)).or_default();
            *number += 1;
            let mpi_request = n
                .user_data
                .and_then(|off| t.read_ptr(posted.request.checked_add(off)?).ok())
                .filter(|&r| r != 0);
            out.posted.push(
                decoded.context,
                Op::Recv {
                    posted,
                    decoded,
                    vci,
                    number: *number,
                    mpi_request,
                },
            );
        }
        let (unexpected, stop) = matching::unexpected(t, &n.layout, worker, MAX_LIST_ITEMS);
        out.unexpected_stop = out.unexpected_stop.or(stop);
        for message in unexpected {
            let decoded = tags.decode(message.tag, !0);
            out.unexpected.push(
                decoded.context,
                Op::Unexpected {
                    message,
                    decoded,
                    vci,
                },
            );
        }
    }
    match &n.pools {
        Ok(pools) => {
            for vci in 0..vcis {
                if let Err(why) = probed(t, n, pools, vci, tags, &mut out.probed) {
                    out.probed_unread.get_or_insert(why);
                }
            }
        }
        Err(m) => out.probed_unread = Some(format!("{m} missing")),
    }
    out
}

/// The mprobe requests of VCI `vci`'s allocator (its direct block, then
/// every indirect one): each in use (`ref_count` above 0) with a message
/// handle, its message read from UCX's descriptor.
fn probed<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    n: &Netmod,
    p: &Pools,
    vci: u64,
    tags: TagLayout,
    out: &mut ByKey<Op>,
) -> Result<(), String> {
    let f = &p.alloc;
    let at = p.mem + vci * f.size;
    let v = t
        .view(at, f.size)
        .map_err(|e| format!("MPIR_Request_mem[{vci}]: {e}"))?;
    let count = |off: u64| -> Result<u64, String> {
        let n = v.i32(off).map_err(|e| e.to_string())?;
        u64::try_from(n).map_err(|_| format!("MPIR_Request_mem[{vci}]: a count of {n}"))
    };
    let allocator = objects::Allocator {
        direct: v.ptr(f.direct).unwrap_or(0),
        direct_size: count(f.direct_size)?,
        indirect: v.ptr(f.indirect).unwrap_or(0),
        blocks: count(f.indirect_size)?,
        allocated: count(f.num_allocated)?,
    };
    let (blocks, cut) = allocator.blocks(t, objects::MAX_REQUEST_BLOCKS);
    match cut {
        None => {}
        Some(Cut::Counts { blocks, per, .. }) => {
            return Err(format!(
                "MPIR_Request_mem[{vci}]: {blocks} blocks of {per} requests"
            ))
        }
        Some(Cut::Table { block, error, .. }) => {
            return Err(format!("MPIR_Request_mem[{vci}] block {block}: {error}"))
        }
    }
    for block in blocks {
        let area = block
            .read(t, p.req_size)
            .map_err(|e| format!("requests at {:#x}: {e}", block.base))?;
        for i in 0..block.objects {
            let o = i * p.req_size;
            let (Ok(kind), Ok(refs)) = (area.i32(o + p.kind), area.i32(o + p.ref_count)) else {
                continue;
            };
            if kind != KIND_MPROBE || refs <= 0 {
                continue;
            }
            let Ok(desc) = area.ptr(o + p.handle) else {
                continue;
            };
            if desc == 0 {
                continue;
            }
            let holder = block.base + o;
            let message = matching::descriptor(t, &n.layout, desc)
                .map_err(|e| format!("the descriptor of request {holder:#x}: {e}"))?;
            let decoded = tags.decode(message.tag, !0);
            out.push(
                decoded.context,
                Op::Probed {
                    message,
                    decoded,
                    holder,
                },
            );
        }
    }
    Ok(())
}

impl Op {
    /// `comm`'s operation; `collective`: on its collective context.
    pub fn to_operation(&self, comm: &Comm, ucx: &str, collective: bool) -> PendingOperation {
        let global = |s: i64| comm.peer_global(s);
        let vci_of = |vci: u64| {
            if vci == 0 {
                String::new()
            } else {
                format!(", VCI {vci}")
            }
        };
        let (op, mut lines) = match self {
            Op::Recv {
                posted,
                decoded,
                vci,
                number,
                mpi_request,
            } => {
                let request = match mpi_request {
                    Some(r) => mqs_abi::request_line("receive", *r),
                    None => format!("UCP request at {:#x}", posted.request),
                };
                let order = operations::posted_line(posted, *number, ucx, &vci_of(*vci));
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
            Op::Unexpected {
                message,
                decoded,
                vci,
            } => (
                operations::message(message, decoded, global, OpStatus::Pending),
                operations::arrival_lines(message, ucx, &vci_of(*vci)),
            ),
        };
        if collective {
            lines.push("MPICH internal (collective context)".to_string());
        }
        PendingOperation {
            extra_text: lines.into(),
            ..op
        }
    }
}

/// A message taken by `MPI_Mprobe`/`MPI_Improbe` has left UCX's lists
/// (`ucp_tag_probe_nb` with remove) for the message handle of an MPICH
/// request of kind mprobe, which is in no queue: found in MPICH's request
/// objects; where they cannot be read, said as the last line of a
/// non-empty receive queue, and once per process.
pub const MPROBED_NOT_LISTED: &str = "messages taken by MPI_Mprobe are not listed";
pub const MPROBED_WHY: &str = "MPICH ch4:ucx: messages taken by MPI_Mprobe or MPI_Improbe and not yet received are not listed: MPICH's request objects cannot be read";

/// Why a send queue under ch4:ucx can miss sends (said per communicator:
/// with an empty queue as "cannot tell", else as its last line).
pub const SENDS_NOT_LISTED: &str = "sends completed locally under UCX are not listed";

// The glue of the backend: a queue of a communicator as the netmod's
// workers show it.

/// ch4:ucx: what one queue of a communicator holds in UCX's workers.
#[derive(Debug, Default)]
pub(super) struct UcxFound {
    /// Its operations, made: those of the communicator's context, then
    /// those of its collective context (shown on request); for receives,
    /// then the messages matched probes hold, in the same order.
    pub ops: Vec<PendingOperation>,
    /// Why the walk of the workers ended early.
    pub stop: Option<Stop>,
    /// Why the queue can be missing operations, said when it is empty
    /// ("cannot tell", never "empty").
    pub unseen: Option<String>,
    /// The last line of a queue that may not be whole.
    pub partial: Option<String>,
}

impl Mpich {
    /// What UCX's workers hold of `comm`'s queue of `class` (and of its
    /// collective context, shown on request), the workers read once per
    /// stop.
    pub(super) fn read_ucx<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        netmod: &Netmod,
        comm: &Comm,
        class: Class,
        internal: bool,
    ) -> UcxFound {
        let name = netmod.name();
        let posted = match class {
            Class::Send => {
                // Sends are MPICH's own queue's; those that completed
                // locally (eager ones, handed back complete) are in none.
                return UcxFound {
                    unseen: Some(format!(
                        "MPICH ch4:ucx ({name}): {}; none waits here",
                        SENDS_NOT_LISTED
                    )),
                    partial: Some(SENDS_NOT_LISTED.to_string()),
                    ..UcxFound::default()
                };
            }
            Class::Posted => true,
            Class::Unexpected => false,
        };
        let ctx = comm.recvcontext_id;
        // The collective context's only when it is shown.
        let contexts = [ctx, ctx + 1];
        let keys = if internal {
            &contexts[..]
        } else {
            &contexts[..1]
        };
        let scan = self.cache.ucx.get(
            |s| if posted { &s.posted } else { &s.unexpected },
            keys,
            || scan(t, netmod),
        );
        if let Some(why) = &scan.no_worker {
            return UcxFound {
                unseen: Some(format!("MPICH ch4:ucx ({name}): {why}")),
                partial: Some(format!("{name} not read")),
                ..UcxFound::default()
            };
        }
        let (by, stop) = if posted {
            (&mut scan.posted, scan.posted_stop)
        } else {
            (&mut scan.unexpected, scan.unexpected_stop)
        };
        let mut ops: Vec<PendingOperation> = by
            .take(ctx)
            .iter()
            .map(|op| op.to_operation(comm, &name, false))
            .collect();
        if internal {
            ops.extend(
                by.take(ctx + 1)
                    .iter()
                    .map(|op| op.to_operation(comm, &name, true)),
            );
        }
        if posted {
            // Then the messages matched probes took (matched already, as
            // ob1's DLL view shows them).
            let probed = scan.probed.take(ctx);
            ops.extend(probed.iter().map(|op| op.to_operation(comm, &name, false)));
            if internal {
                let probed = scan.probed.take(ctx + 1);
                ops.extend(probed.iter().map(|op| op.to_operation(comm, &name, true)));
            }
        }
        let (unseen, partial) = match (posted, scan.disagrees.first()) {
            (true, Some(&(vci, counted, read))) => (
                Some(format!(
                    "MPICH ch4:ucx ({name}): VCI {vci}'s worker counts {counted} posted receives, the walk found {read}"
                )),
                Some(format!("UCX counts {counted} posted receives, {read} read")),
            ),
            // Messages matched probes took, when they could not be read.
            (true, None) if scan.probed_unread.is_some() => {
                (None, Some(MPROBED_NOT_LISTED.to_string()))
            }
            _ => (None, None),
        };
        UcxFound {
            ops,
            stop,
            unseen,
            partial,
        }
    }
}

#[cfg(test)]
#[path = "ucx_tests.rs"]
mod tests;
