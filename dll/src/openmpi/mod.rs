//! The Open MPI backend (4.1 and 5.0, ob1 PML): image checks, the
//! communicator table and the three queues, answering the iteration
//! [`crate::iteration`] keeps.
//!
//! This file is the backend's face: the image's and process's checks and
//! the [`MpiBackend`] impl, which hands each queue to the PML's reader:
//! ob1's queues ([`ob1`]), with what waits in the shared-memory transport
//! after its unexpected messages ([`sm`]), or UCX's worker under pml ucx
//! ([`pml_ucx`]).

pub mod communicators;
pub mod groups;
pub mod layout;
pub mod lists;
pub mod ob1;
pub mod ob1_comm;
pub mod pml_ucx;
pub mod requests;
pub mod sm;
pub mod unexpected;

use std::sync::Arc;

use mqs_abi::{OpClass, ProcessLocation};

use crate::access::{ImageAccess, ProcessAccess, TypeSizes};
use crate::by_key::PerStop;
use crate::errors::DllError;
use crate::iteration::{Call, CommInfo, Context, Listed, Made, MpiBackend, Queue, Setup};
use crate::messages::{self, Failure};
use crate::names::ProcName;
use crate::target::{ByteOrder, Sizes, Target};
use crate::transit::Message;
use crate::types::Missing;

use communicators::{Comm, Signature, Table};
use layout::Layout;
use requests::{DatatypeCache, Request, Scan};

/// Data symbols the DLL reads.
pub const SYM_COMMUNICATORS: &str = "ompi_mpi_communicators";
pub const SYM_SEND_REQUESTS: &str = "mca_pml_base_send_requests";
pub const SYM_RECV_REQUESTS: &str = "mca_pml_base_recv_requests";
pub const SYM_TYPEDEFS_SIZEOF: &str = "MPIR_debug_typedefs_sizeof";
pub const SYM_IGNORE_QUEUES: &str = "MPIR_Ignore_queues";
pub const SYM_PML_COMPONENT: &str = "mca_pml_base_selected_component";
pub const SYM_OB1_COMM_CLASS: &str = "mca_pml_ob1_comm_t_class";
pub const SYM_PROC_LIST: &str = "ompi_proc_list";
pub const SYM_LOCAL_PROC: &str = "ompi_proc_local_proc";
/// A function in the file that always has debug info; asking for it makes
/// lazy debuggers load that file's types first.
pub const FN_SETUP_DLLS: &str = "ompi_debugger_setup_dlls";

/// Whether an image is an Open MPI program with the debug info we need.
pub fn check_image<I: ImageAccess>(image: &I) -> Result<Layout, Failure> {
    // Only to make a lazy debugger load the file with the types.
    let _ = image.find_function(FN_SETUP_DLLS);
    if image.find_symbol(SYM_IGNORE_QUEUES).is_some() {
        return Err(Failure {
            code: DllError::SilentFailure,
            message: None,
        });
    }
    // Whether this is Open MPI at all is only asked when its types are
    // missing: the process looks the table up anyway.
    Layout::resolve(image).map_err(|missing| {
        if image.find_symbol(SYM_COMMUNICATORS).is_none() {
            Failure {
                code: DllError::NotOpenMpi,
                message: Some(messages::NOT_OPEN_MPI),
            }
        } else {
            Failure::missing(missing)
        }
    })
}

/// Addresses of the symbols, looked up per process (a shared library may
/// load at a different address in each), only those that are read.
/// MPI_COMM_WORLD and MPI_COMM_NULL need none: they have fixed slots in
/// the communicator table ([`communicators::SLOT_COMM_NULL`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Symbols {
    pub communicators: u64,
    pub send_requests: Option<u64>,
    pub recv_requests: Option<u64>,
    pub pml_component: Option<u64>,
    /// The class of ob1's communicator data, looked up only when the PML
    /// could not be read: then each communicator's class tells.
    pub ob1_comm_class: Option<u64>,
    /// MPI-2 only: the processes of other jobs, and our own process name.
    pub proc_list: Option<u64>,
    pub local_proc: Option<u64>,
    /// What the transport reader needs (looked up only where ob1's types
    /// are there: without them no unexpected message is read).
    pub sm: sm::SmSymbols,
}

