//! The communicator table (`ompi_mpi_communicators`, an
//! `opal_pointer_array_t`) and what the DLL keeps of each communicator.

use std::collections::HashMap;

use mqs_abi::{Cartesian, Communicator};

use crate::access::ProcessAccess;
use crate::iteration::CommInfo;
use crate::names::NameMap;
use crate::openmpi::groups::{self, Translator, World};
use crate::openmpi::layout::{ContextId, Layout, NameStorage};
use crate::target::{ReadError, Target};

/// Most slots of the communicator table read.
pub const MAX_COMM_SLOTS: u64 = 1 << 20;

/// `OMPI_COMM_INTER` and `OMPI_COMM_ISFREED` in `c_flags`.
const COMM_INTER: u64 = 0x1;
const COMM_ISFREED: u64 = 0x10;
/// `OMPI_COMM_CART` (Open MPI 2.0 and later): `c_topo` holds a grid.
const COMM_CART: u64 = 0x100;

/// One communicator as the DLL shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub addr: u64,
    /// The unique id: `c_index` where the type has it (Open MPI 5),
    /// else `c_contextid`; either way the communicator's slot in the table
    /// and the context ob1's headers carry.
    pub id: u64,
    pub name: String,
    pub local_rank: i64,
    /// Size of the local group.
    pub size: i64,
    pub inter: bool,
    /// Global ranks of the local group's members.
    pub local_ranks: Vec<i64>,
    /// Global ranks of the group peers are named in: the remote group of an
    /// intercommunicator, the local group otherwise.
    pub remote_ranks: Vec<i64>,
    /// ob1's `mca_pml_ob1_comm_t`, 0 if none.
    pub pml_comm: u64,
    /// Open MPI 5's 128-bit id (`cid_base`, `cid_sub`): how a CID header
    /// names the communicator.
    pub extended_id: Option<(u64, u64)>,
    /// Its grid, if `MPI_Cart_create` made it.
    pub cart: Option<Cartesian>,
}

impl CommInfo for Comm {
    fn to_abi(&self) -> Communicator {
        Communicator {
            unique_id: self.id,
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

/// What identifies a state of the communicator table: rebuild when it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub lowest_free: i64,
    pub number_free: i64,
    pub size: i64,
    pub addr: u64,
    /// FNV-1a over the slot pointers.
    pub hash: u64,
}

/// The table's slots as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub signature: Signature,
    pub slots: Vec<u64>,
}

fn fnv1a(values: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Reads the table header and its slots (one fetch for the slots).
pub fn read_table<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    table: u64,
) -> Result<Table, ReadError> {
    let pa = &layout.pointer_array;
    let len = [pa.lowest_free, pa.number_free, pa.size, pa.addr]
        .into_iter()
        .max()
        .unwrap_or(0)
        + 8;
    let v = t.view(t.check_ptr(table, t.ptr_align(), len)?, len)?;
    let size = v.int(pa.size)?;
    let lowest_free = v.int(pa.lowest_free)?;
    let number_free = v.int(pa.number_free)?;
    let addr = v.ptr(pa.addr)?;
    let count = u64::try_from(size)
        .ok()
        .filter(|&n| n <= MAX_COMM_SLOTS)
        .ok_or(ReadError::OutOfRange)?;
    let psize = u64::from(t.sizes.pointer);
    let slots = if count == 0 {
        Vec::new()
    } else {
        let raw = t.view(t.check_ptr(addr, psize, count * psize)?, count * psize)?;
        (0..count)
            .map(|i| raw.ptr(i * psize))
            .collect::<Result<Vec<_>, _>>()?
    };
    Ok(Table {
        signature: Signature {
            lowest_free,
            number_free,
            size,
            addr,
            hash: fnv1a(&slots),
        },
        slots,
    })
}

/// The raw fields of one communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawComm {
    id: u64,
    /// Open MPI 5's extended context id (`cid_base`, `cid_sub`), the same
    /// in every process of the communicator: shown in an unnamed one's name.
    extended_id: Option<(u64, u64)>,
    name: String,
    my_rank: i64,
    flags: u64,
    local_group: u64,
    remote_group: u64,
    pml_comm: u64,
    /// `c_topo`, 0 if the type has none.
    topo: u64,
}

fn read_comm<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    addr: u64,
) -> Result<RawComm, ReadError> {
    let c = &layout.comm;
    let v = t.view(t.check_ptr(addr, t.ptr_align(), c.size)?, c.size)?;
    let name = match c.name_storage {
        NameStorage::Inline(len) => v.chars(c.name, len)?,
        NameStorage::Pointer => match v.ptr(c.name)? {
            0 => String::new(),
            p => t.read_cstring(p, 256).unwrap_or_default(),
        },
    };
    let (id, extended_id) = match (c.index, c.contextid_kind) {
        (Some(index), ContextId::Extended { base, sub }) => (
            v.u32(index)?,
            Some((v.u64(c.contextid + base)?, v.u64(c.contextid + sub)?)),
        ),
        (Some(index), ContextId::U32) => (v.u32(index)?, None),
        (None, _) => (v.u32(c.contextid)?, None),
    };
    Ok(RawComm {
        id,
        extended_id,
        name,
        my_rank: v.int(c.my_rank)?,
        flags: v.u32(c.flags)?,
        local_group: v.ptr(c.local_group)?,
        remote_group: v.ptr(c.remote_group)?,
        pml_comm: c.pml_comm.map(|o| v.ptr(o)).transpose()?.unwrap_or(0),
        topo: c
            .cart
            .map(|cart| v.ptr(cart.topo))
            .transpose()?
            .unwrap_or(0),
    })
}

