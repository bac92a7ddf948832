//! Making a type pack from a library's DWARF (its own, or a separate debug
//! file's, or a rebuild's proven to load the same bytes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::queries::Queries;
use super::{abi, identity};
use mqs_core::symbols::typepack::{
    Checks, PackSymbol, PackType, Provenance, TypePack, FORMAT, VERSION,
};
use mqs_core::symbols::{ObjectSymbols, TypeIndexStats};
use mqs_core::{Error, Result};

/// What to make a pack from.
#[derive(Debug, Clone, Default)]
pub struct ExtractOptions {
    /// The library the pack describes (its build-id is the key).
    pub library: PathBuf,
    /// Its separate debug file, when it has no DWARF itself.
    pub debug_file: Option<PathBuf>,
    /// Where debug files (and dwz files under `.dwz/`) are looked for.
    pub debug_dirs: Vec<PathBuf>,
    /// A rebuild of the library whose DWARF to use instead, after checking
    /// that it loads the same bytes.
    pub built_library: Option<PathBuf>,
    /// Where the rebuild's code differs, take its types alone if it is a
    /// close rebuild ([`super::abi`]): no symbol the library hides.
    pub close_rebuild: bool,
    pub queries: Queries,
    /// Provenance text for the pack.
    pub description: String,
}

/// Makes the pack: every queried type the DWARF has, the queried symbols
/// the library does not export, and the sizes `MPIR_debug_typedefs_sizeof`
/// must hold.
pub fn extract(options: &ExtractOptions) -> Result<TypePack> {
    let library = ObjectSymbols::open(&options.library, options.debug_dirs.clone())?;
    let build_id = library.build_id_hex().ok_or_else(|| Error::BadInput {
        path: options.library.clone(),
        detail: "it has no build-id, and a pack is keyed by one".into(),
    })?;
    let source_path = options
        .built_library
        .clone()
        .unwrap_or_else(|| options.library.clone());
    let source = match &options.debug_file {
        Some(debug) => {
            ObjectSymbols::open_with_debug_file(&source_path, debug, options.debug_dirs.clone())?
        }
        None => ObjectSymbols::open(&source_path, options.debug_dirs.clone())?,
    };
    if !source.has_local_dwarf() {
        return Err(Error::BadInput {
            path: source_path.clone(),
            detail: format!(
                "no DWARF for it here ({}): give its debug file with --debug-file, or the \
                 directory of its debug files with --debug-dir",
                source.notes().join("; ")
            ),
        });
    }
    let (rebuilt, hidden_symbols) = match &options.built_library {
        Some(built) => match identity::compare_loaded(&options.library, built) {
            Ok(same) => (Some(same), true),
            Err(e) if !options.close_rebuild => return Err(e),
            Err(e) => {
                let close =
                    abi::compare_abi(&options.library, built).map_err(|why| Error::BadInput {
                        path: built.clone(),
                        detail: format!("{e}; and {why}"),
                    })?;
                (Some(close), false)
            }
        },
        None => (None, true),
    };
    let TypeIndexStats {
        dwarf_path,
        sup_path,
        ..
    } = source.index_types();

    let mut types = BTreeMap::new();
    for name in &options.queries.types {
        if let Some(info) = source.find_type(name) {
            types.insert(name.clone(), PackType::from_info(&info));
        }
    }
    // The addresses of what the library hides are the rebuild's: carried
    // only where its bytes are the library's.
    let mut symbols = BTreeMap::new();
    for name in &options.queries.symbols {
        if library.exported(name).is_some() || !hidden_symbols {
            continue;
        }
        if let Some(s) = source.data_symbol(name) {
            symbols.insert(
                name.clone(),
                PackSymbol {
                    value: s.value,
                    global: s.global,
                },
            );
        }
    }
    let mut functions = BTreeMap::new();
    for name in &options.queries.functions {
        if library.exported(name).is_some() || !hidden_symbols {
            continue;
        }
        if let Some(s) = source.function_symbol(name) {
            functions.insert(
                name.clone(),
                PackSymbol {
                    value: s.value,
                    global: s.global,
                },
            );
        }
    }
    let file_name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    Ok(TypePack {
        format: FORMAT.into(),
        version: VERSION,
        library: file_name(&options.library),
        build_id,
        provenance: Provenance {
            description: options.description.clone(),
            tool: format!("mqs-dump {} typepack extract", env!("CARGO_PKG_VERSION")),
            dwarf_file: dwarf_path.as_deref().map(describe_file).unwrap_or_default(),
            dwz_file: sup_path.as_deref().map(describe_file),
            rebuilt,
        },
        symbols,
        functions,
        types,
        checks: Checks {
            typedefs_sizeof: typedefs_sizeof(&source),
        },
    })
}

/// A file as a pack records it: its name and build-id, no machine path.
fn describe_file(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    match ObjectSymbols::open(path, Vec::new())
        .ok()
        .and_then(|o| o.build_id_hex())
    {
        Some(id) => format!("{name} (build-id {id})"),
        None => name,
    }
}

/// short, int, long, long long, void *, bool, size_t, as the DWARF sizes
/// them: what Open MPI's `MPIR_debug_typedefs_sizeof` holds.
fn typedefs_sizeof(source: &ObjectSymbols) -> Option<Vec<i64>> {
    let size = |name: &str| {
        source
            .find_type(name)
            .and_then(|t| t.size)
            .and_then(|s| i64::try_from(s).ok())
    };
    let pointer = Some(if source.is_64() { 8 } else { 4 });
    Some(vec![
        size("short")?,
        size("int")?,
        size("long")?,
        size("long long")?,
        pointer?,
        size("_Bool").or_else(|| size("bool"))?,
        size("size_t")?,
    ])
}