pub fn resolve_symbols<I: ImageAccess>(image: &I) -> Result<Symbols, Missing> {
    let mpi2 = cfg!(feature = "mpi2");
    Ok(Symbols {
        communicators: image
            .find_symbol(SYM_COMMUNICATORS)
            .ok_or(Missing::Symbol(SYM_COMMUNICATORS))?,
        send_requests: image.find_symbol(SYM_SEND_REQUESTS),
        recv_requests: image.find_symbol(SYM_RECV_REQUESTS),
        pml_component: image.find_symbol(SYM_PML_COMPONENT),
        ob1_comm_class: None,
        proc_list: mpi2.then(|| image.find_symbol(SYM_PROC_LIST)).flatten(),
        local_proc: mpi2.then(|| image.find_symbol(SYM_LOCAL_PROC)).flatten(),
        sm: sm::SmSymbols::default(),
    })
}

/// The basic sizes of a process: the debugger's, refined by the MPI's own
/// record, and the byte order learned from target_to_host.
pub fn process_sizes<I: ImageAccess, P: ProcessAccess + ?Sized>(
    image: &I,
    p: &P,
    debugger: Option<TypeSizes>,
) -> Result<(Sizes, ByteOrder), DllError> {
    let sizes = match debugger {
        Some(ts) => Sizes::from_debugger(ts)?,
        None => Sizes::LP64,
    };
    let order = ByteOrder::probe(p);
    let Some(record) = image.find_symbol(SYM_TYPEDEFS_SIZEOF) else {
        return Ok((sizes, order));
    };
    let t = Target::new(p, sizes, order);
    let step = u64::from(sizes.int);
    // Seven ints, in one read.
    let values: Vec<i64> = t
        .view(record, 7 * step)
        .map(|v| (0..7u64).map_while(|i| v.int(i * step).ok()).collect())
        .unwrap_or_default();
    Ok((sizes.with_mpi_record(&values), order))
}

/// The selected PML as Open MPI records it: name and Open MPI version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmlInfo {
    pub name: String,
    pub version: Option<(i64, i64, i64)>,
}

/// Reads `mca_pml_base_selected_component` (an `mca_base_component_t`,
/// whose layout is fixed by the MCA ABI: three ints, a 16-byte project
/// name, three ints, a 32-byte type name, three ints, a 64-byte name).
fn read_pml<P: ProcessAccess + ?Sized>(t: &Target<'_, P>, addr: u64) -> Option<PmlInfo> {
    let (name, project, version) = read_component(t, addr, "pml")?;
    let version = (project == "ompi").then_some(version);
    Some(PmlInfo { name, version })
}

/// An MCA component of `kind` at `addr` (`mca_base_component_t`, laid out
/// by the MCA ABI as [`read_pml`] says): its name, project and version.
pub(crate) fn read_component<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    addr: u64,
    kind: &str,
) -> Option<(String, String, (i64, i64, i64))> {
    let v = t.view(t.check_ptr(addr, 4, 160).ok()?, 160).ok()?;
    if v.chars(40, 32).ok()? != kind {
        return None;
    }
    let project = v.chars(12, 16).ok()?;
    let name = v.chars(84, 64).ok()?;
    let version = (
        v.i32(28).unwrap_or(0),
        v.i32(32).unwrap_or(0),
        v.i32(36).unwrap_or(0),
    );
    Some((name, project, version))
}

