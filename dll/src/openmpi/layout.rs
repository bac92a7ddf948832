//! Every Open MPI type and field offset the DLL uses, resolved once per
//! image from the debugger's type information.
//!
//! The core types (lists, free lists, requests, communicators, groups,
//! datatypes) are required: Open MPI compiles `ompi/debuggers` with `-g`
//! even in release builds so that they are always there. The ob1 PML's
//! private types (its matching queues and fragments) exist only in a build
//! with `-g` everywhere; without them the DLL falls back to the request free
//! lists and cannot show unexpected messages.
//!
//! Every query is a round trip in some debuggers (padb asks gdb for each),
//! so the DLL asks only for what it reads: a type's size only where it is
//! used, no field it does not read, nothing whose answer C already fixes
//! (members of a union are at offset 0).

use crate::access::ImageAccess;
use crate::target::Sizes;
use crate::types::{ty, Missing, Ty};

/// `opal_list_item_t` / `opal_list_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLayout {
    pub item_next: u64,
    pub item_size: u64,
    pub sentinel: u64,
}

/// `opal_free_list_t` and its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeListLayout {
    pub num_allocated: u64,
    pub num_per_alloc: u64,
    pub frag_size: u64,
    pub frag_alignment: u64,
    pub frag_class: u64,
    pub allocations: u64,
    /// sizeof(opal_free_list_item_t): the header at the start of each slab.
    pub item_size: u64,
}

/// `ompi_request_t`, `ompi_status_public_t`, the PML base requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLayout {
    pub ompi_type: u64,
    pub state: u64,
    pub complete: u64,
    pub status: u64,
    pub status_source: u64,
    pub status_tag: u64,
    pub status_ucount: Option<u64>,
    pub status_cancelled: Option<u64>,
    pub addr: u64,
    pub count: u64,
    pub peer: u64,
    pub tag: u64,
    pub comm: u64,
    pub datatype: u64,
    pub sequence: Option<u64>,
    pub pml_type: u64,
    pub pml_complete: Option<u64>,
    /// sizeof(mca_pml_base_request_t).
    pub base_size: u64,
    pub send_addr: u64,
    pub send_bytes_packed: u64,
    pub send_mode: u64,
    pub send_size: u64,
    pub recv_bytes_packed: Option<u64>,
    pub recv_size: u64,
}

impl RequestLayout {
    /// Bytes to read to decode any request.
    pub fn read_size(&self) -> u64 {
        self.send_size.max(self.recv_size).max(self.base_size)
    }
}

/// `opal_pointer_array_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointerArrayLayout {
    pub lowest_free: u64,
    pub number_free: u64,
    pub size: u64,
    pub addr: u64,
}

/// How a communicator stores its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameStorage {
    /// `char c_name[len]` (Open MPI 4.x).
    Inline(u64),
    /// `char *c_name` (Open MPI 5.x).
    Pointer,
}

/// What a communicator's context id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextId {
    /// `uint32_t c_contextid` (Open MPI 4.x): the index into the
    /// communicator table, the same in every process of the communicator.
    U32,
    /// `ompi_comm_extended_cid_t c_contextid` (Open MPI 5.x): 128 bits,
    /// `cid_base` and `cid_sub` at these offsets within it. The table
    /// index is then `c_index`, local to the process (ob1's headers carry
    /// it).
    Extended { base: u64, sub: u64 },
}

/// `ompi_communicator_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommLayout {
    pub size: u64,
    pub name: u64,
    pub name_storage: NameStorage,
    pub contextid: u64,
    pub contextid_kind: ContextId,
    /// `c_index` (Open MPI 5.x): the unique id where the type has it.
    pub index: Option<u64>,
    pub my_rank: u64,
    pub flags: u64,
    pub local_group: u64,
    pub remote_group: u64,
    pub pml_comm: Option<u64>,
    /// `c_topo` and what a Cartesian topology keeps behind it, where the
    /// types say.
    pub cart: Option<CartLayout>,
}

/// A Cartesian communicator's grid: `c_topo` (a `mca_topo_base_module_t`),
/// its `mtc` (a union of pointers, `cart` among them) and the
/// `mca_topo_base_comm_cart_2_2_0_t` it points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CartLayout {
    pub topo: u64,
    pub mtc: u64,
    pub ndims: u64,
    pub dims: u64,
    pub periods: u64,
}

/// Sparse group storage: where `ompi_group_t` keeps it, and the layout of
/// the structs in its `sparse_data` union.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseLayout {
    pub parent: u64,
    pub sparse_data: u64,
}

