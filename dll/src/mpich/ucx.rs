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
/// A send's buffer and length in bytes in its `ucp_request_t` (optional:
/// without them a send's length is not known).
pub const REQUEST_SEND_BUFFER: &str = "send.buffer";
pub const REQUEST_SEND_LENGTH: &str = "send.length";
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
pub const ALLOC_TYPE: &str = "MPIR_Object_alloc_t";
pub const ALLOC_DIRECT: &str = "direct";
pub const ALLOC_DIRECT_SIZE: &str = "direct_size";
pub const ALLOC_INDIRECT: &str = "indirect";
pub const ALLOC_INDIRECT_SIZE: &str = "indirect_size";
pub const ALLOC_NUM_ALLOCATED: &str = "num_allocated";
pub const REQUEST_KIND: &str = "kind";
pub const REQUEST_REF_COUNT: &str = "ref_count";
/// `MPIR_REQUEST_KIND__MPROBE` in MPICH 4.0's `MPIR_Request_kind_t`
/// (enumerators are not in reach of a DLL).
pub const KIND_MPROBE: i64 = 11;
/// Bounds of the allocators' walk: objects per block, blocks per pool.
const MAX_BLOCK: u64 = 1 << 16;
const MAX_BLOCKS: u64 = 1 << 12;

/// Where MPICH's request objects are, for the messages matched probes
/// hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pools {
    /// `&MPIR_Request_mem` and the size of one allocator.
    pub mem: u64,
    pub alloc_size: u64,
    pub direct: u64,
    pub direct_size: u64,
    pub indirect: u64,
    pub indirect_size: u64,
    pub num_allocated: u64,
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
        alloc_size: a.size()?,
        direct: a.field(ALLOC_DIRECT)?,
        direct_size: a.field(ALLOC_DIRECT_SIZE)?,
        indirect: a.field(ALLOC_INDIRECT)?,
        indirect_size: a.field(ALLOC_INDIRECT_SIZE)?,
        num_allocated: a.field(ALLOC_NUM_ALLOCATED)?,
        req_size: r.size()?,
        kind: r.field(REQUEST_KIND)?,
        ref_count: r.field(REQUEST_REF_COUNT)?,
        handle: r.field(MPIR_REQUEST_DEV)? + d.field(DEVREQ_CH4)?,
    })
}

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
        let send = request
            .as_ref()
            .and_then(|r| Some((r.opt(REQUEST_SEND_BUFFER)?, r.opt(REQUEST_SEND_LENGTH)?)));
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
    let at = p.mem + vci * p.alloc_size;
    let v = t
        .view(at, p.alloc_size)
        .map_err(|e| format!("MPIR_Request_mem[{vci}]: {e}"))?;
    let count = |off: u64| -> Result<u64, String> {
        let n = v.i32(off).map_err(|e| e.to_string())?;
        u64::try_from(n).map_err(|_| format!("MPIR_Request_mem[{vci}]: a count of {n}"))
    };
    let (direct, direct_size) = (v.ptr(p.direct).unwrap_or(0), count(p.direct_size)?);
    let (indirect, blocks) = (v.ptr(p.indirect).unwrap_or(0), count(p.indirect_size)?);
    let allocated = count(p.num_allocated)?;
    let mut areas = Vec::new();
    if direct != 0 && direct_size > 0 {
        areas.push((direct, direct_size.min(MAX_BLOCK)));
    }
    if let Some(per) = allocated.saturating_sub(direct_size).checked_div(blocks) {
        if blocks > MAX_BLOCKS || per == 0 || per > MAX_BLOCK || indirect == 0 {
            return Err(format!(
                "MPIR_Request_mem[{vci}]: {blocks} blocks of {per} requests"
            ));
        }
        for b in 0..blocks {
            let block = t
                .read_ptr(indirect + b * t.ptr_align())
                .map_err(|e| format!("MPIR_Request_mem[{vci}] block {b}: {e}"))?;
            if block != 0 {
                areas.push((block, per));
            }
        }
    }
    for (base, objects) in areas {
        let bytes = objects * p.req_size;
        let area = t
            .check_ptr(base, t.ptr_align(), bytes)
            .and_then(|a| t.view(a, bytes))
            .map_err(|e| format!("requests at {base:#x}: {e}"))?;
        for i in 0..objects {
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
            let message = matching::descriptor(t, &n.layout, desc)
                .map_err(|e| format!("the descriptor of request {:#x}: {e}", base + o))?;
            let decoded = tags.decode(message.tag, !0);
            out.push(
                decoded.context,
                Op::Probed {
                    message,
                    decoded,
                    holder: base + o,
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

#[cfg(test)]
mod tests {
    use super::*;
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
        req.insert(REQUEST_SEND_BUFFER.to_string(), 32);
        req.insert(REQUEST_SEND_LENGTH.to_string(), 48);
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
}
