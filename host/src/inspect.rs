//! One dump, from whatever source: find the processes (a pid, a starter's
//! job, core files, a snapshot), index their symbols, find and load the
//! DLL, run the interface's calling sequence over every process, let the
//! processes go. The library entry points behind `mqs-dump`.
//!
//! Every source goes through the same steps ([`Prepared`] processes handed
//! to [`dump_prepared`]); only finding the processes and letting them go
//! differ. A single rank is a job of one.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::dll::capture::OutputCapture;
use crate::dll::{locate, Dll, ImageSymbols, ProcessId, Session};
use crate::dump::{
    DllInfo, JobDump, Launcher, NewProcess, NewProcessList, ProcessDump, RankFailure, Section,
    SpawnedJob, SCHEMA_VERSION,
};
use crate::job::{Member, MpiEnvironment};
use crate::process::{
    CoreFile, CoreOptions, LiveProcess, Liveness, Mode, PageCache, SnapshotProcess, Target,
};
use crate::snapshot::{self, RecordingSymbols, Snapshot};
use crate::stacks::{self, RawStacks};
use crate::symbols::{
    LineTables, ObjectSymbols, SymbolCache, SymbolIndex, SymbolSources, TypeSource,
};
use crate::{mpi2dd, mpir, pmix};
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
        debuginfod: !options.offline,
        progress: true,
    }))
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
pub fn rank_from_environment(target: &dyn Target) -> Option<i32> {
    MpiEnvironment::of(&target.environment().ok()?).rank
}

/// Called as a job's processes are stopped and dumped: (steps done, total).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

/// A process ready to be dumped: its source, symbols and DLL.
struct Prepared<T: Target> {
    member: Member,
    target: PageCache<T>,
    index: Option<Arc<SymbolIndex>>,
    symbols: Rc<dyn ImageSymbols>,
    /// Set when the dump is saved: the lookups as the DLL makes them.
    recording: Option<Rc<RecordingSymbols>>,
    dll: PathBuf,
    executable: String,
    /// The MPI library (the object naming the DLL), to say what it lacks
    /// when the DLL finds no types.
    mpi_library: Option<Arc<ObjectSymbols>>,
    cache: Option<Arc<SymbolCache>>,
}

impl<T: Target> Prepared<T> {
    /// Indexes the target's symbols and finds its DLL. On failure the
    /// target is handed back so that it can be let go.
    fn new(
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
        let dll = match dll_path_for(&*symbols, &target, options) {
            Ok(dll) => dll,
            Err(e) => {
                let e = match (&e, &index) {
                    (Error::NotMpi { pid, .. }, Some(index)) => {
                        no_queue_support(*pid, index).unwrap_or(e)
                    }
                    _ => e,
                };
                return Err(Box::new((target, e)));
            }
        };
        let mpi_library = match &index {
            Some(index) => match prepare_types(&target, index, cache, &dll, options) {
                Ok(library) => library,
                Err(e) => return Err(Box::new((target, e))),
            },
            None => None,
        };
        let recording = options
            .save
            .as_ref()
            .map(|_| Rc::new(RecordingSymbols::new(symbols.clone())));
        let symbols = match &recording {
            Some(r) => r.clone() as Rc<dyn ImageSymbols>,
            None => symbols,
        };
        let executable = target
            .executable()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| format!("pid {}", member.pid));
        Ok(Self {
            member,
            target,
            index,
            symbols,
            recording,
            dll,
            executable,
            mpi_library,
            cache: Some(cache.clone()),
        })
    }

    /// The error for a DLL that found no types: which library lacks them,
    /// and how to get them, when mqs found nothing for it.
    fn explain(&self, e: Error) -> Error {
        let Error::NoDebugInfo { detail } = e else {
            return e;
        };
        let (Some(library), Some(cache)) = (&self.mpi_library, &self.cache) else {
            return Error::NoDebugInfo { detail };
        };
        if library.type_source() != TypeSource::None {
            return Error::NoDebugInfo { detail };
        }
        let dirs: Vec<String> = cache
            .typepack_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let debuginfod = match cache.debuginfod() {
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
                "no DWARF in it or in the debug directories, no type pack in {}, {debuginfod}",
                dirs.join(", ")
            ),
            detail,
        }))
    }
}