impl SparseLayout {
    /// The structs' layout for a target with these sizes: by C's rules
    /// ([`SparseStructs::c_rules`]), never asked of the debugger (see
    /// `resolve_sparse`).
    pub fn structs(&self, sizes: &Sizes) -> SparseStructs {
        SparseStructs::c_rules(sizes)
    }
}

/// `struct ompi_group_sporadic_data_t`, `..._sporadic_list_t`,
/// `..._strided_data_t` and `..._bitmap_data_t` (Open MPI's group.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseStructs {
    /// grp_sporadic: list pointer and length.
    pub sporadic_list: u64,
    pub sporadic_len: u64,
    /// struct ompi_group_sporadic_list_t: rank_first, length; its size.
    pub sporadic_first: u64,
    pub sporadic_length: u64,
    pub sporadic_elem: u64,
    /// grp_strided: offset, stride, last element.
    pub strided_offset: u64,
    pub strided_stride: u64,
    pub strided_last: u64,
    /// grp_bitmap: array pointer and length.
    pub bitmap_array: u64,
    pub bitmap_len: u64,
}

impl SparseStructs {
    /// The layout C gives these structs, unchanged since sparse groups
    /// came (Open MPI 1.3): `{ T *list; int len; }` for sporadic and bitmap
    /// data, `{ int first; int length; }` for a sporadic range, three ints
    /// for strided data. An int after a pointer sits at the pointer's size
    /// (int is never more aligned than a pointer).
    pub fn c_rules(sizes: &Sizes) -> SparseStructs {
        let ptr = u64::from(sizes.pointer);
        let int = u64::from(sizes.int);
        SparseStructs {
            sporadic_list: 0,
            sporadic_len: ptr,
            sporadic_first: 0,
            sporadic_length: int,
            sporadic_elem: 2 * int,
            strided_offset: 0,
            strided_stride: int,
            strided_last: 2 * int,
            bitmap_array: 0,
            bitmap_len: ptr,
        }
    }
}

/// `ompi_group_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLayout {
    pub size: u64,
    pub proc_count: u64,
    pub proc_pointers: u64,
    pub flags: u64,
    pub sparse: Option<SparseLayout>,
}

/// `ompi_datatype_t` (name) and its `opal_datatype_t` super (size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatatypeLayout {
    pub name: u64,
    pub name_len: u64,
    pub size: u64,
    pub read_size: u64,
}

/// `opal_proc_t`: where a process's name (jobid, vpid) and host live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcLayout {
    pub name: u64,
    /// Read for MPI-2's new processes only (asked for in that build only).
    pub hostname: Option<u64>,
}

/// ob1's private types (only in a `-g` build of the ob1 component).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ob1Layout {
    pub comm_size: u64,
    pub comm_wild_receives: u64,
    pub comm_procs: u64,
    pub comm_num_procs: u64,
    pub proc_size: u64,
    pub proc_frags_cant_match: Option<u64>,
    pub proc_specific_receives: u64,
    pub proc_unexpected_frags: u64,
    pub frag_size: u64,
    pub frag_hdr: u64,
    pub frag_num_segments: u64,
    pub frag_range: Option<u64>,
    pub frag_segments: u64,
    /// How many segments the array holds.
    pub frag_max_segments: u64,
    pub seg_size: u64,
    pub seg_addr: u64,
    pub seg_len: u64,
    /// Offsets from the start of a fragment's header (`mca_pml_ob1_hdr_t`,
    /// a union: each kind of header starts at offset 0).
    pub hdr_type: u64,
    pub hdr_ctx: u64,
    pub hdr_src: u64,
    pub hdr_tag: u64,
    pub hdr_seq: u64,
    /// Bytes of the match header on the wire (14 without heterogeneous
    /// support, 16 with its explicit padding).
    pub match_hdr_len: u64,
    pub rndv_msg_length: u64,
    /// Bytes of the rendezvous header on the wire.
    pub rndv_hdr_len: u64,
    /// ob1 send request: the receiver's request once matched (ACK seen).
    pub send_req_recv: Option<u64>,
    pub send_bytes_delivered: Option<u64>,
    /// ob1 receive request: bytes received so far.
    pub recv_bytes_received: Option<u64>,
    /// Open MPI 5: the CID header that names a communicator by its
    /// 128-bit id in the first message to a peer.
    pub cid: Option<CidLayout>,
}

