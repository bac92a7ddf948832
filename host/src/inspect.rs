//! Dumping live processes: attach, index symbols, find and load the DLL,
//! run the interface's calling sequence, detach. Given an MPI starter
//! (`mpirun`), every local rank of its job is dumped in turn. The library
//! entry point behind `mqs-dump --pid`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::dll::capture::OutputCapture;
use crate::dll::{locate, Dll, ImageSymbols, Session, TypeLayout};
use crate::dump::{
    DllInfo, JobDump, Launcher, NewProcess, NewProcessList, ProcessDump, RankFailure, Section,
    SCHEMA_VERSION,
};
use crate::mpir;
use crate::symbols::{SymbolCache, SymbolIndex};
use crate::target::{exe_path, LiveProcess, Mode, PageCache, Target};
use crate::{Error, Result};

/// How to dump.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Load this DLL instead of the one the target names.
    pub dll: Option<PathBuf>,
    /// Load a DLL the target names even if it fails the ownership checks.
    pub trust_dll: bool,
    /// Read processes while they run instead of stopping them.
    pub no_stop: bool,
    /// Extra directories with separate debug files.
    pub debug_dirs: Vec<PathBuf>,
}

/// The host's symbol index as the DLL layer sees it.
#[derive(Debug)]
pub struct IndexSymbols(Arc<SymbolIndex>);

impl IndexSymbols {
    pub fn new(index: Arc<SymbolIndex>) -> Self {
        Self(index)
    }
}

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
    let cache = Arc::new(SymbolCache::new(debug_dirs.to_vec()));
    index_symbols_with(target, &cache)
}

