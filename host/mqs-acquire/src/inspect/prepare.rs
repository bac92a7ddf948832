//! Preparing a process for the DLL: its symbols indexed (or the answers a
//! snapshot recorded), the DLL it names (or the one asked for), its types
//! made ready (debuginfod allowed to fetch the MPI's own files, type packs
//! checked against it), and what to say when the MPI lacks what the DLL
//! needs.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::members::{Member, MpiEnvironment};
use crate::snapshot::RecordingSymbols;
use crate::{locate, Error, Result};
use mqs_core::interface::{ImageSymbols, Target};
use mqs_core::process::PageCache;
use mqs_core::symbols::{ObjectSymbols, SymbolCache, SymbolIndex, TypeSource};
use mqs_core::Error as CoreError;

use super::options::{DllChoice, Options};
use super::sources::index_symbols_with;

/// A process ready to be dumped: its source, symbols and DLL.
pub(super) struct Prepared<T: Target> {
    pub(super) member: Member,
    pub(super) target: PageCache<T>,
    pub(super) index: Option<Arc<SymbolIndex>>,
    pub(super) symbols: Rc<dyn ImageSymbols>,
    /// Set when the dump is saved: the lookups as the DLL makes them.
    pub(super) recording: Option<Rc<RecordingSymbols>>,
    pub(super) dll: PathBuf,
    /// The DLL the MPI names, for when mqs's own (`dll`) cannot read the
    /// process; or why there is none to fall back to (missing, untrusted),
    /// which is then the error to report.
    pub(super) fallback: Option<Result<PathBuf>>,
    /// How `dll` was chosen, when mqs chose it (no DLL was asked for).
    pub(super) chosen: Option<String>,
    pub(super) executable: String,
    /// The MPI library (the object naming the DLL), to say what it lacks
    /// when the DLL finds no types.
    pub(super) mpi_library: Option<Arc<ObjectSymbols>>,
    /// The type packs the symbols answer from, as the dump names them.
    pub(super) type_packs: Vec<String>,
    pub(super) cache: Option<Arc<SymbolCache>>,
    /// Why no DLL can read this process's queues, for a process whose MPI
    /// keeps none for debuggers, prepared for its stacks alone (`dll` is
    /// then empty and never loaded).
    pub(super) no_queues: Option<String>,
}

