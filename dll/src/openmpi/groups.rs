//! Groups and global ranks.
//!
//! An `ompi_group_t` lists its members as `ompi_proc_t *` (dense "plist"
//! storage) or, with the sparse-group MCA option, as ranks of a parent group
//! (sporadic ranges, a stride, or a bitmap). A member pointer may also be a
//! *sentinel*: an encoded process name with the low bit set, for processes
//! Open MPI has not allocated a proc for yet. A member's global rank is found
//! by matching its pointer against MPI_COMM_WORLD's group, else by its
//! process name (jobid, vpid): in our own job the vpid is the world rank.
//! With MPI-2 the debugger's identities (job table) take precedence; the
//! processes of other jobs are MPI-2's new processes.

use std::collections::HashMap;

use mqs_abi::ProcessLocation;

use crate::access::ProcessAccess;
use crate::names::{identity_of, NameMap, ProcName};
use crate::openmpi::layout::{GroupLayout, Layout, SparseLayout, SparseStructs};
use crate::openmpi::lists;
use crate::target::{ReadError, Target, View};

/// Most members a group may have.
pub const MAX_GROUP: u64 = 1 << 20;
/// Deepest chain of sparse parent groups followed.
const MAX_PARENT_DEPTH: u32 = 8;

const GROUP_SPORADIC: u64 = 0x08;
const GROUP_STRIDED: u64 = 0x10;
const GROUP_BITMAP: u64 = 0x20;

/// MPI_COMM_WORLD's members, for translating other groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct World {
    /// Member pointer -> world rank.
    pub procs: HashMap<u64, i64>,
    /// Our own job's id, when it could be learned.
    pub jobid: Option<u32>,
    pub size: usize,
}

/// Decodes a sentinel member pointer (low bit set) into a process name.
pub fn sentinel_name(ptr: u64, pointer_size: u8, own_jobid: Option<u32>) -> Option<ProcName> {
    if ptr & 1 == 0 {
        return None;
    }
    if pointer_size >= 8 {
        // bit 0: 1, bits 1-15: local jobid, 16-31: job family, 32-63: vpid.
        let local = ((ptr >> 1) & 0x7fff) as u32;
        let family = ((ptr >> 16) & 0xffff) as u32;
        Some(ProcName {
            jobid: (family << 16) | local,
            vpid: (ptr >> 32) as u32,
        })
    } else {
        // 32-bit pointers only hold a vpid of our own job.
        Some(ProcName {
            jobid: own_jobid?,
            vpid: (ptr >> 1) as u32,
        })
    }
}

/// The process name stored in an `ompi_proc_t`.
pub fn proc_name<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    proc_ptr: u64,
) -> Result<ProcName, ReadError> {
    let at = t.check_ptr(proc_ptr, 4, layout.proc_.name + 8)? + layout.proc_.name;
    let v = t.view(at, 8)?;
    Ok(ProcName {
        jobid: v.u32(0)? as u32,
        vpid: v.u32(4)? as u32,
    })
}

/// The name of a member pointer, sentinel or real.
pub fn member_name<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    world: &World,
    ptr: u64,
) -> Option<ProcName> {
    if ptr & 1 == 1 {
        return sentinel_name(ptr, t.sizes.pointer, world.jobid);
    }
    proc_name(t, layout, ptr).ok()
}

/// Translates group members to global ranks (-1 when unknown).
#[derive(Debug)]
pub struct Translator<'x> {
    pub world: &'x World,
    /// MPI-2 identities; when non-empty they are the global ranks.
    pub names: Option<&'x NameMap>,
}

