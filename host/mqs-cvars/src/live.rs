//! The control-variable values a running MPI process holds, read from its
//! memory through its symbols and DWARF, without stopping it.
//!
//! - MPICH keeps each variable in a global `MPIR_CVAR_<NAME>` (an int,
//!   double, `const char *` or an inline range of two ints); which ones
//!   exist, and their types, come from the library's own listing.
//! - Open MPI keeps its MCA variable registry in the file-static
//!   `opal_pointer_array_t mca_base_vars` of libopen-pal: records of type
//!   `mca_base_var_t` with the full name, type, a pointer to the storage
//!   and where the value came from. Their layouts come from DWARF, so
//!   libopen-pal must have it (a `-g` build).
//!
//! Every walk is bounded; a value that cannot be read says why.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::{Datatype, Family, Listing, Value};
use crate::Result;
use mqs_acquire::Error as AcquireError;
use mqs_core::interface::{read_c_string, Environment, Target};
use mqs_core::symbols::SymbolIndex;

/// Most variables believed in Open MPI's registry.
const MAX_VARS: i32 = 1 << 16;
/// Longest string value read.
const MAX_STRING: usize = 64 * 1024;
/// Longest name read.
const MAX_NAME: usize = 1024;

/// Where a value came from, as far as the process shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// The library's default.
    Default,
    /// An environment variable of the process (`NAME=value`).
    Environment { variable: String },
    /// A parameter file.
    File {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// The launcher's command line (`mpirun --mca`).
    CommandLine,
    /// Set while running (MPI_T_cvar_write, or the library itself).
    Set,
    /// Open MPI's override file.
    Override {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// Changed while running: not the default, and neither the
    /// environment, a file nor the command line set it.
    Changed,
    /// A source code mqs does not know.
    Unknown,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Environment { variable } => write!(f, "environment {variable}"),
            Source::File { path: Some(p) } => write!(f, "file {p}"),
            Source::File { path: None } => f.write_str("a parameter file"),
            Source::CommandLine => f.write_str("command line"),
            Source::Set => f.write_str("set at run time"),
            Source::Override { path: Some(p) } => write!(f, "override file {p}"),
            Source::Override { path: None } => f.write_str("override file"),
            Source::Changed => f.write_str("the program or library, while running"),
            Source::Unknown => f.write_str("an unknown source"),
        }
    }
}

/// One variable in one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveValue {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Why there is no value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<String>,
    /// Where the value came from, when the process says (Open MPI's
    /// registry does; for MPICH only the environment can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// The values of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessValues {
    pub pid: i32,
    pub values: Vec<LiveValue>,
}

/// The MPI library a process has mapped.
pub fn mpi_library(target: &dyn Target) -> Result<PathBuf> {
    let objects = target.mapped_objects()?;
    objects
        .iter()
        .map(|o| o.path.clone())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libmpi.so"))
        })
        .ok_or_else(|| {
            AcquireError::NotMpi {
                pid: target.pid(),
                detail: "it has no libmpi.so mapped".into(),
            }
            .into()
        })
}

/// Reads the values of `listing`'s variables (MPICH) or of the whole
/// registry (Open MPI) from a process.
pub fn read(
    target: &dyn Target,
    symbols: &SymbolIndex,
    listing: &Listing,
    env: &Environment,
) -> Result<ProcessValues> {
    let values = match listing.family {
        Family::Mpich => read_mpich(target, symbols, listing, env),
        Family::OpenMpi => read_open_mpi(target, symbols, env)?,
    };
    Ok(ProcessValues {
        pid: target.pid(),
        values,
    })
}

