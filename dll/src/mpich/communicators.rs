//! MPICH's communicators: the list `MPIR_All_communicators` keeps
//! (`MPIR_Comm_list`: a sequence number bumped on every change, and the
//! head of the communicators linked through `comm_next`), or, in an MPICH
//! built without debugger support (no list), the communicator objects in
//! use in MPICH's own object pools (`MPIR_Comm_builtin` and the allocator
//! `MPIR_Comm_mem`); which of them MPICH made for itself, and the global
//! ranks of their members.

use std::collections::{HashMap, HashSet};

use mqs_abi::{Cartesian, Communicator};

use crate::access::ProcessAccess;
use crate::iteration::CommInfo;
use crate::mpich::layout::{
    CartLayout, CommDevice, CommPoolLayout, Layout, RankMapLayout, TOPO_KIND_CART,
};
use crate::mpich::objects::{self, Block, Cut, Place};
use crate::names::{identity_of, NameMap, ProcName};
use crate::target::{ReadError, Target, View};
use crate::walk::Stop;

/// Most communicators followed on the list.
pub const MAX_COMMS: usize = 1 << 17;
/// Most members a group may have.
pub const MAX_GROUP: u64 = 1 << 20;
/// Most attributes followed on a communicator's list in search of its
/// topology.
pub const MAX_ATTRIBUTES: usize = 64;

/// `MPI_KEYVAL_INVALID` (MPICH's `mpi.h`): `MPIR_Topology_keyval` before the
/// first topology is made, and after `MPI_Finalize`.
pub const KEYVAL_INVALID: i64 = 0x2400_0000;

/// Builtin handles: `MPI_COMM_WORLD`, `MPI_COMM_SELF` and MPICH's own
/// `MPIR_ICOMM_WORLD` (its internal copy of the world).
pub const HANDLE_COMM_WORLD: u32 = 0x4400_0000;
pub const HANDLE_COMM_SELF: u32 = 0x4400_0001;
pub const HANDLE_ICOMM_WORLD: u32 = 0x4400_0002;

/// `MPIR_COMM_HIERARCHY_KIND__NODE_ROOTS` and `__NODE`.
const HIERARCHY_NODE_ROOTS: i64 = 2;
const HIERARCHY_NODE: i64 = 3;
/// `MPIR_COMM_KIND__INTERCOMM`.
const COMM_KIND_INTER: i64 = 1;
/// Context id fields (`mpir_contextid.h`): bit 0 pt2pt/collective, bits
/// 1-2 the subcommunicator type (intra-node, inter-node), bit 3 the local
/// communicator of an intercommunicator.
const CTX_SUBCOMM_SHIFT: u64 = 1;
const CTX_SUBCOMM_MASK: u64 = 0x3;
const CTX_LOCALCOMM_BIT: u64 = 1 << 3;

/// One communicator as the DLL shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub addr: u64,
    pub handle: u32,
    /// Send and receive context ids, at their full width.
    pub context_id: u64,
    pub recvcontext_id: u64,
    pub name: String,
    pub local_rank: i64,
    pub size: i64,
    pub inter: bool,
    /// Why MPICH made it for itself, if it did.
    pub internal: Option<&'static str>,
    /// Global ranks of the local group's members.
    pub local_ranks: Vec<i64>,
    /// Global ranks of the group peers are named in.
    pub remote_ranks: Vec<i64>,
    /// Its grid, if `MPI_Cart_create` made it.
    pub cart: Option<Cartesian>,
}

impl CommInfo for Comm {
    /// The receive context id is the unique id: MPICH allocates it per
    /// process, and it is what incoming messages are matched on.
    fn to_abi(&self) -> Communicator {
        Communicator {
            unique_id: self.recvcontext_id,
            local_rank: self.local_rank,
            size: self.size,
            name: self.name.clone(),
        }
    }

    fn local_ranks(&self) -> &[i64] {
        &self.local_ranks
    }

    fn remote_ranks(&self) -> &[i64] {
        &self.remote_ranks
    }

    fn cartesian(&self) -> Option<&Cartesian> {
        self.cart.as_ref()
    }
}

/// The head of the list and its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListHead {
    pub sequence: i64,
    pub head: u64,
}