/// The BTL's types, as Open MPI 4.1 (`vader`) or 5.0 (`sm`) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmLayout {
    /// The BTL's name: `vader` or `sm`.
    pub name: &'static str,
    /// Its component, a data symbol.
    pub symbol: &'static str,
    pub comp_segment_size: Option<u64>,
    pub comp_endpoints: u64,
    pub comp_fbox_in_endpoints: u64,
    pub comp_num_fbox_in: u64,
    pub comp_my_fifo: u64,
    pub comp_fbox_size: u64,
    /// `sizeof` an endpoint: `endpoints` is an array of them by local rank.
    pub ep_size: u64,
    /// The endpoint's anonymous `fbox_in` struct (`buffer`, `startp`,
    /// `start`, `seq`: their offsets follow from C's rules).
    pub ep_fbox_in: u64,
    pub ep_segment_base: u64,
    pub hdr_size: u64,
    pub hdr_next: u64,
    pub hdr_tag: u64,
    pub hdr_flags: u64,
    pub hdr_len: u64,
    /// `struct iovec sc_iov`: its length is the pointer after the base.
    pub hdr_sc_iov: Option<u64>,
    pub hdr_fbox_base: u64,
    pub fifo_head: u64,
    pub fifo_tail: u64,
    /// `opal_process_info_t.num_local_peers`: bounds every local rank.
    pub num_local_peers: Option<u64>,
}

/// Type names: Open MPI 4.1's `vader` and 5.0's `sm`.
struct Names {
    btl: &'static str,
    symbol: &'static str,
    component: &'static str,
    endpoint: &'static str,
    hdr: &'static str,
    fifo: &'static str,
}

const VADER: Names = Names {
    btl: "vader",
    symbol: "mca_btl_vader_component",
    component: "mca_btl_vader_component_t",
    endpoint: "mca_btl_vader_endpoint_t",
    hdr: "mca_btl_vader_hdr_t",
    fifo: "vader_fifo_t",
};

const SM: Names = Names {
    btl: "sm",
    symbol: "mca_btl_sm_component",
    component: "mca_btl_sm_component_t",
    endpoint: "mca_btl_sm_endpoint_t",
    hdr: "mca_btl_sm_hdr_t",
    fifo: "sm_fifo_t",
};

/// The name of the shared-memory BTL of Open MPI 5 (`five`) or 4.1.
pub fn btl_name(five: bool) -> &'static str {
    if five {
        SM.btl
    } else {
        VADER.btl
    }
}

/// The BTL's types in an image of Open MPI 5 (`five`, its types named
/// `sm`) or 4.1 (`vader`): only a build with `-g` everywhere has them.
pub fn resolve_sm<I: ImageAccess>(image: &I, five: bool) -> Result<SmLayout, Missing> {
    let n = if five { SM } else { VADER };
    let comp = ty(image, n.component)?;
    let ep = ty(image, n.endpoint)?;
    let hdr = ty(image, n.hdr)?;
    let fifo = ty(image, n.fifo)?;
    let num_local_peers = ty(image, "opal_process_info_t")
        .ok()
        .and_then(|t| t.opt("num_local_peers"));
    Ok(SmLayout {
        name: n.btl,
        symbol: n.symbol,
        comp_segment_size: comp.opt("segment_size"),
        comp_endpoints: comp.field("endpoints")?,
        comp_fbox_in_endpoints: comp.field("fbox_in_endpoints")?,
        comp_num_fbox_in: comp.field("num_fbox_in_endpoints")?,
        comp_my_fifo: comp.field("my_fifo")?,
        comp_fbox_size: comp.field("fbox_size")?,
        ep_size: ep.size()?,
        ep_fbox_in: ep.field("fbox_in")?,
        ep_segment_base: ep.field("segment_base")?,
        hdr_size: hdr.size()?,
        hdr_next: hdr.field("next")?,
        hdr_tag: hdr.field("tag")?,
        hdr_flags: hdr.field("flags")?,
        hdr_len: hdr.field("len")?,
        hdr_sc_iov: hdr.opt("sc_iov"),
        hdr_fbox_base: hdr.field("fbox_base")?,
        fifo_head: fifo.field("fifo_head")?,
        fifo_tail: fifo.field("fifo_tail")?,
        num_local_peers,
    })
}

/// Open MPI 5's CID header (`mca_pml_ob1_cid_hdr_t`): where its 128-bit
/// communicator id lies, and where the match header behind it starts
/// (`mca_pml_ob1_ext_match_hdr_t.hdr_match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CidLayout {
    pub cid: u64,
    pub cid_base: u64,
    pub cid_sub: u64,
    pub inner: u64,
}

