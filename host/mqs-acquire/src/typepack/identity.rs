//! Whether a rebuild of a library loads exactly the bytes the library
//! loads: every allocated section equal (name, type, flags, address, size,
//! contents; NOBITS by size), every PT_LOAD segment equal, all but the
//! build-id note. Then the rebuild's DWARF describes the library, whose own
//! debug file we do not have. The one other difference accepted is a newer
//! linker's order of the imported symbols, when proven to be nothing else
//! ([`super::plt_order`]).

use std::path::Path;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{elf, Endianness};

use super::plt_order::{self, Sec};
use mqs_core::hex::hex;
use mqs_core::symbols::typepack::Rebuilt;
use mqs_core::{Error, Result};

/// The one section allowed to differ: it holds the build-id itself.
const BUILD_ID_NOTE: &str = ".note.gnu.build-id";

/// Compares the loaded parts of `library` and `rebuild`. On success says
/// what was compared; otherwise the first difference, as an error.
pub fn compare_loaded(library: &Path, rebuild: &Path) -> Result<Rebuilt> {
    let a_bytes = read(library)?;
    let b_bytes = read(rebuild)?;
    let a = parse(library, &a_bytes)?;
    let b = parse(rebuild, &b_bytes)?;
    let differ = |detail: String| Error::BadInput {
        path: rebuild.to_owned(),
        detail: format!(
            "does not load the same bytes as {}: {detail}",
            library.display()
        ),
    };
    let a_loads = loads(&a)?;
    let b_loads = loads(&b)?;
    if a_loads != b_loads {
        return Err(differ(format!(
            "PT_LOAD segments differ ({a_loads:x?} vs {b_loads:x?})"
        )));
    }
    let a_secs = alloc_sections(library, &a, &a_bytes)?;
    let b_secs = alloc_sections(rebuild, &b, &b_bytes)?;
    let names = |s: &[Section<'_>]| s.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
    if names(&a_secs) != names(&b_secs) {
        return Err(differ(format!(
            "the allocated sections differ: {:?} vs {:?}",
            names(&a_secs),
            names(&b_secs)
        )));
    }
    let mut compared = 0u64;
    let mut identical = Vec::new();
    let mut first_difference = None;
    for (x, y) in a_secs.iter().zip(&b_secs) {
        if (x.sh_type, x.flags, x.addr, x.size) != (y.sh_type, y.flags, y.addr, y.size) {
            return Err(differ(format!(
                "section {} has type/flags/address/size {:?} vs {:?}",
                x.name,
                (x.sh_type, x.flags, x.addr, x.size),
                (y.sh_type, y.flags, y.addr, y.size)
            )));
        }
        if x.name == BUILD_ID_NOTE {
            continue;
        }
        compared += x.data.len() as u64;
        match x.data.iter().zip(y.data).position(|(p, q)| p != q) {
            None => identical.push(x.name.clone()),
            Some(at) => {
                first_difference.get_or_insert_with(|| {
                    format!(
                        "section {} differs at byte {at:#x} (address {:#x})",
                        x.name,
                        x.addr + at as u64
                    )
                });
            }
        }
    }
    let build_id = object::Object::build_id(&b)
        .ok()
        .flatten()
        .map(hex)
        .unwrap_or_default();
    let library_id = object::Object::build_id(&a)
        .ok()
        .flatten()
        .map(hex)
        .unwrap_or_default();
    let mut statement = format!(
        "the DWARF is the rebuild's (build-id {build_id}); the rebuild loads the same bytes \
         as the library (build-id {library_id}): {} allocated sections ({compared} bytes) and \
         every PT_LOAD segment are identical, only the build-id note differs",
        identical.len()
    );
    let mut equivalent = Vec::new();
    if let Some(first) = first_difference {
        // Only a newer linker's order of imports, proven, is accepted.
        let x86_64 = a.elf_header().e_machine(a.endian()) == elf::EM_X86_64;
        let proof = if x86_64 {
            plt_order::explain(&as_secs(&a_secs), &as_secs(&b_secs))
        } else {
            Err("not x86-64".to_string())
        };
        let r = proof.map_err(|why| differ(format!("{first}; {why}")))?;
        statement = format!(
            "the DWARF is the rebuild's (build-id {build_id}); the rebuild loads the same code \
             and data as the library (build-id {library_id}): of {} allocated sections \
             ({compared} bytes) and every PT_LOAD segment, all but the build-id note and {} are \
             identical; those differ only by the order of {} imported (undefined) symbols in \
             .dynsym, as a newer linker put them, so that {} PLT slots call other functions \
             and {} call/jump operands in the code changed with them, each calling the same \
             function in both (checked: every other relocation names the same symbol in both, \
             and every call through a reordered slot calls the same function)",
            identical.len() + r.sections.len(),
            r.sections.join(", "),
            r.symbols,
            r.slots,
            r.operands
        );
        equivalent = r.sections;
    }
    Ok(Rebuilt {
        statement,
        build_id,
        identical_sections: identical,
        equivalent_sections: equivalent,
        bytes_compared: compared,
    })
}

/// The sections but the build-id note, as `plt_order` reads them.
fn as_secs<'s>(secs: &'s [Section<'_>]) -> Vec<Sec<'s>> {
    secs.iter()
        .filter(|x| x.name != BUILD_ID_NOTE)
        .map(|x| Sec {
            name: &x.name,
            sh_type: x.sh_type,
            flags: x.flags,
            addr: x.addr,
            data: x.data,
        })
        .collect()
}

struct Section<'a> {
    name: String,
    sh_type: u32,
    flags: u64,
    addr: u64,
    size: u64,
    data: &'a [u8],
}

/// A library's bytes, or the error naming it.
pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse<'a>(path: &Path, data: &'a [u8]) -> Result<ElfFile64<'a, Endianness>> {
    ElfFile64::parse(data).map_err(|e| Error::ObjectFile {
        path: path.to_owned(),
        detail: format!("not a 64-bit ELF file: {e}"),
    })
}

