//! The iteration the interface asks of every backend, kept here once, and
//! the trait each MPI's backend answers it through.
//!
//! A debugger walks a process's communicators (`mqs_update_communicator_list`,
//! `mqs_setup_communicator_iterator`, `mqs_get_communicator`,
//! `mqs_next_communicator`) and three queues on each
//! (`mqs_setup_operation_iterator`, `mqs_next_operation`). [`Process`]
//! holds what that walk needs whatever the MPI: the communicator list and
//! what it was built from, the current communicator, the queue being
//! taken, MPI-2's new processes, the lines for `dprints`. It asks its
//! [`MpiBackend`] only what is the MPI's own: reading the list's head,
//! building the list, reading one queue, making an operation. The entry
//! points see a process as [`AnyProcess`], its backend behind one vtable.

use std::collections::{HashSet, VecDeque};
use std::fmt::{self, Debug};

use mqs_abi::{Cartesian, Communicator, OpClass, PendingOperation, ProcessLocation, ReturnCode};

use crate::abi;
use crate::access::{ImageAccess, ProcessAccess};
use crate::callbacks::{ImageCallbacks, InfoKind};
use crate::cursor::Cursor;
use crate::errors::DllError;
use crate::messages::{self, Failure};
use crate::names::{sorted, NameMap, ProcName, Sorted};
use crate::target::{ByteOrder, Sizes, Target};
use crate::walk::Stop;

/// What a communicator of any backend gives the interface.
pub trait CommInfo {
    /// As `mqs_get_communicator` gives it.
    fn to_abi(&self) -> Communicator;
    /// Global ranks of the local group's members, one per member.
    fn local_ranks(&self) -> &[i64];
    /// Global ranks of the group peers are named in: the remote group of
    /// an intercommunicator, the local group otherwise.
    fn remote_ranks(&self) -> &[i64];

    /// Its Cartesian grid, where the MPI keeps one the backend reads.
    fn cartesian(&self) -> Option<&Cartesian> {
        None
    }

    /// The global rank of a peer named by its rank in this communicator.
    fn peer_global(&self, rank: i64) -> i64 {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.remote_ranks().get(r).copied())
            .unwrap_or(-1)
    }
}

/// A queue as a backend read it at `mqs_setup_operation_iterator`.
#[derive(Debug)]
pub struct Queue<R, I> {
    /// What the items stand for, read once (Open MPI: the decoded
    /// requests they index).
    pub read: R,
    /// The operations in the order they are shown, each made into a
    /// [`PendingOperation`] only when the debugger takes it: a queue of
    /// 100,000 is then never held twice, as read and as made.
    pub items: Vec<I>,
    /// Why the walk ended before the queue did.
    pub stop: Option<Stop>,
    /// Why operations the backend cannot see may be there: said, as
    /// `mqs_no_information`, instead of an empty queue ("cannot tell",
    /// never "empty").
    pub unseen: Option<String>,
    /// The last line of a queue that may not be whole, where no stop says
    /// why.
    pub partial: Option<String>,
}

/// The queue a backend reads.
pub type QueueOf<B> = Queue<<B as MpiBackend>::Read, <B as MpiBackend>::Item>;

impl<R, I> Queue<R, I> {
    pub fn new(read: R, items: Vec<I>, stop: Option<Stop>) -> Self {
        Queue {
            read,
            items,
            stop,
            unseen: None,
            partial: None,
        }
    }
}

/// How a backend reads its process, and what it has to tell the debugger.
#[derive(Debug)]
pub struct Context {
    pub sizes: Sizes,
    pub order: ByteOrder,
    /// Show what the MPI does for itself: operations with internal tags,
    /// the communicators it made (MQS_SHOW_INTERNAL=1).
    pub show_internal: bool,
    /// Lines for the debugger's dprints, drained by the exports.
    dprints: Vec<String>,
    /// The keys of the lines said once per process.
    said: HashSet<&'static str>,
    /// What `mqs_process_has_queues` found (the MPI and its version) and
    /// the backend's name, for the version string.
    detected: Option<(String, &'static str)>,
}

impl Context {
    pub fn new(sizes: Sizes, order: ByteOrder) -> Self {
        Context {
            sizes,
            order,
            show_internal: std::env::var_os("MQS_SHOW_INTERNAL").is_some_and(|v| v == "1"),
            dprints: Vec::new(),
            said: HashSet::new(),
            detected: None,
        }
    }