pub fn read_head<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    addr: u64,
) -> Result<ListHead, ReadError> {
    let l = layout.comm_list.as_ref().ok_or(ReadError::OutOfRange)?;
    let len = l.sequence.max(l.head) + u64::from(t.sizes.pointer);
    let v = t.view(t.check_ptr(addr, t.ptr_align(), len)?, len)?;
    Ok(ListHead {
        sequence: v.int(l.sequence)?,
        head: v.ptr(l.head)?,
    })
}

/// How global ranks are found: the process's world, and MPI-2 identities.
#[derive(Debug, Clone, Copy)]
pub struct Translator<'x> {
    /// Size of MPI_COMM_WORLD: process numbers (lpids) below it are world
    /// ranks; others belong to other jobs.
    pub world_size: Option<u64>,
    pub names: Option<&'x NameMap>,
}

/// MPICH's processes of other jobs are told apart from the world by this
/// job id in MPI-2 names (MPICH has no job ids of its own).
pub const OWN_JOB: u32 = 0;

impl Translator<'_> {
    pub fn global(&self, lpid: Option<u64>) -> i64 {
        let Some(lpid) = lpid else {
            return -1;
        };
        if self.world_size.is_some_and(|n| lpid >= n) {
            return -1;
        }
        let Ok(rank) = u32::try_from(lpid) else {
            return -1;
        };
        match self.names.filter(|n| !n.is_empty()) {
            Some(names) => identity_of(
                names,
                ProcName {
                    jobid: OWN_JOB,
                    vpid: rank,
                },
            )
            .unwrap_or(-1),
            None => i64::from(rank),
        }
    }
}

/// The raw fields of one communicator.
struct Raw {
    handle: u32,
    context_id: u64,
    recvcontext_id: u64,
    remote_size: i64,
    local_size: Option<i64>,
    rank: i64,
    local_group: u64,
    remote_group: u64,
    inter: bool,
    hierarchy: Option<i64>,
    name: String,
    /// `attributes`: the head of its attribute list, 0 if none (or the
    /// types do not say).
    attributes: u64,
}

fn decode<P: ProcessAccess + ?Sized>(
    v: &View<'_, '_, P>,
    layout: &Layout,
) -> Result<Raw, ReadError> {
    let c = &layout.comm;
    let comm_kind = c.comm_kind.map(|o| v.int(o)).transpose()?;
    Ok(Raw {
        handle: v.u32(c.handle)? as u32,
        context_id: v.uint(c.context_id, c.ctx_size)?,
        recvcontext_id: v.uint(c.recvcontext_id, c.ctx_size)?,
        remote_size: v.int(c.remote_size)?,
        local_size: c.local_size.map(|o| v.int(o)).transpose()?,
        rank: v.int(c.rank)?,
        local_group: v.ptr(c.local_group)?,
        remote_group: v.ptr(c.remote_group)?,
        inter: comm_kind == Some(COMM_KIND_INTER),
        hierarchy: c.hierarchy_kind.and_then(|o| v.int(o).ok()),
        name: v.chars(c.name, c.name_len)?,
        attributes: c
            .cart
            .and_then(|cart| v.ptr(cart.attributes).ok())
            .unwrap_or(0),
    })
}

/// Which attribute holds a communicator's topology: the value of
/// `MPIR_Topology_keyval`, the handle of its keyval (None where the symbol
/// was not found or read: no grid is looked for; `MPI_KEYVAL_INVALID`
/// until the first topology is made, when no attribute has it).
pub type TopoKeyval = Option<i64>;

/// The grid of an intracommunicator of `size` ranks whose attribute list
/// starts at `head`: the `MPIR_Topology` of the attribute whose keyval's
/// handle is `keyval`, taken only
/// if it is Cartesian, of `size` nodes, with 1 to [`mqs_abi::MAX_CART_DIMS`]
/// dimensions whose extents make `size`. At most [`MAX_ATTRIBUTES`] are
/// followed, a repeated one ends the list. None where anything does not
/// read or fit: the peers are then shown by rank.
fn read_cart<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    cart: &CartLayout,
    head: u64,
    size: i64,
    keyval: i64,
) -> Option<Cartesian> {
    let mut seen = HashSet::new();
    let mut cur = head;
    while cur != 0 && seen.len() < MAX_ATTRIBUTES && seen.insert(cur) {
        let a = t
            .view(
                t.check_ptr(cur, t.ptr_align(), cart.attr_read).ok()?,
                cart.attr_read,
            )
            .ok()?;
        let value = a.ptr(cart.attr_value).ok()?;
        let k = a.ptr(cart.attr_keyval).ok()?;
        let handle = t
            .check_ptr(k, 4, cart.keyval_handle + 4)
            .and_then(|k| t.read_int(k + cart.keyval_handle))
            .ok();
        if handle == Some(keyval) {
            // The topology's own attribute: a graph's is no grid.
            return read_topology(t, cart, value, size);
        }
        cur = a.ptr(cart.attr_next).ok()?;
    }
    None
}