impl<T: Target> Prepared<T> {
    /// Indexes the target's symbols and finds its DLL. On failure the
    /// target is handed back so that it can be let go.
    pub(super) fn new(
        member: Member,
        target: PageCache<T>,
        known: Known,
        cache: &Arc<SymbolCache>,
        options: &Options,
    ) -> std::result::Result<Self, Box<(PageCache<T>, Error)>> {
        let (index, symbols) = match known {
            Known::Recorded(symbols) => (None, symbols),
            Known::Index(index) => (Some(index.clone()), Rc::new(index) as Rc<dyn ImageSymbols>),
            Known::Nothing => match index_symbols_with(&target, cache) {
                Ok(index) => (Some(index.clone()), Rc::new(index) as Rc<dyn ImageSymbols>),
                Err(e) => return Err(Box::new((target, e))),
            },
        };
        // Intel MPI is MPICH's kin by its symbols, but no DLL reads it:
        // unless a DLL is named, say so rather than try ours on it.
        let intel = match (&options.dll, &index) {
            (DllChoice::Given(_), _) | (_, None) => None,
            (_, Some(index)) => intel_mpi(index),
        };
        let picked = match intel {
            Some((library, version)) => Err(Error::NoQueueSupport {
                pid: member.pid,
                detail: intel_mpi_detail(&library, version.as_deref()),
            }),
            None => pick_dll(&*symbols, &target, options),
        };
        let pick = match picked {
            Ok(pick) => pick,
            Err(e) => {
                let e = match (&e, &index) {
                    (Error::NotMpi { pid, .. }, Some(index)) => {
                        no_queue_support(*pid, index).unwrap_or(e)
                    }
                    _ => e,
                };
                // With --stacks, an MPI process whose MPI keeps no queues
                // for debuggers is still worth its stacks: what it waits
                // for may be read there, and where not, the analysis says
                // it cannot tell, and why.
                if let (Error::NoQueueSupport { detail, .. }, true, Some(_)) =
                    (&e, options.stacks, &index)
                {
                    let why = detail.clone();
                    let executable = executable_of(&target, member.pid);
                    return Ok(Self {
                        member,
                        target,
                        index,
                        symbols,
                        recording: None,
                        dll: PathBuf::new(),
                        fallback: None,
                        chosen: None,
                        executable,
                        mpi_library: None,
                        type_packs: Vec::new(),
                        cache: Some(cache.clone()),
                        no_queues: Some(why),
                    });
                }
                return Err(Box::new((target, e)));
            }
        };
        let (mpi_library, type_packs) = match &index {
            Some(index) => match prepare_types(&target, index, cache) {
                Ok(types) => types,
                Err(e) => return Err(Box::new((target, e))),
            },
            None => (None, Vec::new()),
        };
        let recording = options
            .save
            .as_ref()
            .map(|_| Rc::new(RecordingSymbols::new(symbols.clone())));
        let symbols = match &recording {
            Some(r) => r.clone() as Rc<dyn ImageSymbols>,
            None => symbols,
        };
        let executable = executable_of(&target, member.pid);
        Ok(Self {
            member,
            target,
            index,
            symbols,
            recording,
            dll: pick.dll,
            fallback: pick.fallback,
            chosen: pick.chosen,
            executable,
            mpi_library,
            type_packs,
            cache: Some(cache.clone()),
            no_queues: None,
        })
    }

    /// The error for a DLL that found no types: which library lacks them,
    /// and how to get them, when mqs found nothing for it.
    pub(super) fn explain(&self, e: CoreError) -> Error {
        let CoreError::NoDebugInfo { detail } = e else {
            return e.into();
        };
        let (Some(library), Some(cache)) = (&self.mpi_library, &self.cache) else {
            return Error::from(CoreError::NoDebugInfo { detail });
        };
        if library.type_source() != TypeSource::None {
            return Error::from(CoreError::NoDebugInfo { detail });
        }
        let dirs: Vec<String> = cache
            .typepack_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let debuginfod = match cache.fetcher() {
            None if std::env::var_os("DEBUGINFOD_URLS").is_some_and(|v| !v.is_empty()) => {
                "debuginfod not asked (--offline)".to_owned()
            }
            None => "debuginfod not asked (DEBUGINFOD_URLS is not set)".to_owned(),
            Some(client) => {
                let notes = client.notes();
                format!(
                    "debuginfod {} has no debug file for it{}",
                    client.servers().join(" "),
                    if notes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", notes.join("; "))
                    }
                )
            }
        };
        Error::MissingTypes(Box::new(crate::error::MissingTypes {
            library: library.path().to_owned(),
            build_id: library.build_id_hex().unwrap_or_else(|| "none".into()),
            tried: format!(
                "no DWARF in it or in the debug directories, no type pack in {}{}, {debuginfod}",
                dirs.join(", "),
                match cache.typepack_notes() {
                    [] => String::new(),
                    notes => format!(" ({} skipped: {})", notes.len(), notes.join("; ")),
                }
            ),
            detail,
        }))
    }
}

/// The path of a process's executable, for its dump.
fn executable_of(target: &dyn Target, pid: i32) -> String {
    target
        .executable()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| format!("pid {pid}"))
}

