//! MPICH's object allocators (`MPIR_Object_alloc_t`) and handles
//! (`mpir_objects.h`), walked one bounded way for every kind of object
//! the DLL reads there: communicators (`MPIR_Comm_mem`), requests
//! (`MPIR_Request_mem`, one allocator per VCI) and datatypes
//! (`MPIR_Datatype_mem`).
//!
//! An allocator has a direct block of `direct_size` objects (a static
//! array) and `indirect_size` blocks behind `indirect`, a table of
//! pointers, each block of equally many objects, `num_allocated` in all.
//! A handle says where its object is: its kind in bits 30-31 (builtin 1,
//! direct 2, indirect 3), the object's kind in bits 26-29, an indirect
//! block's number in bits 12-25 and the index in it below, a direct or
//! builtin object's index in bits 0-25. Every object's handle is written
//! when its block is set up and never changes, so it proves an object's
//! place. These are MPICH's handle scheme, unchanged since MPICH2.

use crate::access::{ImageAccess, ProcessAccess};
use crate::target::{ReadError, Target, View};
use crate::types::{Missing, Ty};

/// The allocator's type and the fields read.
pub const ALLOC_TYPE: &str = "MPIR_Object_alloc_t";
pub const ALLOC_DIRECT: &str = "direct";
pub const ALLOC_DIRECT_SIZE: &str = "direct_size";
pub const ALLOC_INDIRECT: &str = "indirect";
pub const ALLOC_INDIRECT_SIZE: &str = "indirect_size";
pub const ALLOC_NUM_ALLOCATED: &str = "num_allocated";
/// The size of one object.
pub const ALLOC_OBJ_SIZE: &str = "size";

/// Most objects one block is believed to hold.
pub const MAX_PER_BLOCK: u64 = 1 << 16;
/// Most indirect blocks believed: of communicators, of one VCI's requests.
pub const MAX_COMM_BLOCKS: u64 = 1 << 13;
pub const MAX_REQUEST_BLOCKS: u64 = 1 << 12;
/// Largest object an indirect handle is believed to name, in bytes.
pub const MAX_OBJECT_SIZE: u64 = 1 << 16;

/// A handle's kind (bits 30-31).
pub const HANDLE_BUILTIN: u32 = 1;
pub const HANDLE_DIRECT: u32 = 2;
pub const HANDLE_INDIRECT: u32 = 3;
const KIND_SHIFT: u32 = 30;
const MPI_KIND_SHIFT: u32 = 26;
const INDIRECT_SHIFT: u32 = 12;

/// Whether a handle is builtin, direct or indirect.
pub fn handle_kind(handle: u32) -> u32 {
    handle >> KIND_SHIFT
}

/// The object kind a handle names (`HANDLE_GET_MPI_KIND`).
pub fn mpi_kind(handle: u32) -> u32 {
    (handle >> MPI_KIND_SHIFT) & 0xf
}

/// A direct object's index.
pub fn direct_index(handle: u32) -> u32 {
    handle & 0x03ff_ffff
}

/// The first handle of a block of `mpi_kind` objects: the builtin, the
/// direct or the `number`th indirect block (the others follow one by one).
pub fn first_handle(kind: u32, mpi_kind: u32, number: u64) -> u32 {
    (kind << KIND_SHIFT) | (mpi_kind << MPI_KIND_SHIFT) | ((number as u32) << INDIRECT_SHIFT)
}

/// Where an `MPIR_Object_alloc_t`'s fields are, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocFields {
    pub size: u64,
    pub direct: u64,
    pub direct_size: u64,
    pub indirect: u64,
    pub indirect_size: u64,
    pub num_allocated: u64,
}

impl AllocFields {
    /// From the allocator's type; the first that is missing said.
    pub(crate) fn resolve<I: ImageAccess>(a: &Ty<'_, I>) -> Result<AllocFields, Missing> {
        Ok(AllocFields {
            size: a.size()?,
            direct: a.field(ALLOC_DIRECT)?,
            direct_size: a.field(ALLOC_DIRECT_SIZE)?,
            indirect: a.field(ALLOC_INDIRECT)?,
            indirect_size: a.field(ALLOC_INDIRECT_SIZE)?,
            num_allocated: a.field(ALLOC_NUM_ALLOCATED)?,
        })
    }
}