/// The grid of the `MPIR_Topology` at `at`, if it is a Cartesian one of
/// `size` ranks.
fn read_topology<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    cart: &CartLayout,
    at: u64,
    size: i64,
) -> Option<Cartesian> {
    let v = t
        .view(
            t.check_ptr(at, t.ptr_align(), cart.topo_read).ok()?,
            cart.topo_read,
        )
        .ok()?;
    if v.int(cart.kind).ok()? != TOPO_KIND_CART || v.int(cart.nnodes).ok()? != size {
        return None;
    }
    crate::grid::read_grid(
        t,
        v.int(cart.ndims).ok()?,
        v.ptr(cart.dims).ok()?,
        v.ptr(cart.periodic).ok()?,
        size,
    )
}

/// Why MPICH made a communicator for itself, if it did.
fn internal_reason(raw: &Raw) -> Option<&'static str> {
    if raw.handle == HANDLE_ICOMM_WORLD {
        return Some("MPICH's internal copy of MPI_COMM_WORLD");
    }
    match raw.hierarchy {
        Some(HIERARCHY_NODE) => return Some("node subcommunicator (collectives)"),
        Some(HIERARCHY_NODE_ROOTS) => return Some("node-roots subcommunicator (collectives)"),
        _ => {}
    }
    match (raw.recvcontext_id >> CTX_SUBCOMM_SHIFT) & CTX_SUBCOMM_MASK {
        1 => return Some("node subcommunicator (collectives)"),
        2 => return Some("node-roots subcommunicator (collectives)"),
        _ => {}
    }
    if raw.recvcontext_id & CTX_LOCALCOMM_BIT != 0 && !raw.inter {
        return Some("local communicator of an intercommunicator");
    }
    None
}

/// The process numbers (lpids) of a group's members, from the group
/// MPICH built.
fn group_lpids<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    group: u64,
) -> Result<Option<Vec<Option<u64>>>, ReadError> {
    let Some(g) = layout.group else {
        return Ok(None);
    };
    if group == 0 {
        return Ok(None);
    }
    let v = t.view(t.check_ptr(group, t.ptr_align(), g.size)?, g.size)?;
    let count = u64::try_from(v.int(g.count)?)
        .ok()
        .filter(|&n| n <= MAX_GROUP)
        .ok_or(ReadError::OutOfRange)?;
    if count == 0 {
        return Ok(Some(Vec::new()));
    }
    let table = v.ptr(g.lrank_to_lpid)?;
    let stride = g.pmap_size.max(1);
    let raw = t.view(t.check_ptr(table, 4, count * stride)?, count * stride)?;
    // The lpid is the first member, 8 bytes wide since MPICH 4.0 (an int
    // before): the entry's size tells.
    let width = if stride >= 16 { 8 } else { 4 };
    (0..count)
        .map(|i| raw.uint(i * stride + g.pmap_lpid, width).map(Some))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What ch3's connection tables gave, for the rest of the stop: each
/// connection's lpid, and each table's lpids (communicators made by
/// duplication share their table: read once, not once per communicator).
#[derive(Debug, Default)]
struct LpidCache {
    vcs: HashMap<u64, Option<u64>>,
    tables: HashMap<u64, Vec<Option<u64>>>,
}

/// ch3: the lpids of a virtual connection table's connections.
fn vcrt_lpids<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    vcrt: u64,
    size_off: u64,
    table_off: u64,
    lpid_off: u64,
    cache: &mut LpidCache,
) -> Result<Vec<Option<u64>>, ReadError> {
    if let Some(known) = cache.tables.get(&vcrt) {
        return Ok(known.clone());
    }
    let lpids = read_vcrt(t, vcrt, size_off, table_off, lpid_off, &mut cache.vcs)?;
    cache.tables.insert(vcrt, lpids.clone());
    Ok(lpids)
}