type Load = (u64, u64, u64, u64, u32);

fn loads(file: &ElfFile64<'_, Endianness>) -> Result<Vec<Load>> {
    let e = file.endian();
    let data = file.data();
    let headers = file
        .elf_header()
        .program_headers(e, data)
        .map_err(|err| Error::ObjectFile {
            path: Default::default(),
            detail: err.to_string(),
        })?;
    Ok(headers
        .iter()
        .filter(|p| p.p_type(e) == elf::PT_LOAD)
        .map(|p| {
            (
                p.p_vaddr(e),
                p.p_offset(e),
                p.p_filesz(e),
                p.p_memsz(e),
                p.p_flags(e).0,
            )
        })
        .collect())
}

fn alloc_sections<'a>(
    path: &Path,
    file: &ElfFile64<'a, Endianness>,
    data: &'a [u8],
) -> Result<Vec<Section<'a>>> {
    let e = file.endian();
    let bad = |detail: String| Error::ObjectFile {
        path: path.to_owned(),
        detail,
    };
    let table = file.elf_section_table();
    let mut out = Vec::new();
    for header in table.iter() {
        let flags = header.sh_flags(e).0;
        if flags & elf::SHF_ALLOC.0 == 0 {
            continue;
        }
        let name = table
            .section_name(e, header)
            .map_err(|err| bad(err.to_string()))?;
        let sh_type = header.sh_type(e).0;
        let contents = if sh_type == elf::SHT_NOBITS.0 {
            &[][..]
        } else {
            header.data(e, data).map_err(|err| bad(err.to_string()))?
        };
        out.push(Section {
            name: String::from_utf8_lossy(name).into_owned(),
            sh_type,
            flags,
            addr: header.sh_addr(e),
            size: header.sh_size(e),
            data: contents,
        });
    }
    Ok(out)
}
