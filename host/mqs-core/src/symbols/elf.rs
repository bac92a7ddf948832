//! What the symbol layer needs from an ELF file's headers: its identity
//! (build-id), its links to separate debug files, its PT_LOAD segments (for
//! the load bias) and where its sections lie.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment};

use super::mapped::MappedFile;
use crate::{Error, Result};

/// A mapped ELF file and the header facts read from it once.
#[derive(Debug)]
pub(crate) struct ElfFile {
    file: Arc<MappedFile>,
    pub(crate) build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: file name and CRC32 of the separate debug file.
    pub(crate) debuglink: Option<(PathBuf, u32)>,
    /// `.gnu_debugaltlink`: path and build-id of the dwz supplementary file.
    pub(crate) altlink: Option<(PathBuf, Vec<u8>)>,
    pub(crate) has_symtab: bool,
    pub(crate) has_dwarf: bool,
    pub(crate) little_endian: bool,
    /// PT_LOAD segments as (p_vaddr, p_offset).
    loads: Vec<(u64, u64)>,
    /// Link-time address ranges of the executable PT_LOAD segments: where
    /// its code lies, to tell which object an instruction address is in.
    pub(crate) code: Vec<std::ops::Range<u64>>,
}

impl ElfFile {
    pub(crate) fn open(path: &Path) -> Result<Self> {
        Self::parse(MappedFile::open(path)?)
    }

    /// The root of the process it was read through, if any.
    pub(crate) fn root(&self) -> Option<&Path> {
        self.file.root()
    }

    pub(crate) fn parse(file: Arc<MappedFile>) -> Result<Self> {
        let bad = |detail: String| Error::ObjectFile {
            path: file.path().to_owned(),
            detail,
        };
        let obj = object::File::parse(file.bytes()).map_err(|e| bad(e.to_string()))?;
        if obj.format() != object::BinaryFormat::Elf {
            return Err(bad(format!("not ELF but {:?}", obj.format())));
        }
        // Malformed notes or link sections only cost us the debug-file
        // lookup, so they are not errors.
        let build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, crc)| (PathBuf::from(OsStr::from_bytes(name)), crc));
        let altlink = obj
            .gnu_debugaltlink()
            .ok()
            .flatten()
            .map(|(name, id)| (PathBuf::from(OsStr::from_bytes(name)), id.to_vec()));
        let has_dwarf = obj
            .section_by_name(".debug_info")
            .is_some_and(|s| s.file_range().is_some_and(|(_, size)| size > 0));
        let loads = obj
            .segments()
            .map(|seg| (seg.address(), seg.file_range().0))
            .collect();
        let code = obj
            .segments()
            .filter(|seg| {
                matches!(seg.flags(), object::SegmentFlags::Elf { p_flags, .. }
                    if p_flags.0 & object::elf::PF_X.0 != 0)
            })
            .map(|seg| seg.address()..seg.address().saturating_add(seg.size()))
            .collect();
        let has_symtab = obj.symbol_table().is_some();
        let little_endian = obj.is_little_endian();
        drop(obj);
        Ok(Self {
            file,
            build_id,
            debuglink,
            altlink,
            has_symtab,
            has_dwarf,
            little_endian,
            loads,
            code,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }

    pub(crate) fn mapped(&self) -> &Arc<MappedFile> {
        &self.file
    }

    /// The parsed file. Parsing only reads headers, so doing it per use is
    /// cheap, and it keeps `ElfFile` free of borrows of its own map.
    pub(crate) fn object(&self) -> Result<object::File<'_>> {
        object::File::parse(self.file.bytes()).map_err(|e| Error::ObjectFile {
            path: self.path().to_owned(),
            detail: e.to_string(),
        })
    }

    /// The load bias of this file when its lowest mapping starts at `start`
    /// and maps file offset `offset` (both as a memory map shows them).
    ///
    /// The mapping holds the PT_LOAD segment with the smallest `p_offset` at
    /// or above `offset` (the kernel maps segments from their page-aligned
    /// offsets), so file offset `offset` sits at vaddr
    /// `p_vaddr - (p_offset - offset)`, and the bias is `start` minus that.
    /// Wrapping arithmetic: a file loaded below its link address has a
    /// "negative" bias, which still adds correctly modulo 2^64.
    pub(crate) fn load_bias(&self, start: u64, offset: u64) -> Result<u64> {
        let (vaddr, p_offset) = self
            .loads
            .iter()
            .filter(|(_, off)| *off >= offset)
            .min_by_key(|(_, off)| *off)
            .copied()
            .ok_or_else(|| Error::ObjectFile {
                path: self.path().to_owned(),
                detail: format!("no PT_LOAD segment at or after file offset {offset:#x}"),
            })?;
        let mapped_vaddr = vaddr.wrapping_sub(p_offset - offset);
        Ok(start.wrapping_sub(mapped_vaddr))
    }
}