impl Translator<'_> {
    /// The global rank of one member pointer.
    pub fn member<P: ProcessAccess + ?Sized>(
        &self,
        t: &Target<'_, P>,
        layout: &Layout,
        ptr: u64,
    ) -> i64 {
        if ptr == 0 {
            return -1;
        }
        if let Some(names) = self.names.filter(|n| !n.is_empty()) {
            // A world member's name is (our job, its world rank): no read.
            let name = match (self.world.procs.get(&ptr), self.world.jobid) {
                (Some(&rank), Some(jobid)) => u32::try_from(rank)
                    .ok()
                    .map(|vpid| ProcName { jobid, vpid }),
                _ => member_name(t, layout, self.world, ptr),
            };
            return name.and_then(|n| identity_of(names, n)).unwrap_or(-1);
        }
        if let Some(&rank) = self.world.procs.get(&ptr) {
            return rank;
        }
        match (member_name(t, layout, self.world, ptr), self.world.jobid) {
            (Some(name), Some(job)) if name.jobid == job => i64::from(name.vpid),
            _ => -1,
        }
    }

    /// The global ranks of a group's members, in group rank order.
    pub fn group<P: ProcessAccess + ?Sized>(
        &self,
        t: &Target<'_, P>,
        layout: &Layout,
        group: u64,
    ) -> Result<Vec<i64>, ReadError> {
        let members = group_members(t, layout, group, 0)?;
        Ok(members
            .into_iter()
            .map(|m| match m {
                Member::Ptr(p) => self.member(t, layout, p),
                Member::Unknown => -1,
            })
            .collect())
    }
}

/// One member as the group stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Ptr(u64),
    Unknown,
}

/// The number of members of a group.
pub fn group_size<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    g: &GroupLayout,
    group: u64,
) -> Result<u64, ReadError> {
    let at = t.check_ptr(group, t.ptr_align(), g.size)?;
    let count = t.view(at, g.size)?.int(g.proc_count)?;
    u64::try_from(count)
        .ok()
        .filter(|&c| c <= MAX_GROUP)
        .ok_or(ReadError::OutOfRange)
}

/// The member pointers of a group, resolving sparse storage through its
/// parents (bounded depth).
pub fn group_members<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    group: u64,
    depth: u32,
) -> Result<Vec<Member>, ReadError> {
    let g = &layout.group;
    let at = t.check_ptr(group, t.ptr_align(), g.size)?;
    let view = t.view(at, g.size)?;
    let count = u64::try_from(view.int(g.proc_count)?)
        .ok()
        .filter(|&c| c <= MAX_GROUP)
        .ok_or(ReadError::OutOfRange)?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let flags = view.u32(g.flags)?;
    let pointers = view.ptr(g.proc_pointers)?;
    let psize = u64::from(t.sizes.pointer);
    if pointers != 0 {
        let table = t.check_ptr(pointers, psize, count * psize)?;
        let raw = t.view(table, count * psize)?;
        return (0..count)
            .map(|i| Ok(Member::Ptr(raw.ptr(i * psize)?)))
            .collect();
    }
    let sparse_kind = flags & (GROUP_SPORADIC | GROUP_STRIDED | GROUP_BITMAP);
    let (Some(sp), true) = (g.sparse, sparse_kind != 0 && depth < MAX_PARENT_DEPTH) else {
        return Ok(vec![Member::Unknown; count as usize]);
    };
    let parent = view.ptr(sp.parent)?;
    let parent_members = group_members(t, layout, parent, depth + 1)?;
    let to_parent = sparse_to_parent(t, &sp, &view, flags, count)?;
    Ok(to_parent
        .into_iter()
        .map(
            |r| match r.and_then(|r| parent_members.get(r as usize).copied()) {
                Some(m) => m,
                None => Member::Unknown,
            },
        )
        .collect())
}

