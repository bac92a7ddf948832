//! The DLL's C entry points called directly, with callback tables of our
//! own, for the tests of the calling contract (`contract.rs`): what the
//! real host never does (calls out of order, NULLs, info slots holding
//! garbage) and what only a debugger's view of the slots shows. Every other
//! test drives the DLL through the real host's session (`super::session`).

use std::cell::Cell;
#[cfg(feature = "mpi2")]
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

#[cfg(not(feature = "mpi2"))]
pub use mqs_abi::ffi::mpi1 as abi;
#[cfg(feature = "mpi2")]
pub use mqs_abi::ffi::mpi2 as abi;
use mqs_abi::{Communicator, PendingOperation, ReturnCode};
use mqs_dll::access::ProcessAccess;
use mqs_dll::exports as x;
use mqs_dll::testing::FakeImage;

/// An image as the fake debugger holds it.
pub struct Image {
    pub fake: FakeImage,
    /// The info slot: NULL until the DLL puts its info (a test may fill it
    /// with garbage first, as debuggers that do not clear it have).
    pub info: Cell<*mut c_void>,
    pub slot: Slot,
}

impl Image {
    pub fn new(fake: FakeImage) -> Box<Image> {
        Box::new(Image {
            fake,
            info: Cell::new(std::ptr::null_mut()),
            slot: Slot::default(),
        })
    }
}

/// What the DLL did with an object's info slot.
#[derive(Debug, Default)]
pub struct Slot {
    pub puts: Cell<u32>,
    /// get_*_info calls made before the DLL put anything there.
    pub gets_before_put: Cell<u32>,
}

impl Slot {
    fn put(&self) {
        self.puts.set(self.puts.get() + 1);
    }
    fn get(&self) {
        if self.puts.get() == 0 {
            self.gets_before_put.set(self.gets_before_put.get() + 1);
        }
    }
}

/// A process as the fake debugger holds it.
pub struct Process {
    pub memory: Box<dyn ProcessAccess>,
    pub image: *mut Image,
    pub sizes: [i32; 5],
    pub rank: i32,
    pub fetches: Cell<u64>,
    /// As for [`Image::info`].
    pub info: Cell<*mut c_void>,
    pub slot: Slot,
    #[cfg(feature = "mpi2")]
    pub job: Cell<*mut Job>,
    #[cfg(feature = "mpi2")]
    pub identity: Cell<i32>,
}

impl Process {
    pub fn new(
        memory: Box<dyn ProcessAccess>,
        image: &mut Image,
        sizes: [i32; 5],
        rank: i32,
    ) -> Box<Process> {
        Box::new(Process {
            memory,
            image,
            sizes,
            rank,
            fetches: Cell::new(0),
            info: Cell::new(std::ptr::null_mut()),
            slot: Slot::default(),
            #[cfg(feature = "mpi2")]
            job: Cell::new(std::ptr::null_mut()),
            #[cfg(feature = "mpi2")]
            identity: Cell::new(-1),
        })
    }
}

/// A job (MPI-2).
#[cfg(feature = "mpi2")]
pub struct Job {
    pub info: Cell<*mut c_void>,
    pub slot: Slot,
    pub processes: RefCell<Vec<*mut Process>>,
}

#[cfg(feature = "mpi2")]
impl Job {
    pub fn new() -> Box<Job> {
        Box::new(Job {
            info: Cell::new(std::ptr::null_mut()),
            slot: Slot::default(),
            processes: RefCell::new(Vec::new()),
        })
    }
}

/// Lines the DLL printed through dprints.
pub static DPRINTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

// SAFETY (for every callback below): the DLL passes back the handles this
// fake gave it, which point to live Image/Process/Job boxes for the whole
// session, and buffers of the sizes the interface promises.