/// Gets a process's types ready: lets debuginfod fetch the MPI's own files
/// (the library that names the DLL, and the objects in the directories of
/// the DLLs it names, where Open MPI keeps its components), and checks the
/// type packs the symbols answer from against the process. Returns the MPI
/// library.
fn prepare_types(
    target: &dyn Target,
    index: &SymbolIndex,
    cache: &SymbolCache,
    dll: &Path,
    options: &Options,
) -> Result<Option<Arc<ObjectSymbols>>> {
    let objects = index.objects();
    let library = objects
        .iter()
        .find(|(o, _)| o.data_symbol("MPIR_dll_name").is_some())
        .map(|(o, _)| o.clone());
    if cache.debuginfod().is_some() {
        let mut dirs: Vec<PathBuf> = locate::named_by_target(index, target)
            .unwrap_or_default()
            .iter()
            .map(PathBuf::as_path)
            .chain(options.dll.is_none().then_some(dll))
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
    crate::typepack::guard::check(target, index, &env)?;
    Ok(library)
}

/// Why a process with an MPI library but no `MPIR_dll_name` shows no
/// queues: its MPI was built without debugger support (Debian's MPICH).
fn no_queue_support(pid: i32, index: &SymbolIndex) -> Option<Error> {
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
        format!(
            "its MPI library {name} is MPICH built without --enable-debuginfo: it keeps no \
             message queues for debuggers (no MPIR_dll_name, no queue symbols), so no DLL can \
             show them; rebuild MPICH with --enable-debuginfo (and shared libraries) and \
             relink or rerun the program with it"
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
enum Known {
    Nothing,
    /// Indexed already (a starter's, looked at before we knew it was one).
    Index(Arc<SymbolIndex>),
    /// The answers a snapshot recorded.
    Recorded(Rc<dyn ImageSymbols>),
}

/// A job found through a process that knows it: an MPIR starter's
/// process table, or the MPI2DD directories reached from a directory or
/// metadirectory process.
#[derive(Debug, Clone)]
pub struct FoundJob {
    pub launcher: Launcher,
    pub members: Vec<Member>,
    /// Processes the tables name that cannot be reached, and why.
    pub unreachable: Vec<(Member, String)>,
}

/// The job `target` leads to, if it is a starter, a directory or a
/// metadirectory, or a PMIx launcher (None for an ordinary rank, or a
/// starter whose job has not started yet). Only reads: the caller decides
/// whether the process is stopped meanwhile, except that a PMIx launcher
/// must run to answer.
pub fn find_job(
    target: &dyn Target,
    symbols: &SymbolIndex,
    options: &Options,
) -> Result<Option<FoundJob>> {
    let launcher = || Launcher {
        pid: target.pid(),
        executable: target
            .executable()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    let published = match mpi2dd::info_address(symbols) {
        Some(addr) => mpi2dd::published_info(target, addr)?,
        None => None,
    };
    if let Some(info) = published {
        if info.is_directory() || info.is_metadirectory() {
            let mut opener = NoStopOpener {
                cache: symbol_cache(options),
            };
            let found = mpi2dd::walk(target, &info, &mut opener)?;
            let unreachable = found
                .unreachable
                .into_iter()
                .map(|(dir, why)| {
                    let member = Member {
                        pid: dir.pid,
                        host: dir.host,
                        rank: 0,
                        identity: -1,
                        spawned_job: None,
                        spawned_by: None,
                    };
                    (member, format!("a directory process of the job: {why}"))
                })
                .collect();
            return Ok(Some(FoundJob {
                launcher: launcher(),
                members: mpi2dd::members(&found.entries),
                unreachable,
            }));
        }
    }
    if let Some(library) = pmix::launcher_library(target, symbols) {
        let table = pmix::proc_table(target.pid(), &library, pmix::TIMEOUT)?;
        if table.is_empty() {
            return Ok(None);
        }
        return Ok(Some(FoundJob {
            launcher: launcher(),
            members: crate::job::members(target, &table),
            unreachable: Vec::new(),
        }));
    }
    if !mpir::is_starter(symbols) {
        return Ok(None);
    }
    let table = mpir::read_proctable(target, symbols)?;
    if table.is_empty() {
        return Ok(None);
    }
    Ok(Some(FoundJob {
        launcher: launcher(),
        members: crate::job::members(target, &table),
        unreachable: Vec::new(),
    }))
}

/// Opens the processes an MPI2DD walk leads to, without stopping them.
struct NoStopOpener {
    cache: Arc<SymbolCache>,
}

impl mpi2dd::Opener for NoStopOpener {
    fn open(&mut self, pid: i32) -> Result<(Box<dyn Target>, u64)> {
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        let index = index_symbols_with(&target, &self.cache)?;
        let addr = mpi2dd::info_address(&*index).ok_or_else(|| Error::NotMpi {
            pid,
            detail: "a metadirectory names it as a directory, but it has no MPI2DD_info".into(),
        })?;
        Ok((Box::new(target), addr))
    }
}

/// Ranks of a job read somewhere other than here: by collectors on their
/// own hosts (the `collect` module plugs in here, so that this module does
/// not depend on it). [`dump_with`] hands them over before it stops any
/// local rank, waits in [`Elsewhere::stopped`] until they are stopped too,
/// and merges what [`Elsewhere::finish`] returns, rank by rank.
pub trait Elsewhere {
    /// Whether `member` is read elsewhere rather than attached to here.
    fn takes(&self, member: &Member) -> bool;
    /// Starts reading `members`. The starter runs again by then.
    fn start(&mut self, starter: &Starter, members: Vec<Member>);
    /// Every local member is stopped: returns once the others are too (or
    /// will not be).
    fn stopped(&mut self);
    /// What was read elsewhere: dumps, and failures with their errors.
    fn finish(&mut self) -> Vec<Result<ProcessDump, (RankFailure, Error)>>;
}

/// The starter of a job as [`Elsewhere`] gets it: running, with the
/// symbols it was read with.
#[derive(Debug, Clone)]
pub struct Starter {
    pub pid: i32,
    pub symbols: Arc<SymbolIndex>,
}

/// Reads nothing elsewhere: ranks on other hosts are reported out of reach.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nowhere;

impl Elsewhere for Nowhere {
    fn takes(&self, _: &Member) -> bool {
        false
    }
    fn start(&mut self, _: &Starter, _: Vec<Member>) {}
    fn stopped(&mut self) {}
    fn finish(&mut self) -> Vec<Result<ProcessDump, (RankFailure, Error)>> {
        Vec::new()
    }
}

/// Dumps `pid`: one MPI process, or, for an MPI starter (or an MPI2DD
/// directory or metadirectory), every local process of its job. A job whose
/// processes all fail gives the first one's error.
pub fn dump(pid: i32, options: &Options, progress: Progress<'_>) -> Result<JobDump> {
    dump_with(pid, options, progress, &mut Nowhere)
}

/// [`dump`], with the processes `elsewhere` takes read there (ranks on
/// other hosts, by collectors) and merged into the job.
pub fn dump_with(
    pid: i32,
    options: &Options,
    progress: Progress<'_>,
    elsewhere: &mut dyn Elsewhere,
) -> Result<JobDump> {
    let cache = symbol_cache(options);
    // A PMIx launcher answers only while it runs: ask it before anything
    // is stopped.
    {
        let probe = LiveProcess::attach(pid, Mode::NoStop)?;
        let symbols = index_symbols_with(&probe, &cache)?;
        if pmix::launcher_library(&probe, &*symbols).is_some() {
            let job = find_job(&probe, &symbols, options)?.ok_or_else(|| Error::NotMpi {
                pid,
                detail: "it is a PMIx launcher that runs no job (yet)".into(),
            })?;
            let starter = Starter { pid, symbols };
            return dump_found(job, &cache, options, progress, (&starter, elsewhere));
        }
    }
    let mut target = attach(pid, options)?;
    let symbols = match index_symbols_with(&target, &cache) {
        Ok(symbols) => symbols,
        Err(e) => return finish(&mut target, Err(e)),
    };
    let job = match find_job(&target, &symbols, options) {
        Ok(job) => job,
        Err(e) => return finish(&mut target, Err(e)),
    };
    let Some(job) = job else {
        let starter = mpir::is_starter(&*symbols);
        let rank = rank_from_environment(&target).unwrap_or(-1);
        let member = Member::single(pid, rank);
        let prepared = Prepared::new(member, target, Known::Index(symbols), &cache, options);
        let prepared = match prepared {
            Ok(p) => p,
            Err(failed) => {
                let (mut target, e) = *failed;
                return finish(&mut target, Err(e));
            }
        };
        let outcome = dump_job(None, vec![prepared], options, progress, &mut |t| {
            finish(t, Ok(()))
        })?;
        return outcome.single().map_err(|e| match e {
            // A starter whose job has not started names no DLL itself.
            Error::NotMpi { pid, .. } if starter => Error::NotMpi {
                pid,
                detail: "it is an MPI starter whose process table is empty \
                         (its job has not started yet)"
                    .into(),
            },
            other => other,
        });
    };
    // Its tables were read while it was stopped; let it go before stopping
    // its job.
    finish(&mut target, Ok(()))?;
    let starter = Starter { pid, symbols };
    dump_found(job, &cache, options, progress, (&starter, elsewhere))
}

/// Dumps several processes at once (ranks, starters, directories), each
/// expanded to its job: every process is stopped together and numbered one
/// after the other. Ranks of one job (by the job name in their environment)
/// keep their MPI_COMM_WORLD ranks; each further job is numbered after the
/// ones before.
pub fn dump_pids(pids: &[i32], options: &Options, progress: Progress<'_>) -> Result<JobDump> {
    dump_pids_with(pids, options, progress, &mut || None)
}

/// [`dump_pids`], with the ranks on other hosts of each starter named read
/// there by the reader `elsewhere` makes for that starter (None: out of
/// reach).
pub fn dump_pids_with(
    pids: &[i32],
    options: &Options,
    progress: Progress<'_>,
    elsewhere: &mut dyn FnMut() -> Option<Box<dyn Elsewhere>>,
) -> Result<JobDump> {
    let cache = symbol_cache(options);
    // Each named process as (its job's name, its members); looked at
    // without stopping: they are stopped together below.
    let mut groups: Vec<(Option<String>, Vec<Member>)> = Vec::new();
    let mut launcher = None;
    let mut failures = Vec::new();
    // Each starter named, its reader elsewhere, and its members (host, pid).
    type Named = (Starter, Box<dyn Elsewhere>, Vec<(String, i32)>);
    let mut starters: Vec<Named> = Vec::new();
    for &pid in pids {
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        let symbols = index_symbols_with(&target, &cache)?;
        match find_job(&target, &symbols, options)? {
            Some(job) => {
                launcher.get_or_insert(job.launcher);
                for (member, why) in job.unreachable {
                    let e = Error::Unreachable {
                        pid: member.pid,
                        detail: why,
                    };
                    failures.push((failure(&member, &e), e));
                }
                if let Some(reader) = elsewhere() {
                    let owns = job
                        .members
                        .iter()
                        .map(|m| (m.host.clone(), m.pid))
                        .collect();
                    starters.push((Starter { pid, symbols }, reader, owns));
                }
                groups.push((None, job.members));
            }
            None => {
                let env = MpiEnvironment::of(&target.environment().unwrap_or_default());
                let member = Member::single(pid, env.rank.unwrap_or(-1));
                match groups
                    .iter_mut()
                    .find(|(job, _)| job.is_some() && *job == env.job)
                {
                    Some((_, members)) => members.push(member),
                    None => groups.push((env.job.clone(), vec![member])),
                }
            }
        }
    }
    let members = number_groups(groups);
    let launcher = launcher.unwrap_or(Launcher {
        pid: pids[0],
        executable: String::new(),
    });
    let away = starters
        .iter_mut()
        .map(|(starter, reader, owns)| Away {
            starter,
            reader: reader.as_mut(),
            owns: Some(owns.as_slice()),
        })
        .collect();
    dump_members(launcher, members, failures, &cache, options, progress, away)
}

/// One numbering for several jobs: the first keeps its identities, each
/// next one starts after the highest so far. A process named twice (a rank
/// and its starter) is kept once.
fn number_groups(groups: Vec<(Option<String>, Vec<Member>)>) -> Vec<Member> {
    let mut out: Vec<Member> = Vec::new();
    let mut next = 0i32;
    for (_, members) in groups {
        let offset = next;
        for mut m in members {
            let same_host = |o: &Member| {
                o.host == m.host || (mpir::is_local_host(&o.host) && mpir::is_local_host(&m.host))
            };
            if out.iter().any(|o| o.pid == m.pid && same_host(o)) {
                continue;
            }
            if m.identity >= 0 {
                m.identity += offset;
            } else {
                m.identity = next.max(offset);
            }
            next = next.max(m.identity + 1);
            out.push(m);
        }
    }
    out
}

/// Dumps the job of a starter that runs (one launched and traced by
/// `mqs-dump launch`): its tables are read without stopping it, then its
/// processes are stopped and dumped; those `elsewhere` takes (ranks on
/// other hosts, for collectors there) are read there.
pub fn dump_running_starter(
    starter: i32,
    options: &Options,
    elsewhere: &mut dyn Elsewhere,
) -> Result<JobDump> {
    let cache = symbol_cache(options);
    let target = LiveProcess::attach(starter, Mode::NoStop)?;
    let symbols = index_symbols_with(&target, &cache)?;
    let job = find_job(&target, &symbols, options)?.ok_or_else(|| Error::NotMpi {
        pid: starter,
        detail: "the starter lists no processes (yet)".into(),
    })?;
    let starter = Starter {
        pid: starter,
        symbols,
    };
    dump_found(job, &cache, options, &mut |_, _| {}, (&starter, elsewhere))
}

fn dump_found(
    job: FoundJob,
    cache: &Arc<SymbolCache>,
    options: &Options,
    progress: Progress<'_>,
    (starter, reader): (&Starter, &mut dyn Elsewhere),
) -> Result<JobDump> {
    let unreachable = job
        .unreachable
        .into_iter()
        .map(|(member, why)| {
            let e = Error::Unreachable {
                pid: member.pid,
                detail: why,
            };
            (failure(&member, &e), e)
        })
        .collect();
    dump_members(
        job.launcher,
        job.members,
        unreachable,
        cache,
        options,
        progress,
        vec![Away {
            starter,
            reader,
            owns: None,
        }],
    )
}

/// Dumps a collector's share of a job: the processes of `members`, all on
/// this host, stopped together; `barrier` is called once all are stopped
/// (and before any is read), and when it fails every one is let go
/// unread and fails with its error. Each member ends up in the job's
/// processes or in its failures; only saving a snapshot (`options.save`)
/// fails the whole.
pub fn dump_share(
    members: Vec<Member>,
    options: &Options,
    progress: Progress<'_>,
    barrier: &mut dyn FnMut() -> Result<()>,
) -> Result<JobDump> {
    let cache = symbol_cache(options);
    Ok(dump_here(
        None,
        members,
        Vec::new(),
        &cache,
        options,
        progress,
        barrier,
    )?
    .job)
}

/// A starter whose ranks on other hosts are read there, by `reader`;
/// `owns`: its members by (host, pid) where several starters share a dump
/// (None: every member is its).
struct Away<'a> {
    starter: &'a Starter,
    reader: &'a mut dyn Elsewhere,
    owns: Option<&'a [(String, i32)]>,
}

/// Hands the members a reader elsewhere takes to it, stops every local
/// member, waits for the others, dumps, releases, merges.
fn dump_members(
    launcher: Launcher,
    members: Vec<Member>,
    mut failures: Vec<(RankFailure, Error)>,
    cache: &Arc<SymbolCache>,
    options: &Options,
    progress: Progress<'_>,
    mut away: Vec<Away<'_>>,
) -> Result<JobDump> {
    let (members, unusable) = crate::job::screen(members);
    // Which reader elsewhere takes a member, if any.
    let pick = |away: &[Away<'_>], member: &Member| {
        away.iter().position(|a| {
            a.owns.is_none_or(|owns| {
                owns.iter()
                    .any(|(h, p)| *h == member.host && *p == member.pid)
            }) && a.reader.takes(member)
        })
    };
    let mut taken: Vec<Vec<Member>> = away.iter().map(|_| Vec::new()).collect();
    let mut here = Vec::new();
    for member in members {
        match pick(&away, &member) {
            Some(i) => taken[i].push(member),
            None => here.push(member),
        }
    }
    for (member, why) in unusable {
        if why == crate::job::Unusable::Remote {
            if let Some(i) = pick(&away, &member) {
                taken[i].push(member);
                continue;
            }
        }
        let e = match why {
            crate::job::Unusable::Remote => Error::Remote {
                rank: member.rank,
                host: member.host.clone(),
                pid: member.pid,
            },
            other => Error::Unreachable {
                pid: member.pid,
                detail: other.describe(&member),
            },
        };
        failures.push((failure(&member, &e), e));
    }
    // Only the readers given members take part.
    let mut active: Vec<&mut Away<'_>> = Vec::new();
    for (a, mut members) in away.iter_mut().zip(taken) {
        if members.is_empty() {
            continue;
        }
        members.sort_by_key(|m| m.identity);
        a.reader.start(a.starter, members);
        active.push(a);
    }
    let outcome = {
        let mut barrier = || {
            for a in active.iter_mut() {
                a.reader.stopped();
            }
            Ok(())
        };
        dump_here(
            Some(launcher),
            here,
            failures,
            cache,
            options,
            progress,
            &mut barrier,
        )
    };
    // Whatever happened here, what is read elsewhere is waited for.
    let read_elsewhere: Vec<_> = active.iter_mut().flat_map(|a| a.reader.finish()).collect();
    let mut outcome = outcome?;
    for result in read_elsewhere {
        match result {
            Ok(process) => outcome.job.processes.push(process),
            Err(failure) => outcome.add_failures(vec![failure]),
        }
    }
    // One job, rank by rank, wherever each rank was read.
    outcome
        .job
        .processes
        .sort_by_key(|p| (p.global_rank < 0, p.global_rank));
    outcome.job_or_first_error()
}

/// Stops every member (all usable on this host), calls `barrier`, dumps
/// them all, releases them; `failures` are the job's other members.
fn dump_here(
    launcher: Option<Launcher>,
    members: Vec<Member>,
    mut failures: Vec<(RankFailure, Error)>,
    cache: &Arc<SymbolCache>,
    options: &Options,
    progress: Progress<'_>,
    barrier: &mut dyn FnMut() -> Result<()>,
) -> Result<Outcome> {
    let mut prepared = Vec::new();
    let total = members.len() * 2;
    for (done, member) in members.into_iter().enumerate() {
        progress(done, total);
        let target = match attach(member.pid, options) {
            Ok(target) => target,
            // A rank that ended since the starter listed it.
            Err(Error::NoSuchProcess { pid }) => {
                let e = Error::Unreachable {
                    pid,
                    detail: format!(
                        "rank {} has exited (no process with pid {pid} any more)",
                        member.rank
                    ),
                };
                failures.push((failure(&member, &e), e));
                continue;
            }
            Err(e) => {
                failures.push((failure(&member, &e), e));
                continue;
            }
        };
        match Prepared::new(member.clone(), target, Known::Nothing, cache, options) {
            Ok(p) => prepared.push(p),
            Err(failed) => {
                let (mut target, e) = *failed;
                let e = match finish(&mut target, Err::<(), _>(e)) {
                    Err(e) => e,
                    Ok(()) => continue,
                };
                failures.push((failure(&member, &e), e));
            }
        }
    }
    if let Err(e) = barrier() {
        for mut p in prepared {
            let e = match finish(&mut p.target, Err::<(), _>(Error::Collect(e.to_string()))) {
                Err(e) => e,
                Ok(()) => continue,
            };
            failures.push((failure(&p.member, &e), e));
        }
        let mut outcome = Outcome {
            job: JobDump {
                schema_version: SCHEMA_VERSION,
                launcher,
                processes: Vec::new(),
                failures: Vec::new(),
            },
            first_error: None,
        };
        outcome.add_failures(failures);
        return Ok(outcome);
    }
    let mut outcome = dump_job(launcher, prepared, options, progress, &mut |t| {
        finish(t, Ok(()))
    })?;
    outcome.add_failures(failures);
    Ok(outcome)
}

/// Dumps the processes recorded in core files (one per process of a job),
/// numbered by their MPI rank, not by file order.
pub fn dump_cores(cores: &[PathBuf], core: &CoreOptions, options: &Options) -> Result<JobDump> {
    let cache = symbol_cache(options);
    let mut prepared = Vec::new();
    let mut failures = Vec::new();
    for path in cores {
        let target = page_cache(CoreFile::open(path, core.clone())?, options);
        let rank = rank_from_environment(&target).unwrap_or(-1);
        let member = Member::single(target.pid(), rank);
        match Prepared::new(member.clone(), target, Known::Nothing, &cache, options) {
            Ok(p) => prepared.push(p),
            Err(failed) if cores.len() == 1 => return Err(failed.1),
            Err(failed) => failures.push((failure(&member, &failed.1), failed.1)),
        }
    }
    let mut outcome = dump_job(None, prepared, options, &mut |_, _| {}, &mut |_| Ok(()))?;
    number_by_world_rank(&mut outcome.job);
    outcome.add_failures(failures);
    outcome.job_or_first_error()
}

/// Replays a snapshot file.
pub fn dump_snapshot(path: &Path, options: &Options) -> Result<JobDump> {
    dump_loaded_snapshot(Snapshot::load(path, &options.debug_dirs)?, options)
}

/// Replays a snapshot already in memory.
pub fn dump_loaded_snapshot(snapshot: Snapshot, options: &Options) -> Result<JobDump> {
    let cache = symbol_cache(options);
    let mut prepared: Vec<Prepared<SnapshotProcess>> = Vec::new();
    let mut failures = Vec::new();
    let count = snapshot.processes.len();
    for entry in snapshot.processes {
        let member = entry.member.clone();
        let symbols: Rc<dyn ImageSymbols> = Rc::new(entry.symbols);
        let target = page_cache(entry.target, options);
        match Prepared::new(
            member.clone(),
            target,
            Known::Recorded(symbols),
            &cache,
            options,
        ) {
            Ok(p) => prepared.push(p),
            Err(failed) if count == 1 => return Err(failed.1),
            Err(failed) => failures.push((failure(&member, &failed.1), failed.1)),
        }
    }
    let mut outcome = dump_job(
        snapshot.launcher,
        prepared,
        options,
        &mut |_, _| {},
        &mut |_| Ok(()),
    )?;
    outcome.add_failures(failures);
    outcome.job_or_first_error()
}

/// A dump, with the errors behind its failures.
struct Outcome {
    job: JobDump,
    /// The first error, whole (the failures keep only its text).
    first_error: Option<Error>,
}

impl Outcome {
    fn add_failures(&mut self, failures: Vec<(RankFailure, Error)>) {
        for (failure, error) in failures {
            self.job.failures.push(failure);
            // Ranks on other hosts are reported, not failed on.
            if !matches!(error, Error::Remote { .. }) {
                self.first_error.get_or_insert(error);
            }
        }
        self.job.failures.sort_by_key(|f| f.rank);
    }

    /// The dump, unless nothing could be dumped: then the first error.
    fn job_or_first_error(self) -> Result<JobDump> {
        match self.first_error {
            Some(e) if self.job.processes.is_empty() => Err(e),
            _ => Ok(self.job),
        }
    }

    /// A job of one process: its error is the error.
    fn single(self) -> Result<JobDump> {
        self.job_or_first_error()
    }
}

/// How a member that could not be dumped is reported.
pub fn failure(member: &Member, error: &Error) -> RankFailure {
    RankFailure {
        rank: usize::try_from(member.identity).unwrap_or(member.rank),
        pid: member.pid,
        host: member.host.clone(),
        message: error.to_string(),
        exit_code: error.exit_code(),
    }
}

/// Where the global rank is not known from the process's environment, the
/// DLL's MPI_COMM_WORLD says which rank it is; processes are then listed in
/// rank order.
fn number_by_world_rank(job: &mut JobDump) {
    for p in &mut job.processes {
        if p.global_rank >= 0 {
            continue;
        }
        if let Section::Ok { value } = &p.communicators {
            if let Some(world) = value.list.iter().find(|c| c.name == "MPI_COMM_WORLD") {
                p.global_rank = i32::try_from(world.local_rank).unwrap_or(-1);
            }
        }
    }
    job.processes
        .sort_by_key(|p| (p.global_rank < 0, p.global_rank));
}

/// Dumps prepared processes: one session per DLL with every process of
/// that DLL in it (so an MPI-2 DLL knows every identity when it translates
/// ranks), then saves the snapshot if asked, then lets each process go
/// with `release` (for live ones: resume, and check it still runs).
fn dump_job<T: Target>(
    launcher: Option<Launcher>,
    mut prepared: Vec<Prepared<T>>,
    options: &Options,
    progress: Progress<'_>,
    release: &mut dyn FnMut(&mut PageCache<T>) -> Result<()>,
) -> Result<Outcome> {
    let members = prepared.len();
    let total = members * 2;
    let mut results: Vec<Option<Result<ProcessDump>>> = prepared.iter().map(|_| None).collect();
    let mut dlls: Vec<PathBuf> = prepared.iter().map(|p| p.dll.clone()).collect();
    dlls.sort();
    dlls.dedup();
    let mut done = members;
    for dll in &dlls {
        let group: Vec<usize> = (0..prepared.len())
            .filter(|&i| &prepared[i].dll == dll)
            .collect();
        let mut step = || {
            progress(done, total);
            done += 1;
        };
        for (i, result) in dump_group(dll, &prepared, &group, &mut step) {
            results[i] = Some(result);
        }
    }
    // Stacks are walked while every process is still stopped, named once
    // all are let go.
    let raw_stacks: Vec<Option<Section<RawStacks>>> = prepared
        .iter()
        .map(|p| options.stacks.then(|| unwind_stacks(p)))
        .collect();
    let saved = match &options.save {
        Some(path) => save(path, launcher.as_ref(), &prepared),
        None => Ok(()),
    };

    let mut job = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher,
        processes: vec![],
        failures: vec![],
    };
    let mut first_error = None;
    if options.stacks {
        // Release first so that naming frames never keeps a process stopped.
        for (p, result) in prepared.iter_mut().zip(results.iter_mut()) {
            let released = release(&mut p.target);
            if let Err(e) = released {
                *result = Some(Err(e));
            }
        }
        name_stacks(&prepared, raw_stacks, &mut results);
    }
    for (p, result) in prepared.iter_mut().zip(results) {
        let result = result.unwrap_or_else(|| {
            Err(Error::Dll {
                call: "mqs_setup_process",
                detail: "the process was not handed to the DLL".into(),
            })
        });
        // Releasing twice is harmless (it is idempotent).
        let released = release(&mut p.target);
        match released.and(result) {
            Ok(process) => job.processes.push(process),
            Err(e) => {
                job.failures.push(failure(&p.member, &e));
                first_error.get_or_insert(e);
            }
        }
    }
    progress(total, total);
    saved?;
    Ok(Outcome { job, first_error })
}

/// Unwinds every thread of a prepared (stopped) process.
fn unwind_stacks<T: Target>(p: &Prepared<T>) -> Section<RawStacks> {
    match &p.index {
        None => Section::NotAvailable {
            reason: "a snapshot records no stacks (only what the DLL read)".into(),
        },
        Some(index) => match stacks::unwind(&p.target, index) {
            Ok(raw) => Section::Ok { value: raw },
            Err(e) => Section::Error {
                message: e.to_string(),
            },
        },
    }
}

/// Names the unwound stacks and puts them into the dumps, sharing the line
/// tables of every object between the processes.
fn name_stacks<T: Target>(
    prepared: &[Prepared<T>],
    raw: Vec<Option<Section<RawStacks>>>,
    results: &mut [Option<Result<ProcessDump>>],
) {
    let mut objects: Vec<Arc<ObjectSymbols>> = Vec::new();
    for index in prepared.iter().filter_map(|p| p.index.as_ref()) {
        for (object, _) in index.objects() {
            if !objects.iter().any(|o| Arc::ptr_eq(o, &object)) {
                objects.push(object);
            }
        }
    }
    let mut lines = LineTables::new();
    for ((p, raw), result) in prepared.iter().zip(raw).zip(results.iter_mut()) {
        let (Some(raw), Some(Ok(dump))) = (raw, result.as_mut()) else {
            continue;
        };
        dump.stacks = Some(match (raw, &p.index) {
            (Section::Ok { value }, Some(index)) => {
                dump.stats.stacks_ms = Some(value.elapsed_ms);
                Section::Ok {
                    value: stacks::symbolize(&value, index, &objects, &mut lines),
                }
            }
            (Section::Ok { .. }, None) => Section::NotAvailable {
                reason: "no symbols".into(),
            },
            (Section::NotAvailable { reason }, _) => Section::NotAvailable { reason },
            (Section::Error { message }, _) => Section::Error { message },
        });
    }
}

fn save<T: Target>(
    path: &Path,
    launcher: Option<&Launcher>,
    prepared: &[Prepared<T>],
) -> Result<()> {
    let recorded: Vec<snapshot::Recorded<'_, T>> = prepared
        .iter()
        .filter_map(|p| {
            Some(snapshot::Recorded {
                member: &p.member,
                target: &p.target,
                symbols: p.recording.as_deref()?,
                index: p.index.as_deref(),
                dll: &p.dll,
            })
        })
        .collect();
    snapshot::save(path, launcher, &recorded)
}

/// One session of `dll_path` over the prepared processes `group` (indices
/// into `prepared`): every process is handed to the DLL before any is
/// dumped.
fn dump_group<T: Target>(
    dll_path: &Path,
    prepared: &[Prepared<T>],
    group: &[usize],
    step: &mut dyn FnMut(),
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
        let p = &prepared[i];
        let capture = OutputCapture::start();
        let result = session
            .add_image(&p.executable, Box::new(p.symbols.clone()))
            .and_then(|image| {
                session.add_process(
                    image,
                    Box::new(&p.target),
                    p.member.identity,
                    p.target.pointer_size() as i32,
                )
            });
        let output = capture.map(OutputCapture::finish).unwrap_or_default();
        match result {
            Ok(process) => added.push((i, process, output)),
            Err(e) => {
                echo_verbose(&output);
                out.push((i, Err(p.explain(e))));
            }
        }
    }
    for (i, process, mut output) in added {
        step();
        let p = &prepared[i];
        let capture = OutputCapture::start();
        let mut dump = process_dump(&session, process, &p.member, p.executable.clone(), dll);
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

/// Dumps one process through each of several DLLs, all within one stop of
/// the process, so that they see the same state (for cross-checking DLLs).
pub fn dump_with_each_dll(
    pid: i32,
    dlls: &[PathBuf],
    options: &Options,
) -> Result<Vec<ProcessDump>> {
    let cache = symbol_cache(options);
    let mut target = attach(pid, options)?;
    let symbols = match index_symbols_with(&target, &cache) {
        Ok(symbols) => symbols,
        Err(e) => return finish(&mut target, Err(e)),
    };
    let member = Member::single(pid, rank_from_environment(&target).unwrap_or(-1));
    let executable = target
        .executable()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| format!("pid {pid}"));
    // The packs are checked once, whichever DLLs read through them.
    let first = dlls.first().cloned().unwrap_or_default();
    let mpi_library = match prepare_types(&target, &symbols, &cache, &first, options) {
        Ok(library) => library,
        Err(e) => return finish(&mut target, Err(e)),
    };
    let mut dumps = Vec::new();
    for dll in dlls {
        let prepared = [Prepared {
            member: member.clone(),
            target,
            index: Some(symbols.clone()),
            symbols: Rc::new(symbols.clone()),
            recording: None,
            dll: dll.clone(),
            executable: executable.clone(),
            mpi_library: mpi_library.clone(),
            cache: Some(cache.clone()),
        }];
        let mut results = dump_group(dll, &prepared, &[0], &mut || {});
        let [Prepared { target: t, .. }] = prepared;
        target = t;
        match results.pop() {
            Some((_, Ok(dump))) => dumps.push(dump),
            Some((_, Err(e))) => return finish(&mut target, Err(e)),
            None => {}
        }
    }
    finish(&mut target, Ok(dumps))
}

fn attach(pid: i32, options: &Options) -> Result<PageCache<LiveProcess>> {
    let mode = if options.no_stop {
        Mode::NoStop
    } else {
        Mode::Stop
    };
    Ok(page_cache(LiveProcess::attach(pid, mode)?, options))
}

/// Memory a process's page cache holds at most while a dump is not saved.
/// A dump of 200,000 operations reads some 90 MB of the process once,
/// in address order (1 MiB slab windows, requests and fragments in runs);
/// this keeps mqs-dump's own size far below that. Our DLL makes the same
/// 3,138 reading syscalls at N = 100,000 with 4 MB as with 16; MPICH's
/// own DLL walks each queue once per communicator and needs about 8 MB
/// for N = 10,000 (121 syscalls, 1,441 with 4 MB).
pub const PAGE_CACHE_LIMIT: usize = 8 << 20;

/// The page cache a dump reads a process through: every page kept when the
/// dump is saved (the snapshot holds them), else at most [`PAGE_CACHE_LIMIT`].
fn page_cache<T: Target>(target: T, options: &Options) -> PageCache<T> {
    match options.save {
        Some(_) => PageCache::new(target),
        None => PageCache::with_limit(target, PAGE_CACHE_LIMIT),
    }
}

/// Lets a live process go whatever happened, then reports: the death of
/// the process takes precedence over any other error.
fn finish<T, S: Target>(target: &mut PageCache<S>, result: Result<T>) -> Result<T> {
    let released = target.release();
    let gone = || target.liveness() == Liveness::Gone;
    let pid = target.pid();
    let value = result.map_err(|e| {
        if gone() {
            Error::ProcessGone { pid }
        } else {
            e
        }
    })?;
    released.map_err(|e| {
        if gone() {
            Error::ProcessGone { pid }
        } else {
            e
        }
    })?;
    // What was read may predate the death, but a dump of a process that is
    // no more is not what the user asked for: say so.
    if gone() {
        return Err(Error::ProcessGone { pid });
    }
    Ok(value)
}

/// The DLL to use for a process: the one given, else the one it names
/// (checked for trust unless told otherwise).
fn dll_path_for(
    symbols: &dyn ImageSymbols,
    target: &dyn Target,
    options: &Options,
) -> Result<PathBuf> {
    let dll_path = match &options.dll {
        Some(path) => path.clone(),
        None => {
            let named = locate::named_by_target(symbols, target)?;
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
        host: None,
        spawned: member.spawned_job.as_ref().map(|job| SpawnedJob {
            job: job.clone(),
            rank: member.rank,
            parent: member.spawned_by.clone(),
        }),
        executable,
        dll: DllInfo::new(
            dll.path.display().to_string(),
            dll.current_version(),
            dll.compatibility,
        ),
        communicators,
        new_processes,
        spawn_breakpoint,
        unreadable: session.unreadable(process),
        dll_output: Vec::new(),
        stacks: None,
        stats,
    }
}