/// Everything, for one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub list: ListLayout,
    pub free_list: FreeListLayout,
    /// `opal_object_t.obj_class`: lets the DLL check an object's class.
    pub obj_class: Option<u64>,
    pub request: RequestLayout,
    pub pointer_array: PointerArrayLayout,
    pub comm: CommLayout,
    pub group: GroupLayout,
    pub datatype: DatatypeLayout,
    pub proc_: ProcLayout,
    /// ob1's queues, or what is missing for them.
    pub ob1: Result<Ob1Layout, Missing>,
    /// The shared-memory BTL (messages in transit), or what is missing for
    /// it; asked for only where ob1's types are there (without them no
    /// unexpected message is shown at all).
    pub sm: Result<SmLayout, Missing>,
}

impl Layout {
    /// Resolves the layout, or says which type or field is missing.
    pub fn resolve<I: ImageAccess>(image: &I) -> Result<Layout, Missing> {
        let list = resolve_list(image)?;
        let free_list = resolve_free_list(image)?;
        let obj_class = ty(image, "opal_object_t")
            .ok()
            .and_then(|t| t.opt("obj_class"));
        let request = resolve_request(image)?;
        let pointer_array = {
            let t = ty(image, "opal_pointer_array_t")?;
            PointerArrayLayout {
                lowest_free: t.field("lowest_free")?,
                number_free: t.field("number_free")?,
                size: t.field("size")?,
                addr: t.field("addr")?,
            }
        };
        let comm = resolve_comm(image)?;
        let group = resolve_group(image)?;
        let datatype = resolve_datatype(image)?;
        let proc_ = match ty(image, "opal_proc_t") {
            Ok(t) => ProcLayout {
                name: t.opt("proc_name").unwrap_or(list.item_size),
                hostname: if cfg!(feature = "mpi2") {
                    t.opt("proc_hostname")
                } else {
                    None
                },
            },
            // opal_proc_t starts with an opal_list_item_t, then the name.
            Err(_) => ProcLayout {
                name: list.item_size,
                hostname: None,
            },
        };
        // Open MPI 5 has c_index, and names its BTL sm.
        let five = comm.index.is_some();
        let ob1 = resolve_ob1(image, five);
        let sm = match &ob1 {
            Ok(_) => resolve_sm(image, five),
            Err(m) => Err(*m),
        };
        Ok(Layout {
            list,
            free_list,
            obj_class,
            request,
            pointer_array,
            comm,
            group,
            datatype,
            proc_,
            ob1,
            sm,
        })
    }
}

fn resolve_list<I: ImageAccess>(image: &I) -> Result<ListLayout, Missing> {
    let item = ty(image, "opal_list_item_t")?;
    let list = ty(image, "opal_list_t")?;
    Ok(ListLayout {
        item_next: item.field("opal_list_next")?,
        item_size: item.size()?,
        sentinel: list.field("opal_list_sentinel")?,
    })
}

fn resolve_free_list<I: ImageAccess>(image: &I) -> Result<FreeListLayout, Missing> {
    let item = ty(image, "opal_free_list_item_t")?;
    let fl = ty(image, "opal_free_list_t")?;
    Ok(FreeListLayout {
        num_allocated: fl.field("fl_num_allocated")?,
        num_per_alloc: fl.field("fl_num_per_alloc")?,
        frag_size: fl.field("fl_frag_size")?,
        frag_alignment: fl.field("fl_frag_alignment")?,
        frag_class: fl.field("fl_frag_class")?,
        allocations: fl.field("fl_allocations")?,
        item_size: item.size()?,
    })
}

fn resolve_request<I: ImageAccess>(image: &I) -> Result<RequestLayout, Missing> {
    let req = ty(image, "ompi_request_t")?;
    let status = ty(image, "ompi_status_public_t")?;
    let base = ty(image, "mca_pml_base_request_t")?;
    let send = ty(image, "mca_pml_base_send_request_t")?;
    let recv = ty(image, "mca_pml_base_recv_request_t")?;
    let status_off = req.field("req_status")?;
    Ok(RequestLayout {
        ompi_type: req.field("req_type")?,
        state: req.field("req_state")?,
        complete: req.field("req_complete")?,
        status: status_off,
        status_source: status.field("MPI_SOURCE")?,
        status_tag: status.field("MPI_TAG")?,
        status_ucount: status.opt("_ucount"),
        status_cancelled: status.opt("_cancelled"),
        addr: base.field("req_addr")?,
        count: base.field("req_count")?,
        peer: base.field("req_peer")?,
        tag: base.field("req_tag")?,
        comm: base.field("req_comm")?,
        datatype: base.field("req_datatype")?,
        sequence: base.opt("req_sequence"),
        pml_type: base.field("req_type")?,
        pml_complete: base.opt("req_pml_complete"),
        base_size: base.size()?,
        send_addr: send.field("req_addr")?,
        send_bytes_packed: send.field("req_bytes_packed")?,
        send_mode: send.field("req_send_mode")?,
        send_size: send.size()?,
        recv_bytes_packed: recv.opt("req_bytes_packed"),
        recv_size: recv.size()?,
    })
}

