//! One dump, from whatever source: find the processes (a pid, a starter's
//! job, core files, a snapshot), index their symbols, find and load the
//! DLL, run the interface's calling sequence over every process, let the
//! processes go. The library entry points behind `mqs-dump`.
//!
//! Every source goes through the same steps (prepared processes handed to
//! one dump of the job); only finding the processes and letting them go
//! differ. A single rank is a job of one.
//!
//! [`prepare`] makes a process ready for its DLL, [`sources`] finds and
//! opens the processes, [`run`] dumps them; this module holds the entry
//! points.

mod options;
mod prepare;
mod run;
mod sources;

pub use options::{symbol_cache, DllChoice, Options, Progress};
use prepare::{prepare_types, Known, Prepared};
pub use run::failure;
use run::{dump_found, dump_group, dump_here, dump_job, dump_members, Away};
use sources::{
    attach, finish, index_symbols_with, number_by_world_rank, number_groups, page_cache,
};
pub use sources::{find_job, Elsewhere, FoundJob, Nowhere, Starter, PAGE_CACHE_LIMIT};
pub use sources::{index_symbols, rank_from_environment};

use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::members::{Member, MpiEnvironment};
use crate::snapshot::Snapshot;
use crate::{mpir, pmix, Error, Result};
use mqs_core::interface::{ImageSymbols, Target};
use mqs_core::model::{JobDump, Launcher, ProcessDump};
use mqs_core::process::{CoreFile, CoreOptions, LiveProcess, Mode, SnapshotProcess};
use mqs_core::symbols::SymbolIndex;

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
        if let Some(parent) = srun_helper_parent(&probe, &symbols) {
            return dump_with(parent, options, progress, elsewhere);
        }
        if pmix::launcher_library(&probe, &*symbols).is_some() {
            let job = match find_job(&probe, &symbols, options) {
                Ok(job) => job,
                // Its PMIx library cannot be loaded here (a launcher in a
                // container, built for another C library): its ranks on
                // this host are still below it.
                Err(Error::Pmix { detail, .. })
                    if !crate::members::ranks_below(&probe).is_empty() =>
                {
                    let note = format!(
                        "it did not answer as a PMIx launcher ({detail}): its ranks on this host \
                         were found below it, and ranks on other hosts are not read (--launcher \
                         starts collectors there)"
                    );
                    return dump_ranks_below(&probe, options, progress, Some(note));
                }
                Err(e) => return Err(e),
            };
            let job = job.ok_or_else(|| Error::NotMpi {
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
        let rank = rank_from_environment(&target);
        // A launcher that keeps no process table (Debian's hydra mpiexec,
        // built without debugger support) still has its ranks on this
        // host below it: the job is theirs.
        if !starter && rank.is_none() && !crate::members::ranks_below(&target).is_empty() {
            finish(&mut target, Ok(()))?;
            return dump_ranks_below(&target, options, progress, None);
        }
        let rank = rank.unwrap_or(-1);
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

/// The job of a launcher whose process table cannot be read (Debian's hydra
/// `mpiexec` keeps none; a PMIx launcher whose library cannot be loaded
/// here): the ranks below it on this host, found by the rank in their
/// environment.
fn dump_ranks_below(
    launcher: &dyn Target,
    options: &Options,
    progress: Progress<'_>,
    note: Option<String>,
) -> Result<JobDump> {
    let ranks = crate::members::ranks_below(launcher);
    let executable = launcher
        .executable()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut job = dump_pids_with(&ranks, options, progress, &mut || None)?;
    // Hydra's ranks on other hosts: named, with where to read them. (A
    // PMIx launcher read this way has its note, which says why.)
    let name = Path::new(&executable)
        .file_name()
        .map_or_else(|| "launcher".into(), |n| n.to_string_lossy().into_owned());
    let elsewhere = match note {
        None => crate::members::ranks_elsewhere(launcher),
        Some(_) => Vec::new(),
    };
    for rank in elsewhere {
        let error = Error::Collect(format!(
            "rank {rank} is not below {name} (pid {pid}) on this host: it keeps no table of \
             its ranks, and those on other hosts run under its proxy there; read them there \
             with mqs-dump --pid <the pid of hydra_pmi_proxy on that host> (or, under Slurm, \
             mqs-dump --slurm JOBID)",
            pid = launcher.pid()
        ));
        job.failures.push(mqs_core::model::RankFailure {
            rank: usize::try_from(rank).unwrap_or(0),
            pid: 0,
            host: String::new(),
            message: error.to_string(),
            exit_code: error.exit_code(),
        });
    }
    job.launcher = Some(Launcher {
        pid: launcher.pid(),
        executable,
        note,
    });
    Ok(job)
}

/// srun forks a helper of itself whose process table stays empty: given
/// that one, the parent srun that lists the job is meant.
fn srun_helper_parent(probe: &LiveProcess, symbols: &SymbolIndex) -> Option<i32> {
    if !mpir::is_starter(symbols) || symbols.find_symbol("totalview_jobid").is_none() {
        return None;
    }
    if !mpir::read_proctable(probe, symbols).ok()?.is_empty() {
        return None;
    }
    let parent = LiveProcess::attach(probe.parent_pid()?, Mode::NoStop).ok()?;
    if parent.executable().ok()? != probe.executable().ok()? {
        return None;
    }
    let parent_symbols = index_symbols(&parent, &[]).ok()?;
    let listed = !mpir::read_proctable(&parent, &*parent_symbols)
        .ok()?
        .is_empty();
    listed.then(|| parent.pid())
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
                // A launcher that names no job (hydra): the ranks it
                // started on this host share their parent, its proxy.
                let job = env.job.clone().or_else(|| {
                    env.rank?;
                    let parent = mqs_core::process::ProcessIdentity::parent_of(pid)?;
                    Some(format!("ranks started by pid {parent}"))
                });
                match groups
                    .iter_mut()
                    .find(|(known, _)| known.is_some() && *known == job)
                {
                    Some((_, members)) => members.push(member),
                    None => groups.push((job, vec![member])),
                }
            }
        }
    }
    let members = number_groups(groups);
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
    let (mpi_library, type_packs) = match prepare_types(&target, &symbols, &cache) {
        Ok(types) => types,
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
            fallback: None,
            chosen: None,
            executable: executable.clone(),
            mpi_library: mpi_library.clone(),
            type_packs: type_packs.clone(),
            cache: Some(cache.clone()),
            no_queues: None,
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
