//! Every MPICH type and field offset the DLL uses, resolved once per image
//! from the debugger's type information (MPICH's `--enable-debuginfo`
//! compiles the files that reference them with `-g`).
//!
//! The device-independent part (communicators, groups, requests, statuses,
//! datatypes, the debugger's send queue) is required. Which queues hold
//! the receives depends on the MPICH version and device:
//! - 4.0.x: the device's own lists behind `MPID_Recvq_posted_head_ptr` and
//!   `MPID_Recvq_unexpected_head_ptr`, of requests whose matching fields
//!   are device-specific: ch3's `dev.match.parts` (and `user_buf`,
//!   `user_count`, `datatype`), ch4's active-message part `dev.ch4.am`
//!   (`MPIDIG_req_t`: `buffer`, `count`, `datatype`, and in its `u.recv`
//!   union member `source`, `context_id`, `tag`);
//! - 4.1 and later: device-independent lists of `MPIR_Debugq` entries
//!   (`req`; `tag`, `rank`, `context_id`; `buf`; `count`; `next`, `prev`)
//!   behind `MPIR_Sendq_head`, `MPIR_Recvq_head` and `MPIR_Unexpq_head`.
//!
//! Anonymous structs and unions inside these types cannot be asked for by
//! name: their members' offsets follow from C's rules, as noted where used.

use crate::access::ImageAccess;
use crate::mpich::objects::{
    AllocFields, ALLOC_INDIRECT, ALLOC_INDIRECT_SIZE, ALLOC_OBJ_SIZE, ALLOC_TYPE,
};
use crate::types::{ty, Missing};

/// 4.1+: the debugger's receive queue, a list of `MPIR_Debugq`.
pub const SYM_RECVQ: &str = "MPIR_Recvq_head";
/// ch4's global state: there, a request's device part is ch4's.
pub const SYM_CH4_GLOBAL: &str = "MPIDI_global";

/// `MPIR_Comm_list`: the list of every communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommListLayout {
    pub sequence: u64,
    pub head: u64,
}

/// MPICH's communicator objects, which exist with or without debugger
/// support: `MPIR_Comm_builtin` (MPI_COMM_WORLD, MPI_COMM_SELF and its
/// internal copy of the world) and the allocator `MPIR_Comm_mem`
/// (`MPIR_Object_alloc_t`: a direct block of `direct_size` objects, and
/// `indirect_size` blocks behind `indirect` of equally many objects each,
/// `num_allocated` in all), every object starting with its `handle` and
/// `ref_count` (above 0 while in use; 0 once freed or never used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommPoolLayout {
    /// `MPIR_Object_alloc_t`: its size and fields.
    pub alloc: AllocFields,
    /// `size`: the allocator's object size, checked against `MPIR_Comm`'s.
    pub obj_size: u64,
    /// `MPIR_Comm.ref_count`.
    pub ref_count: u64,
}

/// How a device maps a communicator's ranks to processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommDevice {
    /// ch3: `dev.vcrt` (remote group) and `dev.local_vcrt` (local group of
    /// an intercommunicator), tables of virtual connections whose `lpid` is
    /// the process's number (its MPI_COMM_WORLD rank for the first world).
    Ch3 {
        vcrt: u64,
        local_vcrt: u64,
        vcrt_size: u64,
        vcrt_table: u64,
        vc_lpid: u64,
        vc_size: u64,
    },
    /// ch4: `dev.ch4.map` and `dev.ch4.local_map` (`MPIDI_rank_map_t`).
    Ch4 {
        map: u64,
        local_map: u64,
        rank_map: RankMapLayout,
    },
    /// Neither: only the groups MPICH built (lazily) translate ranks.
    None,
}

/// ch4's `MPIDI_rank_map_t`: a mode, the address-vector table and either a
/// regular mapping (`reg`: an offset, or `{offset, stride, blocksize}`) or
/// a lookup table (`irreg`: `{table object, int *lpid}` or `{table object,
/// {int avtid; int lpid} *gpid}`). The unions' members follow C's rules:
/// ints one after the other; the lookup tables' pointer after the table
/// object's pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankMapLayout {
    pub size: u64,
    pub mode: u64,
    pub avtid: u64,
    pub count: u64,
    pub reg: u64,
    pub irreg: u64,
}

