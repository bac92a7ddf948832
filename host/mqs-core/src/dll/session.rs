//! One debugging session with a DLL: the images, processes and (MPI-2) job
//! handed to it, the calling sequence of the interface, and the walk of its
//! iterators into the owned dump model.

use std::ffi::{c_char, c_int, c_void};
use std::time::Instant;

use mqs_abi::ffi::mpi1::{mqs_communicator, mqs_pending_operation};
use mqs_abi::ffi::mpi2::mqs_process_location;
use mqs_abi::{Communicator, OpClass, PendingOperation, ProcessLocation, ReturnCode};

use super::handles::{ImageHandle, JobHandle, ProcessHandle};
use super::library::{static_str, Dll};
use super::{callbacks, watchdog};
use crate::interface::{ImageSymbols, Target};
use crate::model::{
    CallbackCounts, CommunicatorDump, CommunicatorList, DllInfo, DumpStats, NewProcess,
    NewProcessList, ProcessDump, Queue, Section,
};
use crate::{Error, Result};

/// Bounds on what the host accepts from a DLL, so that a DLL that never
/// says mqs_end_of_list cannot hang or exhaust the host.
pub const MAX_COMMUNICATORS: usize = 1 << 17;
pub const MAX_OPERATIONS: usize = 1 << 22;
/// Largest group the host allocates for mqs_get_comm_group.
const MAX_GROUP: i64 = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageId(usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId(usize);

/// The session borrows the targets of its processes for `'t`.
#[derive(Debug)]
// The handles are boxed because their addresses are what the DLL holds:
// they must not move when the vectors grow.
#[allow(clippy::vec_box)]
pub struct Session<'t> {
    dll: &'static Dll,
    job: Option<Box<JobHandle>>,
    images: Vec<Box<ImageHandle>>,
    processes: Vec<Box<ProcessHandle<'t>>>,
}

impl<'t> Session<'t> {
    /// Starts a session; with an MPI-2 DLL this sets up the job object.
    pub fn new(dll: &'static Dll) -> Result<Self> {
        let mut session = Self {
            dll,
            job: None,
            images: Vec::new(),
            processes: Vec::new(),
        };
        if let Some(mpi2) = dll.entry.mpi2.filter(|_| dll.is_mpi2()) {
            let job = JobHandle::new();
            let table: *const c_void = (&raw const callbacks::mpi2::JOB).cast();
            // SAFETY: a registered job handle and a static table of the
            // MPI-2 layout this DLL declared.
            let rc = watchdog::guarded("mqs_setup_job", || unsafe {
                (mpi2.mqs_setup_job)(job.as_ptr().cast_mut().cast(), table.cast())
            });
            session.job = Some(job);
            session.check("mqs_setup_job", rc)?;
        }
        Ok(session)
    }

