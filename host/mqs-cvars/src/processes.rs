//! `cvars --pid`: the control variables a live job runs with. Finds the
//! processes (a rank, or every local rank of a starter's job), lists the
//! library's defaults in a helper, reads each process's values from its
//! memory without stopping it, and merges them.

use std::path::PathBuf;
use std::sync::Arc;

use crate::compare::{self, LiveReport, Member, MemberFailure};
use crate::helper::Helper;
use crate::live::{self, ProcessValues};
use crate::model::Filter;
use crate::{Error, Result};
use mqs_acquire::members::MpiEnvironment;
use mqs_acquire::{mpir, Error as AcquireError};
use mqs_core::interface::Target;
use mqs_core::process::{LiveProcess, Mode};
use mqs_core::symbols::{SymbolCache, SymbolIndex};

/// What `read` needs besides the pid.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// The library whose defaults to compare with; default: the one the
    /// (first) process has mapped.
    pub library: Option<PathBuf>,
    pub debug_dirs: Vec<PathBuf>,
    pub filter: Filter,
    /// Only variables whose value differs from the default somewhere.
    pub only_changed: bool,
}

/// A process to read: where it sits in the job.
struct Candidate {
    member: Member,
    host: String,
}

/// Reads the control variables of `pid` (a rank or a starter's job).
pub fn read(pid: i32, helper: &Helper, options: &JobOptions) -> Result<LiveReport> {
    let cache = Arc::new(SymbolCache::new(options.debug_dirs.clone()));
    let first = LiveProcess::attach(pid, Mode::NoStop)?;
    let index = index_of(&first, &cache)?;
    let starter = mpir::is_starter(&*index);
    let table = if starter {
        mpir::read_proctable(&first, &*index)?
    } else {
        Vec::new()
    };
    // Open MPI's ranks define the MPIR symbols too, with an empty table.
    let (launcher, candidates) = if table.is_empty() {
        let rank = first
            .environment()
            .ok()
            .and_then(|env| MpiEnvironment::of(&env).rank);
        let only = Candidate {
            member: Member { pid, rank },
            host: String::new(),
        };
        (None, vec![only])
    } else {
        let members = mqs_acquire::members::members(&first, &table)
            .into_iter()
            .map(|m| Candidate {
                member: Member {
                    pid: m.pid,
                    rank: Some(m.identity),
                },
                host: m.host,
            })
            .collect();
        (Some(pid), members)
    };

    let mut failures = Vec::new();
    let mut first_error: Option<Error> = None;
    let mut note = |member: &Member, e: Error, failures: &mut Vec<MemberFailure>| {
        failures.push(MemberFailure {
            pid: member.pid,
            rank: member.rank,
            message: e.to_string(),
            exit_code: e.exit_code(),
        });
        first_error.get_or_insert(e);
    };
    let mut first = Some((first, index));
    let mut opened = Vec::new();
    for c in candidates {
        if !mqs_acquire::hosts::is_local_host(&c.host) || c.member.pid <= 0 {
            let e = AcquireError::Remote {
                rank: c.member.rank.unwrap_or(0).max(0) as usize,
                host: c.host.clone(),
                pid: c.member.pid,
            };
            note(&c.member, e.into(), &mut failures);
            continue;
        }
        // A single rank was opened already; a starter's ranks are opened
        // now.
        let source = match first.take_if(|_| launcher.is_none()) {
            Some(pair) => Ok(pair),
            None => LiveProcess::attach(c.member.pid, Mode::NoStop)
                .map_err(Error::from)
                .and_then(|t| index_of(&t, &cache).map(|i| (t, i))),
        };
        let found = source.and_then(|(t, i)| match live::mpi_library(&t) {
            Ok(lib) => Ok((lib, t, i)),
            Err(Error::Acquire(AcquireError::NotMpi { pid, .. }))
                if starter && launcher.is_none() =>
            {
                Err(AcquireError::NotMpi {
                    pid,
                    detail: "it is an MPI starter whose process table is empty (its job has \
                             not started yet)"
                        .into(),
                }
                .into())
            }
            Err(e) => Err(e),
        });
        match found {
            Ok((lib, target, symbols)) => opened.push((c.member, lib, target, symbols)),
            Err(e) => note(&c.member, e, &mut failures),
        }
    }
    let library = match (&options.library, opened.first()) {
        (Some(lib), _) => lib.clone(),
        (None, Some((_, lib, _, _))) => lib.clone(),
        // Nothing could be opened: the first error says why.
        (None, None) => {
            return Err(first_error.unwrap_or_else(|| {
                AcquireError::NotMpi {
                    pid,
                    detail: "no process of the job could be read".into(),
                }
                .into()
            }))
        }
    };
    let listing = helper.list(&library)?;
    let mut processes: Vec<(Member, ProcessValues)> = Vec::new();
    for (member, lib, target, symbols) in opened {
        let env = target.environment().unwrap_or_default();
        let result = if lib != library && options.library.is_none() {
            Err(AcquireError::NotMpi {
                pid: member.pid,
                detail: format!(
                    "it runs {}, not {} like the rest of the job",
                    lib.display(),
                    library.display()
                ),
            }
            .into())
        } else {
            live::read(&target, &symbols, &listing, &env)
        };
        // The process may have ended while it was read.
        let result = match result {
            Err(_) if !target.is_alive() => {
                Err(mqs_core::Error::ProcessGone { pid: member.pid }.into())
            }
            other => other,
        };
        match result {
            Ok(values) => processes.push((member, values)),
            Err(e) => note(&member, e, &mut failures),
        }
    }
    if processes.is_empty() {
        if let Some(e) = first_error {
            return Err(e);
        }
    }
    processes.sort_by_key(|(m, _)| (m.rank, m.pid));
    failures.sort_by_key(|f| (f.rank, f.pid));
    Ok(compare::report(
        &listing,
        launcher,
        processes,
        failures,
        &options.filter,
        options.only_changed,
    ))
}

fn index_of(target: &dyn Target, cache: &Arc<SymbolCache>) -> Result<Arc<SymbolIndex>> {
    let objects = target.mapped_objects()?;
    Ok(Arc::new(SymbolIndex::from_mapped_with_cache(
        cache.clone(),
        &objects,
    )?))
}
