//! Checking a pack against a library: the build-id it is keyed by, the
//! symbols both know, and, where the library's DWARF is here, every type,
//! size and field offset.

use std::path::PathBuf;

use mqs_core::symbols::typepack::{FoundPack, PackType, TypePack, TypePacks};
use mqs_core::symbols::ObjectSymbols;
use mqs_core::{Error, Result};

/// What to check.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    pub library: PathBuf,
    pub debug_file: Option<PathBuf>,
    pub debug_dirs: Vec<PathBuf>,
    /// Pack files or directories; empty: the standard places.
    pub packs: Vec<PathBuf>,
}

/// What was verified, one line each.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub pack: PathBuf,
    pub lines: Vec<String>,
}

pub fn check(options: &CheckOptions) -> Result<CheckReport> {
    let library = match &options.debug_file {
        Some(debug) => ObjectSymbols::open_with_debug_file(
            &options.library,
            debug,
            options.debug_dirs.clone(),
        )?,
        None => ObjectSymbols::open(&options.library, options.debug_dirs.clone())?,
    };
    let id = library.build_id_hex().ok_or_else(|| Error::BadInput {
        path: options.library.clone(),
        detail: "it has no build-id, so no pack can be for it".into(),
    })?;
    let found = find(&options.packs, &id)?.ok_or_else(|| Error::BadInput {
        path: options.library.clone(),
        detail: format!("no type pack for build-id {id} in the pack directories"),
    })?;
    let pack = &found.pack;
    let bad = |detail: String| Error::BadInput {
        path: found.path.clone(),
        detail: format!("does not describe {}: {detail}", options.library.display()),
    };
    let mut lines = vec![format!(
        "build-id {id}: the pack's key ({} types, {} symbols, {} functions)",
        pack.types.len(),
        pack.symbols.len(),
        pack.functions.len()
    )];
    if let Some(rebuilt) = &pack.provenance.rebuilt {
        lines.push(format!("provenance: {}", rebuilt.statement));
    }
    let mut exported = 0;
    for (name, s) in pack.symbols.iter().chain(&pack.functions) {
        let here = if library.has_local_dwarf() {
            library
                .data_symbol(name)
                .or_else(|| library.function_symbol(name))
        } else {
            library.exported(name)
        };
        match here {
            Some(h) if h.value != s.value => {
                return Err(bad(format!(
                    "symbol {name} is at {:#x} in the library, {:#x} in the pack",
                    h.value, s.value
                )))
            }
            Some(_) => exported += 1,
            None => {}
        }
    }
    let total = pack.symbols.len() + pack.functions.len();
    lines.push(if exported == total {
        format!("symbols: all {total} agree with the library's")
    } else {
        // A stripped library keeps only its exported symbols: the pack's
        // hidden ones cannot be compared here (the runtime invariants
        // check what is read through them).
        format!(
            "symbols: {exported} of {total} are in the library's symbol table and agree; {} \
             are not there (hidden and stripped), only the pack has them",
            total - exported
        )
    });
    if library.has_local_dwarf() {
        for (name, t) in &pack.types {
            let Some(info) = library.find_type(name) else {
                return Err(bad(format!("type {name} is not in its DWARF")));
            };
            let here = PackType::from_info(&info);
            if here.size != t.size {
                return Err(bad(format!(
                    "sizeof({name}) is {:?} in its DWARF, {:?} in the pack",
                    here.size, t.size
                )));
            }
            for (field, offset) in &t.fields {
                match info.field_offset(field) {
                    Some(o) if o == *offset => {}
                    other => {
                        return Err(bad(format!(
                            "{name}.{field} is at {other:?} in its DWARF, {offset} in the pack"
                        )))
                    }
                }
            }
        }
        lines.push(format!(
            "types: all {} agree with its DWARF ({})",
            pack.types.len(),
            library
                .index_types()
                .dwarf_path
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ));
    } else {
        lines.push(
            "types: not compared (no DWARF for the library here); the runtime invariants \
             check them on every use"
                .into(),
        );
    }
    Ok(CheckReport {
        pack: found.path.clone(),
        lines,
    })
}

/// The pack for `id` among files and directories (or the standard places).
fn find(places: &[PathBuf], id: &str) -> Result<Option<FoundPack>> {
    if places.is_empty() {
        return Ok(TypePacks::standard(Vec::new()).find(id));
    }
    for place in places {
        if place.is_file() {
            let pack = TypePack::load(place)?;
            if pack.build_id.eq_ignore_ascii_case(id) {
                return Ok(Some(FoundPack {
                    path: place.clone(),
                    pack: pack.into(),
                    borrowed: false,
                }));
            }
        } else if let Some(found) = TypePacks::new(vec![place.clone()]).find(id) {
            return Ok(Some(found));
        }
    }
    Ok(None)
}