/// Gets a process's types ready: lets debuginfod fetch the MPI's own files
/// (the library that names the DLL, and the objects in the directories of
/// the DLLs it names, where Open MPI keeps its components), and checks the
/// type packs the symbols answer from against the process. Returns the MPI
/// library, and a line per library read through a type pack (see
/// [`type_pack_lines`]).
pub(super) fn prepare_types(
    target: &dyn Target,
    index: &SymbolIndex,
    cache: &SymbolCache,
) -> Result<(Option<Arc<ObjectSymbols>>, Vec<String>)> {
    let objects = index.objects();
    let library = objects
        .iter()
        .find(|(o, _)| o.data_symbol("MPIR_dll_name").is_some())
        .map(|(o, _)| o.clone());
    if cache.fetcher().is_some() {
        let mut dirs: Vec<PathBuf> = locate::named_by_target(index, target)
            .unwrap_or_default()
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter_map(|p| p.parent().map(Path::to_owned))
            .collect();
        dirs.dedup();
        let fetchable = objects
            .iter()
            .filter(|(o, _)| {
                library.as_ref().is_some_and(|l| Arc::ptr_eq(l, o))
                    || o.path()
                        .parent()
                        .is_some_and(|p| dirs.iter().any(|d| d == p))
            })
            .map(|(o, _)| o.path().to_owned());
        index.allow_fetch(fetchable);
    }
    let env = MpiEnvironment::of(&target.environment().unwrap_or_default());
    // Borrowed packs first: one that does not fit is dropped, not fatal
    // (nobody asked for it), and the guard then sees only the packs left.
    let borrowed = crate::typepack::borrowed::check(target, index);
    crate::typepack::guard::check(target, index, &env)?;
    let mut lines = type_pack_lines(index, borrowed);
    lines.extend(unreadable_pack_lines(cache));
    Ok((library, lines))
}

/// What the dump says about the packs: each pack of the process's own
/// build (the guard's invariants held, or the dump would have failed),
/// then each pack borrowed from another build, used or dropped, with why
/// (`borrowed::check`'s lines). Nothing that differs between the ranks of
/// a job (the guard's rank and handles), so that equal ranks stay one
/// state in a collector tree. Empty when every type came from DWARF.
fn type_pack_lines(index: &SymbolIndex, borrowed: Vec<String>) -> Vec<String> {
    let name = crate::typepack::borrowed::file_name;
    let mut own: Vec<String> = crate::typepack::guard::packs_in_use(index)
        .iter()
        .map(|(library, pack, _)| {
            format!(
                "{}: types from {}, made for this build (its invariants hold in this process)",
                name(library),
                name(pack)
            )
        })
        .collect();
    // The objects come in address order, which address-space randomisation
    // changes from rank to rank: by name, equal ranks say it alike.
    own.sort_unstable();
    own.into_iter().chain(borrowed).collect()
}

/// A line per file in the pack directories that is not a type pack: it
/// stands for no library, and the user who put it there learns why.
fn unreadable_pack_lines(cache: &SymbolCache) -> impl Iterator<Item = String> + '_ {
    cache
        .typepack_notes()
        .iter()
        .map(|note| format!("not a type pack, skipped: {note}"))
}

/// Intel MPI: the library of the process that exports Intel's own entry
/// points (`I_MPI_Check_image_status`), and its version, where its
/// read-only data holds exactly one version-like string (`2021.18.1`; the
/// version MPICH's symbols give is that of the MPICH it was made from).
fn intel_mpi(index: &SymbolIndex) -> Option<(String, Option<String>)> {
    let (library, _) = index
        .objects()
        .into_iter()
        .find(|(o, _)| o.exported("I_MPI_Check_image_status").is_some())?;
    let version = unique_rodata_string(&library, is_release_version);
    Some((library.path().display().to_string(), version))
}