unsafe extern "C" fn cb_malloc(size: usize) -> *mut c_void {
    // SAFETY: plain allocation.
    unsafe { libc::malloc(size.max(1)) }
}
unsafe extern "C" fn cb_free(ptr: *mut c_void) {
    // SAFETY: the DLL frees only what cb_malloc returned (or NULL).
    unsafe { libc::free(ptr) }
}
unsafe extern "C" fn cb_dprints(text: *const c_char) {
    if text.is_null() {
        return;
    }
    // SAFETY: the DLL passes NUL-terminated strings.
    let s = unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned();
    if let Ok(mut d) = DPRINTS.lock() {
        d.push(s);
    }
}
unsafe extern "C" fn cb_errorstring(_code: c_int) -> *mut c_char {
    c"fake host error".as_ptr().cast_mut()
}
unsafe extern "C" fn cb_put_image_info(image: *mut abi::mqs_image, info: *mut abi::mqs_image_info) {
    // SAFETY: see above.
    let image = unsafe { &*image.cast::<Image>() };
    image.slot.put();
    image.info.set(info.cast());
}
unsafe extern "C" fn cb_get_image_info(image: *mut abi::mqs_image) -> *mut abi::mqs_image_info {
    // SAFETY: see above.
    let image = unsafe { &*image.cast::<Image>() };
    image.slot.get();
    image.info.get().cast()
}
unsafe extern "C" fn cb_put_process_info(
    process: *mut abi::mqs_process,
    info: *mut abi::mqs_process_info,
) {
    // SAFETY: see above.
    let process = unsafe { &*process.cast::<Process>() };
    process.slot.put();
    process.info.set(info.cast());
}
unsafe extern "C" fn cb_get_process_info(
    process: *mut abi::mqs_process,
) -> *mut abi::mqs_process_info {
    // SAFETY: see above.
    let process = unsafe { &*process.cast::<Process>() };
    process.slot.get();
    process.info.get().cast()
}
#[cfg(feature = "mpi2")]
unsafe extern "C" fn cb_put_job_info(job: *mut abi::mqs_job, info: *mut abi::mqs_job_info) {
    // SAFETY: see above.
    let job = unsafe { &*job.cast::<Job>() };
    job.slot.put();
    job.info.set(info.cast());
}
#[cfg(feature = "mpi2")]
unsafe extern "C" fn cb_get_job_info(job: *mut abi::mqs_job) -> *mut abi::mqs_job_info {
    // SAFETY: see above.
    let job = unsafe { &*job.cast::<Job>() };
    job.slot.get();
    job.info.get().cast()
}

