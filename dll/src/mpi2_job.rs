//! MPI-2: the job object, process identities and processes the MPI
//! created or connected to.
//!
//! The debugger numbers every process of a job (COMM_WORLD first, then
//! spawned or connected ones) and tells the DLL each process's number with
//! `mqs_set_process_identity`. The job keeps, for each identity, the name
//! that process has in its MPI ([`crate::names`]); global ranks are then
//! those identities, for members of any job.

use std::collections::BTreeMap;

use mqs_abi::{ProcessLocation, ReturnCode};

use crate::abi;
use crate::callbacks::{self, InfoKind};
use crate::errors::DllError;
use crate::names::{NameMap, ProcName};
use crate::process::{ensure_checked, with_process};

/// What the DLL keeps per job.
#[derive(Debug)]
pub struct JobState {
    /// The debugger's job table, kept since `mqs_setup_job`.
    pub table: *const abi::mqs_job_callbacks,
    /// Process name -> identity.
    pub names: NameMap,
    /// Identity -> process name (None when it could not be read).
    pub identities: BTreeMap<i32, Option<ProcName>>,
}

impl InfoKind for JobState {
    const MAGIC: u64 = 0x6d71_735f_6a6f_625f; // "mqs_job_"
    const MISSING: DllError = DllError::NoJobInfo;
}

/// `mqs_setup_job`.
pub fn setup_job(
    job: *mut abi::mqs_job,
    table: *const abi::mqs_job_callbacks,
) -> Result<(), DllError> {
    if job.is_null() || table.is_null() {
        return Err(DllError::NullArgument);
    }
    let fresh = JobState {
        table,
        names: NameMap::new(),
        identities: BTreeMap::new(),
    };
    // Set up again: replace, do not leak. The debugger's info slot is only
    // asked for if we wrote it.
    if callbacks::was_put_on(job.cast())
        && callbacks::with_job_state::<JobState, _>(job, |_| ()).is_ok()
    {
        return callbacks::with_job_state::<JobState, _>(job, |st| *st = fresh);
    }
    callbacks::put_job_state(job, fresh)
}

/// `mqs_destroy_job_info`.
pub fn destroy_job_info(info: *mut abi::mqs_job_info) -> Result<(), DllError> {
    callbacks::destroy_job_state::<JobState>(info)
}

/// `mqs_set_process_identity`.
pub fn set_process_identity(process: *mut abi::mqs_process, identity: i32) -> Result<(), DllError> {
    if identity < 0 {
        return Err(DllError::BadIdentity);
    }
    with_process(process, |st, pc| {
        // The name needs the symbols; without them the identity is still kept.
        let _ = ensure_checked(st, pc);
        // Global ranks change: the communicator list is rebuilt next time.
        let name = st.set_identity(pc);
        let job = pc.job().ok_or(DllError::NoJobInfo)?;
        callbacks::with_job_state::<JobState, _>(job, |js| {
            if let Some(Some(old)) = js.identities.insert(identity, name) {
                js.names.remove(&old);
            }
            if let Some(n) = name {
                js.names.insert(n, i64::from(identity));
            }
        })
    })?
}

/// `mqs_setup_new_process_iterator`.
pub fn setup_new_process_iterator(process: *mut abi::mqs_process) -> Result<ReturnCode, DllError> {
    with_process(process, |st, pc| {
        ensure_checked(st, pc)?;
        Ok(st.setup_new_processes(pc))
    })?
}

/// `mqs_next_new_process`.
pub fn next_new_process(
    process: *mut abi::mqs_process,
) -> Result<Option<ProcessLocation>, DllError> {
    with_process(process, |st, _| st.next_new_process())?
}

/// `mqs_spawn_breakpoint_name`: where the MPI passes once the new
/// processes of a spawn, connect or accept are known (each backend says).
pub fn spawn_breakpoint_name(process: *mut abi::mqs_process) -> Result<String, DllError> {
    with_process(process, |st, pc| {
        let _ = ensure_checked(st, pc);
        st.spawn_breakpoint()
    })
}