fn resolve_comm<I: ImageAccess>(image: &I) -> Result<CommLayout, Missing> {
    let c = ty(image, "ompi_communicator_t")?;
    let name = c.field("c_name")?;
    let contextid = c.field("c_contextid")?;
    // 4.x has an inline char[MPI_MAX_OBJECT_NAME] right before c_contextid;
    // 5.x a char *. The gap between the two fields tells them apart.
    let name_storage = match contextid.checked_sub(name) {
        Some(gap) if gap >= 16 => NameStorage::Inline(gap.min(256)),
        _ => NameStorage::Pointer,
    };
    // 5.x has c_index and a 128-bit extended context id; 4.x neither, so
    // its extended-id type is asked for only when c_index exists.
    let index = c.opt("c_index");
    let contextid_kind = match index {
        None => ContextId::U32,
        Some(_) => {
            let x = ty(image, "ompi_comm_extended_cid_t")?;
            ContextId::Extended {
                base: x.field("cid_base")?,
                sub: x.field("cid_sub")?,
            }
        }
    };
    Ok(CommLayout {
        size: c.size()?,
        name,
        name_storage,
        contextid,
        contextid_kind,
        index,
        my_rank: c.field("c_my_rank")?,
        flags: c.field("c_flags")?,
        local_group: c.field("c_local_group")?,
        remote_group: c.field("c_remote_group")?,
        pml_comm: c.opt("c_pml_comm"),
        cart: resolve_cart(image, &c),
    })
}

/// Open MPI's own DLL asks for these types too, so its debugger file keeps
/// them in release builds (and type packs have them); without them no grid
/// is shown, and nothing else changes.
fn resolve_cart<I: ImageAccess>(image: &I, comm: &Ty<'_, I>) -> Option<CartLayout> {
    let module = ty(image, "mca_topo_base_module_t").ok()?;
    let cart = ty(image, "mca_topo_base_comm_cart_2_2_0_t").ok()?;
    Some(CartLayout {
        topo: comm.opt("c_topo")?,
        mtc: module.opt("mtc")?,
        ndims: cart.opt("ndims")?,
        dims: cart.opt("dims")?,
        periods: cart.opt("periods")?,
    })
}

fn resolve_group<I: ImageAccess>(image: &I) -> Result<GroupLayout, Missing> {
    let g = ty(image, "ompi_group_t")?;
    Ok(GroupLayout {
        size: g.size()?,
        proc_count: g.field("grp_proc_count")?,
        proc_pointers: g.field("grp_proc_pointers")?,
        flags: g.field("grp_flags")?,
        sparse: resolve_sparse(&g),
    })
}

/// Sparse groups are rare (an MCA option). Their four structs have a
/// struct tag and no typedef, and their layout is fixed by C (see
/// [`SparseStructs::c_rules`]; checked against Open MPI 4.1.4's DWARF in
/// `tests/internals.rs`): they are not asked of the debugger, which would
/// cost every process of every job up to 13 lookups for groups it almost
/// never has (a round trip each in debuggers that ask gdb, as padb does),
/// and fail in those that refuse names with a space.
fn resolve_sparse<I: ImageAccess>(g: &Ty<'_, I>) -> Option<SparseLayout> {
    Some(SparseLayout {
        parent: g.opt("grp_parent_group_ptr")?,
        sparse_data: g.opt("sparse_data")?,
    })
}

fn resolve_datatype<I: ImageAccess>(image: &I) -> Result<DatatypeLayout, Missing> {
    let d = ty(image, "ompi_datatype_t")?;
    let o = ty(image, "opal_datatype_t")?;
    let name = d.field("name")?;
    let size = d.field("super")? + o.field("size")?;
    let total = d.size()?;
    // The name is the last member of ompi_datatype_t in 4.x; bound it anyway.
    let name_len = total.saturating_sub(name).clamp(1, 64);
    Ok(DatatypeLayout {
        name,
        name_len,
        size,
        read_size: total.max(size + 8).max(name + name_len),
    })
}

