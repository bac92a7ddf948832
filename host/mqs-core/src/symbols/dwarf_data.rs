//! The DWARF sections of one object: in place in the mapped file where they
//! are stored plainly, decompressed into memory where they are compressed,
//! plus the dwz supplementary file's sections when there is one.
//!
//! Readers are borrowed per use (`DwarfData::dwarf`), so nothing here holds
//! a reference into its own map.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gimli::{DwarfSections, EndianSlice, RunTimeEndian, SectionId};
use object::{CompressionFormat, Object, ObjectSection};

use super::elf::ElfFile;
use super::mapped::MappedFile;
use crate::{Error, Result};

pub type Slice<'a> = EndianSlice<'a, RunTimeEndian>;

#[derive(Debug)]
enum SectionData {
    Empty,
    Mapped(Arc<MappedFile>, Range<usize>),
    Owned(Box<[u8]>),
}

impl SectionData {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Empty => &[],
            Self::Mapped(file, range) => &file.bytes()[range.clone()],
            Self::Owned(bytes) => bytes,
        }
    }
}

/// The sections of one file.
#[derive(Debug)]
struct DwarfFile {
    path: PathBuf,
    sections: DwarfSections<SectionData>,
    endian: RunTimeEndian,
}

impl DwarfFile {
    fn load(elf: &ElfFile) -> Result<Self> {
        let obj = elf.object()?;
        let sections = DwarfSections::load(|id| section(elf, &obj, id))?;
        let endian = if elf.little_endian {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        Ok(Self {
            path: elf.path().to_owned(),
            sections,
            endian,
        })
    }
}

/// Type, line and argument lookups never read macro or name index
/// sections; leaving them empty spares their decompression.
fn wanted(id: SectionId) -> bool {
    matches!(
        id,
        SectionId::DebugAbbrev
            | SectionId::DebugAddr
            | SectionId::DebugAranges
            | SectionId::DebugRanges
            | SectionId::DebugRngLists
            | SectionId::DebugInfo
            | SectionId::DebugLine
            | SectionId::DebugLineStr
            | SectionId::DebugStr
            | SectionId::DebugStrOffsets
            | SectionId::DebugTypes
            // Where arguments are (stacks' frame arguments).
            | SectionId::DebugLoc
            | SectionId::DebugLocLists
    )
}

/// The bytes of one section of an object file (in place in its map, or
/// decompressed), for readers outside this module (the unwinder).
#[derive(Debug)]
pub struct SectionBytes(SectionData);

impl SectionBytes {
    /// Section `name` of `elf`, if it has one with contents.
    pub(crate) fn of(elf: &ElfFile, obj: &object::File<'_>, name: &str) -> Option<Self> {
        match section_named(elf, obj, name) {
            Ok(SectionData::Empty) | Err(_) => None,
            Ok(data) => Some(Self(data)),
        }
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

fn section(elf: &ElfFile, obj: &object::File<'_>, id: SectionId) -> Result<SectionData> {
    if !wanted(id) {
        return Ok(SectionData::Empty);
    }
    section_named(elf, obj, id.name())
}

fn section_named(elf: &ElfFile, obj: &object::File<'_>, name: &str) -> Result<SectionData> {
    let bad = |detail: String| Error::ObjectFile {
        path: elf.path().to_owned(),
        detail: format!("{name}: {detail}"),
    };
    let Some(section) = obj.section_by_name(name) else {
        return Ok(SectionData::Empty);
    };
    let range = section
        .compressed_file_range()
        .map_err(|e| bad(e.to_string()))?;
    if range.format == CompressionFormat::None {
        // NOBITS sections (as in a stripped file) have no file range.
        let Some((offset, size)) = section.file_range() else {
            return Ok(SectionData::Empty);
        };
        let start = usize::try_from(offset).map_err(|e| bad(e.to_string()))?;
        let end = usize::try_from(size)
            .ok()
            .and_then(|size| start.checked_add(size))
            .filter(|end| *end <= elf.mapped().bytes().len())
            .ok_or_else(|| bad("extends past the end of the file".into()))?;
        return Ok(SectionData::Mapped(elf.mapped().clone(), start..end));
    }
    let data = section
        .uncompressed_data()
        .map_err(|e| bad(e.to_string()))?;
    Ok(SectionData::Owned(data.into_owned().into_boxed_slice()))
}

/// An object's DWARF: its own (or its separate debug file's) sections and
/// those of its dwz supplementary file.
#[derive(Debug)]
pub(crate) struct DwarfData {
    main: DwarfFile,
    sup: Option<DwarfFile>,
    /// Each unit's code ranges, sorted, built on the first lookup of a
    /// function by address (`params`).
    pub(super) code_units: std::sync::OnceLock<Vec<(u64, u64, usize)>>,
}

impl DwarfData {
    pub(crate) fn load(elf: &ElfFile, sup: Option<&ElfFile>) -> Result<Self> {
        Ok(Self {
            main: DwarfFile::load(elf)?,
            sup: sup.map(DwarfFile::load).transpose()?,
            code_units: std::sync::OnceLock::new(),
        })
    }

    /// The file the DWARF is read from (the object or its debug file).
    pub(crate) fn path(&self) -> &Path {
        &self.main.path
    }

    pub(crate) fn sup_path(&self) -> Option<&Path> {
        self.sup.as_ref().map(|s| s.path.as_path())
    }

    /// Readers over the sections; `dwarf.sup()` is the supplementary file.
    pub(crate) fn dwarf(&self) -> gimli::Dwarf<Slice<'_>> {
        let endian = self.main.endian;
        self.main
            .sections
            .borrow_with_sup(self.sup.as_ref().map(|s| &s.sections), |data| {
                EndianSlice::new(data.bytes(), endian)
            })
    }
}