/// `MPIR_Comm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommLayout {
    pub size: u64,
    pub handle: u64,
    pub context_id: u64,
    pub recvcontext_id: u64,
    /// `sizeof(MPIR_Context_id_t)`: 2, or 4 with extended context bits.
    pub ctx_size: u8,
    pub remote_size: u64,
    pub local_size: Option<u64>,
    pub rank: u64,
    pub local_group: u64,
    pub remote_group: u64,
    pub comm_kind: Option<u64>,
    pub hierarchy_kind: Option<u64>,
    pub name: u64,
    pub name_len: u64,
    pub next: u64,
    pub device: CommDevice,
    /// `attributes` and what a Cartesian topology's attribute holds, where
    /// the types say.
    pub cart: Option<CartLayout>,
}

/// `MPI_CART`: `MPIR_Topology.kind` of a Cartesian topology (MPICH's
/// `mpi.h`: `MPIR_Topo_type { MPI_GRAPH=1, MPI_CART=2, MPI_DIST_GRAPH=3 }`).
pub const TOPO_KIND_CART: i64 = 2;
/// The keyval of MPICH's topology attribute (`static int` in
/// `src/mpi/topo/topoutil.c`: a local symbol, absent where the symbol
/// table was stripped).
pub const SYM_TOPO_KEYVAL: &str = "MPIR_Topology_keyval";

/// A communicator's Cartesian grid as MPICH keeps it: an attribute on
/// `MPIR_Comm.attributes` (a list of `MPIR_Attribute`, linked through
/// `next`) whose keyval (`MPII_Keyval`, its `handle`) is
/// `MPIR_Topology_keyval` and whose `value` points at an `MPIR_Topology`
/// `{ kind; union topo { graph; cart; dist_graph } topo; }`, its `cart` an
/// `MPII_Cart_topology { nnodes; ndims; int *dims; int *periodic; ... }`.
/// The union's members all start it, so `topo.cart`'s fields are `topo`'s
/// offset plus theirs in `MPII_Cart_topology` (`union topo` is tagged: no
/// path names its members).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CartLayout {
    /// `MPIR_Comm.attributes`.
    pub attributes: u64,
    /// `MPIR_Attribute`: bytes read of it, and its fields.
    pub attr_read: u64,
    pub attr_keyval: u64,
    pub attr_next: u64,
    pub attr_value: u64,
    /// `MPII_Keyval.handle`.
    pub keyval_handle: u64,
    /// `MPIR_Topology`: bytes read of it (up to the last field decoded),
    /// its `kind`, and `topo.cart`'s fields from its start.
    pub topo_read: u64,
    pub kind: u64,
    pub nnodes: u64,
    pub ndims: u64,
    pub dims: u64,
    pub periodic: u64,
}

/// `MPIR_Group` and its `MPII_Group_pmap_t` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLayout {
    pub size: u64,
    pub count: u64,
    pub lrank_to_lpid: u64,
    pub pmap_size: u64,
    pub pmap_lpid: u64,
}

/// Where a request's matching fields are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDevice {
    /// ch3's `MPIDI_Request` (offsets from the request's start).
    Ch3 {
        tag: u64,
        rank: u64,
        rank_size: u8,
        ctx: u64,
        user_buf: u64,
        user_count: u64,
        datatype: u64,
        recv_data_sz: Option<u64>,
        state: Option<u64>,
    },
    /// ch4's active-message request `MPIDIG_req_t` (offsets from the
    /// request's start).
    Ch4 {
        buffer: u64,
        count: u64,
        datatype: u64,
        source: u64,
        ctx: u64,
        tag: u64,
        /// `req`: the `MPIDIG_req_ext_t` with the message's `status` flags.
        ext: Option<u64>,
        ext_status: Option<u64>,
    },
    /// Not known: only what `MPIR_Debugq` entries record.
    None,
}