fn read_vcrt<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    vcrt: u64,
    size_off: u64,
    table_off: u64,
    lpid_off: u64,
    vc_cache: &mut HashMap<u64, Option<u64>>,
) -> Result<Vec<Option<u64>>, ReadError> {
    let head = table_off;
    let v = t.view(t.check_ptr(vcrt, t.ptr_align(), head)?, head)?;
    let count = u64::try_from(v.int(size_off)?)
        .ok()
        .filter(|&n| n <= MAX_GROUP)
        .ok_or(ReadError::OutOfRange)?;
    let psize = u64::from(t.sizes.pointer);
    if count == 0 {
        return Ok(Vec::new());
    }
    let table = t.view(vcrt + table_off, count * psize)?;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let vc = table.ptr(i * psize)?;
        let lpid = *vc_cache.entry(vc).or_insert_with(|| {
            t.check_ptr(vc, 4, lpid_off + 4)
                .and_then(|a| t.read_int(a + lpid_off))
                .ok()
                .and_then(|l| u64::try_from(l).ok())
        });
        out.push(lpid);
    }
    Ok(out)
}

/// `MPIDI_RANK_MAP_*` modes.
mod mode {
    pub const DIRECT: i64 = 0;
    pub const DIRECT_INTRA: i64 = 1;
    pub const OFFSET: i64 = 2;
    pub const OFFSET_INTRA: i64 = 3;
    pub const STRIDE: i64 = 4;
    pub const STRIDE_INTRA: i64 = 5;
    pub const STRIDE_BLOCK: i64 = 6;
    pub const STRIDE_BLOCK_INTRA: i64 = 7;
    pub const LUT: i64 = 8;
    pub const LUT_INTRA: i64 = 9;
    pub const MLUT: i64 = 10;
}

/// ch4: the process numbers of `count` ranks through a rank map: world
/// ranks for address-vector table 0, None for other tables (other jobs).
fn rank_map_lpids<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    m: &RankMapLayout,
    v: &View<'_, '_, P>,
    at: u64,
    count: u64,
) -> Result<Vec<Option<u64>>, ReadError> {
    let mode = v.int(at + m.mode)?;
    let avtid = v.int(at + m.avtid)?;
    let int = u64::from(t.sizes.int);
    let reg = at + m.reg;
    let irreg = at + m.irreg;
    let psize = u64::from(t.sizes.pointer);
    let own = |avtid: i64, idx: i64| (avtid == 0).then(|| u64::try_from(idx).ok()).flatten();
    let count_i = i64::try_from(count).map_err(|_| ReadError::OutOfRange)?;
    Ok(match mode {
        mode::DIRECT | mode::DIRECT_INTRA => {
            let av = if mode == mode::DIRECT { avtid } else { 0 };
            (0..count_i).map(|r| own(av, r)).collect()
        }
        mode::OFFSET | mode::OFFSET_INTRA => {
            let av = if mode == mode::OFFSET { avtid } else { 0 };
            let offset = v.int(reg)?;
            (0..count_i).map(|r| own(av, r + offset)).collect()
        }
        mode::STRIDE | mode::STRIDE_INTRA | mode::STRIDE_BLOCK | mode::STRIDE_BLOCK_INTRA => {
            let av = if matches!(mode, mode::STRIDE | mode::STRIDE_BLOCK) {
                avtid
            } else {
                0
            };
            let offset = v.int(reg)?;
            let stride = v.int(reg + int)?;
            let block = v.int(reg + 2 * int)?;
            let blocked = matches!(mode, mode::STRIDE_BLOCK | mode::STRIDE_BLOCK_INTRA);
            (0..count_i)
                .map(|r| {
                    let idx = if blocked && block > 0 {
                        (r / block)
                            .checked_mul(stride - block)
                            .and_then(|x| x.checked_add(r + offset))
                    } else {
                        r.checked_mul(stride).and_then(|x| x.checked_add(offset))
                    };
                    idx.and_then(|i| own(av, i))
                })
                .collect()
        }
        mode::LUT | mode::LUT_INTRA => {
            let av = if mode == mode::LUT { avtid } else { 0 };
            // `irreg.lut` is `{ table object *t; int *lpid; }`.
            let table = v.ptr(irreg + psize)?;
            let raw = t.view(t.check_ptr(table, 4, count * 4)?, count * 4)?;
            (0..count)
                .map(|i| raw.i32(i * 4).map(|idx| own(av, idx)))
                .collect::<Result<_, _>>()?
        }
        mode::MLUT => {
            // `irreg.mlut` is `{ table object *t; {int avtid; int lpid} *gpid; }`.
            let table = v.ptr(irreg + psize)?;
            let raw = t.view(t.check_ptr(table, 4, count * 8)?, count * 8)?;
            (0..count)
                .map(|i| Ok(own(raw.i32(i * 8)?, raw.i32(i * 8 + 4)?)))
                .collect::<Result<_, ReadError>>()?
        }
        _ => vec![None; count as usize],
    })
}