/// For each child rank, its rank in the parent group (None if unknown).
fn sparse_to_parent<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    sparse: &SparseLayout,
    v: &View<'_, '_, P>,
    flags: u64,
    count: u64,
) -> Result<Vec<Option<u64>>, ReadError> {
    let base = sparse.sparse_data;
    let sp: SparseStructs = sparse.structs(&t.sizes);
    if flags & GROUP_STRIDED != 0 {
        let offset = v.int(base + sp.strided_offset)?;
        let stride = v.int(base + sp.strided_stride)?;
        return Ok((0..count as i64)
            .map(|i| u64::try_from(offset.checked_add(stride.checked_mul(i)?)?).ok())
            .collect());
    }
    if flags & GROUP_SPORADIC != 0 {
        let list = v.ptr(base + sp.sporadic_list)?;
        let len = u64::try_from(v.int(base + sp.sporadic_len)?)
            .ok()
            .filter(|&l| l <= MAX_GROUP)
            .ok_or(ReadError::OutOfRange)?;
        let elem = sp.sporadic_elem.max(1);
        let raw = t.view(t.check_ptr(list, 4, len * elem)?, len * elem)?;
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..len {
            let first = raw.int(i * elem + sp.sporadic_first)?;
            let length = raw.int(i * elem + sp.sporadic_length)?;
            if !(0..=MAX_GROUP as i64).contains(&length) {
                return Err(ReadError::OutOfRange);
            }
            for k in 0..length {
                if out.len() as u64 >= count {
                    break;
                }
                out.push(u64::try_from(first + k).ok());
            }
        }
        out.resize(count as usize, None);
        return Ok(out);
    }
    // Bitmap: child rank i is the i-th set bit.
    let array = v.ptr(base + sp.bitmap_array)?;
    let len = u64::try_from(v.int(base + sp.bitmap_len)?)
        .ok()
        .filter(|&l| l <= MAX_GROUP)
        .ok_or(ReadError::OutOfRange)?;
    let bits = t.read_bytes(t.check_ptr(array, 1, len)?, len as usize)?;
    let mut out = Vec::with_capacity(count as usize);
    for (byte_index, byte) in bits.iter().enumerate() {
        for bit in 0..8u64 {
            if byte & (1 << bit) != 0 && (out.len() as u64) < count {
                out.push(Some(byte_index as u64 * 8 + bit));
            }
        }
    }
    out.resize(count as usize, None);
    Ok(out)
}

/// Reads MPI_COMM_WORLD's group into a [`World`].
pub fn read_world<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    world_group: u64,
    own_jobid: Option<u32>,
) -> Result<World, ReadError> {
    let members = group_members(t, layout, world_group, 0)?;
    let mut world = World {
        procs: HashMap::new(),
        jobid: own_jobid,
        size: members.len(),
    };
    for (rank, m) in members.iter().enumerate() {
        if let Member::Ptr(p) = *m {
            if p != 0 {
                world.procs.entry(p).or_insert(rank as i64);
            }
        }
    }
    if world.jobid.is_none() {
        // Any member's name tells our job: a sentinel costs nothing to
        // decode, a real proc one read.
        for m in &members {
            if let Member::Ptr(p) = *m {
                if let Some(name) = member_name(t, layout, &world, p) {
                    world.jobid = Some(name.jobid);
                    break;
                }
            }
        }
    }
    Ok(world)
}

/// The processes on `ompi_proc_list` (at `list`) that are not in our own
/// job (`own_jobid`): MPI-2's new processes.
pub fn other_jobs<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    list: u64,
    own_jobid: u32,
) -> Vec<ProcessLocation> {
    let w = lists::opal_list(t, &layout.list, list, 1 << 16);
    let mut out = Vec::new();
    for item in w.items {
        let Ok(name) = proc_name(t, layout, item) else {
            continue;
        };
        if name.jobid == own_jobid {
            continue;
        }
        let host = layout
            .proc_
            .hostname
            .and_then(|off| t.read_ptr(item + off).ok())
            .filter(|&a| a != 0)
            .and_then(|a| t.read_cstring(a, 63).ok())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "(unknown)".to_string());
        out.push(ProcessLocation {
            // Open MPI keeps neither the pid nor the executable of processes
            // of other jobs; say so rather than guess.
            pid: 0,
            image_name: format!(
                "(unknown: Open MPI process jobid {:#x} vpid {}; pid and executable not recorded)",
                name.jobid, name.vpid
            ),
            host_name: host,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_decode_like_open_mpi() {
        // jobid = family << 16 | local; vpid in the high half.
        let family = 0x1234u64;
        let local = 0x0005u64;
        let vpid = 7u64;
        let s = 1 | (local << 1) | (family << 16) | (vpid << 32);
        assert_eq!(
            sentinel_name(s, 8, None),
            Some(ProcName {
                jobid: 0x1234_0005,
                vpid: 7
            })
        );
        assert_eq!(sentinel_name(s & !1, 8, None), None);
        assert_eq!(
            sentinel_name((3 << 1) | 1, 4, Some(9)),
            Some(ProcName { jobid: 9, vpid: 3 })
        );
        assert_eq!(sentinel_name(7, 4, None), None);
    }
}