fn read_mpich(
    target: &dyn Target,
    symbols: &SymbolIndex,
    listing: &Listing,
    env: &Environment,
) -> Vec<LiveValue> {
    listing
        .variables
        .iter()
        .map(|v| {
            let mut live = LiveValue {
                name: v.name.clone(),
                value: None,
                no_value: None,
                source: mpich_source(&v.name, env),
            };
            let symbol = mpich_symbol(&v.name);
            let (Some(datatype), Some(count)) = (v.datatype.known(), v.count) else {
                live.no_value = Some(
                    v.no_value
                        .clone()
                        .unwrap_or_else(|| "the library gave no type and count".into()),
                );
                return live;
            };
            let Some(addr) = symbols.find_symbol(&symbol) else {
                live.no_value = Some(format!("no symbol {symbol} in the process"));
                return live;
            };
            match read_value(target, addr, datatype, count.max(0) as usize) {
                Ok(value) => live.value = Some(value),
                Err(e) => live.no_value = Some(format!("{symbol}: {e}")),
            }
            live
        })
        .collect()
}

/// MPICH's variable `MPIR_CVAR_X` is the global of that name.
fn mpich_symbol(name: &str) -> String {
    if name.starts_with("MPIR_CVAR_") {
        name.to_owned()
    } else {
        format!("MPIR_CVAR_{name}")
    }
}

/// MPICH takes a variable from the first of MPICH_X, MPIR_PARAM_X and
/// MPIR_CVAR_X that is set.
fn mpich_source(name: &str, env: &Environment) -> Option<Source> {
    let bare = name.strip_prefix("MPIR_CVAR_").unwrap_or(name);
    Family::Mpich
        .env_prefixes()
        .iter()
        .map(|p| format!("{p}{bare}"))
        .find_map(|var| {
            env.get(&var).map(|value| Source::Environment {
                variable: format!("{var}={value}"),
            })
        })
}

/// Reads `count` elements of `datatype` stored at `addr`; an MPI_CHAR
/// variable is a pointer to its string.
fn read_value(target: &dyn Target, addr: u64, datatype: Datatype, count: usize) -> Result<Value> {
    if datatype == Datatype::Char {
        let ptr = read_u64(target, addr)?;
        if ptr == 0 {
            return Ok(Value::Text(String::new()));
        }
        return Ok(Value::Text(read_c_string(target, ptr, MAX_STRING)?));
    }
    let count = count.min(1024);
    let mut bytes = vec![0u8; datatype.size() * count];
    target.read(addr, &mut bytes)?;
    Ok(datatype.decode(&bytes, count))
}

fn read_u64(target: &dyn Target, addr: u64) -> Result<u64> {
    let mut b = [0u8; 8];
    target.read(addr, &mut b)?;
    Ok(u64::from_ne_bytes(b))
}

fn field(bytes: &[u8], offset: u64, len: usize) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    bytes.get(start..start.checked_add(len)?)
}