fn resolve_ob1<I: ImageAccess>(image: &I, five: bool) -> Result<Ob1Layout, Missing> {
    let comm = ty(image, "mca_pml_ob1_comm_t")?;
    let proc_ = ty(image, "mca_pml_ob1_comm_proc_t")?;
    let frag = ty(image, "mca_pml_ob1_recv_frag_t")?;
    let seg = ty(image, "mca_btl_base_segment_t")?;
    let common = ty(image, "mca_pml_ob1_common_hdr_t")?;
    let matchh = ty(image, "mca_pml_ob1_match_hdr_t")?;
    let rndv = ty(image, "mca_pml_ob1_rendezvous_hdr_t")?;
    // The fragment's header is a union (mca_pml_ob1_hdr_t) of the kinds of
    // header: each starts at offset 0, and each starts with the common one.
    let hdr_seq = matchh.field("hdr_seq")?;
    // The wire length of a match header ends after hdr_seq, or after the
    // explicit padding of heterogeneous builds.
    let match_hdr_len = match matchh.opt("hdr_padding") {
        Some(pad) => pad + 2,
        None => hdr_seq + 2,
    };
    let rndv_len_off = rndv.field("hdr_msg_length")?;
    let rndv_hdr_len = match rndv.opt("hdr_src_req") {
        Some(off) => off + 8,
        None => rndv_len_off + 8,
    };
    let segments = frag.field("segments")?;
    let seg_size = seg.size()?;
    // The segment array runs up to `buffers` (16 segments in 4.1).
    let frag_max_segments = frag
        .opt("buffers")
        .and_then(|b| b.checked_sub(segments))
        .map(|bytes| bytes / seg_size.max(1))
        .filter(|&n| n > 0)
        .unwrap_or(16)
        .min(64);
    // Only Open MPI 5 has the CID header; 4.1 is not asked for it.
    let cid = if five { resolve_cid(image) } else { None };
    let send = ty(image, "mca_pml_ob1_send_request_t").ok();
    let recv = ty(image, "mca_pml_ob1_recv_request_t").ok();
    Ok(Ob1Layout {
        comm_size: comm.size()?,
        comm_wild_receives: comm.field("wild_receives")?,
        comm_procs: comm.field("procs")?,
        comm_num_procs: comm.field("num_procs")?,
        proc_size: proc_.size()?,
        proc_frags_cant_match: proc_.opt("frags_cant_match"),
        proc_specific_receives: proc_.field("specific_receives")?,
        proc_unexpected_frags: proc_.field("unexpected_frags")?,
        frag_size: frag.size()?,
        frag_hdr: frag.field("hdr")?,
        frag_num_segments: frag.field("num_segments")?,
        frag_range: frag.opt("range"),
        frag_segments: segments,
        frag_max_segments,
        seg_size,
        seg_addr: seg.field("seg_addr")?,
        seg_len: seg.field("seg_len")?,
        hdr_type: common.field("hdr_type")?,
        hdr_ctx: matchh.field("hdr_ctx")?,
        hdr_src: matchh.field("hdr_src")?,
        hdr_tag: matchh.field("hdr_tag")?,
        hdr_seq,
        match_hdr_len,
        rndv_msg_length: rndv_len_off,
        rndv_hdr_len,
        send_req_recv: send.as_ref().and_then(|s| s.opt("req_recv")),
        send_bytes_delivered: send.as_ref().and_then(|s| s.opt("req_bytes_delivered")),
        recv_bytes_received: recv.as_ref().and_then(|r| r.opt("req_bytes_received")),
        cid,
    })
}

/// Open MPI 5's CID header and the match header after it.
fn resolve_cid<I: ImageAccess>(image: &I) -> Option<CidLayout> {
    let cid = ty(image, "mca_pml_ob1_cid_hdr_t").ok()?;
    let ext = ty(image, "mca_pml_ob1_ext_match_hdr_t").ok()?;
    let id = ty(image, "ompi_comm_extended_cid_t").ok()?;
    Some(CidLayout {
        cid: cid.opt("hdr_cid")?,
        cid_base: id.opt("cid_base")?,
        cid_sub: id.opt("cid_sub")?,
        inner: ext.opt("hdr_match")?,
    })
}