/// `MPIR_Request` and its `MPI_Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLayout {
    /// Bytes read per request: up to the last field decoded.
    pub read: u64,
    pub kind: u64,
    pub cc: u64,
    pub comm: Option<u64>,
    pub next: u64,
    pub st_source: u64,
    pub st_tag: u64,
    pub st_count_lo: Option<u64>,
    pub st_count_hi: Option<u64>,
    pub device: RequestDevice,
}

/// The debugger's queue entries: `MPIR_Sendq` (4.0) or `MPIR_Debugq`
/// (4.1 and later, which adds `buf` and `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryLayout {
    pub size: u64,
    pub req: u64,
    pub tag: u64,
    pub rank: u64,
    pub ctx: u64,
    pub next: u64,
    pub buf: Option<u64>,
    pub count: Option<u64>,
}

/// Where the receives are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queues {
    /// The device's lists of requests, linked through `MPIR_Request.next`.
    Device,
    /// `MPIR_Recvq_head` / `MPIR_Unexpq_head` lists of `MPIR_Debugq`.
    Debugq,
}

/// `MPIR_Datatype`: size and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatatypeLayout {
    pub size: u64,
    pub size_field: u64,
    pub name: u64,
    pub name_len: u64,
}

/// `MPIR_Object_alloc_t`: the blocks of indirect objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocLayout {
    pub indirect: u64,
    pub indirect_size: u64,
    pub obj_size: u64,
    pub read: u64,
}

/// Which device MPICH was built with, as its types tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Ch3,
    Ch4,
    Unknown,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Ch3 => "ch3",
            Device::Ch4 => "ch4",
            Device::Unknown => "device unknown",
        }
    }
}

/// ch4's record of how it runs: how many VCIs there are. (Whether the
/// OFI netmod matches messages itself is a one-bit field of its settings,
/// `MPIDI_OFI_capabilities_t.enable_tagged`, whose bit position the
/// debugger's interface cannot tell: its control variable says it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ch4Layout {
    /// Offset of `n_vcis` in `MPIDI_global`.
    pub n_vcis: Option<u64>,
    /// Offsets of VCI 0's `per_vci[0].posted_list` and `unexp_list` in
    /// `MPIDI_global`: the active-message queues' heads, which MPICH
    /// built with debugger support also points `MPID_Recvq_posted_head_ptr`
    /// and `MPID_Recvq_unexpected_head_ptr` at.
    pub vci0_heads: Option<(u64, u64)>,
}

/// ch3's `MPIDI_Message_match_parts_t`: how a request and a packet name
/// a message (offsets within the struct).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchParts {
    pub tag: u64,
    pub rank: u64,
    pub rank_size: u8,
    pub ctx: u64,
}

/// ch3:nemesis's shared-memory transport: the region that describes it,
/// its queues of cells, its fast boxes, and the ch3 packets a cell starts
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NemesisLayout {
    /// `MPID_nem_mem_region_t`: bytes read of it, and its fields.
    pub region_read: u64,
    pub num_local: u64,
    pub num_procs: u64,
    pub local_procs: u64,
    pub local_rank: u64,
    pub ext_procs: u64,
    /// `mailboxes.in`: the fast boxes from each local rank.
    pub mailboxes_in: u64,
    pub my_recvq: u64,
    /// `MPID_nem_queue_t`: `head`, `tail` and the consumer's own
    /// `my_head` (a cache line in: where a fast box's cell starts too).
    pub q_head: u64,
    pub q_tail: u64,
    pub q_my_head: u64,
    /// `MPID_nem_cell_t` and its `MPID_nem_pkt_header_t`.
    pub cell_next: u64,
    pub cell_source: u64,
    pub cell_datalen: u64,
    pub cell_seqno: u64,
    pub cell_payload: u64,
    /// `MPID_nem_fastbox_t.flag`.
    pub fbox_flag: u64,
    /// `sizeof(MPIDI_CH3_Pkt_t)`: every packet's size in a cell.
    pub pkt_size: u64,
    /// `match` and `data_sz` of the packets that start a message: an
    /// eager, synchronous, ready or rendezvous send
    /// (`MPIDI_CH3_Pkt_send_t`), a short eager one with its data inside
    /// (`MPIDI_CH3_Pkt_eagershort_send_t`), nemesis's large-message
    /// request to send (`MPID_nem_pkt_lmt_rts_t`).
    pub send: (u64, u64),
    pub short: (u64, u64),
    pub lmt_rts: (u64, u64),
    pub parts: MatchParts,
}

