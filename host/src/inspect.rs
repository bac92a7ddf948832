//! Dumping one live process: attach, index its symbols, find and load the
//! DLL, run the interface's calling sequence, detach. The library entry
//! point behind `mqs-dump --pid`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::dll::{locate, Dll, ImageSymbols, Session, TypeLayout};
use crate::dump::{DllInfo, ProcessDump};
use crate::symbols::SymbolIndex;
use crate::target::{exe_path, LiveProcess, Mode, PageCache, Target};
use crate::{Error, Result};

/// How to dump a process.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Load this DLL instead of the one the target names.
    pub dll: Option<PathBuf>,
    /// Load a DLL the target names even if it fails the ownership checks.
    pub trust_dll: bool,
    /// Read the process while it runs instead of stopping it.
    pub no_stop: bool,
    /// Extra directories with separate debug files.
    pub debug_dirs: Vec<PathBuf>,
}

/// The host's symbol index as the DLL layer sees it.
struct IndexSymbols(Arc<SymbolIndex>);

impl ImageSymbols for IndexSymbols {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.0.find_symbol(name)
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        self.0.find_function(name)
    }

    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        let info = self.0.find_type(name)?;
        Some(TypeLayout {
            size: info.size,
            fields: info.fields.clone(),
        })
    }
}

/// The symbols of a process: every mapped object with its load bias.
pub fn index_symbols(target: &dyn Target, debug_dirs: &[PathBuf]) -> Result<Arc<SymbolIndex>> {
    let objects = target.mapped_objects()?;
    let index = SymbolIndex::from_mapped(&objects, debug_dirs.to_vec())?;
    Ok(Arc::new(index))
}

/// The MPI_COMM_WORLD rank a launcher gave the process, from its
/// environment (Open MPI, MPICH/hydra and PMIx launchers set these).
pub fn rank_from_environment(pid: i32) -> Option<i32> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
    for key in ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"] {
        let prefix = format!("{key}=");
        if let Some(value) = vars.iter().find_map(|v| v.strip_prefix(prefix.as_bytes())) {
            if let Ok(rank) = std::str::from_utf8(value).unwrap_or("").parse() {
                return Some(rank);
            }
        }
    }
    None
}

/// Dumps one process.
pub fn dump_pid(pid: i32, options: &Options) -> Result<ProcessDump> {
    let start = Instant::now();
    let mode = if options.no_stop { Mode::NoStop } else { Mode::Stop };
    let live = LiveProcess::attach(pid, mode)?;
    let target = PageCache::new(live);
    let result = dump_attached(pid, &target, options);
    // Detach (resume) before anything else; dropping does it too on error.
    let detached = target.into_inner().detach();
    let mut dump = match result {
        Ok(dump) => dump,
        Err(e) => return Err(gone_or(pid, e)),
    };
    detached.map_err(|e| gone_or(pid, e))?;
    dump.stats.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(dump)
}

/// An error seen while the process died is reported as its death.
fn gone_or(pid: i32, error: Error) -> Error {
    if process_gone(pid) {
        Error::ProcessGone { pid }
    } else {
        error
    }
}

fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

fn dump_attached(pid: i32, target: &PageCache<LiveProcess>, options: &Options) -> Result<ProcessDump> {
    let symbols = index_symbols(target, &options.debug_dirs)?;
    let dll_path = match &options.dll {
        Some(path) => path.clone(),
        None => {
            let named = locate::named_by_target(&IndexSymbols(symbols.clone()), target)?;
            let path = locate::first_existing(&named)?;
            if !options.trust_dll {
                locate::check_trusted(&path)?;
            }
            path
        }
    };
    if !dll_path.exists() {
        return Err(Error::DllMissing {
            path: dll_path,
            detail: "no such file".into(),
        });
    }
    let dll = Dll::load(&dll_path)?;
    let executable = exe_path(pid)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| format!("pid {pid}"));
    let global_rank = rank_from_environment(pid).unwrap_or(-1);

    let mut session = Session::new(dll)?;
    let image = session.add_image(&executable, Box::new(IndexSymbols(symbols)))?;
    // The session borrows the target: it is dropped (and the DLL's process
    // info destroyed) before the caller detaches.
    let process = session.add_process(image, Box::new(target), global_rank, 8)?;
    let (communicators, stats) = session.dump(process);
    Ok(ProcessDump {
        pid,
        global_rank,
        executable,
        dll: DllInfo {
            path: dll.path.display().to_string(),
            version: dll.version.clone(),
            compatibility: dll.compatibility,
        },
        communicators,
        stats,
    })
}