/// One operation of a queue as read, made into a
/// [`mqs_abi::PendingOperation`] only when the debugger takes it
/// ([`crate::iteration::Queue`]).
#[derive(Debug)]
pub enum Pending {
    /// The request at this index of the queue's decoded requests (its
    /// [`crate::iteration::Queue::read`]).
    Request {
        index: u32,
        order: ob1::Order,
    },
    Frag(unexpected::Frag),
    /// A message waiting in the transport.
    Transit(Message),
    /// A receive or message read from UCX's worker (pml ucx).
    Ucx(pml_ucx::Op),
}

/// Per-call caches, valid while the process stays stopped: dropped when the
/// communicator list is updated or its iterator set up again.
#[derive(Debug, Default)]
pub struct Cache {
    /// The request free lists' scans, by communicator.
    pub sends: PerStop<Scan>,
    pub recvs: PerStop<Scan>,
    pub datatypes: DatatypeCache,
    /// What waits in the transports.
    pub transit: PerStop<sm::Transit>,
    /// pml ucx: the worker's queues.
    pub ucx: PerStop<pml_ucx::Scan>,
}

/// What the Open MPI backend keeps per process.
#[derive(Debug)]
pub struct OpenMpi {
    pub layout: Arc<Layout>,
    pub symbols: Option<Symbols>,
    pub pml: Option<PmlInfo>,
    /// pml ucx: what reading UCX needs, or why it cannot be read.
    pub ucx: Option<Result<pml_ucx::PmlUcx, String>>,
    /// This process's Open MPI name (jobid, vpid).
    pub own_name: Option<ProcName>,
    pub cache: Cache,
}

impl OpenMpi {
    pub fn new(layout: Arc<Layout>) -> Self {
        OpenMpi {
            layout,
            symbols: None,
            pml: None,
            ucx: None,
            own_name: None,
            cache: Cache::default(),
        }
    }

    fn symbols(&self) -> Result<Symbols, DllError> {
        self.symbols.ok_or(DllError::ImageHasNoQueues)
    }

    /// Why pending sends and receives can be missing, for a PML other
    /// than ob1: this DLL lists requests from ob1's queues and Open MPI's
    /// base free lists, where other PMLs do not (all) keep theirs.
    fn pml_blind_spot(&self) -> Option<String> {
        let pml = self.pml.as_ref().filter(|p| p.name != "ob1")?;
        Some(match pml.name.as_str() {
            "ucx" => match &self.ucx {
                Some(Err(why)) => format!(
                    "the selected PML is ucx, which keeps its requests inside UCX, \
                     and UCX cannot be read here: {why}"
                ),
                _ => "the selected PML is ucx, which keeps its requests inside UCX, \
                      out of any debugger's sight (run with --mca pml ob1 to see them)"
                    .to_owned(),
            },
            "cm" => "the selected PML is cm, which matches in its MTL and keeps its own \
                     request lists: only requests on Open MPI's base free lists are shown"
                .to_owned(),
            other => format!(
                "the selected PML is {other}, not ob1: only requests on Open MPI's base \
                 free lists are shown"
            ),
        })
    }

    /// pml ucx with a UCX this DLL reads.
    fn ucx(&self) -> Option<&pml_ucx::PmlUcx> {
        self.ucx.as_ref()?.as_ref().ok()
    }

    fn ob1_selected(&self) -> bool {
        self.pml.as_ref().is_none_or(|p| p.name == "ob1")
    }
}

impl MpiBackend for OpenMpi {
    type Comm = Comm;
    type Marker = Signature;
    type Head = Table;
    type Read = Vec<Request>;
    type Item = Pending;