/// The lpids of a communicator's local group and of the group its peers
/// are in, from MPICH's groups when it built them, else from the device.
fn member_lpids<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    v: &View<'_, '_, P>,
    raw: &Raw,
    vc_cache: &mut LpidCache,
) -> (Vec<Option<u64>>, Vec<Option<u64>>) {
    // Sizes bounded as groups are: corrupt memory must not make us allocate
    // without bound.
    let bounded = |n: i64| n.clamp(0, MAX_GROUP as i64) as u64;
    let local_n = bounded(raw.local_size.unwrap_or(raw.remote_size));
    let remote_n = bounded(raw.remote_size);
    let local_n = if raw.inter { local_n } else { remote_n };
    let device = |which_local: bool, vc_cache: &mut LpidCache| {
        let n = if which_local { local_n } else { remote_n };
        match layout.comm.device {
            CommDevice::Ch3 {
                vcrt,
                local_vcrt,
                vcrt_size,
                vcrt_table,
                vc_lpid,
                ..
            } => {
                let at = if which_local && raw.inter {
                    local_vcrt
                } else {
                    vcrt
                };
                v.ptr(at)
                    .ok()
                    .filter(|&p| p != 0)
                    .and_then(|p| vcrt_lpids(t, p, vcrt_size, vcrt_table, vc_lpid, vc_cache).ok())
            }
            CommDevice::Ch4 {
                map,
                local_map,
                rank_map,
            } => {
                let at = if which_local && raw.inter {
                    local_map
                } else {
                    map
                };
                rank_map_lpids(t, &rank_map, v, at, n).ok()
            }
            CommDevice::None => None,
        }
    };
    let from_group = |g: u64| group_lpids(t, layout, g).ok().flatten();
    let world_identity =
        || (raw.handle == HANDLE_COMM_WORLD).then(|| (0..remote_n).map(Some).collect::<Vec<_>>());
    let remote = from_group(if raw.inter {
        raw.remote_group
    } else {
        raw.local_group
    })
    .or_else(|| device(false, vc_cache))
    .or_else(world_identity)
    .unwrap_or_else(|| vec![None; remote_n as usize]);
    let local = if raw.inter {
        from_group(raw.local_group)
            .or_else(|| device(true, vc_cache))
            .unwrap_or_else(|| vec![None; local_n as usize])
    } else {
        remote.clone()
    };
    (local, remote)
}

/// The communicators, and what could not be read.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub comms: Vec<Comm>,
    pub skipped: usize,
    pub stop: Option<Stop>,
    /// The size of MPI_COMM_WORLD and this process's rank in it.
    pub world: Option<(u64, i64)>,
}

/// Walks the list from `head`: every communicator read whole (one fetch
/// each), cycle-checked and capped, then their members translated.
pub fn build<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    head: u64,
    names: Option<&NameMap>,
    keyval: TopoKeyval,
) -> Result<Built, ReadError> {
    let size = layout.comm.size;
    let mut seen = HashSet::new();
    let mut raws: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut built = Built::default();
    let mut cur = head;
    while cur != 0 {
        if let Err(e) = t.check_ptr(cur, t.ptr_align(), size) {
            built.stop = Some(match e {
                ReadError::Budget => return Err(e),
                _ => Stop::BadPointer(cur),
            });
            break;
        }
        if !seen.insert(cur) {
            built.stop = Some(Stop::Cycle(cur));
            break;
        }
        if raws.len() >= MAX_COMMS {
            built.stop = Some(Stop::Limit(MAX_COMMS));
            break;
        }
        let bytes = match t.read_bytes(cur, size as usize) {
            Ok(b) => b,
            Err(ReadError::Budget) => return Err(ReadError::Budget),
            // A communicator freed while we looked: the list ends here.
            Err(ReadError::Unreadable(a)) => {
                built.stop = Some(Stop::Unreadable(a));
                break;
            }
            Err(_) => {
                built.stop = Some(Stop::BadPointer(cur));
                break;
            }
        };
        let next = t
            .view_from(cur, bytes.clone())
            .ptr(layout.comm.next)
            .unwrap_or(0);
        raws.push((cur, bytes));
        cur = next;
    }
    translate(t, layout, raws, names, keyval, built)
}