unsafe fn name<'a>(p: *const c_char) -> &'a str {
    // SAFETY: the DLL passes NUL-terminated names.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

unsafe extern "C" fn cb_get_type_sizes(
    process: *mut abi::mqs_process,
    out: *mut abi::mqs_target_type_sizes,
) {
    // SAFETY: see above.
    let p = unsafe { &*process.cast::<Process>() };
    // SAFETY: see above.
    let out = unsafe { &mut *out };
    out.short_size = p.sizes[0];
    out.int_size = p.sizes[1];
    out.long_size = p.sizes[2];
    out.long_long_size = p.sizes[3];
    out.pointer_size = p.sizes[4];
}
unsafe extern "C" fn cb_find_symbol(
    image: *mut abi::mqs_image,
    n: *mut c_char,
    addr: *mut abi::mqs_taddr_t,
) -> c_int {
    // SAFETY: see above.
    let (img, n) = unsafe { (&*image.cast::<Image>(), name(n)) };
    match img.fake.symbols.get(n) {
        Some(&a) => {
            if !addr.is_null() {
                // SAFETY: see above.
                unsafe { *addr = a };
            }
            0
        }
        None => 100,
    }
}
unsafe extern "C" fn cb_find_function(
    image: *mut abi::mqs_image,
    n: *mut c_char,
    _lang: abi::mqs_lang_code,
    addr: *mut abi::mqs_taddr_t,
) -> c_int {
    // SAFETY: see above.
    unsafe { cb_find_symbol(image, n, addr) }
}
unsafe extern "C" fn cb_find_type(
    image: *mut abi::mqs_image,
    n: *mut c_char,
    _lang: abi::mqs_lang_code,
) -> *mut abi::mqs_type {
    // SAFETY: see above.
    let (img, n) = unsafe { (&*image.cast::<Image>(), name(n)) };
    match img.fake.types.iter().find(|t| t.0 == n) {
        Some(t) => (t as *const (String, u64, std::collections::HashMap<String, u64>))
            .cast_mut()
            .cast(),
        None => std::ptr::null_mut(),
    }
}
type TypeEntry = (String, u64, std::collections::HashMap<String, u64>);
unsafe extern "C" fn cb_field_offset(ty: *mut abi::mqs_type, field: *mut c_char) -> c_int {
    // SAFETY: type handles point into the image's type table.
    let (t, f) = unsafe { (&*ty.cast::<TypeEntry>(), name(field)) };
    t.2.get(f).map_or(-1, |&o| o as c_int)
}
unsafe extern "C" fn cb_sizeof(ty: *mut abi::mqs_type) -> c_int {
    // SAFETY: as above.
    unsafe { (*ty.cast::<TypeEntry>()).1 as c_int }
}
unsafe extern "C" fn cb_get_global_rank(process: *mut abi::mqs_process) -> c_int {
    // SAFETY: see above.
    unsafe { (*process.cast::<Process>()).rank }
}
unsafe extern "C" fn cb_get_image(process: *mut abi::mqs_process) -> *mut abi::mqs_image {
    // SAFETY: see above.
    unsafe { (*process.cast::<Process>()).image.cast() }
}
unsafe extern "C" fn cb_fetch_data(
    process: *mut abi::mqs_process,
    addr: abi::mqs_taddr_t,
    size: c_int,
    buf: *mut c_void,
) -> c_int {
    // SAFETY: see above.
    let p = unsafe { &*process.cast::<Process>() };
    p.fetches.set(p.fetches.get() + 1);
    let Ok(len) = usize::try_from(size) else {
        return 101;
    };
    if len == 0 {
        return 0;
    }
    // SAFETY: the DLL gives a buffer of `size` bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    if p.memory.fetch(addr, out) {
        0
    } else {
        102
    }
}
unsafe extern "C" fn cb_target_to_host(
    process: *mut abi::mqs_process,
    input: *const c_void,
    output: *mut c_void,
    size: c_int,
) {
    // SAFETY: see above.
    let p = unsafe { &*process.cast::<Process>() };
    let len = usize::try_from(size).unwrap_or(0);
    // SAFETY: both buffers hold `size` bytes.
    let (i, o) = unsafe {
        (
            std::slice::from_raw_parts(input.cast::<u8>(), len),
            std::slice::from_raw_parts_mut(output.cast::<u8>(), len),
        )
    };
    p.memory.target_to_host(i, o);
}
#[cfg(feature = "mpi2")]
unsafe extern "C" fn cb_get_process_job(process: *mut abi::mqs_process) -> *mut abi::mqs_job {
    // SAFETY: see above.
    unsafe { (*process.cast::<Process>()).job.get().cast() }
}
#[cfg(feature = "mpi2")]
unsafe extern "C" fn cb_get_process_identity(process: *mut abi::mqs_job) -> c_int {
    // SAFETY: hosts receive the process handle here (header slip).
    unsafe { (*process.cast::<Process>()).identity.get() }
}
#[cfg(feature = "mpi2")]
unsafe extern "C" fn cb_get_process(
    job: *mut abi::mqs_job,
    identity: c_int,
) -> *mut abi::mqs_process {
    // SAFETY: see above.
    let j = unsafe { &*job.cast::<Job>() };
    let procs = j.processes.borrow();
    procs
        .iter()
        // SAFETY: the job lists live processes.
        .find(|p| unsafe { (***p).identity.get() } == identity)
        .map_or(std::ptr::null_mut(), |p| p.cast())
}

