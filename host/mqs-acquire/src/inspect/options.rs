//! How to dump, and the symbol cache the options make: debug directories,
//! type packs, debuginfod unless offline.

use std::path::PathBuf;
use std::sync::Arc;

use mqs_core::symbols::{SymbolCache, SymbolSources};
use serde::{Deserialize, Serialize};

/// Which message-queue DLL reads a process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DllChoice {
    /// The one the process's MPI names (`MPIR_dll_name`), checked for trust.
    #[default]
    Named,
    /// This one, whatever the process names.
    Given(PathBuf),
    /// mqs's own DLL at this path where it reads the process, else (it is
    /// missing, or cannot read that MPI) the one the MPI names. The dump
    /// says which was used.
    PreferOurs(PathBuf),
}

impl DllChoice {
    /// The DLL given, if one was.
    pub fn given(&self) -> Option<&PathBuf> {
        match self {
            DllChoice::Given(path) => Some(path),
            _ => None,
        }
    }
}

/// How to dump.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Which DLL reads each process.
    pub dll: DllChoice,
    /// Load a DLL the target names even if it fails the ownership checks.
    pub trust_dll: bool,
    /// Read processes while they run instead of stopping them.
    pub no_stop: bool,
    /// Extra directories with separate debug files.
    pub debug_dirs: Vec<PathBuf>,
    /// Save what the dump read into this snapshot file.
    pub save: Option<PathBuf>,
    /// Also unwind every thread's call stack while the process is stopped.
    pub stacks: bool,
    /// Type pack directories searched before the standard ones.
    pub typepack_dirs: Vec<PathBuf>,
    /// Never ask debuginfod servers for debug files.
    pub offline: bool,
}

/// The symbol cache of one dump: debug directories, type packs, and
/// debuginfod unless offline.
pub fn symbol_cache(options: &Options) -> Arc<SymbolCache> {
    Arc::new(SymbolCache::with_sources(&SymbolSources {
        debug_dirs: options.debug_dirs.clone(),
        typepack_dirs: options.typepack_dirs.clone(),
        fetcher: if options.offline {
            None
        } else {
            crate::debuginfod::Debuginfod::from_environment(true)
        },
    }))
}

/// Called as a job's processes are stopped and dumped: (steps done, total).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);