/// The one string of `library`'s read-only data that `wanted` takes, where
/// there is exactly one (a release's version, kept there for
/// `MPI_Get_library_version`); none where there are several.
fn unique_rodata_string(
    library: &mqs_core::symbols::ObjectSymbols,
    wanted: fn(&[u8]) -> bool,
) -> Option<String> {
    let rodata = library.section_data(".rodata").unwrap_or_default();
    let mut found: Vec<&[u8]> = rodata.split(|&b| b == 0).filter(|s| wanted(s)).collect();
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [one] => Some(String::from_utf8_lossy(one).into_owned()),
        _ => None,
    }
}

/// `2021.18` or `2021.18.1`: a year, then one or two numbers.
fn is_release_version(s: &[u8]) -> bool {
    let mut parts = s.split(|&b| b == b'.');
    let year = parts.next().unwrap_or_default();
    let rest: Vec<&[u8]> = parts.collect();
    year.len() == 4
        && year.starts_with(b"20")
        && year.iter().all(u8::is_ascii_digit)
        && (1..=2).contains(&rest.len())
        && rest
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.iter().all(u8::is_ascii_digit))
}

/// MPICH's version as its releases spell it: `4.2.1`, `4.1`, `5.0.0rc1`,
/// `4.3a2` (numbers of one or two digits, the first not 0).
fn is_mpich_version(s: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(s) else {
        return false;
    };
    let short_number =
        |p: &str| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    // A pre-release's suffix: a, b or rc, and its number.
    let numbers = ["rc", "a", "b"]
        .iter()
        .find_map(|mark| {
            let (head, tail) = text.rsplit_once(mark)?;
            short_number(tail).then_some(head)
        })
        .unwrap_or(text);
    let parts: Vec<&str> = numbers.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts.iter().all(|p| short_number(p))
        && !parts[0].starts_with('0')
}

/// Why a process of Intel MPI shows no queues, with what still works.
fn intel_mpi_detail(library: &str, version: Option<&str>) -> String {
    let name = match version {
        Some(v) => format!("Intel MPI {v}"),
        None => "Intel MPI (version not found in it)".to_owned(),
    };
    format!(
        "its MPI library {library} is {name}: it ships no message-queue DLL and names none, and \
         has no debug information; its internals are Intel's own, not MPICH's, so no DLL can \
         show its queues. --stacks shows each rank's stacks, and --deadlock what can be judged \
         from them"
    )
}

/// Why a process with an MPI library but no `MPIR_dll_name` shows no
/// queues: its MPI was built without debugger support (Debian's MPICH).
pub(super) fn no_queue_support(pid: i32, index: &SymbolIndex) -> Option<Error> {
    if let Some((library, version)) = intel_mpi(index) {
        let detail = intel_mpi_detail(&library, version.as_deref());
        return Some(Error::NoQueueSupport { pid, detail });
    }
    let (library, _) = index.objects().into_iter().find(|(o, _)| {
        o.function_symbol("MPI_Init").is_some() && o.function_symbol("PMPI_Init").is_some()
    })?;
    let mpich = library.function_symbol("MPIR_Err_return_comm").is_some()
        || library
            .path()
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("mpich"));
    let name = library.path().display().to_string();
    let detail = if mpich {
        // Its version, where the library exports it.
        // Its version: exported by some builds, else the one version string
        // of its read-only data.
        let version = library
            .exported("MPII_Version_string")
            .and_then(|s| library.string_at(s.value, 32))
            .filter(|v| !v.is_empty())
            .or_else(|| unique_rodata_string(&library, is_mpich_version))
            .map_or(String::new(), |v| format!(" {v}"));
        format!(
            "its MPI library {name} is MPICH{version} built without --enable-debuginfo: it keeps \
             no message queues for debuggers (no MPIR_dll_name, no queue symbols), so no DLL can \
             show them; --stacks still shows each rank's stacks. To see queues, run the program \
             with an MPICH configured with --enable-debuginfo (and shared libraries; a pip wheel \
             or a distribution's package is not)"
        )
    } else {
        format!(
            "its MPI library {name} was built without message-queue debugging support (no \
             MPIR_dll_name), so no DLL can show its queues; rebuild the MPI with its debugger \
             support enabled"
        )
    };
    Some(Error::NoQueueSupport { pid, detail })
}