/// Everything, for one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub device: Device,
    /// The communicator list (MPICH with debugger support).
    pub comm_list: Option<CommListLayout>,
    /// The communicator objects (any MPICH whose types are known).
    pub comm_pool: Option<CommPoolLayout>,
    pub comm: CommLayout,
    pub group: Option<GroupLayout>,
    pub request: RequestLayout,
    /// The send queue (absent: MPICH keeps none).
    pub sends: Option<EntryLayout>,
    pub queues: Queues,
    /// `MPIR_Debugq` for the 4.1+ receive queues (the same as `sends`).
    pub debugq: Option<EntryLayout>,
    pub datatype: Option<DatatypeLayout>,
    pub alloc: Option<AllocLayout>,
    /// `sizeof(MPI_Aint)`.
    pub aint_size: u8,
    pub ch4: Ch4Layout,
    /// ch3:nemesis's transport (4.0's device queues only), or what is
    /// missing for it.
    pub nemesis: Result<NemesisLayout, Missing>,
}

fn size_u8(n: Option<u64>, default: u8) -> u8 {
    n.and_then(|n| u8::try_from(n).ok())
        .filter(|n| matches!(n, 1 | 2 | 4 | 8))
        .unwrap_or(default)
}

impl Layout {
    /// Resolves the layout, or says which type or field is missing.
    pub fn resolve<I: ImageAccess>(image: &I) -> Result<Layout, Missing> {
        // Without debugger support there is no list; the communicator
        // objects are then found in their allocator.
        let comm_list = match ty(image, "MPIR_Comm_list") {
            Ok(list) => Some(CommListLayout {
                sequence: list.field("sequence_number")?,
                head: list.field("head")?,
            }),
            Err(_) => None,
        };
        let ctx_size = size_u8(
            ty(image, "MPIR_Context_id_t")
                .ok()
                .and_then(|t| t.size().ok()),
            2,
        );
        let aint_size = size_u8(ty(image, "MPI_Aint").ok().and_then(|t| t.size().ok()), 8);
        let (device, request_device, parts) = resolve_request_device(image, ctx_size)?;
        let comm = resolve_comm(image, ctx_size, device)?;
        let comm_pool = resolve_comm_pool(image, comm.size);
        if comm_list.is_none() && comm_pool.is_none() {
            return Err(Missing::Type("MPIR_Comm_list"));
        }
        let group = ty(image, "MPIR_Group").ok().and_then(|g| {
            let pmap = ty(image, "MPII_Group_pmap_t").ok()?;
            Some(GroupLayout {
                size: g.size().ok()?,
                count: g.opt("size")?,
                lrank_to_lpid: g.opt("lrank_to_lpid")?,
                pmap_size: pmap.size().ok()?,
                pmap_lpid: pmap.opt("lpid")?,
            })
        });
        // A type found nowhere makes a debugger search the DWARF of every
        // object (libc's separate debug file too: 40% of a dump's time),
        // so the version-specific types are asked for only where the
        // version's symbols are.
        let debugq = image
            .find_symbol(SYM_RECVQ)
            .and_then(|_| resolve_entry(image, "MPIR_Debugq"));
        let sendq = resolve_entry(image, "MPIR_Sendq");
        // `MPIR_Debugq` exists from 4.1 on (4.0 has `MPIR_Sendq`), whatever
        // the device: its lists are then the queues. Their entries hold
        // the matching fields; a request's device part may belong to
        // another path than the one the DLL knows (ch4's native
        // requests), so it is not read.
        let (queues, request_device) = if debugq.is_some() {
            (Queues::Debugq, RequestDevice::None)
        } else if request_device != RequestDevice::None {
            (Queues::Device, request_device)
        } else {
            return Err(Missing::Type("MPIDI_Request"));
        };
        let request = resolve_request(image, request_device)?;
        let sends = debugq.or(sendq);
        let datatype = ty(image, "MPIR_Datatype").ok().and_then(|d| {
            let name = d.opt("name")?;
            let size = d.size().ok()?;
            Some(DatatypeLayout {
                size,
                size_field: d.opt("size")?,
                name,
                // MPI_MAX_OBJECT_NAME, bounded by the struct.
                name_len: d
                    .opt("alignsize")
                    .and_then(|a| a.checked_sub(name))
                    .unwrap_or(64)
                    .clamp(1, 128),
            })
        });
        let alloc = ty(image, ALLOC_TYPE).ok().and_then(|a| {
            let indirect = a.opt(ALLOC_INDIRECT)?;
            let indirect_size = a.opt(ALLOC_INDIRECT_SIZE)?;
            let obj_size = a.opt(ALLOC_OBJ_SIZE)?;
            Some(AllocLayout {
                indirect,
                indirect_size,
                obj_size,
                read: indirect.max(indirect_size).max(obj_size) + 8,
            })
        });
        let ch4 = if device == Device::Ch4 {
            resolve_ch4(image)
        } else {
            Ch4Layout::default()
        };
        let nemesis = match (parts, queues) {
            (Some(parts), Queues::Device) => resolve_nemesis(image, parts),
            _ => Err(Missing::Type("MPID_nem_mem_region_t")),
        };
        Ok(Layout {
            device,
            comm_list,
            comm_pool,
            comm,
            group,
            request,
            sends,
            queues,
            debugq,
            datatype,
            alloc,
            aint_size,
            ch4,
            nemesis,
        })
    }
}

