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
//!   library kept by its build-id; [`debuginfod`]: debug files fetched by
//!   build-id.
//! - [`load_bias`]: turns the lowest mapping of a file into the bias to add.

mod cache;
mod debug_files;
pub mod debuginfod;
mod dwarf_data;
mod elf;
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

pub use cache::SymbolCache;
pub use dwarf_data::SectionBytes;
pub(crate) use dwarf_data::Slice as DwarfSlice;
pub use index::SymbolIndex;
pub use lines::{LineTables, SourceFrame};
pub use object::{ObjectSymbols, Symbol, TypeIndexStats, TypeSource, UnwindSections};
pub use types::{TypeInfo, TypeKind};

use crate::Result;

/// mqs's cache directory: `$MQS_CACHE`, else `$XDG_CACHE_HOME/mqs`, else
/// `~/.cache/mqs` (where the type packs a user adds and debuginfod's
/// downloads go).
pub fn cache_root() -> Option<std::path::PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = var("MQS_CACHE") {
        return Some(dir.into());
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Some(std::path::PathBuf::from(dir).join("mqs"));
    }
    var("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/mqs"))
}

/// Where symbol lookups may find types besides the objects' own DWARF.
#[derive(Debug, Clone, Default)]
pub struct SymbolSources {
    /// Directories of separate debug files (before `/usr/lib/debug`).
    pub debug_dirs: Vec<std::path::PathBuf>,
    /// Type pack directories searched before the standard ones.
    pub typepack_dirs: Vec<std::path::PathBuf>,
    /// Ask the servers in `DEBUGINFOD_URLS` (unless `--offline`).
    pub debuginfod: bool,
    /// Show a progress bar while downloading (on a terminal).
    pub progress: bool,
}

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