    pub fn dll(&self) -> &'static Dll {
        self.dll
    }

    fn check(&self, call: &'static str, rc: c_int) -> Result<()> {
        match ReturnCode::from_raw(rc) {
            ReturnCode::Ok => Ok(()),
            _ => Err(Error::Dll {
                call,
                detail: self.dll.error_string(rc),
            }),
        }
    }

    /// Hands an executable image to the DLL and asks whether it has queues.
    /// The image stays in the session (to be destroyed properly) even when
    /// this fails.
    pub fn add_image(&mut self, name: &str, symbols: Box<dyn ImageSymbols>) -> Result<ImageId> {
        let image = ImageHandle::new(name.to_string(), symbols);
        let handle = image.as_ptr().cast_mut();
        self.images.push(image);
        let id = ImageId(self.images.len() - 1);
        let table: *const c_void = if self.dll.is_mpi2() {
            (&raw const callbacks::mpi2::IMAGE).cast()
        } else {
            (&raw const callbacks::mpi1::IMAGE).cast()
        };
        // SAFETY: a registered image handle and a static table.
        let rc = watchdog::guarded("mqs_setup_image", || unsafe {
            (self.dll.entry.common.mqs_setup_image)(handle.cast(), table.cast())
        });
        self.check("mqs_setup_image", rc)?;
        let mut message: *mut c_char = std::ptr::null_mut();
        // SAFETY: as above; the DLL may store a static string in `message`.
        let rc = watchdog::guarded("mqs_image_has_queues", || unsafe {
            (self.dll.entry.common.mqs_image_has_queues)(handle.cast(), &mut message)
        });
        if rc != 0 {
            return Err(self.no_queues(id, rc, message));
        }
        Ok(id)
    }

    /// The error for a failed has_queues: the DLL's message (its format's
    /// `%s` filled with the image name), plus what the host could not find.
    fn no_queues(&self, image: ImageId, rc: c_int, message: *const c_char) -> Error {
        let image = &self.images[image.0];
        // SAFETY: has_queues messages are static strings or NULL.
        let text = unsafe { static_str(message) }
            .map(|m| format_has_queues_message(&m, &image.name))
            .unwrap_or_default();
        let mut detail = if text.is_empty() {
            format!(
                "the DLL cannot show message queues ({})",
                self.dll.error_string(rc)
            )
        } else {
            text
        };
        let missing = image.missing.borrow();
        if !missing.is_empty() {
            detail.push_str(&format!(
                " [not found in the MPI's symbols and debug info: {}]",
                missing.join(", ")
            ));
        }
        Error::NoDebugInfo { detail }
    }

    /// Names the DLL asked for and the image did not have.
    pub fn missing_names(&self, image: ImageId) -> Vec<String> {
        self.images[image.0].missing.borrow().clone()
    }

    /// Hands a process to the DLL. `global_rank` is its MPI_COMM_WORLD rank
    /// (its identity in the job for MPI-2 DLLs), -1 if unknown.
    pub fn add_process(
        &mut self,
        image: ImageId,
        target: Box<dyn Target + 't>,
        global_rank: i32,
        pointer_size: i32,
    ) -> Result<ProcessId> {
        let image_handle: &ImageHandle = &self.images[image.0];
        let process = ProcessHandle::new(
            target,
            image_handle,
            self.job.as_deref(),
            global_rank,
            pointer_size,
        );
        let handle = process.as_ptr().cast_mut();
        let identity = self.register_identity(&process, global_rank);
        process.identity.set(identity);
        self.processes.push(process);
        let id = ProcessId(self.processes.len() - 1);

        let table: *const c_void = if self.dll.is_mpi2() {
            (&raw const callbacks::mpi2::PROCESS).cast()
        } else {
            (&raw const callbacks::mpi1::PROCESS).cast()
        };
        // SAFETY: a registered process handle and a static table.
        let rc = watchdog::guarded("mqs_setup_process", || unsafe {
            (self.dll.entry.common.mqs_setup_process)(handle.cast(), table.cast())
        });
        self.check("mqs_setup_process", rc)?;
        if let Some(mpi2) = self.dll.entry.mpi2.filter(|_| self.dll.is_mpi2()) {
            // SAFETY: registered handle.
            let rc = watchdog::guarded("mqs_set_process_identity", || unsafe {
                (mpi2.mqs_set_process_identity)(handle.cast(), identity)
            });
            self.check("mqs_set_process_identity", rc)?;
        }
        let mut message: *mut c_char = std::ptr::null_mut();
        // SAFETY: registered handle; the DLL may store a static string.
        let rc = watchdog::guarded("mqs_process_has_queues", || unsafe {
            (self.dll.entry.common.mqs_process_has_queues)(handle.cast(), &mut message)
        });
        if rc != 0 {
            return Err(self.no_queues(image, rc, message));
        }
        Ok(id)
    }

    /// MPI-2: places the process in the job's table. COMM_WORLD ranks are
    /// identities 0..n; others take the next free slot after them.
    fn register_identity(&self, process: &ProcessHandle<'_>, global_rank: i32) -> i32 {
        let Some(job) = &self.job else {
            return global_rank;
        };
        let mut table = job.processes.borrow_mut();
        let index = match usize::try_from(global_rank) {
            Ok(rank) if table.get(rank).is_none_or(|p| p.is_null()) => rank,
            _ => table
                .iter()
                .position(|p| p.is_null())
                .unwrap_or(table.len()),
        };
        if table.len() <= index {
            table.resize(index + 1, std::ptr::null());
        }
        table[index] = process.as_ptr();
        i32::try_from(index).unwrap_or(-1)
    }

    /// Walks every communicator and queue of a process.
    pub fn dump(&self, id: ProcessId) -> (Section<CommunicatorList>, DumpStats) {
        let (section, stats, _) = self.dump_by_class(id);
        (section, stats)
    }

    /// [`Session::dump`], with the share of each class of operation (in
    /// [`OpClass::ALL`] order: setting up its iterator and taking every
    /// operation, summed over communicators) for benchmarks that compare
    /// DLLs on what both list.
    pub fn dump_by_class(
        &self,
        id: ProcessId,
    ) -> (Section<CommunicatorList>, DumpStats, [DumpStats; 3]) {
        let process = &self.processes[id.0];
        let before = Counters::now(process);
        let mut per_class: [DumpStats; 3] = Default::default();
        let section = self.walk_communicators(process, &mut per_class);
        let mut stats = before.since(process);
        // Setup included: most type and symbol lookups happen there.
        stats.callbacks = process.callbacks();
        (section, stats, per_class)
    }

    fn walk_communicators(
        &self,
        process: &ProcessHandle<'_>,
        per_class: &mut [DumpStats; 3],
    ) -> Section<CommunicatorList> {
        let entry = &self.dll.entry.common;
        let handle = process.as_ptr().cast_mut();
        // Every DLL call below gets `handle`, a registered process handle set
        // up with mqs_setup_process, and zeroed host-owned out-structures of
        // the interface's layout.
        // SAFETY: see above.
        let rc = watchdog::guarded("mqs_update_communicator_list", || unsafe {
            (entry.mqs_update_communicator_list)(handle.cast())
        });
        if rc != 0 {
            return self.section_error("mqs_update_communicator_list", rc);
        }
        // SAFETY: see above.
        let rc = watchdog::guarded("mqs_setup_communicator_iterator", || unsafe {
            (entry.mqs_setup_communicator_iterator)(handle.cast())
        });
        match ReturnCode::from_raw(rc) {
            ReturnCode::Ok => {}
            ReturnCode::EndOfList => {
                return Section::Ok {
                    value: CommunicatorList { list: vec![] },
                }
            }
            ReturnCode::NoInformation => {
                return Section::NotAvailable {
                    reason: self.no_information("about communicators"),
                }
            }
            ReturnCode::Other(_) => {
                return self.section_error("mqs_setup_communicator_iterator", rc)
            }
        }
        let mut list = Vec::new();
        loop {
            if list.len() >= MAX_COMMUNICATORS {
                break;
            }
            let mut out = mqs_communicator::default();
            // SAFETY: see above.
            let rc = watchdog::guarded("mqs_get_communicator", || unsafe {
                (entry.mqs_get_communicator)(handle.cast(), (&raw mut out).cast())
            });
            if rc != 0 {
                if list.is_empty() {
                    return self.section_error("mqs_get_communicator", rc);
                }
                break;
            }
            let mut comm = CommunicatorDump::new(Communicator::from_raw(&out));
            comm.group = self.comm_group(handle, comm.size);
            comm.cartesian = self.comm_cartesian(handle, comm.size);
            for (class, stats) in OpClass::ALL.into_iter().zip(per_class.iter_mut()) {
                let before = Counters::now(process);
                *comm.queue_mut(class) = self.walk_queue(handle, class);
                before.add_since(process, stats);
            }
            list.push(comm);
            // SAFETY: see above. Never called again after end of list: both
            // shipped DLLs dereference NULL if it is.
            let rc = watchdog::guarded("mqs_next_communicator", || unsafe {
                (entry.mqs_next_communicator)(handle.cast())
            });
            if rc != 0 {
                break;
            }
        }
        Section::Ok {
            value: CommunicatorList { list },
        }
    }

    fn comm_group(&self, handle: *mut c_void, size: i64) -> Option<Vec<i64>> {
        let get = self.dll.entry.common.mqs_get_comm_group?;
        if !(1..=MAX_GROUP).contains(&size) {
            return None;
        }
        let mut ranks: Vec<c_int> = vec![-1; usize::try_from(size).ok()?];
        // SAFETY: the array has `size` ints, the size the DLL reported.
        let rc = watchdog::guarded("mqs_get_comm_group", || unsafe {
            get(handle.cast(), ranks.as_mut_ptr().cast())
        });
        (rc == 0).then(|| ranks.into_iter().map(i64::from).collect())
    }

    /// The grid of the current communicator, where the DLL has mqs's
    /// extension and the communicator one: taken only if it is a grid of
    /// the communicator's size.
    fn comm_cartesian(&self, handle: *mut c_void, size: i64) -> Option<mqs_abi::Cartesian> {
        let get = self.dll.entry.common.mqs_get_comm_cartesian?;
        let mut ndims: c_int = 0;
        let mut dims = [0 as c_int; mqs_abi::MAX_CART_DIMS];
        let mut periods = [0 as c_int; mqs_abi::MAX_CART_DIMS];
        // SAFETY: registered handle; both arrays hold MAX_CART_DIMS ints,
        // the count passed.
        let rc = watchdog::guarded("mqs_get_comm_cartesian", || unsafe {
            get(
                handle.cast(),
                mqs_abi::MAX_CART_DIMS as c_int,
                &raw mut ndims,
                dims.as_mut_ptr(),
                periods.as_mut_ptr(),
            )
        });
        let n = usize::try_from(ndims)
            .ok()
            .filter(|&n| rc == 0 && n <= mqs_abi::MAX_CART_DIMS)?;
        mqs_abi::Cartesian::checked(
            dims[..n].iter().map(|&d| i64::from(d)).collect(),
            periods[..n].iter().map(|&p| p != 0).collect(),
            size,
        )
    }

    fn walk_queue(&self, handle: *mut c_void, class: OpClass) -> Section<Queue> {
        let entry = &self.dll.entry.common;
        // SAFETY: registered, set-up process handle.
        let rc = watchdog::guarded("mqs_setup_operation_iterator", || unsafe {
            (entry.mqs_setup_operation_iterator)(handle.cast(), class.to_raw())
        });
        match ReturnCode::from_raw(rc) {
            ReturnCode::Ok => {}
            ReturnCode::EndOfList => {
                return Section::Ok {
                    value: Queue {
                        operations: vec![],
                        truncated: None,
                        fixed_in_run: Vec::new(),
                    },
                }
            }
            ReturnCode::NoInformation => {
                return Section::NotAvailable {
                    reason: self.no_information(&format!("about {}", class.name())),
                }
            }
            ReturnCode::Other(_) => return self.section_error("mqs_setup_operation_iterator", rc),
        }
        let mut operations = Vec::new();
        let mut truncated = None;
        loop {
            if operations.len() >= MAX_OPERATIONS {
                truncated = Some(format!("stopped after {MAX_OPERATIONS} operations"));
                break;
            }
            let mut out = mqs_pending_operation::default();
            // SAFETY: registered handle; zeroed host-owned operation.
            let rc = watchdog::guarded("mqs_next_operation", || unsafe {
                (entry.mqs_next_operation)(handle.cast(), (&raw mut out).cast())
            });
            match ReturnCode::from_raw(rc) {
                ReturnCode::Ok => operations.push(PendingOperation::from_raw(&out)),
                ReturnCode::EndOfList => break,
                _ => {
                    truncated = Some(format!(
                        "mqs_next_operation failed: {}",
                        self.dll.error_string(rc)
                    ));
                    break;
                }
            }
        }
        // Grown by doubling, up to a third was spare: at 100,000
        // operations a queue is 12 MB, held until the end of the dump.
        operations.shrink_to_fit();
        Section::Ok {
            value: Queue {
                operations,
                truncated,
                fixed_in_run: Vec::new(),
            },
        }
    }

    /// Why the DLL has no information: the interface has no channel for it
    /// but the DLL's text for mqs_no_information, which a DLL may make
    /// specific (ours does); generic texts add nothing and are left out.
    fn no_information(&self, what: &str) -> String {
        let generic = |t: &str| {
            let t = t.to_ascii_lowercase();
            t.len() < 40 || t.ends_with("no information") || t.ends_with("nothing is known")
        };
        match self
            .dll
            .code_text(mqs_abi::ffi::mpi1::mqs_no_information as c_int)
        {
            Some(text) if !generic(&text) => format!("the DLL has no information {what}: {text}"),
            _ => format!("the DLL has no information {what}"),
        }
    }

    fn section_error<T>(&self, call: &str, rc: c_int) -> Section<T> {
        Section::Error {
            message: format!("{call}: {}", self.dll.error_string(rc)),
        }
    }

    /// MPI-2: the processes the MPI created or connected to, as the DLL
    /// lists them (None: the DLL has no new-process iterator).
    pub fn new_processes(&self, id: ProcessId) -> Option<Section<Vec<ProcessLocation>>> {
        let mpi2 = self.dll.entry.mpi2.filter(|_| self.dll.is_mpi2())?;
        let (setup, next) = (
            mpi2.mqs_setup_new_process_iterator?,
            mpi2.mqs_next_new_process?,
        );
        let handle = self.processes[id.0].as_ptr().cast_mut();
        // SAFETY: registered, set-up process handle.
        let rc = watchdog::guarded("mqs_setup_new_process_iterator", || unsafe {
            setup(handle.cast())
        });
        match ReturnCode::from_raw(rc) {
            ReturnCode::Ok => {}
            ReturnCode::EndOfList => return Some(Section::Ok { value: vec![] }),
            ReturnCode::NoInformation => {
                return Some(Section::NotAvailable {
                    reason: self.no_information("about new processes"),
                })
            }
            ReturnCode::Other(_) => {
                return Some(self.section_error("mqs_setup_new_process_iterator", rc))
            }
        }
        let mut list = Vec::new();
        while list.len() < MAX_COMMUNICATORS {
            let mut out = mqs_process_location::default();
            // SAFETY: registered handle; a zeroed host-owned location.
            let rc = watchdog::guarded("mqs_next_new_process", || unsafe {
                next(handle.cast(), (&raw mut out).cast())
            });
            if rc != 0 {
                break;
            }
            list.push(ProcessLocation::from_raw(&out));
        }
        Some(Section::Ok { value: list })
    }

    /// MPI-2: the function the DLL wants a breakpoint on to learn about
    /// spawned processes, if it names one.
    pub fn spawn_breakpoint_name(&self, id: ProcessId) -> Option<String> {
        let get = self
            .dll
            .entry
            .mpi2
            .filter(|_| self.dll.is_mpi2())?
            .mqs_spawn_breakpoint_name?;
        let handle = self.processes[id.0].as_ptr().cast_mut();
        let mut buf = [0 as c_char; 256];
        // SAFETY: registered handle; the buffer's true length is passed.
        let rc = watchdog::guarded("mqs_spawn_breakpoint_name", || unsafe {
            get(handle.cast(), buf.as_mut_ptr(), buf.len() as c_int)
        });
        (rc == 0)
            .then(|| mqs_abi::decode_c_chars(&buf))
            .filter(|name| !name.is_empty())
    }

    /// Everything the DLL can tell about a process, as the model's
    /// [`ProcessDump`]: its communicators and queues, MPI-2's new processes
    /// and spawn breakpoint, what could not be read, and the counts. What
    /// only the caller knows (the host, a spawned job, stacks, the DLL's
    /// output, type packs) is left empty.
    pub fn process_dump(
        &self,
        id: ProcessId,
        pid: i32,
        global_rank: i32,
        executable: String,
    ) -> ProcessDump {
        let (communicators, stats) = self.dump(id);
        let new_processes = self.new_processes(id).map(|section| match section {
            Section::Ok { value } => Section::Ok {
                value: NewProcessList {
                    list: value.into_iter().map(NewProcess::from).collect(),
                },
            },
            Section::NotAvailable { reason } => Section::NotAvailable { reason },
            Section::Error { message } => Section::Error { message },
        });
        let target = self.target(id);
        ProcessDump {
            pid,
            global_rank,
            host: None,
            spawned: None,
            executable,
            dll: DllInfo::new(
                self.dll.path.display().to_string(),
                self.dll.current_version(),
                self.dll.compatibility,
            ),
            communicators,
            new_processes,
            spawn_breakpoint: self.spawn_breakpoint_name(id),
            type_packs: Vec::new(),
            unreadable: self.unreadable(id),
            dll_output: Vec::new(),
            held_by: target.held_by(),
            os_state: target.os_state(),
            stacks: None,
            stats,
            run_len: 1,
            run_shifts_peers: false,
        }
    }

    /// The target of a process, e.g. for its read counters.
    pub fn target(&self, id: ProcessId) -> &dyn Target {
        &*self.processes[id.0].target
    }

    /// Fetch callbacks so far for a process.
    /// Memory the DLL asked for in this process and did not get.
    pub fn unreadable(&self, id: ProcessId) -> Vec<String> {
        self.processes[id.0].unreadable.borrow().clone()
    }

    pub fn fetches(&self, id: ProcessId) -> u64 {
        self.processes[id.0].fetches.get()
    }

    /// Callbacks so far for a process, by kind (its image's included).
    pub fn callbacks(&self, id: ProcessId) -> CallbackCounts {
        self.processes[id.0].callbacks()
    }
}