/// What is known of a process's symbols before it is prepared.
pub(super) enum Known {
    Nothing,
    /// Indexed already (a starter's, looked at before we knew it was one).
    Index(Arc<SymbolIndex>),
    /// The answers a snapshot recorded.
    Recorded(Rc<dyn ImageSymbols>),
}

/// The DLL chosen for a process.
pub(super) struct Pick {
    pub(super) dll: PathBuf,
    /// The one the MPI names, when `dll` is mqs's own (or why none).
    pub(super) fallback: Option<Result<PathBuf>>,
    /// How `dll` was chosen, when mqs chose it.
    pub(super) chosen: Option<String>,
}

/// Says that mqs's own DLL read a process by default.
pub(super) const CHOSEN_OURS: &str =
    "mqs's own (the default; --dll mpi reads with the one the MPI names)";

/// Says that mqs's own DLL read a process whose MPI names no DLL.
pub(super) const CHOSEN_OURS_POOLS: &str =
    "mqs's own (the default; this MPICH, built without debugger support, names no DLL: ours \
     finds its communicators among MPICH's objects)";

/// The DLL to use for a process: the one given; the one it names (checked
/// for trust unless told otherwise); or mqs's own, with the named one to
/// fall back to.
pub(super) fn pick_dll(
    symbols: &dyn ImageSymbols,
    target: &dyn Target,
    options: &Options,
) -> Result<Pick> {
    let named = || locate::usable_named(symbols, target, options.trust_dll);
    let pick = match &options.dll {
        DllChoice::Given(path) => Pick {
            dll: path.clone(),
            fallback: None,
            chosen: None,
        },
        DllChoice::Named => Pick {
            dll: named()?,
            fallback: None,
            chosen: None,
        },
        DllChoice::PreferOurs(ours) => {
            if let Err(e) = locate::named_by_target(symbols, target) {
                // An MPI without debugger support names no DLL. Ours still
                // reads MPICH's communicator objects where their symbols
                // are known here (its type pack, or its DWARF); else no DLL
                // reads it, and the error says so.
                let pools = matches!(e, Error::NotMpi { .. })
                    && ours.exists()
                    && symbols
                        .find_symbol(crate::typepack::guard::MPICH_BUILTIN)
                        .is_some();
                if !pools {
                    return Err(e);
                }
                return Ok(Pick {
                    dll: ours.clone(),
                    fallback: None,
                    chosen: Some(CHOSEN_OURS_POOLS.into()),
                });
            }
            if ours.exists() {
                Pick {
                    dll: ours.clone(),
                    fallback: Some(named()),
                    chosen: Some(CHOSEN_OURS.into()),
                }
            } else {
                Pick {
                    dll: named()?,
                    fallback: None,
                    chosen: Some(format!(
                        "the one the MPI names (mqs's own is not installed at {})",
                        ours.display()
                    )),
                }
            }
        }
    };
    if !pick.dll.exists() {
        return Err(Error::from(CoreError::DllMissing {
            path: pick.dll,
            detail: "no such file".into(),
        }));
    }
    Ok(pick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_the_releases_spell_them() {
        for good in ["4.2.1", "4.1", "5.0.0rc1", "4.3a2", "10.0.2b1"] {
            assert!(is_mpich_version(good.as_bytes()), "{good}");
        }
        for bad in [
            "", "4", "4.2.1.1", "0.1", "4.2x", "rc1", "4.123", "v4.2", "4.2rc", "2021.18",
        ] {
            assert!(!is_mpich_version(bad.as_bytes()), "{bad}");
        }
        assert!(is_release_version(b"2021.18"));
        assert!(is_release_version(b"2021.18.1"));
        assert!(!is_release_version(b"4.2.1"));
    }
}
