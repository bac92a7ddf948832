//! Before any DLL runs: which DLL reads each of the debugger's processes,
//! and its rank, found as mqs-dump finds them (the DLL the MPI names in
//! MPI2DD's table, `mpimsgq_dll_locations` or `MPIR_dll_name`, through the
//! process's own root, and checked for trust; the rank from the
//! environment the process was started with).
//!
//! Nothing here runs a DLL's code, so the debugger asks it in its own
//! process; the DLLs then run where it chooses (a helper, by default).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use mqs_acquire::locate;
use mqs_acquire::members::MpiEnvironment;
use mqs_core::interface::Target;

use crate::answers::{Answers, Described, Image, Process};

/// Says how the DLL was chosen when the user did not name one.
pub const CHOSEN_NAMED: &str = "the one the MPI names (MPIR_dll_name)";

/// What the debugger asks: the DLL for each process.
#[derive(Debug, Deserialize)]
pub struct Request {
    /// The DLL the user gave (`--dll PATH`, `--dll ours`); none: the one
    /// each process names.
    #[serde(default)]
    pub dll: Option<PathBuf>,
    /// Load a named DLL whoever could have written it (`--trust-dll`).
    #[serde(default)]
    pub trust_dll: bool,
    /// The user asked for nothing (no `--dll`): the listing says how the
    /// DLL was chosen.
    #[serde(default)]
    pub by_default: bool,
    pub processes: Vec<Described>,
}

/// For one process, in the request's order: its DLL and rank, or why it
/// has no DLL (with mqs-dump's exit code for that error).
#[derive(Debug, Default, Serialize)]
pub struct Planned {
    /// Its MPI_COMM_WORLD rank from its environment, -1 if it says none.
    pub global_rank: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dll: Option<PathBuf>,
    /// How the DLL was chosen, when the user did not name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// The DLL and rank of every process of the request.
pub fn plan(request: &Request, answers: Answers) -> Vec<Planned> {
    (0u32..)
        .zip(&request.processes)
        .map(|(index, described)| {
            let process = Process::of(answers, index, described);
            let image = Image { answers, index };
            let global_rank = process
                .environment()
                .ok()
                .and_then(|env| MpiEnvironment::of(&env).rank)
                .unwrap_or(-1);
            let planned = Planned {
                global_rank,
                ..Planned::default()
            };
            match choose(request, &image, &process) {
                Ok((dll, chosen)) => Planned {
                    dll: Some(dll),
                    chosen,
                    ..planned
                },
                Err(e) => Planned {
                    error: Some(e.to_string()),
                    exit_code: Some(e.exit_code()),
                    ..planned
                },
            }
        })
        .collect()
}

/// The DLL for one process, and how it was chosen.
fn choose(
    request: &Request,
    image: &Image,
    process: &Process,
) -> mqs_acquire::Result<(PathBuf, Option<String>)> {
    if let Some(given) = &request.dll {
        return Ok((given.clone(), None));
    }
    let path = locate::usable_named(image, process, request.trust_dll)?;
    let chosen = request.by_default.then(|| CHOSEN_NAMED.to_string());
    Ok((path, chosen))
}