fn index_symbols_with(target: &dyn Target, cache: &Arc<SymbolCache>) -> Result<Arc<SymbolIndex>> {
    let objects = target.mapped_objects()?;
    Ok(Arc::new(SymbolIndex::from_mapped_with_cache(
        cache.clone(),
        &objects,
    )?))
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

/// Called before each rank of a job is dumped: (done, total).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

/// Dumps `pid`: one MPI process, or, for an MPI starter, every local rank
/// of its job. A starter whose ranks all fail gives the first rank's error.
pub fn dump(pid: i32, options: &Options, progress: Progress<'_>) -> Result<JobDump> {
    let cache = Arc::new(SymbolCache::new(options.debug_dirs.clone()));
    let target = attach(pid, options)?;
    let symbols = match index_symbols_with(&target, &cache) {
        Ok(symbols) => symbols,
        Err(e) => return finish(pid, target, Err(e)),
    };
    let starter = mpir::is_starter(&IndexSymbols(symbols.clone()));
    let table = if starter {
        match mpir::read_proctable(&target, &IndexSymbols(symbols.clone())) {
            Ok(table) => table,
            Err(e) => return finish(pid, target, Err(e)),
        }
    } else {
        Vec::new()
    };
    if table.is_empty() {
        let rank = rank_from_environment(pid).unwrap_or(-1);
        let result = dump_attached(pid, rank, &target, symbols, options).map_err(|e| match e {
            Error::NotMpi { pid, .. } if starter => Error::NotMpi {
                pid,
                detail: "it is an MPI starter whose process table is empty \
                             (its job has not started yet)"
                    .into(),
            },
            other => other,
        });
        let process = finish(pid, target, result)?;
        return Ok(JobDump {
            schema_version: SCHEMA_VERSION,
            launcher: None,
            processes: vec![process],
            failures: vec![],
        });
    }

    // A starter: its table was read while it was stopped; let it go before
    // stopping its ranks one by one.
    let launcher = Launcher {
        pid,
        executable: exe_path(pid)
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    let table = finish(pid, target, Ok(table))?;
    let mut job = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: Some(launcher),
        processes: vec![],
        failures: vec![],
    };
    let mut first_error = None;
    for (done, entry) in table.iter().enumerate() {
        progress(done, table.len());
        let failure = |message: String, code: i32| RankFailure {
            rank: entry.rank,
            pid: entry.pid,
            host: entry.host.clone(),
            message,
            exit_code: code,
        };
        if !mpir::is_local_host(&entry.host) || entry.pid <= 0 {
            job.failures.push(failure(
                format!(
                    "rank {} runs on host '{}' (pid {}): only local processes can be read",
                    entry.rank, entry.host, entry.pid
                ),
                crate::exit_code::OTHER,
            ));
            continue;
        }
        match dump_rank(entry.pid, entry.rank as i32, options, &cache) {
            Ok(process) => job.processes.push(process),
            Err(e) => {
                job.failures.push(failure(e.to_string(), e.exit_code()));
                first_error.get_or_insert(e);
            }
        }
    }
    progress(table.len(), table.len());
    match first_error {
        Some(e) if job.processes.is_empty() => Err(e),
        _ => Ok(job),
    }
}

/// Dumps one process through each of several DLLs, all within one stop of
/// the process, so that they see the same state (for cross-checking DLLs).
pub fn dump_with_each_dll(
    pid: i32,
    dlls: &[PathBuf],
    options: &Options,
) -> Result<Vec<ProcessDump>> {
    let target = attach(pid, options)?;
    let result = index_symbols(&target, &options.debug_dirs).and_then(|symbols| {
        let rank = rank_from_environment(pid).unwrap_or(-1);
        dlls.iter()
            .map(|dll| {
                let options = Options {
                    dll: Some(dll.clone()),
                    ..options.clone()
                };
                dump_attached(pid, rank, &target, symbols.clone(), &options)
            })
            .collect()
    });
    finish(pid, target, result)
}

/// Dumps one rank (not a starter).
fn dump_rank(
    pid: i32,
    rank: i32,
    options: &Options,
    cache: &Arc<SymbolCache>,
) -> Result<ProcessDump> {
    let target = attach(pid, options)?;
    let result = index_symbols_with(&target, cache)
        .and_then(|symbols| dump_attached(pid, rank, &target, symbols, options));
    finish(pid, target, result)
}

fn attach(pid: i32, options: &Options) -> Result<PageCache<LiveProcess>> {
    let mode = if options.no_stop {
        Mode::NoStop
    } else {
        Mode::Stop
    };
    Ok(PageCache::new(LiveProcess::attach(pid, mode)?))
}

/// Detaches (resumes) the process whatever happened, then reports: the
/// death of the process takes precedence over any other error.
fn finish<T>(pid: i32, target: PageCache<LiveProcess>, result: Result<T>) -> Result<T> {
    let detached = target.into_inner().detach();
    let value = result.map_err(|e| gone_or(pid, e))?;
    detached.map_err(|e| gone_or(pid, e))?;
    // What was read may predate the death, but a dump of a process that is
    // no more is not what the user asked for: say so.
    if process_gone(pid) {
        return Err(Error::ProcessGone { pid });
    }
    Ok(value)
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

fn dump_attached(
    pid: i32,
    global_rank: i32,
    target: &PageCache<LiveProcess>,
    symbols: Arc<SymbolIndex>,
    options: &Options,
) -> Result<ProcessDump> {
    let _one_session_at_a_time = crate::dll::exclusive();
    // The DLL's own printing is kept apart (shown with --verbose, and in
    // the dump), from loading it to dropping the session.
    let capture = OutputCapture::start();
    let result = run_session(pid, global_rank, target, symbols, options);
    let output = capture.map(OutputCapture::finish).unwrap_or_default();
    if crate::dll::is_verbose() {
        for line in &output {
            eprintln!("mqs-dll: {line}");
        }
    }
    result.map(|mut dump| {
        dump.dll_output = output;
        dump
    })
}

fn run_session(
    pid: i32,
    global_rank: i32,
    target: &PageCache<LiveProcess>,
    symbols: Arc<SymbolIndex>,
    options: &Options,
) -> Result<ProcessDump> {
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

    let mut session = Session::new(dll)?;
    let image = session.add_image(&executable, Box::new(IndexSymbols(symbols)))?;
    // The session borrows the target: it is dropped (and the DLL's process
    // info destroyed) before the caller detaches.
    let process = session.add_process(image, Box::new(target), global_rank, 8)?;
    let (communicators, stats) = session.dump(process);
    let new_processes = session.new_processes(process).map(|section| match section {
        Section::Ok { value } => Section::Ok {
            value: NewProcessList {
                list: value.into_iter().map(NewProcess::from).collect(),
            },
        },
        Section::NotAvailable { reason } => Section::NotAvailable { reason },
        Section::Error { message } => Section::Error { message },
    });
    let spawn_breakpoint = session.spawn_breakpoint_name(process);
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
        new_processes,
        spawn_breakpoint,
        dll_output: Vec::new(),
        stats,
    })
}