/// The communicators read whole (`raws`: each one's address and bytes),
/// decoded, their members translated, sorted as MPICH's DLL lists them.
fn translate<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    raws: Vec<(u64, Vec<u8>)>,
    names: Option<&NameMap>,
    keyval: TopoKeyval,
    mut built: Built,
) -> Result<Built, ReadError> {
    let decoded: Vec<(u64, Vec<u8>, Option<Raw>)> = raws
        .into_iter()
        .map(|(addr, bytes)| {
            let raw = decode(&t.view_from(addr, bytes.clone()), layout).ok();
            (addr, bytes, raw)
        })
        .collect();
    // MPI_COMM_WORLD first: its size says which process numbers are world
    // ranks.
    let world = decoded
        .iter()
        .filter_map(|(_, _, r)| r.as_ref())
        .find(|r| r.handle == HANDLE_COMM_WORLD)
        .map(|r| (r.remote_size.max(0) as u64, r.rank));
    built.world = world;
    let tr = Translator {
        world_size: world.map(|w| w.0),
        names,
    };
    let mut vc_cache = LpidCache::default();
    for (addr, bytes, raw) in decoded {
        let Some(raw) = raw else {
            built.skipped += 1;
            continue;
        };
        let v = t.view_from(addr, bytes);
        let (local, remote) = member_lpids(t, layout, &v, &raw, &mut vc_cache);
        let local_ranks: Vec<i64> = local.into_iter().map(|l| tr.global(l)).collect();
        let remote_ranks: Vec<i64> = remote.into_iter().map(|l| tr.global(l)).collect();
        let internal = internal_reason(&raw);
        let name = if raw.name.is_empty() {
            match internal {
                Some(why) => format!("({why}, context {})", raw.recvcontext_id),
                None => format!("(unnamed, context {})", raw.recvcontext_id),
            }
        } else {
            raw.name.clone()
        };
        let size = if raw.inter {
            raw.local_size.unwrap_or(local_ranks.len() as i64)
        } else {
            raw.remote_size
        }
        .clamp(0, MAX_GROUP as i64);
        // mqs_get_comm_group writes exactly `size` ranks, whatever the group
        // MPICH built says (they differ only in corrupt memory).
        let mut local_ranks = local_ranks;
        local_ranks.resize(size as usize, -1);
        // `MPI_Cart_create` makes intracommunicators only; until the first
        // topology is made no attribute is one.
        let cart = match (layout.comm.cart, keyval) {
            (Some(cart), Some(want))
                if want != KEYVAL_INVALID && !raw.inter && raw.attributes != 0 =>
            {
                read_cart(t, &cart, raw.attributes, size, want)
            }
            _ => None,
        };
        built.comms.push(Comm {
            addr,
            handle: raw.handle,
            context_id: raw.context_id,
            recvcontext_id: raw.recvcontext_id,
            name,
            local_rank: raw.rank,
            size,
            inter: raw.inter,
            internal,
            local_ranks,
            remote_ranks,
            cart,
        });
    }
    // As MPICH's own DLL lists them: by receive context id.
    built.comms.sort_by_key(|c| (c.recvcontext_id, c.addr));
    Ok(built)
}

/// Builtin communicators (`MPIR_COMM_N_BUILTIN`): world, self, MPICH's
/// internal copy of the world.
pub const N_BUILTIN: u64 = 3;
/// `MPIR_COMM` in `MPII_Object_kind`: the object kind communicator
/// handles carry ([`objects`]).
const KIND_COMM: u32 = 0x1;

