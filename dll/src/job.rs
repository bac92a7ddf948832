//! MPI-2: the job object, process identities and processes the MPI
//! created or connected to.
//!
//! The debugger numbers every process of a job (COMM_WORLD first, then
//! spawned or connected ones) and tells the DLL each process's number with
//! `mqs_set_process_identity`. The job keeps, for each identity, the Open
//! MPI process name (jobid, vpid) that process has; global ranks are then
//! those identities, for members of any job.

use std::collections::{BTreeMap, VecDeque};

use mqs_abi::{ProcessLocation, ReturnCode};

use crate::abi;
use crate::access::ProcessAccess;
use crate::backend::Backend;
use crate::callbacks::{self, InfoKind};
use crate::errors::DllError;
use crate::openmpi::groups::{self, NameMap, ProcName};
use crate::openmpi::ProcessState as OpenMpiState;
use crate::process::{ensure_checked, with_process};
use crate::{messages, walk};

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
        let name = match &mut st.backend {
            Backend::OpenMpi(b) => {
                b.identity = Some(identity);
                b.signature = None;
                b.own_name(pc)
            }
            Backend::Mpich(b) => b.set_identity(identity),
        };
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

/// The processes Open MPI knows that are not in this process's job.
fn new_processes<P: ProcessAccess + ?Sized>(
    st: &mut OpenMpiState,
    p: &P,
) -> Option<Vec<ProcessLocation>> {
    let layout = st.layout.clone()?;
    let list = st.symbols?.proc_list?;
    let own = st.own_name(p)?;
    let t = st.target(p);
    let w = walk::opal_list(&t, &layout.list, list, 1 << 16);
    let mut out = Vec::new();
    for item in w.items {
        let Ok(name) = groups::proc_name(&t, &layout, item) else {
            continue;
        };
        if name.jobid == own.jobid {
            continue;
        }
        let host = layout
            .proc_
            .hostname
            .and_then(|off| t.read_ptr(item + off).ok())
            .filter(|&a| a != 0)
            .and_then(|a| t.read_cstring(a, 63).ok())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "(unknown)".to_string());
        out.push(ProcessLocation {
            // Open MPI keeps neither the pid nor the executable of processes
            // of other jobs; say so rather than guess.
            pid: 0,
            image_name: format!(
                "(unknown: Open MPI process jobid {:#x} vpid {}; pid and executable not recorded)",
                name.jobid, name.vpid
            ),
            host_name: host,
        });
    }
    Some(out)
}

/// `mqs_setup_new_process_iterator`.
pub fn setup_new_process_iterator(process: *mut abi::mqs_process) -> Result<ReturnCode, DllError> {
    with_process(process, |st, pc| {
        ensure_checked(st, pc)?;
        let b = match &mut st.backend {
            Backend::OpenMpi(b) => b,
            Backend::Mpich(b) => {
                b.new_processes = None;
                messages::set_no_information_reason(
                    "MPICH does not record the processes it spawned or connected to where this DLL reads",
                );
                return Ok(ReturnCode::NoInformation);
            }
        };
        let Some(found) = new_processes(b, pc) else {
            b.new_processes = None;
            return Ok(ReturnCode::NoInformation);
        };
        // None found: mqs_ok all the same, as for an empty queue.
        b.new_processes = Some(VecDeque::from(found));
        Ok(ReturnCode::Ok)
    })?
}

/// `mqs_next_new_process`.
pub fn next_new_process(
    process: *mut abi::mqs_process,
) -> Result<Option<ProcessLocation>, DllError> {
    with_process(process, |st, _| {
        let queue = match &mut st.backend {
            Backend::OpenMpi(b) => &mut b.new_processes,
            Backend::Mpich(b) => &mut b.new_processes,
        };
        queue
            .as_mut()
            .map(|q| q.pop_front())
            .ok_or(DllError::NoOperationIterator)
    })?
}

/// `mqs_spawn_breakpoint_name`: ob1 (or the selected PML) adds the new
/// processes through `add_procs` once they are known, after spawn, connect
/// and accept (and once in MPI_Init, for COMM_WORLD). MPICH: every new
/// communicator, the intercommunicator of a spawn or connection included,
/// passes `MPIR_Comm_commit` once its members are known.
pub fn spawn_breakpoint_name(process: *mut abi::mqs_process) -> Result<String, DllError> {
    with_process(process, |st, pc| {
        let _ = ensure_checked(st, pc);
        let st = match &st.backend {
            Backend::OpenMpi(b) => b,
            Backend::Mpich(_) => return "MPIR_Comm_commit".to_string(),
        };
        let pml = st
            .pml
            .as_ref()
            .map(|p| p.name.clone())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .unwrap_or_else(|| "ob1".to_string());
        format!("mca_pml_{pml}_add_procs")
    })
}