    /// Finds the symbols and checks that the communicator table can be
    /// read.
    fn check<I: ImageAccess>(&mut self, call: &mut Call<'_>, image: &I) -> Result<(), Failure> {
        let layout = Arc::clone(&self.layout);
        let mut syms = resolve_symbols(image).map_err(Failure::missing)?;
        let t = call.target();
        let cx = &mut *call.cx;
        self.own_name = syms
            .local_proc
            .and_then(|a| t.read_ptr(a).ok())
            .filter(|&p| p != 0)
            .and_then(|p| groups::proc_name(&t, &layout, p).ok());
        self.pml = syms.pml_component.and_then(|a| read_pml(&t, a));
        self.ucx = self
            .pml
            .as_ref()
            .filter(|p| p.name == "ucx")
            .map(|p| pml_ucx::resolve(image, &t, &layout, p.version));
        if self.pml.is_none() {
            syms.ob1_comm_class = image.find_symbol(SYM_OB1_COMM_CLASS);
        }
        syms.sm = sm::resolve_symbols(image, &layout);
        self.symbols = Some(syms);
        communicators::read_table(&t, &layout, syms.communicators).map_err(|e| Failure {
            code: e.into(),
            message: Some(messages::TABLE_UNREADABLE),
        })?;
        let version = match self.pml.as_ref().and_then(|p| p.version) {
            Some((a, b, c)) => format!("Open MPI {a}.{b}.{c}"),
            None => "Open MPI (version not recorded)".to_string(),
        };
        let pml = match self.pml.as_ref() {
            Some(p) => format!("PML {}", p.name),
            None => "PML unknown".to_string(),
        };
        let ob1 = match &layout.ob1 {
            Ok(_) => "ob1 debug info: yes".to_string(),
            Err(m) => format!("ob1 debug info: no ({m})"),
        };
        let transport = match &self.ucx {
            // Which transport the queues come from.
            Some(Ok(ucx)) => format!("pml ucx, {}", ucx.name()),
            Some(Err(why)) => format!("pml ucx, {why}"),
            None => format!("{pml}, {ob1}"),
        };
        cx.detect(format!("{version}, {transport}"), "openmpi");
        // Under another PML ob1's component is not even loaded: its types
        // missing then say nothing about the build.
        if let (Err(m), true) = (&layout.ob1, self.ob1_selected()) {
            cx.say_once(
                "no-ob1",
                format!(
                    "mqs DLL: ob1's queues have no debug information ({m} missing): unexpected messages are not available and posted receives come from the request free lists. Build Open MPI with -g everywhere to see them."
                ),
            );
        }
        if let Some(pml) = self
            .pml
            .as_ref()
            .filter(|p| p.name != "ob1" && self.ucx().is_none())
        {
            let line = format!(
                "mqs DLL: the selected PML is {}, not ob1: only the request free lists can be read",
                pml.name
            );
            cx.say_once("not-ob1", line);
        }
        Ok(())
    }

    fn is_checked(&self) -> bool {
        self.symbols.is_some()
    }

    /// The table's header and slots; its signature is the marker.
    fn list_head(&mut self, call: &mut Call<'_>) -> Result<(Signature, Table), DllError> {
        let syms = self.symbols()?;
        self.cache = Cache::default();
        let table = communicators::read_table(&call.target(), &self.layout, syms.communicators)?;
        Ok((table.signature, table))
    }

    fn build_list(&mut self, call: &mut Call<'_>, table: Table) -> Listed<Self> {
        let own_jobid = self.own_name.map(|n| n.jobid);
        let t = call.target();
        let built = communicators::build(&t, &self.layout, &table, own_jobid, call.names)?;
        if built.skipped > 0 {
            call.cx.say(format!(
                "mqs DLL: {} communicator(s) could not be read and are not shown",
                built.skipped
            ));
        }
        Ok(built.comms)
    }

    fn forget_stop(&mut self) {
        self.cache = Cache::default();
    }

