//! A debugger's processes read through one DLL, and the listing of what
//! was read: the JSON shapes the extensions exchange with the library.

use std::path::PathBuf;

use serde::Deserialize;

use mqs_core::dll::{watchdog, Dll, ProcessId, Session};
use mqs_core::model::{JobDump, ProcessDump, RankFailure, Section, SCHEMA_VERSION};
use mqs_core::process::PageCache;

use crate::answers::{Answers, Described, Image, Process};
use crate::error::Error;

/// What the debugger asks to read: the processes one DLL reads.
#[derive(Debug, Deserialize)]
pub struct Job {
    pub dll: PathBuf,
    pub processes: Vec<Described>,
}

/// What became of one process, in the job's order: its dump, or why the
/// DLL cannot show its queues (with mqs-dump's exit code for that error).
#[derive(Debug)]
pub struct Outcome {
    pub dump: Result<Box<ProcessDump>, (String, i32)>,
}

impl Outcome {
    fn failed(error: &mqs_core::Error) -> Self {
        Outcome {
            dump: Err((error.to_string(), error.exit_code())),
        }
    }
}

/// The dump's answer to the debugger: a first line saying what became of
/// each process (`{"ok": true}` or `{"error", "exit_code"}`), then each
/// dump on a line of its own (compact JSON holds no newline). The debugger
/// hands the dumps on to the listing as they are, never parsing them: a
/// dump of 20,000 operations is megabytes of JSON.
pub fn answer_lines(outcomes: &[Outcome]) -> Result<String, serde_json::Error> {
    let summary: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|o| match &o.dump {
            Ok(_) => serde_json::json!({ "ok": true }),
            Err((error, code)) => serde_json::json!({ "error": error, "exit_code": code }),
        })
        .collect();
    let mut text = serde_json::to_string(&summary)?;
    for dump in outcomes.iter().filter_map(|o| o.dump.as_ref().ok()) {
        text.push('\n');
        text.push_str(&serde_json::to_string(dump)?);
    }
    Ok(text)
}

/// Reads every process of `job` through its DLL; an error only when the
/// DLL cannot be used at all.
pub fn dump(job: &Job, answers: Answers) -> Result<Vec<Outcome>, Error> {
    let _one_session_at_a_time = mqs_core::dll::exclusive();
    if !job.dll.exists() {
        return Err(mqs_core::Error::DllMissing {
            path: job.dll.clone(),
            detail: "no such file; give another with --dll (--dll ours: mqs's own)".into(),
        }
        .into());
    }
    let dll = Dll::load(&job.dll)?;
    watchdog::observe_calls(Some(Box::new(move |call| answers.calling(call))));
    // Unset however the walk ends.
    struct Unobserve;
    impl Drop for Unobserve {
        fn drop(&mut self) {
            watchdog::observe_calls(None);
        }
    }
    let _unobserve = Unobserve;
    let mut session = Session::new(dll)?;
    // Every process is handed to the DLL before any is walked, as an MPI-2
    // DLL's job wants.
    let added: Vec<Result<ProcessId, mqs_core::Error>> = (0u32..)
        .zip(&job.processes)
        .map(|(index, p)| add(&mut session, answers, index, p))
        .collect();
    Ok(added
        .into_iter()
        .zip(&job.processes)
        .map(|(added, p)| match added {
            Ok(id) => {
                let mut dump = session.process_dump(id, p.pid, p.global_rank, p.executable.clone());
                dump.dll.chosen.clone_from(&p.chosen);
                number_by_world_rank(&mut dump);
                Outcome {
                    dump: Ok(Box::new(dump)),
                }
            }
            Err(e) => Outcome::failed(&e),
        })
        .collect())
}

fn add(
    session: &mut Session<'_>,
    answers: Answers,
    index: u32,
    p: &Described,
) -> Result<ProcessId, mqs_core::Error> {
    let image = session.add_image(&p.executable, Box::new(Image { answers, index }))?;
    let process = Process::of(answers, index, p);
    let pointer_size = i32::try_from(p.pointer_size).unwrap_or(8);
    // A page asked of the debugger once per dump (the process is stopped
    // while it lasts): a DLL reads a few bytes at a time, and each answer
    // may be a round trip through a pipe and the debugger's own reader.
    let cached = PageCache::new(process);
    session.add_process(image, Box::new(cached), p.global_rank, pointer_size)
}

/// A rank the debugger could not tell is the process's rank in
/// MPI_COMM_WORLD, as the DLL lists it.
fn number_by_world_rank(dump: &mut ProcessDump) {
    if dump.global_rank >= 0 {
        return;
    }
    if let Section::Ok { value } = &dump.communicators {
        if let Some(world) = value.list.iter().find(|c| c.name == "MPI_COMM_WORLD") {
            dump.global_rank = i32::try_from(world.local_rank).unwrap_or(-1);
        }
    }
}

/// What the debugger prints: its dumps (from one or several DLLs) and, for
/// JSON, the processes that could not be dumped.
#[derive(Debug, Deserialize)]
pub struct Listing {
    pub processes: Vec<ProcessDump>,
    #[serde(default)]
    pub failures: Vec<RankFailure>,
    /// What each DLL printed by itself (in its helper process), by the
    /// index in `processes` of the first dump it made.
    #[serde(default)]
    pub dll_output: Vec<(usize, Vec<String>)>,
}

/// mqs-dump's listing of these dumps (its text, or `--json`'s document),
/// in rank order, ranks the debugger could not tell last.
pub fn render(listing: Listing, json: bool) -> String {
    let mut processes = listing.processes;
    for (index, lines) in listing.dll_output {
        if let Some(p) = processes.get_mut(index) {
            p.dll_output = lines;
        }
    }
    processes.sort_by_key(|p| (p.global_rank < 0, p.global_rank));
    let job = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: None,
        processes,
        failures: listing.failures,
    };
    if json {
        mqs_analysis::render::json(&job) + "\n"
    } else {
        mqs_analysis::render::text(&job)
    }
}
