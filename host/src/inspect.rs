//! Dumping live processes: attach, index symbols, find and load the DLL,
//! run the interface's calling sequence, detach. Given an MPI starter
//! (`mpirun`), every local rank of its job is dumped in turn. The library
//! entry point behind `mqs-dump --pid`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::dll::capture::OutputCapture;
use crate::dll::{locate, Dll, ImageSymbols, ProcessId, Session, TypeLayout};
use crate::dump::{
    DllInfo, JobDump, Launcher, NewProcess, NewProcessList, ProcessDump, RankFailure, Section,
    SpawnedJob, SCHEMA_VERSION,
};
use crate::job::{Member, MpiEnvironment};
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
    MpiEnvironment::of(pid).rank
}

/// Called as a job's processes are stopped and dumped: (steps done, total).
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
    // stopping its job.
    let launcher = Launcher {
        pid,
        executable: exe_path(pid)
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    let table = finish(pid, target, Ok(table))?;
    let members = crate::job::members(pid, &table);
    let mut job = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: Some(launcher),
        processes: vec![],
        failures: vec![],
    };
    let first_error = dump_members(&members, options, &cache, progress, &mut job);
    match first_error {
        Some(e) if job.processes.is_empty() => Err(e),
        _ => Ok(job),
    }
}

/// A member of the job, stopped, with what its dump needs.
struct Attached<'m> {
    member: &'m Member,
    target: PageCache<LiveProcess>,
    symbols: Arc<SymbolIndex>,
    dll: PathBuf,
}

/// Records why a member was not dumped; the first error is kept whole.
fn fail(job: &mut JobDump, first: &mut Option<Error>, member: &Member, error: Error) {
    job.failures.push(RankFailure {
        rank: usize::try_from(member.identity).unwrap_or(member.rank),
        pid: member.pid,
        host: member.host.clone(),
        message: error.to_string(),
        exit_code: error.exit_code(),
    });
    first.get_or_insert(error);
}

/// Dumps the members of a job: all local ones are stopped together, handed
/// to one session per DLL (so an MPI-2 DLL knows every identity when it
/// translates ranks), dumped, then resumed. Returns the first error.
fn dump_members(
    members: &[Member],
    options: &Options,
    cache: &Arc<SymbolCache>,
    progress: Progress<'_>,
    job: &mut JobDump,
) -> Option<Error> {
    let mut first = None;
    // Two steps per member: stopping it, then dumping it.
    let total = members.len() * 2;
    let mut attached = Vec::new();
    for (done, member) in members.iter().enumerate() {
        progress(done, total);
        if !mpir::is_local_host(&member.host) || member.pid <= 0 {
            job.failures.push(RankFailure {
                rank: member.rank,
                pid: member.pid,
                host: member.host.clone(),
                message: format!(
                    "rank {} runs on host '{}' (pid {}): only local processes can be read",
                    member.rank, member.host, member.pid
                ),
                exit_code: crate::exit_code::OTHER,
            });
            continue;
        }
        let target = match attach(member.pid, options) {
            Ok(target) => target,
            Err(e) => {
                fail(job, &mut first, member, e);
                continue;
            }
        };
        let prepared = index_symbols_with(&target, cache).and_then(|symbols| {
            let dll = dll_path_for(&symbols, &target, options)?;
            Ok((symbols, dll))
        });
        match prepared {
            Ok((symbols, dll)) => attached.push(Attached {
                member,
                target,
                symbols,
                dll,
            }),
            Err(e) => {
                if let Err(e) = finish(member.pid, target, Err::<(), _>(e)) {
                    fail(job, &mut first, member, e);
                }
            }
        }
    }

    let mut results: Vec<Option<Result<ProcessDump>>> = attached.iter().map(|_| None).collect();
    let mut dlls: Vec<&PathBuf> = attached.iter().map(|a| &a.dll).collect();
    dlls.sort();
    dlls.dedup();
    let mut done = members.len();
    for dll in dlls {
        let group: Vec<usize> = (0..attached.len())
            .filter(|&i| &attached[i].dll == dll)
            .collect();
        let mut step = |_: usize| {
            progress(done, total);
            done += 1;
        };
        for (i, result) in dump_group(dll, &attached, &group, &mut step) {
            results[i] = Some(result);
        }
    }

    // Resume everyone, then report in job order.
    for (a, result) in attached.into_iter().zip(results) {
        let result = result.unwrap_or_else(|| {
            Err(Error::Dll {
                call: "mqs_setup_process",
                detail: "the process was not handed to the DLL".into(),
            })
        });
        match finish(a.member.pid, a.target, result) {
            Ok(process) => job.processes.push(process),
            Err(e) => fail(job, &mut first, a.member, e),
        }
    }
    progress(total, total);
    job.failures.sort_by_key(|f| f.rank);
    first
}

