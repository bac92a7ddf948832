//! Symbols and types of a process's loaded objects, for the DLL's
//! `find_symbol`, `find_function`, `find_type`, `field_offset` and `sizeof`
//! callbacks.
//!
//! - [`SymbolIndex`]: one process; objects in load order with load biases.
//! - [`SymbolCache`]: parsed files shared between the processes of a job.
//! - [`ObjectSymbols`]: one ELF file: `.symtab` and `.dynsym` (the debug
//!   file's `.symtab` too when stripped); a DWARF type index built on first
//!   use, from the file itself, its separate debug file (build-id or
//!   `.gnu_debuglink`) and its dwz supplementary file (`.gnu_debugaltlink`).
//! - [`typepack`]: type packs, the types and hidden symbols of a stripped
//!   library kept by its build-id; [`DebugFileFetcher`]: debug files fetched
//!   by build-id (a debuginfod client, given by the layer above).
//! - [`load_bias`]: turns the lowest mapping of a file into the bias to add.

mod cache;
mod debug_files;
mod demangle;
mod dwarf_data;
mod elf;
mod fetch;
mod index;
mod lines;
mod mapped;
mod object;
mod params;
mod symtab;
mod type_index;
pub mod typepack;
mod types;

use std::path::Path;

pub use cache::{SymbolCache, SymbolSources};
pub use demangle::demangle;
pub use dwarf_data::SectionBytes;
pub use dwarf_data::Slice as DwarfSlice;
pub use fetch::DebugFileFetcher;
pub use index::SymbolIndex;
pub use lines::{LineTables, SourceFrame};
pub use object::{ObjectSymbols, Symbol, TypeIndexStats, TypeSource, UnwindSections};
pub use params::{Parameter, Pointee};
pub use types::{TypeInfo, TypeKind};

use crate::Result;

/// The load bias of the ELF file at `path` (runtime address = st_value +
/// bias) given its lowest mapping in a process: the mapping's start address
/// and the file offset it maps (as a process's memory map shows them). Works for
/// executables (PIE or not: a non-PIE one gets 0) and shared objects.
pub fn load_bias(
    path: &Path,
    lowest_mapping_start: u64,
    that_mapping_file_offset: u64,
) -> Result<u64> {
    elf::ElfFile::open(path)?.load_bias(lowest_mapping_start, that_mapping_file_offset)
}