pub static BASIC: abi::mqs_basic_callbacks = abi::mqs_basic_callbacks {
    mqs_malloc_fp: Some(cb_malloc),
    mqs_free_fp: Some(cb_free),
    mqs_dprints_fp: Some(cb_dprints),
    mqs_errorstring_fp: Some(cb_errorstring),
    mqs_put_image_info_fp: Some(cb_put_image_info),
    mqs_get_image_info_fp: Some(cb_get_image_info),
    mqs_put_process_info_fp: Some(cb_put_process_info),
    mqs_get_process_info_fp: Some(cb_get_process_info),
    #[cfg(feature = "mpi2")]
    mqs_put_job_info_fp: Some(cb_put_job_info),
    #[cfg(feature = "mpi2")]
    mqs_get_job_info_fp: Some(cb_get_job_info),
};

pub static IMAGE_CB: abi::mqs_image_callbacks = abi::mqs_image_callbacks {
    mqs_get_type_sizes_fp: Some(cb_get_type_sizes),
    mqs_find_function_fp: Some(cb_find_function),
    mqs_find_symbol_fp: Some(cb_find_symbol),
    mqs_find_type_fp: Some(cb_find_type),
    mqs_field_offset_fp: Some(cb_field_offset),
    mqs_sizeof_fp: Some(cb_sizeof),
};

pub static PROCESS_CB: abi::mqs_process_callbacks = abi::mqs_process_callbacks {
    mqs_get_global_rank_fp: Some(cb_get_global_rank),
    mqs_get_image_fp: Some(cb_get_image),
    mqs_fetch_data_fp: Some(cb_fetch_data),
    mqs_target_to_host_fp: Some(cb_target_to_host),
    #[cfg(feature = "mpi2")]
    mqs_get_process_job_fp: Some(cb_get_process_job),
    #[cfg(feature = "mpi2")]
    mqs_get_process_identity_fp: Some(cb_get_process_identity),
};

#[cfg(feature = "mpi2")]
pub static JOB_CB: abi::mqs_job_callbacks = abi::mqs_job_callbacks {
    mqs_get_process_fp: Some(cb_get_process),
};

/// One queue's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queue {
    Ops(Vec<PendingOperation>),
    NoInformation,
    /// Setup failed, or next_operation failed after these operations.
    Error(i32, Vec<PendingOperation>),
}