/// An allocator as read: its direct block, its table of indirect blocks
/// (`blocks` of them), and how many objects it holds in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocator {
    pub direct: u64,
    pub direct_size: u64,
    pub indirect: u64,
    pub blocks: u64,
    pub allocated: u64,
}

/// Where a block is among its allocator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The builtin objects (not the allocator's: a static array).
    Builtin,
    Direct,
    /// The indirect block of this number.
    Indirect(u64),
}

/// A block of objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub base: u64,
    pub objects: u64,
    pub place: Place,
}

impl Block {
    /// The handle of its first object, if it holds objects of `mpi_kind`.
    pub fn first_handle(&self, mpi_kind: u32) -> u32 {
        match self.place {
            Place::Builtin => first_handle(HANDLE_BUILTIN, mpi_kind, 0),
            Place::Direct => first_handle(HANDLE_DIRECT, mpi_kind, 0),
            Place::Indirect(n) => first_handle(HANDLE_INDIRECT, mpi_kind, n),
        }
    }

    /// Its objects, `size` bytes each, read in one piece.
    pub fn read<'t, 'a, P: ProcessAccess + ?Sized>(
        &self,
        t: &'t Target<'a, P>,
        size: u64,
    ) -> Result<View<'t, 'a, P>, ReadError> {
        let bytes = self.objects * size;
        t.check_ptr(self.base, t.ptr_align(), bytes)
            .and_then(|at| t.view(at, bytes))
    }
}

/// Why the walk of an allocator's blocks stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Counts no allocator has: `blocks` indirect blocks of `per` objects
    /// each, or no table (`table` 0).
    Counts { table: u64, blocks: u64, per: u64 },
    /// The table's entry for block `block`, at `at`, could not be read.
    Table {
        block: u64,
        at: u64,
        error: ReadError,
    },
}

impl Allocator {
    /// Its blocks in handle order: the direct block (where there is one),
    /// then every indirect block in use; each of at most [`MAX_PER_BLOCK`]
    /// objects, at most `max_blocks` indirect ones. Reads only the table
    /// of indirect blocks; the blocks found before the walk stopped, and
    /// why it did.
    pub fn blocks<P: ProcessAccess + ?Sized>(
        &self,
        t: &Target<'_, P>,
        max_blocks: u64,
    ) -> (Vec<Block>, Option<Cut>) {
        let mut found = Vec::new();
        if self.direct != 0 && self.direct_size > 0 {
            found.push(Block {
                base: self.direct,
                objects: self.direct_size.min(MAX_PER_BLOCK),
                place: Place::Direct,
            });
        }
        // Every indirect block holds as many objects.
        let Some(per) = self
            .allocated
            .saturating_sub(self.direct_size)
            .checked_div(self.blocks)
        else {
            return (found, None);
        };
        if self.blocks > max_blocks || per == 0 || per > MAX_PER_BLOCK || self.indirect == 0 {
            let cut = Cut::Counts {
                table: self.indirect,
                blocks: self.blocks,
                per,
            };
            return (found, Some(cut));
        }
        for block in 0..self.blocks {
            let at = self.indirect + block * t.ptr_align();
            match t.read_ptr(at) {
                Ok(0) => {}
                Ok(base) => found.push(Block {
                    base,
                    objects: per,
                    place: Place::Indirect(block),
                }),
                Err(error) => return (found, Some(Cut::Table { block, at, error })),
            }
        }
        (found, None)
    }
}

/// The address of the object an indirect `handle` names, in an
/// allocator whose table at `table` holds `blocks` blocks of objects of
/// `size` bytes each; None for a block past the table or a size no object
/// has. Reads one entry of the table.
pub fn indirect_object<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    table: u64,
    blocks: i64,
    size: u64,
    handle: u32,
) -> Result<Option<u64>, ReadError> {
    let block = i64::from((handle >> INDIRECT_SHIFT) & 0x3fff);
    if block >= blocks || size == 0 || size > MAX_OBJECT_SIZE {
        return Ok(None);
    }
    let psize = t.ptr_align();
    let slot = t.check_ptr(table, psize, (block as u64 + 1) * psize)? + block as u64 * psize;
    let base = t.read_ptr(slot)?;
    Ok(Some(
        t.check_ptr(base, 1, 1)? + u64::from(handle & 0xfff) * size,
    ))
}