/// One session of `dll` over the attached members `group` (indices into
/// `attached`): every process is handed to the DLL before any is dumped.
fn dump_group(
    dll_path: &std::path::Path,
    attached: &[Attached<'_>],
    group: &[usize],
    step: &mut dyn FnMut(usize),
) -> Vec<(usize, Result<ProcessDump>)> {
    let _one_session_at_a_time = crate::dll::exclusive();
    let setup = OutputCapture::start();
    let session = Dll::load(dll_path).and_then(|dll| Ok((dll, Session::new(dll)?)));
    let mut setup_output = setup.map(OutputCapture::finish).unwrap_or_default();
    let (dll, mut session) = match session {
        Ok(pair) => pair,
        Err(e) => {
            echo_verbose(&setup_output);
            // Every member fails the same way; the first carries the error,
            // the others the same error loaded again (or its text).
            let message = e.to_string();
            let mut e = Some(e);
            return group
                .iter()
                .map(|&i| {
                    let error = e
                        .take()
                        .or_else(|| Dll::load(dll_path).err())
                        .unwrap_or_else(|| Error::Dll {
                            call: "mqs_setup_job",
                            detail: message.clone(),
                        });
                    (i, Err(error))
                })
                .collect();
        }
    };
    let mut added = Vec::new();
    let mut out = Vec::new();
    for &i in group {
        let a = &attached[i];
        let capture = OutputCapture::start();
        let executable = executable_of(a.member.pid);
        let result = session
            .add_image(&executable, Box::new(IndexSymbols(a.symbols.clone())))
            .and_then(|image| {
                session.add_process(image, Box::new(&a.target), a.member.identity, 8)
            });
        let output = capture.map(OutputCapture::finish).unwrap_or_default();
        match result {
            Ok(process) => added.push((i, process, executable, output)),
            Err(e) => {
                echo_verbose(&output);
                out.push((i, Err(e)));
            }
        }
    }
    for (i, process, executable, mut output) in added {
        step(i);
        let capture = OutputCapture::start();
        let mut dump = process_dump(&session, process, attached[i].member, executable, dll);
        output.extend(capture.map(OutputCapture::finish).unwrap_or_default());
        output.splice(0..0, std::mem::take(&mut setup_output));
        echo_verbose(&output);
        dump.dll_output = output;
        out.push((i, Ok(dump)));
    }
    // Destroying the session's objects may print too; nobody reads that.
    let capture = OutputCapture::start();
    drop(session);
    echo_verbose(&capture.map(OutputCapture::finish).unwrap_or_default());
    out
}

fn echo_verbose(lines: &[String]) {
    if crate::dll::is_verbose() {
        for line in lines {
            eprintln!("mqs-dll: {line}");
        }
    }
}

fn executable_of(pid: i32) -> String {
    exe_path(pid)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| format!("pid {pid}"))
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
    let dll_path = dll_path_for(&symbols, target, options)?;
    let dll = Dll::load(&dll_path)?;
    let executable = executable_of(pid);
    let mut session = Session::new(dll)?;
    let image = session.add_image(&executable, Box::new(IndexSymbols(symbols)))?;
    // The session borrows the target: it is dropped (and the DLL's process
    // info destroyed) before the caller detaches.
    let process = session.add_process(image, Box::new(target), global_rank, 8)?;
    let member = Member {
        pid,
        host: String::new(),
        rank: usize::try_from(global_rank).unwrap_or(0),
        identity: global_rank,
        spawned_job: None,
    };
    Ok(process_dump(&session, process, &member, executable, dll))
}

/// The DLL to use for a process: the one given, else the one it names
/// (checked for trust unless told otherwise).
fn dll_path_for(
    symbols: &Arc<SymbolIndex>,
    target: &PageCache<LiveProcess>,
    options: &Options,
) -> Result<PathBuf> {
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
    Ok(dll_path)
}

/// Walks everything the DLL can tell about a process handed to `session`.
fn process_dump(
    session: &Session<'_>,
    process: ProcessId,
    member: &Member,
    executable: String,
    dll: &Dll,
) -> ProcessDump {
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
    ProcessDump {
        pid: member.pid,
        global_rank: member.identity,
        spawned: member.spawned_job.as_ref().map(|job| SpawnedJob {
            job: job.clone(),
            rank: member.rank,
        }),
        executable,
        dll: DllInfo {
            path: dll.path.display().to_string(),
            version: dll.current_version(),
            compatibility: dll.compatibility,
        },
        communicators,
        new_processes,
        spawn_breakpoint,
        dll_output: Vec::new(),
        stats,
    }
}