/// ch3:nemesis's region, queues, cells, fast boxes and packets.
fn resolve_nemesis<I: ImageAccess>(image: &I, parts: MatchParts) -> Result<NemesisLayout, Missing> {
    let region = ty(image, "MPID_nem_mem_region_t")?;
    let boxes = ty(image, "MPID_nem_fbox_arrays_t")?;
    let queue = ty(image, "MPID_nem_queue_t")?;
    let cell = ty(image, "MPID_nem_cell_t")?;
    let header = ty(image, "MPID_nem_pkt_header_t")?;
    let fbox = ty(image, "MPID_nem_fastbox_t")?;
    let pkt = ty(image, "MPIDI_CH3_Pkt_t")?;
    let send = ty(image, "MPIDI_CH3_Pkt_send_t")?;
    let short = ty(image, "MPIDI_CH3_Pkt_eagershort_send_t")?;
    let rts = ty(image, "MPID_nem_pkt_lmt_rts_t")?;
    let fields = [
        region.field("num_local")?,
        region.field("num_procs")?,
        region.field("local_procs")?,
        region.field("local_rank")?,
        region.field("ext_procs")?,
        region.field("mailboxes")? + boxes.field("in")?,
        region.field("my_recvQ")?,
    ];
    let at = cell.field("header")?;
    Ok(NemesisLayout {
        region_read: fields.iter().max().copied().unwrap_or(0) + 8,
        num_local: fields[0],
        num_procs: fields[1],
        local_procs: fields[2],
        local_rank: fields[3],
        ext_procs: fields[4],
        mailboxes_in: fields[5],
        my_recvq: fields[6],
        q_head: queue.field("head")?,
        q_tail: queue.field("tail")?,
        q_my_head: queue.field("my_head")?,
        cell_next: cell.field("next")?,
        cell_source: at + header.field("source")?,
        cell_datalen: at + header.field("datalen")?,
        cell_seqno: at + header.field("seqno")?,
        cell_payload: cell.field("payload")?,
        fbox_flag: fbox.field("flag")?,
        pkt_size: pkt.size()?,
        send: (send.field("match")?, send.field("data_sz")?),
        short: (short.field("match")?, short.field("data_sz")?),
        lmt_rts: (rts.field("match")?, rts.field("data_sz")?),
        parts,
    })
}