/// Communicator objects read whole: each one's address and bytes.
pub type Objects = Vec<(u64, Vec<u8>)>;

/// Where the pool's objects are in a process: `&MPIR_Comm_builtin` and
/// `&MPIR_Comm_mem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSymbols {
    pub builtin: u64,
    pub mem: u64,
}

/// The communicator objects in use, each read whole: those whose handle is
/// the one its place in the pool gives and whose reference count is above
/// 0; and why the walk stopped early, if it did.
pub fn pool_objects<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    pool: &CommPoolLayout,
    syms: PoolSymbols,
) -> Result<(Objects, Option<Stop>), ReadError> {
    let size = layout.comm.size;
    let f = &pool.alloc;
    let a = t.view(t.check_ptr(syms.mem, t.ptr_align(), f.size)?, f.size)?;
    // Set up at the first allocation: before it, only the builtins exist.
    let obj_size = u64::try_from(a.i32(pool.obj_size)?).unwrap_or(0);
    let count = |off: u64| -> Result<u64, ReadError> {
        u64::try_from(a.i32(off)?).map_err(|_| ReadError::OutOfRange)
    };
    let direct = a.ptr(f.direct)?;
    let direct_size = count(f.direct_size)?;
    let blocks = count(f.indirect_size)?;
    let allocated = count(f.num_allocated)?;
    if obj_size != 0 && obj_size != size {
        // Not MPIR_Comm's allocator as the types say: nothing is read in it.
        return Err(ReadError::OutOfRange);
    }
    let allocator = objects::Allocator {
        direct,
        direct_size,
        // The table is only read where there are indirect blocks.
        indirect: if blocks != 0 { a.ptr(f.indirect)? } else { 0 },
        blocks,
        allocated,
    };
    let (mut areas, cut) = allocator.blocks(t, objects::MAX_COMM_BLOCKS);
    // The direct block is set up with the first allocation, which counts
    // it whole.
    areas.retain(|b| b.place != Place::Direct || allocated >= direct_size);
    let mut stop = match cut {
        None => None,
        Some(Cut::Counts { table, .. }) => Some(Stop::BadPointer(table)),
        Some(Cut::Table {
            error: ReadError::Budget,
            ..
        }) => return Err(ReadError::Budget),
        Some(Cut::Table { at, .. }) => Some(Stop::Unreadable(at)),
    };
    let builtin = Block {
        base: syms.builtin,
        objects: N_BUILTIN,
        place: Place::Builtin,
    };
    let mut found = Vec::new();
    for block in std::iter::once(builtin).chain(areas) {
        let v = match block.read(t, size) {
            Ok(v) => v,
            Err(ReadError::Budget) => return Err(ReadError::Budget),
            Err(_) => {
                stop = stop.or(Some(Stop::Unreadable(block.base)));
                continue;
            }
        };
        let first = block.first_handle(KIND_COMM);
        for i in 0..block.objects {
            if found.len() >= MAX_COMMS {
                return Ok((found, Some(Stop::Limit(MAX_COMMS))));
            }
            let o = i * size;
            let (Ok(handle), Ok(refs)) = (v.u32(o + layout.comm.handle), v.i32(o + pool.ref_count))
            else {
                continue;
            };
            if handle as u32 != first + i as u32 || refs <= 0 {
                continue;
            }
            if let Ok(obj) = v.bytes(o, size) {
                found.push((block.base + o, obj.to_vec()));
            }
        }
    }
    Ok((found, stop))
}

/// A fingerprint of the communicators in use: their addresses and the
/// bytes MPICH's DLL interface shows of them change when one is made or
/// freed.
pub fn fingerprint(objects: &[(u64, Vec<u8>)]) -> i64 {
    // FNV-1a over every object's address and bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (addr, bytes) in objects {
        for b in addr.to_le_bytes().iter().chain(bytes.iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as i64
}

/// The communicators in use in the pool, as [`build`] makes them from
/// the list.
pub fn build_from_pool<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    pool: &CommPoolLayout,
    syms: PoolSymbols,
    names: Option<&NameMap>,
    keyval: TopoKeyval,
) -> Result<Built, ReadError> {
    let (raws, stop) = pool_objects(t, layout, pool, syms)?;
    let built = Built {
        stop,
        ..Built::default()
    };
    translate(t, layout, raws, names, keyval, built)
}