    /// A target for one call.
    pub fn target<'a, P: ProcessAccess + ?Sized>(&self, p: &'a P) -> Target<'a, P> {
        Target::new(p, self.sizes, self.order)
    }

    /// Queues a dprints line.
    pub fn say(&mut self, line: String) {
        self.dprints.push(line);
    }

    /// Queues a dprints line once per process.
    pub fn say_once(&mut self, key: &'static str, line: String) {
        if self.said.insert(key) {
            self.dprints.push(line);
        }
    }

    /// Records what this process runs, for the version string.
    pub fn detect(&mut self, what: String, backend: &'static str) {
        self.detected = Some((what, backend));
    }

    /// The version string names the MPI of the process read last.
    fn say_detected(&self) {
        if let Some((what, backend)) = &self.detected {
            messages::set_detected(what, backend);
        }
    }
}

/// One call of the debugger's as a backend sees it: the process's memory,
/// its [`Context`], and where the communicator list is built, the MPI-2
/// identities the job knows.
pub struct Call<'a> {
    pub cx: &'a mut Context,
    pub p: &'a dyn ProcessAccess,
    /// Global ranks are these identities where there are some.
    pub names: Option<&'a NameMap>,
}

impl fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("cx", &self.cx)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl<'a> Call<'a> {
    /// A call that does not build the communicator list.
    pub fn new(cx: &'a mut Context, p: &'a dyn ProcessAccess) -> Self {
        Call { cx, p, names: None }
    }

    /// A target for this call.
    pub fn target(&self) -> Target<'a, dyn ProcessAccess + 'a> {
        self.cx.target(self.p)
    }
}

/// What one MPI's backend answers: the MPI-specific steps of the
/// iteration [`Process`] keeps.
pub trait MpiBackend: Debug {
    /// A communicator as this backend keeps it.
    type Comm: CommInfo + Debug;
    /// What says which state the communicator list is in: the list is
    /// built again only when it moves.
    type Marker: PartialEq + Debug;
    /// The list's head as read, to build the list from.
    type Head;
    /// What a queue's items stand for, read at setup.
    type Read: Debug;
    /// One operation of a queue as read at setup.
    type Item: Debug;

