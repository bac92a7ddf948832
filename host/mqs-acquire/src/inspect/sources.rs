//! Choosing the sources: which processes a pid leads to (a rank, an MPIR
//! starter's table, MPI2DD directories, a PMIx launcher), how each is read
//! (attached, stopped or not, through a page cache), where ranks read on
//! other hosts plug in ([`Elsewhere`]), how a job's members are numbered,
//! and letting a live process go.

use std::path::PathBuf;
use std::sync::Arc;

use crate::members::{Member, MpiEnvironment};
use crate::{mpi2dd, mpir, pmix, Error, Result};
use mqs_core::interface::{Liveness, Target};
use mqs_core::model::{JobDump, Launcher, ProcessDump, RankFailure, Section};
use mqs_core::process::{LiveProcess, Mode, PageCache};
use mqs_core::symbols::{SymbolCache, SymbolIndex};
use mqs_core::Error as CoreError;

use super::options::{symbol_cache, Options};

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
        note: None,
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
            members: crate::members::members(target, &table),
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
        members: crate::members::members(target, &table),
        unreachable: Vec::new(),
    }))
}

/// Opens the processes an MPI2DD walk leads to, without stopping them.
pub(super) struct NoStopOpener {
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

/// One numbering for several jobs: the first keeps its identities, each
/// next one starts after the highest so far. A process named twice (a rank
/// and its starter) is kept once.
pub(super) fn number_groups(groups: Vec<(Option<String>, Vec<Member>)>) -> Vec<Member> {
    let mut out: Vec<Member> = Vec::new();
    let mut next = 0i32;
    for (_, members) in groups {
        let offset = next;
        for mut m in members {
            let same_host = |o: &Member| {
                o.host == m.host
                    || (crate::hosts::is_local_host(&o.host)
                        && crate::hosts::is_local_host(&m.host))
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

pub(super) fn attach(pid: i32, options: &Options) -> Result<PageCache<LiveProcess>> {
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
pub(super) fn page_cache<T: Target>(target: T, options: &Options) -> PageCache<T> {
    match options.save {
        Some(_) => PageCache::new(target),
        None => PageCache::with_limit(target, PAGE_CACHE_LIMIT),
    }
}

/// Lets a live process go whatever happened, then reports: the death of
/// the process takes precedence over any other error.
pub(super) fn finish<T, S: Target>(target: &mut PageCache<S>, result: Result<T>) -> Result<T> {
    let released = target.release();
    let gone = || target.liveness() == Liveness::Gone;
    let pid = target.pid();
    let value = result.map_err(|e| {
        if gone() {
            Error::from(CoreError::ProcessGone { pid })
        } else {
            e
        }
    })?;
    released.map_err(|e| {
        if gone() {
            CoreError::ProcessGone { pid }
        } else {
            e
        }
    })?;
    // What was read may predate the death, but a dump of a process that is
    // no more is not what the user asked for: say so.
    if gone() {
        return Err(Error::from(CoreError::ProcessGone { pid }));
    }
    Ok(value)
}

/// Where the global rank is not known from the process's environment, the
/// DLL's MPI_COMM_WORLD says which rank it is; processes are then listed in
/// rank order.
pub(super) fn number_by_world_rank(job: &mut JobDump) {
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

pub(super) fn index_symbols_with(
    target: &dyn Target,
    cache: &Arc<SymbolCache>,
) -> Result<Arc<SymbolIndex>> {
    let objects = target.mapped_objects()?;
    let index = SymbolIndex::from_mapped_with_cache(cache.clone(), &objects)?;
    // Stacks caught in clock_gettime and the like unwind through it.
    index.add_vdso(target);
    Ok(Arc::new(index))
}

/// The symbols of a process: every mapped object with its load bias.
pub fn index_symbols(target: &dyn Target, debug_dirs: &[PathBuf]) -> Result<Arc<SymbolIndex>> {
    let cache = Arc::new(SymbolCache::new(debug_dirs.to_vec()));
    index_symbols_with(target, &cache)
}

/// The MPI_COMM_WORLD rank a launcher gave the process, from its
/// environment (Open MPI, MPICH/hydra and PMIx launchers set these).
pub fn rank_from_environment(target: &dyn Target) -> Option<i32> {
    MpiEnvironment::of(&target.environment().ok()?).rank
}