fn resolve_entry<I: ImageAccess>(image: &I, name: &'static str) -> Option<EntryLayout> {
    let e = ty(image, name).ok()?;
    let req = e.opt("req").or_else(|| e.opt("sreq"))?;
    Some(EntryLayout {
        size: e.size().ok()?,
        req,
        tag: e.opt("tag")?,
        rank: e.opt("rank")?,
        ctx: e.opt("context_id")?,
        next: e.opt("next")?,
        buf: e.opt("buf"),
        count: e.opt("count"),
    })
}

/// The request's device part: ch3's `MPIDI_Request`, ch4's `MPIDI_Devreq_t`
/// with its active-message `MPIDIG_req_t`, or neither (4.1+ entries only).
fn resolve_request_device<I: ImageAccess>(
    image: &I,
    ctx_size: u8,
) -> Result<(Device, RequestDevice, Option<MatchParts>), Missing> {
    let req = ty(image, "MPIR_Request")?;
    let Some(dev) = req.opt("dev") else {
        return Ok((Device::Unknown, RequestDevice::None, None));
    };
    // ch3's type is not asked for on ch4 (which has ch3's queue-head
    // symbols too), where it would be found nowhere.
    let ch4 = image.find_symbol(SYM_CH4_GLOBAL).is_some();
    if let Some(d) = (!ch4).then(|| ty(image, "MPIDI_Request").ok()).flatten() {
        let matched = dev + d.field("match")?;
        let parts = ty(image, "MPIDI_Message_match_parts_t")?;
        let rank_size = size_u8(
            ty(image, "MPIDI_Rank_t").ok().and_then(|t| t.size().ok()),
            2,
        );
        let parts = MatchParts {
            tag: parts.field("tag")?,
            rank: parts.field("rank")?,
            rank_size,
            ctx: parts.field("context_id")?,
        };
        // `match` is a union whose `parts` member starts it.
        return Ok((
            Device::Ch3,
            RequestDevice::Ch3 {
                tag: matched + parts.tag,
                rank: matched + parts.rank,
                rank_size,
                ctx: matched + parts.ctx,
                user_buf: dev + d.field("user_buf")?,
                user_count: dev + d.field("user_count")?,
                datatype: dev + d.field("datatype")?,
                recv_data_sz: d.opt("recv_data_sz").map(|o| dev + o),
                state: d.opt("state").map(|o| dev + o),
            },
            Some(parts),
        ));
    }
    if let (Ok(d), Ok(am)) = (ty(image, "MPIDI_Devreq_t"), ty(image, "MPIDIG_req_t")) {
        // dev.ch4 is a union: its `am` member starts it.
        let base = dev + d.field("ch4")?;
        let u = base + am.field("u")?;
        // `u.recv` is `{ int source; MPIR_Context_id_t context_id; int tag; }`.
        let int = 4u64;
        let ctx = u + int;
        let tag = u + (int + u64::from(ctx_size)).next_multiple_of(int);
        let ext = am.opt("req").map(|o| base + o);
        let ext_status = ty(image, "MPIDIG_req_ext_t")
            .ok()
            .and_then(|e| e.opt("status"));
        return Ok((
            Device::Ch4,
            RequestDevice::Ch4 {
                buffer: base + am.field("buffer")?,
                count: base + am.field("count")?,
                datatype: base + am.field("datatype")?,
                source: u,
                ctx,
                tag,
                ext,
                ext_status,
            },
            None,
        ));
    }
    Ok((Device::Unknown, RequestDevice::None, None))
}