    /// `mqs_process_has_queues`: finds the symbols, checks that the
    /// communicator list can be read, and says what MPI runs
    /// ([`Context::detect`]).
    fn check<I: ImageAccess>(&mut self, call: &mut Call<'_>, image: &I) -> Result<(), Failure>;

    /// Whether the process's symbols were looked up (a debugger may skip
    /// `mqs_process_has_queues`).
    fn is_checked(&self) -> bool;

    /// Drops what was cached for the last stop, then reads the head of
    /// the communicator list and its marker.
    fn list_head(&mut self, call: &mut Call<'_>) -> Result<(Self::Marker, Self::Head), DllError>;

    /// Builds the communicator list from its head.
    fn build_list(&mut self, call: &mut Call<'_>, head: Self::Head) -> Listed<Self>;

    /// Drops what was cached for the last stop (the debugger sets the
    /// communicator iterator up again).
    fn forget_stop(&mut self);

    /// Reads one queue of `comm`; None: no information (the reason said
    /// with [`messages::set_no_information_reason`] where there is one).
    fn read_queue(&mut self, call: &mut Call<'_>, comm: &Self::Comm, class: OpClass)
        -> Setup<Self>;

    /// Makes an item of the queue being taken into its operation (None:
    /// the item is not in what was read).
    fn make(&self, read: &Self::Read, item: Self::Item, comm: &Self::Comm) -> Made;

    /// MPI-2: this process's name, for the job's identities.
    fn own_name(&mut self, call: &mut Call<'_>) -> Option<ProcName>;

    /// MPI-2: the processes of other jobs the MPI knows; None: no
    /// information (the reason said where there is one).
    fn new_processes(&mut self, call: &mut Call<'_>) -> Option<Vec<ProcessLocation>>;

    /// MPI-2: where the MPI passes once new processes are known.
    fn spawn_breakpoint(&self) -> String;
}

/// A built communicator list.
pub type Listed<B> = Result<Vec<<B as MpiBackend>::Comm>, DllError>;
/// A queue read at setup, or no information.
pub type Setup<B> = Result<Option<QueueOf<B>>, DllError>;
/// An operation made of an item.
pub type Made = Option<PendingOperation>;

/// The queue being taken, and a note for its last operation (why the
/// list was cut, or that it may not be whole).
#[derive(Debug)]
struct Operations<R, I> {
    read: R,
    items: VecDeque<I>,
    last_note: Option<String>,
}

/// A process of one MPI: the iteration, kept once for every backend, and
/// the backend.
#[derive(Debug)]
pub struct Process<B: MpiBackend> {
    /// The debugger's process table, kept since `mqs_setup_process`.
    table: *const abi::mqs_process_callbacks,
    cx: Context,
    backend: B,
    comms: Vec<B::Comm>,
    /// The marker and the MPI-2 identities the list was built with (they
    /// change global ranks without the MPI's list changing).
    built: Option<(B::Marker, Option<Sorted>)>,
    /// The current communicator, an index into `comms`.
    current: Cursor,
    ops: Option<Operations<B::Read, B::Item>>,
    /// MPI-2: the new processes not taken yet.
    new_processes: Option<VecDeque<ProcessLocation>>,
}

impl<B: MpiBackend> Process<B> {
    pub fn new(
        table: *const abi::mqs_process_callbacks,
        backend: B,
        sizes: Sizes,
        order: ByteOrder,
    ) -> Self {
        Process {
            table,
            cx: Context::new(sizes, order),
            backend,
            comms: Vec::new(),
            built: None,
            current: Cursor::default(),
            ops: None,
            new_processes: None,
        }
    }

    /// Rebuilds the list when its marker or the identities moved.
    fn rebuild(&mut self, p: &dyn ProcessAccess, names: Option<&NameMap>) -> Result<(), DllError> {
        // The queue being taken was read in the last stop.
        self.ops = None;
        let mut call = Call {
            cx: &mut self.cx,
            p,
            names,
        };
        let (marker, head) = self.backend.list_head(&mut call)?;
        let built = Some((marker, names.map(sorted)));
        if self.built == built {
            return Ok(());
        }
        self.comms = self.backend.build_list(&mut call, head)?;
        self.built = built;
        self.current.reset();
        Ok(())
    }
}

/// A process of any MPI, as the entry points drive it (`I`: how its
/// image's symbols and types are reached, the debugger's callbacks in the
/// DLL).
pub trait AnyProcess<I: ImageAccess>: Debug {
    /// The debugger's process table.
    fn table(&self) -> *const abi::mqs_process_callbacks;
    /// Lines queued for the debugger's dprints.
    fn take_dprints(&mut self) -> Vec<String>;
    /// Whether the process's symbols were looked up.
    fn is_checked(&self) -> bool;
    /// `mqs_process_has_queues`.
    fn check(&mut self, image: &I, p: &dyn ProcessAccess) -> Result<(), Failure>;
    /// Whether the communicator list was built since the last setup.
    fn has_list(&self) -> bool;
    /// `mqs_update_communicator_list`: rebuilds the list when the MPI's
    /// marker of it moved; drops per-stop caches either way.
    fn update_communicators(
        &mut self,
        p: &dyn ProcessAccess,
        names: Option<&NameMap>,
    ) -> Result<(), DllError>;
    /// `mqs_setup_communicator_iterator`.
    fn setup_communicators(&mut self) -> ReturnCode;
    /// `mqs_get_communicator`.
    fn current_comm(&self) -> Result<Communicator, DllError>;
    /// `mqs_get_comm_group`: the global ranks of the current
    /// communicator's local group (exactly `size` entries).
    fn comm_group(&self) -> Result<Vec<i32>, DllError>;
    /// `mqs_get_comm_cartesian`: the current communicator's grid, None if
    /// it has none or the backend cannot tell.
    fn comm_cartesian(&self) -> Result<Option<Cartesian>, DllError>;
    /// `mqs_next_communicator`. Past the end the iterator stays ended, so
    /// a debugger that calls again gets an error, not a crash.
    fn next_communicator(&mut self) -> Result<ReturnCode, DllError>;
    /// `mqs_setup_operation_iterator`.
    fn setup_operations(
        &mut self,
        p: &dyn ProcessAccess,
        class: OpClass,
    ) -> Result<ReturnCode, DllError>;
    /// `mqs_next_operation`: the next operation, made now from what was
    /// read at setup (nothing is read here).
    fn next_operation(&mut self) -> Result<Option<PendingOperation>, DllError>;
    /// MPI-2 `mqs_set_process_identity`: the global ranks change, so the
    /// list is built again; gives this process's name.
    fn set_identity(&mut self, p: &dyn ProcessAccess) -> Option<ProcName>;
    /// MPI-2 `mqs_setup_new_process_iterator`.
    fn setup_new_processes(&mut self, p: &dyn ProcessAccess) -> ReturnCode;
    /// MPI-2 `mqs_next_new_process`.
    fn next_new_process(&mut self) -> Result<Option<ProcessLocation>, DllError>;
    /// MPI-2 `mqs_spawn_breakpoint_name`.
    fn spawn_breakpoint(&self) -> String;
}

impl<B: MpiBackend, I: ImageAccess> AnyProcess<I> for Process<B> {
    fn table(&self) -> *const abi::mqs_process_callbacks {
        self.table
    }

    fn take_dprints(&mut self) -> Vec<String> {
        std::mem::take(&mut self.cx.dprints)
    }

    fn is_checked(&self) -> bool {
        self.backend.is_checked()
    }

    fn check(&mut self, image: &I, p: &dyn ProcessAccess) -> Result<(), Failure> {
        let mut call = Call::new(&mut self.cx, p);
        self.backend.check(&mut call, image)?;
        self.cx.say_detected();
        Ok(())
    }

    fn has_list(&self) -> bool {
        self.built.is_some()
    }

    fn update_communicators(
        &mut self,
        p: &dyn ProcessAccess,
        names: Option<&NameMap>,
    ) -> Result<(), DllError> {
        let r = self.rebuild(p, names);
        self.cx.say_detected();
        r
    }

    fn setup_communicators(&mut self) -> ReturnCode {
        self.backend.forget_stop();
        self.ops = None;
        self.current.start(self.comms.len())
    }

    fn current_comm(&self) -> Result<Communicator, DllError> {
        self.current.get(&self.comms).map(CommInfo::to_abi)
    }

    fn comm_group(&self) -> Result<Vec<i32>, DllError> {
        let comm = self.current.get(&self.comms)?;
        Ok(comm
            .local_ranks()
            .iter()
            .map(|&r| i32::try_from(r).unwrap_or(-1))
            .collect())
    }

    fn comm_cartesian(&self) -> Result<Option<Cartesian>, DllError> {
        Ok(self.current.get(&self.comms)?.cartesian().cloned())
    }

    fn next_communicator(&mut self) -> Result<ReturnCode, DllError> {
        let rc = self.current.advance(self.comms.len())?;
        self.ops = None;
        Ok(rc)
    }

    fn setup_operations(
        &mut self,
        p: &dyn ProcessAccess,
        class: OpClass,
    ) -> Result<ReturnCode, DllError> {
        self.ops = None;
        let comm = self.current.get(&self.comms)?;
        let mut call = Call::new(&mut self.cx, p);
        let Some(queue) = self.backend.read_queue(&mut call, comm, class)? else {
            return Ok(ReturnCode::NoInformation);
        };
        if queue.items.is_empty() {
            if let Some(stop) = queue.stop {
                return Err(stop_error(stop));
            }
            if let Some(why) = &queue.unseen {
                messages::set_no_information_reason(why);
                return Ok(ReturnCode::NoInformation);
            }
        }
        // An empty queue is mqs_ok too, and mqs_next_operation ends it at
        // once: the interface allows mqs_end_of_list here, but debuggers
        // (padb) count anything but mqs_ok and mqs_no_information as a
        // failure, and the MPIs' own DLLs never answer it.
        self.ops = Some(Operations {
            read: queue.read,
            items: queue.items.into(),
            last_note: queue.stop.map(|s| s.note()).or(queue.partial),
        });
        Ok(ReturnCode::Ok)
    }

    fn next_operation(&mut self) -> Result<Option<PendingOperation>, DllError> {
        let ops = self.ops.as_mut().ok_or(DllError::NoOperationIterator)?;
        let Some(item) = ops.items.pop_front() else {
            return Ok(None);
        };
        let last_note = if ops.items.is_empty() {
            ops.last_note.take()
        } else {
            None
        };
        let comm = self.current.get(&self.comms)?;
        let mut op = self
            .backend
            .make(&ops.read, item, comm)
            .ok_or(DllError::NoOperationIterator)?;
        if let Some(note) = last_note {
            add_note(&mut op, note);
        }
        Ok(Some(op))
    }

    fn set_identity(&mut self, p: &dyn ProcessAccess) -> Option<ProcName> {
        self.built = None;
        self.backend.own_name(&mut Call::new(&mut self.cx, p))
    }

    fn setup_new_processes(&mut self, p: &dyn ProcessAccess) -> ReturnCode {
        let mut call = Call::new(&mut self.cx, p);
        self.new_processes = self.backend.new_processes(&mut call).map(VecDeque::from);
        // None found: mqs_ok all the same, as for an empty queue.
        match self.new_processes {
            Some(_) => ReturnCode::Ok,
            None => ReturnCode::NoInformation,
        }
    }

    fn next_new_process(&mut self) -> Result<Option<ProcessLocation>, DllError> {
        self.new_processes
            .as_mut()
            .map(VecDeque::pop_front)
            .ok_or(DllError::NoOperationIterator)
    }

    fn spawn_breakpoint(&self) -> String {
        self.backend.spawn_breakpoint()
    }
}

/// A process of any MPI as the DLL reaches it, through the debugger's
/// callbacks.
pub type Debugged = dyn AnyProcess<ImageCallbacks>;

/// What the DLL keeps per process: its MPI's [`Process`].
#[derive(Debug)]
pub struct ProcessState(Box<Debugged>);

impl ProcessState {
    pub fn new(process: impl AnyProcess<ImageCallbacks> + 'static) -> Self {
        ProcessState(Box::new(process))
    }

    pub fn get(&mut self) -> &mut Debugged {
        &mut *self.0
    }
}

impl InfoKind for ProcessState {
    const MAGIC: u64 = 0x6d71_735f_7072_6f63; // "mqs_proc"
    const MISSING: DllError = DllError::NoProcessInfo;
}

/// What a walk's stop makes of a queue that holds nothing else.
fn stop_error(stop: Stop) -> DllError {
    match stop {
        Stop::Budget | Stop::Limit(_) => DllError::LimitReached,
        Stop::Unreadable(_) => DllError::ReadFailed,
        Stop::Cycle(_) | Stop::BadPointer(_) | Stop::Corrupt => DllError::Corrupt,
    }
}

/// Adds a line to an operation's extra text; the fifth line is replaced if
/// all are used (the note matters more than detail).
fn add_note(op: &mut PendingOperation, note: String) {
    if op.extra_text.len() >= 5 {
        op.extra_text.truncate(4);
    }
    op.extra_text.push(&note);
}
