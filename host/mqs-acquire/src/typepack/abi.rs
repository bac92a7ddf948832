//! Whether a rebuild whose code differs from a library's (another release
//! of the same compiler, headers of a newer point release inlined) still
//! has the library's layouts: a close rebuild. Where the distribution's
//! build environment cannot be had again, byte for byte
//! ([`super::identity`]) is out of reach, and the pack can take from the
//! rebuild only what does not depend on where code and data were placed:
//! the types. Checked here: the same exported and imported symbols, each
//! with the same kind and binding, every exported object of the same size,
//! and the same data sections (by name and size), so that every global
//! object of the library has the rebuild's size; the rebuild's data symbols' addresses are never carried
//! (the extract leaves out the symbols the library hides), and the
//! runtime guard ([`super::guard`]) checks the pack against each process
//! before any DLL reads through it.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol, SectionKind};

use mqs_core::symbols::typepack::Rebuilt;
use mqs_core::{Error, Result};

/// The sections whose sizes are those of the library's global objects.
const DATA_SECTIONS: [&str; 6] = [
    ".data",
    ".bss",
    ".tdata",
    ".tbss",
    ".data.rel.ro",
    ".rodata",
];

/// One dynamic symbol as the ABI sees it: name, kind, defined, global,
/// size.
type AbiSymbol = (String, String, bool, bool, u64);

/// Checks that `rebuild` is a close rebuild of `library`; says what was
/// checked, or the first difference as an error.
pub fn compare_abi(library: &Path, rebuild: &Path) -> Result<Rebuilt> {
    let a_bytes = super::identity::read(library)?;
    let b_bytes = super::identity::read(rebuild)?;
    let a = parse(library, &a_bytes)?;
    let b = parse(rebuild, &b_bytes)?;
    let differ = |detail: String| Error::BadInput {
        path: rebuild.to_owned(),
        detail: format!(
            "is not a close rebuild of {} either: {detail}",
            library.display()
        ),
    };
    let (a_syms, b_syms) = (abi_symbols(&a), abi_symbols(&b));
    if a_syms != b_syms {
        let first = a_syms
            .iter()
            .zip(&b_syms)
            .find(|(x, y)| x != y)
            .map_or_else(
                || format!("{} dynamic symbols vs {}", a_syms.len(), b_syms.len()),
                |(x, y)| format!("{x:?} vs {y:?}"),
            );
        return Err(differ(format!("the dynamic symbols differ: {first}")));
    }
    let mut data = Vec::new();
    for name in DATA_SECTIONS {
        let size = |f: &object::File<'_>| f.section_by_name(name).map(|s| s.size());
        let (x, y) = (size(&a), size(&b));
        // .rodata holds string literals, whose lengths may move with code
        // (assertion texts, function names): compared only for presence.
        if name == ".rodata" {
            if x.is_some() != y.is_some() {
                return Err(differ(format!("one has {name}, the other not")));
            }
            continue;
        }
        if x != y {
            return Err(differ(format!("{name} is {x:?} bytes vs {y:?}")));
        }
        if let Some(size) = x {
            data.push(format!("{name} ({size} bytes)"));
        }
    }
    let text = |f: &object::File<'_>| {
        f.sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| s.size())
            .sum::<u64>()
    };
    let id = |f: &object::File<'_>| {
        f.build_id()
            .ok()
            .flatten()
            .map(mqs_core::hex::hex)
            .unwrap_or_default()
    };
    let (build_id, library_id) = (id(&b), id(&a));
    let statement = format!(
        "the DWARF is a close rebuild's (build-id {build_id}) of the library (build-id \
         {library_id}): its code differs ({} bytes of code vs the library's {}: another \
         release of the compiler or of the headers it inlines), so only its types are taken. \
         Checked: the same {} dynamic symbols, each of the same kind and binding, every \
         object of the same size, and data sections of the same sizes ({}); no symbol the library hides is carried, and \
         each process is checked against the pack before it is read through it",
        text(&b),
        text(&a),
        a_syms.len(),
        data.join(", ")
    );
    Ok(Rebuilt {
        build_id,
        identical_sections: Vec::new(),
        equivalent_sections: data,
        bytes_compared: 0,
        statement,
    })
}

/// The dynamic symbols, sorted: what the library offers and asks for.
fn abi_symbols(file: &object::File<'_>) -> Vec<AbiSymbol> {
    let mut symbols: Vec<AbiSymbol> = file
        .dynamic_symbols()
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?.to_owned();
            Some((
                name,
                format!("{:?}", s.kind()),
                !s.is_undefined(),
                s.is_global(),
                // A function's size is its code's, which differs; an
                // object's is its type's.
                if s.is_undefined() || s.kind() == object::SymbolKind::Text {
                    0
                } else {
                    s.size()
                },
            ))
        })
        .collect();
    symbols.sort();
    symbols
}

fn parse<'a>(path: &Path, data: &'a [u8]) -> Result<object::File<'a>> {
    object::File::parse(data).map_err(|e| Error::ObjectFile {
        path: path.to_owned(),
        detail: format!("not an object file: {e}"),
    })
}