/// The grid of a communicator whose flags say it has one: `c_topo`'s
/// `mtc.cart`, its dimensions and periods, taken only if they make a grid
/// of the communicator's size (`crate::grid::read_grid`). None where
/// anything does not read or fit: the peers are then shown by rank.
fn read_cart<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    raw: &RawComm,
    size: i64,
) -> Option<Cartesian> {
    let cart = layout.comm.cart?;
    if raw.flags & COMM_CART == 0 || raw.topo == 0 {
        return None;
    }
    let holder = t.read_ptr(raw.topo.checked_add(cart.mtc)?).ok()?;
    let ndims = t.read_int(holder.checked_add(cart.ndims)?).ok()?;
    let dims = t.read_ptr(holder.checked_add(cart.dims)?).ok()?;
    let periods = t.read_ptr(holder.checked_add(cart.periods)?).ok()?;
    crate::grid::read_grid(t, ndims, dims, periods, size)
}

/// Open MPI's communicator table is indexed by context id (5.x: `c_index`), and
/// `ompi_comm_init` gives MPI_COMM_WORLD, MPI_COMM_SELF and MPI_COMM_NULL
/// the ids 0, 1 and 2, for good: MPI_COMM_NULL is known without a read.
pub const SLOT_COMM_NULL: usize = 2;

/// The communicators, MPI_COMM_WORLD's members, and notes on what was
/// skipped.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub comms: Vec<Comm>,
    pub world: World,
    pub skipped: usize,
}

/// Builds the communicator list from the table's slots: reads each
/// communicator and its groups (cached by group address), skips NULL slots
/// and MPI_COMM_NULL, and sorts by unique id.
pub fn build<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    table: &Table,
    own_jobid: Option<u32>,
    names: Option<&NameMap>,
) -> Result<Built, ReadError> {
    // MPI_COMM_WORLD is slot 0 (see SLOT_COMM_NULL). Its symbol is not
    // needed, and would not be trusted anyway: a debugger may resolve a
    // copy-relocated symbol to the library's unused copy.
    let world_addr = table.slots.first().copied().unwrap_or(0);
    let world = match read_comm(t, layout, world_addr) {
        Ok(raw) => groups::read_world(t, layout, raw.local_group, own_jobid).unwrap_or_default(),
        Err(ReadError::Budget) => return Err(ReadError::Budget),
        Err(_) => World {
            jobid: own_jobid,
            ..World::default()
        },
    };
    let tr = Translator {
        world: &world,
        names,
    };
    let mut group_cache: HashMap<u64, Option<Vec<i64>>> = HashMap::new();
    let mut group = |t: &Target<'_, P>, addr: u64| -> Option<Vec<i64>> {
        group_cache
            .entry(addr)
            .or_insert_with(|| tr.group(t, layout, addr).ok())
            .clone()
    };
    let mut built = Built::default();
    let mut seen = std::collections::HashSet::new();
    for (index, &slot) in table.slots.iter().enumerate() {
        if slot == 0 || index == SLOT_COMM_NULL || !seen.insert(slot) {
            continue;
        }
        let raw = match read_comm(t, layout, slot) {
            Ok(raw) => raw,
            Err(ReadError::Budget) => return Err(ReadError::Budget),
            Err(_) => {
                built.skipped += 1;
                continue;
            }
        };
        let inter = raw.flags & COMM_INTER != 0;
        let Some(local) = group(t, raw.local_group) else {
            built.skipped += 1;
            continue;
        };
        // MPI_COMM_NULL, wherever it is: the only intracommunicator
        // without members.
        if local.is_empty() && !inter {
            continue;
        }
        let remote = if inter {
            group(t, raw.remote_group).unwrap_or_default()
        } else {
            local.clone()
        };
        let cart = if inter {
            None
        } else {
            read_cart(t, layout, &raw, local.len() as i64)
        };
        let mut name = if raw.name.is_empty() {
            match raw.extended_id {
                Some((base, sub)) => format!("(unnamed, id {}, cid {base:#x}:{sub:#x})", raw.id),
                None => format!("(unnamed, id {})", raw.id),
            }
        } else {
            raw.name
        };
        if raw.flags & COMM_ISFREED != 0 {
            name.push_str(" [freed]");
        }
        built.comms.push(Comm {
            addr: slot,
            id: raw.id,
            name,
            local_rank: raw.my_rank,
            size: local.len() as i64,
            inter,
            local_ranks: local,
            remote_ranks: remote,
            pml_comm: raw.pml_comm,
            extended_id: raw.extended_id,
            cart,
        });
    }
    built.comms.sort_by_key(|c| (c.id, c.addr));
    built.world = world;
    Ok(built)
}