/// A process's read counters and the time at one moment of a dump.
struct Counters {
    at: Instant,
    fetches: u64,
    bytes: u64,
    syscalls: u64,
    callbacks: CallbackCounts,
}

impl Counters {
    fn now(process: &ProcessHandle<'_>) -> Counters {
        Counters {
            at: Instant::now(),
            fetches: process.fetches.get(),
            bytes: process.fetched_bytes.get(),
            syscalls: process.target.syscalls(),
            callbacks: process.callbacks(),
        }
    }

    fn since(&self, process: &ProcessHandle<'_>) -> DumpStats {
        let mut stats = DumpStats::default();
        self.add_since(process, &mut stats);
        stats
    }

    fn add_since(&self, process: &ProcessHandle<'_>, stats: &mut DumpStats) {
        stats.fetches += process.fetches.get().saturating_sub(self.fetches);
        stats.fetched_bytes += process.fetched_bytes.get().saturating_sub(self.bytes);
        stats.syscalls += process.target.syscalls().saturating_sub(self.syscalls);
        stats.elapsed_ms += self.at.elapsed().as_secs_f64() * 1e3;
        stats.callbacks = stats
            .callbacks
            .plus(&process.callbacks().since(&self.callbacks));
    }
}

impl Drop for Session<'_> {
    /// Destroys in the order the interface wants: processes, then the job
    /// (after all of its processes), then images.
    fn drop(&mut self) {
        let entry = &self.dll.entry.common;
        for process in self.processes.drain(..) {
            let info = process.info.replace(std::ptr::null_mut());
            if !info.is_null() {
                // SAFETY: the DLL's own process info, given back once.
                watchdog::guarded("mqs_destroy_process_info", || unsafe {
                    (entry.mqs_destroy_process_info)(info.cast())
                });
            }
        }
        if let (Some(job), Some(mpi2)) = (self.job.take(), self.dll.entry.mpi2) {
            let info = job.info.replace(std::ptr::null_mut());
            if !info.is_null() {
                // SAFETY: the DLL's own job info, given back once.
                watchdog::guarded("mqs_destroy_job_info", || unsafe {
                    (mpi2.mqs_destroy_job_info)(info.cast())
                });
            }
        }
        for image in self.images.drain(..) {
            let info = image.info.replace(std::ptr::null_mut());
            if !info.is_null() {
                // SAFETY: the DLL's own image info, given back once.
                watchdog::guarded("mqs_destroy_image_info", || unsafe {
                    (entry.mqs_destroy_image_info)(info.cast())
                });
            }
        }
    }
}

/// Fills the `%s` of a has_queues message with the image name, as the DLL
/// intends, without handing its text to printf; "%%" becomes "%".
pub fn format_has_queues_message(format: &str, image: &str) -> String {
    let mut out = String::with_capacity(format.len() + image.len());
    let mut chars = format.chars().peekable();
    let mut filled = false;
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('s') if !filled => {
                    chars.next();
                    out.push_str(image);
                    filled = true;
                    continue;
                }
                Some('%') => {
                    chars.next();
                    out.push('%');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    // One line: messages meant for a pop-up come with newlines.
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::format_has_queues_message as fmt;

    #[test]
    fn has_queues_message_is_filled_once_and_flattened() {
        assert_eq!(
            fmt("no queues in\n'%s'\n", "/bin/a"),
            "no queues in '/bin/a'"
        );
        assert_eq!(fmt("%s and %s", "x"), "x and %s");
        assert_eq!(fmt("100%% sure: %s", "x"), "100% sure: x");
        assert_eq!(fmt("no image here", "x"), "no image here");
    }
}