    fn read_queue(&mut self, call: &mut Call<'_>, comm: &Comm, class: OpClass) -> Setup<Self> {
        let layout = Arc::clone(&self.layout);
        let syms = self.symbols()?;
        let t = call.target();
        let cx = &mut *call.cx;
        if let Some(pml) = self.ucx().cloned() {
            return self.read_ucx(cx, &t, &pml, comm, class);
        }
        // Under pml ucx whose UCX cannot be read, unexpected messages are
        // UCX's too: say why, not what ob1 (not even loaded) lacks.
        if let (OpClass::UnexpectedMessages, Some(Err(_))) = (class, &self.ucx) {
            if let Some(why) = self.pml_blind_spot() {
                messages::set_no_information_reason(&why);
            }
            return Ok(None);
        }
        let (built, unlisted) = match class {
            OpClass::PendingSends => (self.sends(cx, &t, &layout, &syms, comm), None),
            OpClass::PendingReceives => (self.receives(cx, &t, &layout, &syms, comm), None),
            OpClass::UnexpectedMessages => match self.unexpected(cx, &t, &layout, &syms, comm) {
                Some((built, unlisted)) => (Some(built), Some(unlisted)),
                None => (None, None),
            },
        };
        let Some((requests, ops, stop)) = built else {
            return Ok(None);
        };
        let mut queue = Queue::new(requests, ops, stop);
        if let Some(unlisted) = unlisted {
            // Messages in transit this DLL cannot read may be there:
            // "cannot tell" for an empty queue, a last line otherwise.
            queue.unseen = unlisted
                .why()
                .map(|why| format!("no unexpected message in ob1's queues, but {why}"));
            queue.partial = unlisted.line();
        } else {
            // Requests this DLL cannot see may be there: "cannot tell",
            // never "empty"; what it does see is said to be partial. A
            // line of extra_text holds 63 characters: the PML's name only
            // (the reason goes with an empty queue).
            queue.unseen = self.pml_blind_spot();
            if queue.unseen.is_some() {
                let name = self.pml.as_ref().map_or("", |p| p.name.as_str());
                queue.partial = Some(format!("queue can be incomplete: PML {name}"));
            }
        }
        Ok(Some(queue))
    }

    fn make(&self, requests: &Vec<Request>, item: Pending, comm: &Comm) -> Made {
        Some(match item {
            Pending::Request { index, order } => {
                let request = requests.get(index as usize)?;
                let dt = self
                    .cache
                    .datatypes
                    .get(&request.datatype)
                    .and_then(Option::as_ref);
                requests::to_operation(request, comm, dt, order.line())
            }
            Pending::Frag(frag) => unexpected::to_operation(&frag, comm, Some(comm.id)),
            Pending::Transit(m) => m.to_operation(comm.peer_global(m.source)),
            Pending::Ucx(op) => op.to_operation(comm, &self.ucx()?.name()),
        })
    }

    /// Read once, from `ompi_proc_local_proc`.
    fn own_name(&mut self, call: &mut Call<'_>) -> Option<ProcName> {
        if self.own_name.is_none() {
            let local = self.symbols?.local_proc?;
            let t = call.target();
            let ptr = t.read_ptr(local).ok().filter(|&p| p != 0)?;
            self.own_name = groups::proc_name(&t, &self.layout, ptr).ok();
        }
        self.own_name
    }

    /// The processes on `ompi_proc_list` that are not in this process's
    /// job.
    fn new_processes(&mut self, call: &mut Call<'_>) -> Option<Vec<ProcessLocation>> {
        let list = self.symbols?.proc_list?;
        let own = self.own_name(call)?;
        Some(groups::other_jobs(
            &call.target(),
            &self.layout,
            list,
            own.jobid,
        ))
    }

    /// ob1 (or the selected PML) adds the new processes through
    /// `add_procs` once they are known, after spawn, connect and accept
    /// (and once in MPI_Init, for COMM_WORLD).
    fn spawn_breakpoint(&self) -> String {
        let pml = self
            .pml
            .as_ref()
            .map(|p| p.name.clone())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .unwrap_or_else(|| "ob1".to_string());
        format!("mca_pml_{pml}_add_procs")
    }
}

/// Whether an operation with `tag` is shown: Open MPI's collectives use
/// negative tags.
fn keep_tag(cx: &Context, tag: i64) -> bool {
    cx.show_internal || !requests::is_internal_tag(tag)
}