fn resolve_request<I: ImageAccess>(
    image: &I,
    device: RequestDevice,
) -> Result<RequestLayout, Missing> {
    let req = ty(image, "MPIR_Request")?;
    let status_ty = ty(image, "MPI_Status")?;
    let status = req.field("status")?;
    let st_source = status + status_ty.field("MPI_SOURCE")?;
    let st_tag = status + status_ty.field("MPI_TAG")?;
    let st_count_lo = status_ty.opt("count_lo").map(|o| status + o);
    let st_count_hi = status_ty.opt("count_hi_and_cancelled").map(|o| status + o);
    let kind = req.field("kind")?;
    let cc = req.field("cc")?;
    let next = req.field("next")?;
    let comm = req.opt("comm");
    let device_end = match device {
        RequestDevice::Ch3 {
            tag,
            rank,
            ctx,
            user_buf,
            user_count,
            datatype,
            recv_data_sz,
            state,
            ..
        } => [
            tag + 4,
            rank + 4,
            ctx + 4,
            user_buf + 8,
            user_count + 8,
            datatype + 4,
            recv_data_sz.map_or(0, |o| o + 8),
            state.map_or(0, |o| o + 4),
        ]
        .into_iter()
        .max()
        .unwrap_or(0),
        RequestDevice::Ch4 {
            buffer,
            count,
            datatype,
            tag,
            ext,
            ..
        } => [
            buffer + 8,
            count + 8,
            datatype + 4,
            tag + 4,
            ext.map_or(0, |o| o + 8),
        ]
        .into_iter()
        .max()
        .unwrap_or(0),
        RequestDevice::None => 0,
    };
    let read = [
        device_end,
        kind + 4,
        cc + 4,
        next + 8,
        st_source + 4,
        st_tag + 4,
        st_count_hi.map_or(0, |o| o + 4),
        comm.map_or(0, |o| o + 8),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    Ok(RequestLayout {
        read,
        kind,
        cc,
        comm,
        next,
        st_source,
        st_tag,
        st_count_lo,
        st_count_hi,
        device,
    })
}

fn resolve_comm<I: ImageAccess>(
    image: &I,
    ctx_size: u8,
    device: Device,
) -> Result<CommLayout, Missing> {
    let c = ty(image, "MPIR_Comm")?;
    let name = c.field("name")?;
    let size = c.size()?;
    // The name is `char name[MPI_MAX_OBJECT_NAME]`, followed by the error
    // handler pointer.
    let name_len = c
        .opt("errhandler")
        .and_then(|e| e.checked_sub(name))
        .filter(|&n| n > 0)
        .unwrap_or(64)
        .min(256);
    let dev = c.opt("dev");
    let comm_device = match (device, dev) {
        (Device::Ch3, Some(dev)) => resolve_ch3_comm(image, dev).unwrap_or(CommDevice::None),
        (Device::Ch4, Some(dev)) => resolve_ch4_comm(image, dev).unwrap_or(CommDevice::None),
        _ => CommDevice::None,
    };
    Ok(CommLayout {
        size,
        handle: c.field("handle")?,
        context_id: c.field("context_id")?,
        recvcontext_id: c.field("recvcontext_id")?,
        ctx_size,
        remote_size: c.field("remote_size")?,
        local_size: c.opt("local_size"),
        rank: c.field("rank")?,
        local_group: c.field("local_group")?,
        remote_group: c.field("remote_group")?,
        comm_kind: c.opt("comm_kind"),
        hierarchy_kind: c.opt("hierarchy_kind"),
        name,
        name_len,
        next: c.field("comm_next")?,
        device: comm_device,
        // Resolved for a process once it has made a topology
        // (`Mpich::check`): most jobs never do, and the lookups cost a
        // debugger that answers through another process a round trip each.
        cart: None,
    })
}

/// Where a Cartesian communicator's grid is, if every type says. These
/// types are in every MPICH built with debug information; the attribute's
/// is asked for first, and where it is missing nothing else is (a type
/// found nowhere costs the debugger a search of every object's DWARF).
/// Without them no grid is shown, and nothing else changes.
pub fn resolve_cart<I: ImageAccess>(image: &I) -> Option<CartLayout> {
    let attributes = ty(image, "MPIR_Comm").ok()?.opt("attributes")?;
    let attr = ty(image, "MPIR_Attribute").ok()?;
    let attr_keyval = attr.opt("keyval")?;
    let attr_next = attr.opt("next")?;
    let attr_value = attr.opt("value")?;
    let keyval = ty(image, "MPII_Keyval").ok()?;
    let topology = ty(image, "MPIR_Topology").ok()?;
    let cart = ty(image, "MPII_Cart_topology").ok()?;
    let topo = topology.opt("topo")?;
    let kind = topology.opt("kind")?;
    let nnodes = topo.checked_add(cart.opt("nnodes")?)?;
    let ndims = topo.checked_add(cart.opt("ndims")?)?;
    let dims = topo.checked_add(cart.opt("dims")?)?;
    let periodic = topo.checked_add(cart.opt("periodic")?)?;
    // Pointers are at most 8 bytes wide, ints 4.
    let topo_read = [kind + 4, nnodes + 4, ndims + 4, dims + 8, periodic + 8]
        .into_iter()
        .max()?;
    Some(CartLayout {
        attributes,
        attr_read: attr_keyval.max(attr_next).max(attr_value) + 8,
        attr_keyval,
        attr_next,
        attr_value,
        keyval_handle: keyval.opt("handle")?,
        topo_read,
        kind,
        nnodes,
        ndims,
        dims,
        periodic,
    })
}

fn resolve_ch3_comm<I: ImageAccess>(image: &I, dev: u64) -> Option<CommDevice> {
    let d = ty(image, "MPIDI_CH3I_comm_t").ok()?;
    let vcrt = ty(image, "MPIDI_VCRT_t")
        .or_else(|_| ty(image, "struct MPIDI_VCRT"))
        .ok()?;
    let vc = ty(image, "MPIDI_VC_t").ok()?;
    Some(CommDevice::Ch3 {
        vcrt: dev + d.opt("vcrt")?,
        local_vcrt: dev + d.opt("local_vcrt")?,
        vcrt_size: vcrt.opt("size")?,
        vcrt_table: vcrt.opt("vcr_table")?,
        vc_lpid: vc.opt("lpid")?,
        vc_size: vc.size().ok()?,
    })
}

fn resolve_ch4_comm<I: ImageAccess>(image: &I, dev: u64) -> Option<CommDevice> {
    let d = ty(image, "MPIDI_Devcomm_t").ok()?;
    let ch4 = dev + d.opt("ch4")?;
    // `dev.ch4` is an anonymous struct: its members cannot be asked for by
    // name. The map follows the netmod and shared-memory unions: found
    // through the type of the map itself, whose size is known, placed
    // before `csel_comm`... which is also anonymous. So the maps are
    // located from the end of `MPIDI_Devcomm_t`: `{ ...; map; local_map;
    // void *csel_comm; }`.
    let total = d.size().ok()?;
    let m = ty(image, "MPIDI_rank_map_t").ok()?;
    let map_size = m.size().ok()?;
    let local_map = total.checked_sub(8)?.checked_sub(map_size)?;
    let map = local_map.checked_sub(map_size)?;
    Some(CommDevice::Ch4 {
        map: dev + map,
        local_map: dev + local_map,
        rank_map: RankMapLayout {
            size: map_size,
            mode: m.opt("mode")?,
            avtid: m.opt("avtid")?,
            count: m.opt("size")?,
            reg: m.opt("reg")?,
            irreg: m.opt("irreg")?,
        },
    })
    .filter(|_| ch4 <= dev + map)
}

fn resolve_ch4<I: ImageAccess>(image: &I) -> Ch4Layout {
    let global = ty(image, "MPIDI_CH4_Global_t").ok();
    let n_vcis = global.as_ref().and_then(|g| g.opt("n_vcis"));
    // `per_vci` is an array of `MPIDI_per_vci_t`: VCI 0's is at its start.
    let vci0_heads = global
        .as_ref()
        .and_then(|g| g.opt("per_vci"))
        .and_then(|at| {
            let v = ty(image, "MPIDI_per_vci_t").ok()?;
            Some((at + v.opt("posted_list")?, at + v.opt("unexp_list")?))
        });
    Ch4Layout { n_vcis, vci0_heads }
}

/// The communicator allocator's fields, when its type and `MPIR_Comm`'s
/// reference count are known.
fn resolve_comm_pool<I: ImageAccess>(image: &I, comm_size: u64) -> Option<CommPoolLayout> {
    let a = ty(image, ALLOC_TYPE).ok()?;
    let c = ty(image, "MPIR_Comm").ok()?;
    Some(CommPoolLayout {
        alloc: AllocFields::resolve(&a).ok()?,
        obj_size: a.opt(ALLOC_OBJ_SIZE)?,
        ref_count: c.opt("ref_count")?,
    })
    .filter(|_| comm_size > 0)
}