impl Queue {
    pub fn ops(&self) -> &[PendingOperation] {
        match self {
            Queue::Ops(o) | Queue::Error(_, o) => o,
            Queue::NoInformation => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommDump {
    pub comm: Communicator,
    pub group: Result<Vec<i32>, i32>,
    /// sends, receives, unexpected.
    pub queues: [Queue; 3],
}

/// What a session saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    pub image_rc: i32,
    pub image_message: Option<String>,
    pub process_rc: i32,
    pub update_rc: i32,
    pub comms: Vec<CommDump>,
    /// A code if iterating communicators ended in an error.
    pub comm_error: Option<i32>,
    /// MPI-2: the new-process iterator's outcome and the spawn breakpoint.
    pub new_processes: Option<Result<Vec<mqs_abi::ProcessLocation>, i32>>,
    pub spawn_breakpoint: Option<Result<String, i32>>,
}

/// Most communicators or operations a session accepts before declaring the
/// DLL stuck in a loop.
pub const SESSION_CAP: usize = 1 << 20;

/// Sets the basic callbacks (idempotent: every test uses the same table).
pub fn setup_basic() {
    // SAFETY: a static table, valid for ever.
    unsafe { x::mqs_setup_basic_callbacks(&BASIC) };
}

fn c_message(p: *mut c_char) -> Option<String> {
    // SAFETY: the DLL returns static NUL-terminated strings or NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Image setup and check.
pub fn setup_image(image: &mut Image) -> (i32, Option<String>) {
    setup_basic();
    let h: *mut abi::mqs_image = (image as *mut Image).cast();
    // SAFETY: a live handle and a static table.
    let rc = unsafe { x::mqs_setup_image(h, &IMAGE_CB) };
    if rc != 0 {
        return (rc, None);
    }
    let mut msg: *mut c_char = std::ptr::null_mut();
    // SAFETY: a live handle and a writable out-pointer.
    let rc = unsafe { x::mqs_image_has_queues(h, &mut msg) };
    (rc, c_message(msg))
}

/// Runs the whole calling sequence on one process (its image must have
/// been set up), then destroys the process info (not the image's).
pub fn dump(process: &mut Process) -> Dump {
    let mut d = Dump::default();
    let ph: *mut abi::mqs_process = (process as *mut Process).cast();
    #[cfg(feature = "mpi2")]
    let mut job = Job::new();
    #[cfg(feature = "mpi2")]
    {
        assert_eq!(setup_job(&mut job), 0);
        process.job.set(&mut *job);
        process.identity.set(process.rank.max(0));
        job.processes.borrow_mut().push(process as *mut Process);
    }
    // SAFETY: a live handle and a static table.
    d.process_rc = unsafe { x::mqs_setup_process(ph, &PROCESS_CB) };
    if d.process_rc == 0 {
        #[cfg(feature = "mpi2")]
        // SAFETY: as above.
        unsafe {
            x::mqs_set_process_identity(ph, process.rank.max(0));
        }
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: as above.
        d.process_rc = unsafe { x::mqs_process_has_queues(ph, &mut msg) };
        if d.process_rc == 0 {
            walk_communicators(ph, &mut d);
            #[cfg(feature = "mpi2")]
            mpi2_extras(ph, &mut d);
        }
    }
    destroy_process(process);
    #[cfg(feature = "mpi2")]
    assert_eq!(destroy_job(&mut job), 0);
    d
}

/// The new-process iterator and the spawn breakpoint (MPI-2).
#[cfg(feature = "mpi2")]
fn mpi2_extras(ph: *mut abi::mqs_process, d: &mut Dump) {
    // SAFETY: a live handle.
    let rc = unsafe { x::mqs_setup_new_process_iterator(ph) };
    d.new_processes = Some(match rc {
        0 | 2 => {
            let mut list = Vec::new();
            let mut loc = Box::<abi::mqs_process_location>::default();
            // SAFETY: as above, and a writable location.
            while list.len() < SESSION_CAP && unsafe { x::mqs_next_new_process(ph, &mut *loc) } == 0
            {
                list.push(mqs_abi::ProcessLocation::from_raw(&loc));
                *loc = abi::mqs_process_location::default();
            }
            Ok(list)
        }
        e => Err(e),
    });
    let mut buf = [0 as c_char; 256];
    // SAFETY: as above, and 256 writable bytes.
    let rc = unsafe { x::mqs_spawn_breakpoint_name(ph, buf.as_mut_ptr(), 256) };
    d.spawn_breakpoint = Some(if rc == 0 {
        Ok(mqs_abi::decode_c_chars(&buf))
    } else {
        Err(rc)
    });
}

/// update + iterate, on a process already set up.
pub fn walk_communicators(ph: *mut abi::mqs_process, d: &mut Dump) {
    // SAFETY: a live handle.
    d.update_rc = unsafe { x::mqs_update_communicator_list(ph) };
    if d.update_rc != 0 {
        return;
    }
    // SAFETY: as above.
    let mut rc = unsafe { x::mqs_setup_communicator_iterator(ph) };
    while rc == 0 {
        if d.comms.len() >= SESSION_CAP {
            d.comm_error = Some(-1);
            return;
        }
        let mut raw = abi::mqs_communicator::default();
        // SAFETY: as above, and a writable struct.
        let grc = unsafe { x::mqs_get_communicator(ph, &mut raw) };
        if grc != 0 {
            d.comm_error = Some(grc);
            return;
        }
        let comm = Communicator::from_raw(cast_comm(&raw));
        let n = usize::try_from(comm.size).unwrap_or(0).min(SESSION_CAP);
        let mut ranks = vec![i32::MIN; n];
        // SAFETY: `ranks` holds `size` ints.
        let grc = unsafe { x::mqs_get_comm_group(ph, ranks.as_mut_ptr()) };
        let group = if grc == 0 { Ok(ranks) } else { Err(grc) };
        let queues = [0, 1, 2].map(|class| queue(ph, class));
        d.comms.push(CommDump {
            comm,
            group,
            queues,
        });
        // SAFETY: as above.
        rc = unsafe { x::mqs_next_communicator(ph) };
    }
    if rc != ReturnCode::EndOfList.to_raw() {
        d.comm_error = Some(rc);
    }
}

fn cast_comm(raw: &abi::mqs_communicator) -> &mqs_abi::ffi::mpi1::mqs_communicator {
    // SAFETY: the same C struct at both interface levels.
    unsafe { &*(raw as *const abi::mqs_communicator).cast() }
}

fn cast_op(raw: &abi::mqs_pending_operation) -> &mqs_abi::ffi::mpi1::mqs_pending_operation {
    // SAFETY: the same C struct at both interface levels.
    unsafe { &*(raw as *const abi::mqs_pending_operation).cast() }
}

fn queue(ph: *mut abi::mqs_process, class: c_int) -> Queue {
    // SAFETY: a live handle.
    let rc = unsafe { x::mqs_setup_operation_iterator(ph, class) };
    match rc {
        1 => return Queue::NoInformation,
        2 => return Queue::Ops(Vec::new()),
        0 => {}
        e => return Queue::Error(e, Vec::new()),
    }
    let mut ops = Vec::new();
    loop {
        if ops.len() >= SESSION_CAP {
            return Queue::Error(-1, ops);
        }
        let mut raw = abi::mqs_pending_operation::default();
        // SAFETY: as above, and a writable struct.
        let rc = unsafe { x::mqs_next_operation(ph, &mut raw) };
        match rc {
            0 => ops.push(PendingOperation::from_raw(cast_op(&raw))),
            2 => return Queue::Ops(ops),
            e => return Queue::Error(e, ops),
        }
    }
}

pub fn destroy_process(process: &mut Process) {
    let info = process.info.replace(std::ptr::null_mut());
    if !info.is_null() {
        // SAFETY: the info the DLL attached, destroyed once.
        unsafe { x::mqs_destroy_process_info(info.cast()) };
    }
}

pub fn destroy_image(image: &mut Image) {
    let info = image.info.replace(std::ptr::null_mut());
    if !info.is_null() {
        // SAFETY: the info the DLL attached, destroyed once.
        unsafe { x::mqs_destroy_image_info(info.cast()) };
    }
}

/// Sets up a job (MPI-2).
#[cfg(feature = "mpi2")]
pub fn setup_job(job: &mut Job) -> i32 {
    setup_basic();
    // SAFETY: a live handle and a static table.
    unsafe { x::mqs_setup_job((job as *mut Job).cast(), &JOB_CB) }
}

#[cfg(feature = "mpi2")]
pub fn destroy_job(job: &mut Job) -> i32 {
    let info = job.info.replace(std::ptr::null_mut());
    // SAFETY: the info the DLL attached, destroyed once.
    unsafe { x::mqs_destroy_job_info(info.cast()) }
}

impl Dump {
    /// The communicator with this name.
    pub fn comm(&self, name: &str) -> Option<&CommDump> {
        self.comms.iter().find(|c| c.comm.name == name)
    }
}
