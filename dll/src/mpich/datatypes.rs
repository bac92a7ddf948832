//! MPICH datatypes: from a handle to the object's size and name.
//!
//! An `MPI_Datatype` is an int whose top two bits say where the object is:
//! builtin (01: `MPIR_Datatype_builtin[handle & 0xff]`, its size also in
//! bits 8-15 of the handle), direct (10: `MPIR_Datatype_direct[handle &
//! 0x03ffffff]`) or indirect (11: block `(handle >> 12) & 0x3fff`, index
//! `handle & 0xfff` of `MPIR_Datatype_mem`'s blocks); bits 26-29 say the
//! object kind (3 for datatypes). These encodings are MPICH's handle
//! scheme (`mpir_objects.h`), unchanged since MPICH2.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use crate::access::ProcessAccess;
use crate::mpich::layout::Layout;
use crate::mpich::objects::{self, HANDLE_BUILTIN, HANDLE_DIRECT, HANDLE_INDIRECT};
use crate::mpich::Symbols;
use crate::target::{ReadError, Target};
use crate::walk::AddrHasher;

/// `MPIR_DATATYPE` in `HANDLE_GET_MPI_KIND`.
const MPI_KIND_DATATYPE: u32 = 3;
/// `MPI_DATATYPE_NULL`.
pub const DATATYPE_NULL: u32 = 0x0c00_0000;

/// A datatype's name (empty if none) and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datatype {
    /// Shared: every operation of a queue of 100,000 takes its datatype
    /// from the cache.
    pub name: Arc<str>,
    pub size: u64,
}

/// Datatypes read so far this stop, by handle.
pub type Cache = HashMap<u32, Option<Datatype>, BuildHasherDefault<AddrHasher>>;

/// Where the object of a datatype handle is, if the handle is valid.
fn object<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    syms: &Symbols,
    handle: u32,
) -> Result<Option<u64>, ReadError> {
    let Some(dt) = layout.datatype else {
        return Ok(None);
    };
    if objects::mpi_kind(handle) != MPI_KIND_DATATYPE {
        return Ok(None);
    }
    let obj = dt.size;
    Ok(match objects::handle_kind(handle) {
        // A builtin datatype's index is its handle's low byte (its size
        // the next).
        HANDLE_BUILTIN => syms
            .dt_builtin
            .map(|base| base + u64::from(handle & 0xff) * obj),
        HANDLE_DIRECT => syms
            .dt_direct
            .map(|base| base + u64::from(objects::direct_index(handle)) * obj),
        HANDLE_INDIRECT => {
            let (Some(mem), Some(alloc)) = (syms.dt_mem, layout.alloc) else {
                return Ok(None);
            };
            let v = t.view(t.check_ptr(mem, t.ptr_align(), alloc.read)?, alloc.read)?;
            let table = v.ptr(alloc.indirect)?;
            let blocks = v.int(alloc.indirect_size)?;
            let size = u64::try_from(v.int(alloc.obj_size)?).unwrap_or(0);
            objects::indirect_object(t, table, blocks, size, handle)?
        }
        _ => None,
    })
}

/// Reads a datatype's size and name, cached by handle.
pub fn datatype<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    syms: &Symbols,
    cache: &mut Cache,
    handle: u32,
) -> Option<Datatype> {
    if let Some(known) = cache.get(&handle) {
        return known.clone();
    }
    let read = || -> Result<Option<Datatype>, ReadError> {
        let builtin_size = (objects::handle_kind(handle) == HANDLE_BUILTIN)
            .then(|| u64::from((handle >> 8) & 0xff));
        let Some(dt) = layout.datatype else {
            return Ok(builtin_size.map(|size| Datatype {
                name: Arc::from(""),
                size,
            }));
        };
        let Some(addr) = object(t, layout, syms, handle)? else {
            return Ok(builtin_size.map(|size| Datatype {
                name: Arc::from(""),
                size,
            }));
        };
        let len = (dt.name + dt.name_len).max(dt.size_field + u64::from(layout.aint_size));
        let v = t.view(t.check_ptr(addr, t.ptr_align(), len)?, len)?;
        let size = match builtin_size {
            Some(s) => s,
            None => v.uint(dt.size_field, layout.aint_size)?,
        };
        Ok(Some(Datatype {
            name: v.chars(dt.name, dt.name_len)?.into(),
            size,
        }))
    };
    let found = match read() {
        Ok(d) => d,
        // What the handle says of a builtin is right even if its object is
        // unreadable.
        Err(_) => (objects::handle_kind(handle) == HANDLE_BUILTIN).then(|| Datatype {
            name: Arc::from(""),
            size: u64::from((handle >> 8) & 0xff),
        }),
    };
    cache.insert(handle, found.clone());
    found
}

/// "N x NAME", or what is known of the datatype.
pub fn count_line(count: u64, dt: Option<&Datatype>, handle: u32) -> String {
    match dt {
        Some(d) if !d.name.is_empty() => format!("{count} x {}", d.name),
        Some(d) => format!("{count} x datatype {handle:#x} of {} bytes", d.size),
        None => format!("{count} x datatype {handle:#x} (unreadable)"),
    }
}