fn field_u32(bytes: &[u8], offset: u64) -> Option<u32> {
    field(bytes, offset, 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn field_u64(bytes: &[u8], offset: u64) -> Option<u64> {
    field(bytes, offset, 8).map(|b| {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(b);
        u64::from_ne_bytes(raw)
    })
}

/// `mca_base_var_type_t` (opal/mca/base/mca_base_var.h), in order.
const MCA_TYPES: [Option<Datatype>; 14] = [
    Some(Datatype::Int),
    Some(Datatype::Unsigned),
    Some(Datatype::UnsignedLong),
    Some(Datatype::UnsignedLongLong),
    Some(Datatype::UnsignedLong), // size_t
    Some(Datatype::Char),         // string
    Some(Datatype::Char),         // version string
    Some(Datatype::CBool),
    Some(Datatype::Double),
    Some(Datatype::Long),
    Some(Datatype::Int32),
    Some(Datatype::Uint32),
    Some(Datatype::Int64),
    Some(Datatype::Uint64),
];
/// `mca_base_var_flag_internal_t`.
const MCA_FLAG_VALID: u32 = 0x0001_0000;
const MCA_FLAG_SYNONYM: u32 = 0x0002_0000;

/// The fields of `mca_base_var_t` we read, by offset.
struct VarLayout {
    size: u64,
    flags: u64,
    kind: u64,
    full_name: u64,
    long_name: u64,
    source: u64,
    source_file: u64,
    file_value: u64,
    synonym_for: u64,
    storage: u64,
    /// `mca_base_var_file_value_t.mbvfv_file`.
    file_value_file: Option<u64>,
}

fn var_layout(symbols: &SymbolIndex) -> std::result::Result<VarLayout, String> {
    let t = symbols
        .find_type("mca_base_var_t")
        .ok_or("libopen-pal has no DWARF for mca_base_var_t: rebuild Open MPI with -g")?;
    let off = |name: &str| {
        t.field_offset(name)
            .ok_or_else(|| format!("mca_base_var_t has no field {name}"))
    };
    Ok(VarLayout {
        size: t.size.ok_or("mca_base_var_t has no size")?,
        flags: off("mbv_flags")?,
        kind: off("mbv_type")?,
        full_name: off("mbv_full_name")?,
        long_name: off("mbv_long_name")?,
        source: off("mbv_source")?,
        source_file: off("mbv_source_file")?,
        file_value: off("mbv_file_value")?,
        synonym_for: off("mbv_synonym_for")?,
        storage: off("mbv_storage")?,
        file_value_file: symbols
            .find_type("mca_base_var_file_value_t")
            .and_then(|t| t.field_offset("mbvfv_file")),
    })
}

/// One record of the registry, decoded.
struct Record {
    flags: u32,
    kind: u32,
    full_name: String,
    long_name: String,
    source: u32,
    source_file: u64,
    file_value: u64,
    synonym_for: i32,
    storage: u64,
}

fn read_open_mpi(
    target: &dyn Target,
    symbols: &SymbolIndex,
    env: &Environment,
) -> Result<Vec<LiveValue>> {
    let unreadable = |detail: String| mqs_core::Error::NoDebugInfo { detail }.into();
    let array = symbols.find_symbol("mca_base_vars").ok_or_else(|| {
        unreadable("no symbol mca_base_vars (Open MPI's variable registry) in the process".into())
    })?;
    let pa = symbols.find_type("opal_pointer_array_t").ok_or_else(|| {
        unreadable("no DWARF for opal_pointer_array_t: rebuild Open MPI with -g".into())
    })?;
    let (Some(size_off), Some(addr_off)) = (pa.field_offset("size"), pa.field_offset("addr"))
    else {
        return Err(unreadable("opal_pointer_array_t lacks size or addr".into()));
    };
    let layout = var_layout(symbols).map_err(unreadable)?;
    let mut head = vec![0u8; pa.size.unwrap_or(addr_off + 8) as usize];
    target.read(array, &mut head)?;
    let size = field_u32(&head, size_off).unwrap_or(0) as i32;
    let slots = field_u64(&head, addr_off).unwrap_or(0);
    if !(0..=MAX_VARS).contains(&size) {
        return Err(mqs_core::Error::Read {
            pid: target.pid(),
            addr: array,
            len: head.len(),
            detail: format!("mca_base_vars has an unbelievable size {size}"),
        }
        .into());
    }
    let mut pointers = vec![0u8; size as usize * 8];
    if slots != 0 {
        target.read(slots, &mut pointers)?;
    }
    let mut records: Vec<Option<Record>> = Vec::with_capacity(size as usize);
    let mut buf = vec![0u8; layout.size as usize];
    for slot in pointers.chunks_exact(8) {
        let ptr = u64::from_ne_bytes(slot.try_into().unwrap_or([0; 8]));
        if ptr == 0 || target.read(ptr, &mut buf).is_err() {
            records.push(None);
            continue;
        }
        let string = |offset: u64, max: usize| -> String {
            field_u64(&buf, offset)
                .filter(|&p| p != 0)
                .and_then(|p| read_c_string(target, p, max).ok())
                .unwrap_or_default()
        };
        records.push(Some(Record {
            flags: field_u32(&buf, layout.flags).unwrap_or(0),
            kind: field_u32(&buf, layout.kind).unwrap_or(u32::MAX),
            full_name: string(layout.full_name, MAX_NAME),
            long_name: string(layout.long_name, MAX_NAME),
            source: field_u32(&buf, layout.source).unwrap_or(0),
            source_file: field_u64(&buf, layout.source_file).unwrap_or(0),
            file_value: field_u64(&buf, layout.file_value).unwrap_or(0),
            synonym_for: field_u32(&buf, layout.synonym_for).unwrap_or(u32::MAX) as i32,
            storage: field_u64(&buf, layout.storage).unwrap_or(0),
        }));
    }
    let mut values = Vec::new();
    for record in records.iter().flatten() {
        if record.full_name.is_empty() {
            continue;
        }
        let mut live = LiveValue {
            name: record.full_name.clone(),
            value: None,
            no_value: None,
            source: None,
        };
        if record.flags & MCA_FLAG_VALID == 0 {
            live.no_value = Some("deregistered in the process (its component was closed)".into());
            values.push(live);
            continue;
        }
        // A synonym's value lives with the variable it stands for.
        let holder = if record.flags & MCA_FLAG_SYNONYM != 0 {
            usize::try_from(record.synonym_for)
                .ok()
                .and_then(|i| records.get(i))
                .and_then(Option::as_ref)
        } else {
            Some(record)
        };
        live.source = Some(open_mpi_source(target, &layout, record, env));
        match holder {
            None => live.no_value = Some("a synonym of a variable that is gone".into()),
            Some(holder) => match MCA_TYPES.get(holder.kind as usize).copied().flatten() {
                None => live.no_value = Some(format!("unknown MCA type {}", holder.kind)),
                Some(_) if holder.storage == 0 => {
                    live.no_value = Some("no storage".into());
                }
                Some(datatype) => match read_value(target, holder.storage, datatype, 1) {
                    Ok(value) => live.value = Some(value),
                    Err(e) => live.no_value = Some(e.to_string()),
                },
            },
        }
        values.push(live);
    }
    Ok(values)
}

/// `mca_base_var_source_t`: default, command line, environment, file,
/// set, override.
fn open_mpi_source(
    target: &dyn Target,
    layout: &VarLayout,
    record: &Record,
    env: &Environment,
) -> Source {
    let file = || -> Option<String> {
        let path = if record.source_file != 0 {
            record.source_file
        } else if record.file_value != 0 {
            let mut b = [0u8; 8];
            target
                .read(record.file_value + layout.file_value_file?, &mut b)
                .ok()?;
            u64::from_ne_bytes(b)
        } else {
            return None;
        };
        read_c_string(target, path, 4096)
            .ok()
            .filter(|p| !p.is_empty())
    };
    match record.source {
        0 => Source::Default,
        1 => Source::CommandLine,
        2 => [&record.long_name, &record.full_name]
            .iter()
            .map(|n| format!("OMPI_MCA_{n}"))
            .find_map(|var| {
                env.get(&var).map(|value| Source::Environment {
                    variable: format!("{var}={value}"),
                })
            })
            .unwrap_or(Source::Environment {
                variable: format!("OMPI_MCA_{}", record.full_name),
            }),
        3 => Source::File { path: file() },
        4 => Source::Set,
        5 => Source::Override { path: file() },
        _ => Source::Unknown,
    }
}

/// Where an install prefix keeps libmpi.
pub fn library_in_prefix(prefix: &Path) -> Option<PathBuf> {
    let dirs = [
        "lib",
        "lib64",
        "lib/x86_64-linux-gnu",
        "lib/aarch64-linux-gnu",
    ];
    dirs.iter()
        .map(|d| prefix.join(d))
        .flat_map(|dir| {
            // libmpi.so is the development link; a runtime-only install has
            // only libmpi.so.N.
            let exact = dir.join("libmpi.so");
            let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libmpi.so."))
                })
                .collect();
            found.sort();
            std::iter::once(exact).chain(found)
        })
        .find(|p| p.is_file())
}

/// The prefix of the `mpicc` on PATH (following symlinks).
pub fn prefix_of_mpicc() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let mpicc = std::env::split_paths(&path)
        .map(|dir| dir.join("mpicc"))
        .find(|p| p.is_file())?;
    let real = mpicc.canonicalize().ok()?;
    real.parent()?.parent().map(Path::to_path_buf)
}
