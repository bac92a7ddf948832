//! The Open MPI 4.1 backend (ob1 PML): image checks, per-process state,
//! the communicator list and the three queues.

pub mod communicators;
pub mod groups;
pub mod ob1;
pub mod requests;
pub mod unexpected;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use mqs_abi::{OpClass, PendingOperation, ReturnCode};

use crate::abi;
use crate::access::{ImageAccess, ProcessAccess, TypeSizes};
use crate::cursor::Cursor;
use crate::errors::DllError;
use crate::layout::{Layout, Missing};
use crate::messages;
use crate::target::{ByteOrder, ReadError, Sizes, Target};
use crate::walk::{AddrSet, Stop};

use communicators::{Comm, Signature};
use groups::{NameMap, ProcName, World};
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

pub use crate::messages::Failure;

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
    let v = t.view(t.check_ptr(addr, 4, 160).ok()?, 160).ok()?;
    let project = v.chars(12, 16).ok()?;
    let kind = v.chars(40, 32).ok()?;
    if kind != "pml" {
        return None;
    }
    let name = v.chars(84, 64).ok()?;
    let version = (project == "ompi").then(|| {
        (
            v.i32(28).unwrap_or(0),
            v.i32(32).unwrap_or(0),
            v.i32(36).unwrap_or(0),
        )
    });
    Some(PmlInfo { name, version })
}

/// One operation of a queue as read, made into a [`PendingOperation`] only
/// when the debugger takes it: a queue of 100,000 is then never held twice,
/// as read and as made.
#[derive(Debug)]
pub enum Pending {
    /// The request at this index of the queue's [`Operations::requests`].
    Request {
        index: u32,
        order: Order,
    },
    Frag(unexpected::Frag),
}

/// The line that says how a request's queue is ordered.
#[derive(Debug, Clone, Copy)]
pub enum Order {
    None,
    /// The `number`th in ob1's matching order, from the ANY_SOURCE queue
    /// (`wild`) or a peer's.
    Posted {
        number: usize,
        wild: bool,
    },
    Text(&'static str),
}

/// The current queue's operations not yet taken, and a note for the last
/// (why the list was cut).
#[derive(Debug)]
pub struct Operations {
    /// The requests the items name, each decoded once.
    requests: Vec<Request>,
    items: VecDeque<Pending>,
    last_note: Option<String>,
}

/// A queue as read at setup: its requests and its items in order, and why
/// it was cut.
type Built = (Vec<Request>, Vec<Pending>, Option<Stop>);

/// Per-call caches, valid while the process stays stopped: dropped when the
/// communicator list is updated or its iterator set up again.
#[derive(Debug, Default)]
pub struct Cache {
    pub sends: Option<Scan>,
    pub recvs: Option<Scan>,
    pub datatypes: DatatypeCache,
}

/// What the DLL keeps per process.
#[derive(Debug)]
pub struct ProcessState {
    /// The debugger's process table, kept since `mqs_setup_process`.
    pub table: *const abi::mqs_process_callbacks,
    pub layout: Option<Arc<Layout>>,
    pub sizes: Sizes,
    pub order: ByteOrder,
    pub symbols: Option<Symbols>,
    pub pml: Option<PmlInfo>,
    /// This process's Open MPI name (jobid, vpid).
    pub own_name: Option<ProcName>,
    pub signature: Option<Signature>,
    /// The MPI-2 identities the list was built with (they change ranks).
    names_built: Option<Vec<(ProcName, i64)>>,
    pub comms: Vec<Comm>,
    pub world: World,
    /// Index of the current communicator in `comms`.
    pub current: Cursor,
    pub ops: Option<Operations>,
    pub cache: Cache,
    /// MPI-2: the identity the debugger gave this process.
    pub identity: Option<i32>,
    /// Show operations with negative (internal) tags (MQS_SHOW_INTERNAL=1).
    pub show_internal: bool,
    /// Lines for the debugger's dprints, drained by the exports.
    pub dprints: Vec<String>,
    said: HashSet<&'static str>,
    /// What `check` found (MPI version, PML, debug info), for the version
    /// string.
    detected: Option<String>,
    #[cfg(feature = "mpi2")]
    pub new_processes: Option<VecDeque<mqs_abi::ProcessLocation>>,
}

impl ProcessState {
    pub fn new(
        table: *const abi::mqs_process_callbacks,
        layout: Option<Arc<Layout>>,
        sizes: Sizes,
        order: ByteOrder,
    ) -> Self {
        ProcessState {
            table,
            layout,
            sizes,
            order,
            symbols: None,
            pml: None,
            own_name: None,
            signature: None,
            names_built: None,
            comms: Vec::new(),
            world: World::default(),
            current: Cursor::default(),
            ops: None,
            cache: Cache::default(),
            identity: None,
            show_internal: std::env::var_os("MQS_SHOW_INTERNAL").is_some_and(|v| v == "1"),
            dprints: Vec::new(),
            said: HashSet::new(),
            detected: None,
            #[cfg(feature = "mpi2")]
            new_processes: None,
        }
    }

    /// What `check` found, for the version string.
    pub fn detected(&self) -> Option<String> {
        self.detected.clone()
    }

    /// A target for one call.
    pub fn target<'a, P: ProcessAccess + ?Sized>(&self, p: &'a P) -> Target<'a, P> {
        Target::new(p, self.sizes, self.order)
    }

    /// Queues a dprints line once per process.
    fn say_once(&mut self, key: &'static str, line: String) {
        if self.said.insert(key) {
            self.dprints.push(line);
        }
    }

    fn layout(&self) -> Result<Arc<Layout>, DllError> {
        self.layout.clone().ok_or(DllError::ImageHasNoQueues)
    }

    fn symbols(&self) -> Result<Symbols, DllError> {
        self.symbols.ok_or(DllError::ImageHasNoQueues)
    }

    /// `mqs_process_has_queues`: finds the symbols and checks that the
    /// communicator table can be read.
    pub fn check<I: ImageAccess, P: ProcessAccess + ?Sized>(
        &mut self,
        image: &I,
        p: &P,
    ) -> Result<(), Failure> {
        let layout = self.layout().map_err(|code| Failure {
            code,
            message: None,
        })?;
        let mut syms = resolve_symbols(image).map_err(Failure::missing)?;
        let t = self.target(p);
        self.own_name = syms
            .local_proc
            .and_then(|a| t.read_ptr(a).ok())
            .filter(|&p| p != 0)
            .and_then(|p| groups::proc_name(&t, &layout, p).ok());
        self.pml = syms.pml_component.and_then(|a| read_pml(&t, a));
        if self.pml.is_none() {
            syms.ob1_comm_class = image.find_symbol(SYM_OB1_COMM_CLASS);
        }
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
        self.detected = Some(format!("{version}, {pml}, {ob1}"));
        messages::set_detected(&format!("{version}, {pml}, {ob1}"), "openmpi");
        if let Err(m) = &layout.ob1 {
            self.say_once(
                "no-ob1",
                format!(
                    "mqs DLL: ob1's queues have no debug information ({m} missing): unexpected messages are not available and posted receives come from the request free lists. Build Open MPI with -g everywhere to see them."
                ),
            );
        }
        if let Some(pml) = self.pml.as_ref().filter(|p| p.name != "ob1") {
            let line = format!(
                "mqs DLL: the selected PML is {}, not ob1: only the request free lists can be read",
                pml.name
            );
            self.say_once("not-ob1", line);
        }
        Ok(())
    }

    /// Why pending sends and receives can be missing, for a PML other
    /// than ob1: this DLL lists requests from ob1's queues and Open MPI's
    /// base free lists, where other PMLs do not (all) keep theirs.
    fn pml_blind_spot(&self) -> Option<String> {
        let pml = self.pml.as_ref().filter(|p| p.name != "ob1")?;
        Some(match pml.name.as_str() {
            "ucx" => "the selected PML is ucx, which keeps its requests inside UCX, \
                      out of any debugger's sight (run with --mca pml ob1 to see them)"
                .to_owned(),
            "cm" => "the selected PML is cm, which matches in its MTL and keeps its own \
                     request lists: only requests on Open MPI's base free lists are shown"
                .to_owned(),
            other => format!(
                "the selected PML is {other}, not ob1: only requests on Open MPI's base \
                 free lists are shown"
            ),
        })
    }

    fn ob1_selected(&self) -> bool {
        self.pml.as_ref().is_none_or(|p| p.name == "ob1")
    }

    /// `mqs_update_communicator_list`: rebuilds the list when the table's
    /// signature moved; drops per-stop caches either way.
    pub fn update_communicators<P: ProcessAccess + ?Sized>(
        &mut self,
        p: &P,
        names: Option<&NameMap>,
    ) -> Result<(), DllError> {
        let layout = self.layout()?;
        let syms = self.symbols()?;
        self.cache = Cache::default();
        self.ops = None;
        let t = self.target(p);
        let table = communicators::read_table(&t, &layout, syms.communicators)?;
        // With MPI-2, identities given since the last build change ranks
        // without the table changing.
        let names_now = names.map(|n| {
            let mut v: Vec<(ProcName, i64)> = n.iter().map(|(k, v)| (*k, *v)).collect();
            v.sort_unstable();
            v
        });
        if self.signature == Some(table.signature) && self.names_built == names_now {
            return Ok(());
        }
        let built =
            communicators::build(&t, &layout, &table, self.own_name.map(|n| n.jobid), names)?;
        if built.skipped > 0 {
            self.dprints.push(format!(
                "mqs DLL: {} communicator(s) could not be read and are not shown",
                built.skipped
            ));
        }
        self.comms = built.comms;
        self.world = built.world;
        self.signature = Some(table.signature);
        self.names_built = names_now;
        self.current.reset();
        Ok(())
    }

    /// `mqs_setup_communicator_iterator`.
    pub fn setup_communicators(&mut self) -> ReturnCode {
        self.cache = Cache::default();
        self.ops = None;
        self.current.start(self.comms.len())
    }

    /// The current communicator.
    pub fn current_comm(&self) -> Result<&Comm, DllError> {
        self.current.get(&self.comms)
    }

    /// `mqs_next_communicator`. Past the end the iterator stays ended, so a
    /// debugger that calls again gets an error, not a crash.
    pub fn next_communicator(&mut self) -> Result<ReturnCode, DllError> {
        let rc = self.current.advance(self.comms.len())?;
        self.ops = None;
        Ok(rc)
    }

    /// `mqs_setup_operation_iterator`.
    pub fn setup_operations<P: ProcessAccess + ?Sized>(
        &mut self,
        p: &P,
        class: OpClass,
    ) -> Result<ReturnCode, DllError> {
        self.ops = None;
        self.current_comm()?;
        let layout = self.layout()?;
        let syms = self.symbols()?;
        let t = self.target(p);
        // The list is lent out while the queues are read (they need &mut
        // self for the caches), and always put back.
        let comms = std::mem::take(&mut self.comms);
        let built = match self.current.get(&comms).ok() {
            Some(comm) => match class {
                OpClass::PendingSends => self.sends(&t, &layout, &syms, comm),
                OpClass::PendingReceives => self.receives(&t, &layout, &syms, comm),
                OpClass::UnexpectedMessages => self.unexpected(&t, &layout, &syms, comm),
            },
            None => None,
        };
        self.comms = comms;
        let Some((requests, ops, stop)) = built else {
            return Ok(ReturnCode::NoInformation);
        };
        if let (Some(stop), true) = (stop, ops.is_empty()) {
            return Err(stop_error(stop));
        }
        let mut last_note = stop.map(|s| s.note());
        if class != OpClass::UnexpectedMessages {
            if let Some(why) = self.pml_blind_spot() {
                // Requests this DLL cannot see may be there: "cannot tell",
                // never "empty"; what it does see is said to be partial.
                if ops.is_empty() {
                    crate::messages::set_no_information_reason(&why);
                    return Ok(ReturnCode::NoInformation);
                }
                // A line of extra_text holds 63 characters: the PML's name
                // only (the reason goes with an empty queue).
                let name = self.pml.as_ref().map_or("", |p| p.name.as_str());
                last_note.get_or_insert_with(|| format!("queue can be incomplete: PML {name}"));
            }
        }
        // An empty queue is mqs_ok too, and mqs_next_operation ends it at
        // once: the interface allows mqs_end_of_list here, but debuggers
        // (padb) count anything but mqs_ok and mqs_no_information as a
        // failure, and the MPIs' own DLLs never answer it.
        self.ops = Some(Operations {
            requests,
            items: ops.into(),
            last_note,
        });
        Ok(ReturnCode::Ok)
    }

    /// `mqs_next_operation`: the next operation, made now from what was
    /// read at setup (nothing is read here).
    pub fn next_operation(&mut self) -> Result<Option<PendingOperation>, DllError> {
        let ops = self.ops.as_mut().ok_or(DllError::NoOperationIterator)?;
        let Some(item) = ops.items.pop_front() else {
            return Ok(None);
        };
        let last_note = if ops.items.is_empty() {
            ops.last_note.take()
        } else {
            None
        };
        let ops = self.ops.as_ref().ok_or(DllError::NoOperationIterator)?;
        let comm = self.current.get(&self.comms)?;
        let mut op = match item {
            Pending::Request { index, order } => {
                let request = ops
                    .requests
                    .get(index as usize)
                    .ok_or(DllError::NoOperationIterator)?;
                let dt = self
                    .cache
                    .datatypes
                    .get(&request.datatype)
                    .and_then(Option::as_ref);
                let order = match order {
                    Order::None => None,
                    Order::Posted { number, wild } => {
                        let queue = if wild {
                            "ANY_SOURCE queue"
                        } else {
                            "peer queue"
                        };
                        Some(format!("posted #{number} in ob1 matching order ({queue})"))
                    }
                    Order::Text(text) => Some(text.to_string()),
                };
                requests::to_operation(request, comm, dt, order)
            }
            Pending::Frag(frag) => unexpected::to_operation(&frag, comm, Some(comm.id)),
        };
        if let Some(note) = last_note {
            add_note(&mut op, note);
        }
        Ok(Some(op))
    }

    fn keep_tag(&self, tag: i64) -> bool {
        self.show_internal || !requests::is_internal_tag(tag)
    }

    /// Takes the live requests of `comm` out of one of the request free
    /// lists' scans (made once per stop and shared by every communicator),
    /// with the scan's stop. Taken, they are held once, by the queue they
    /// are shown in; a communicator asked for again in the same stop gets a
    /// new scan.
    fn take_requests<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        fl: u64,
        sends: bool,
        comm: &Comm,
    ) -> (Vec<Request>, Option<Stop>) {
        let slot = if sends {
            &mut self.cache.sends
        } else {
            &mut self.cache.recvs
        };
        if slot
            .as_ref()
            .is_some_and(|s| s.by_comm.was_taken(comm.addr))
        {
            *slot = None;
        }
        let scan = slot.get_or_insert_with(|| requests::scan_free_list(t, layout, fl));
        (scan.by_comm.take(comm.addr), scan.stop)
    }

    /// The request at `index` of `requests` as an item to be made into an
    /// operation when taken, its datatype read now (once per datatype).
    fn item<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        requests: &[Request],
        index: u32,
        order: Order,
    ) -> Pending {
        if let Some(r) = requests.get(index as usize) {
            requests::read_datatype(t, layout, &mut self.cache.datatypes, r.datatype);
        }
        Pending::Request { index, order }
    }

    fn sends<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let fl = syms.send_requests?;
        let (mut reqs, stop) = self.take_requests(t, layout, fl, true, comm);
        reqs.retain(|r| r.kind == requests::Kind::Send && self.keep_tag(r.tag));
        // ob1 numbers sends per peer as they start: the closest thing to
        // the order they were issued.
        reqs.sort_by_key(|r| (r.sequence.unwrap_or(u64::MAX), r.peer, r.addr));
        let ops = (0..reqs.len() as u32)
            .map(|i| self.item(t, layout, &reqs, i, Order::None))
            .collect();
        Some((reqs, ops, stop))
    }

    fn receives<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let ob1_comm = if self.ob1_selected() {
            ob1::read_comm(t, layout, comm, syms.ob1_comm_class)
        } else {
            Err(ob1::NotUsable::NotOb1)
        };
        // The free list holds every receive, including those already
        // matched (and so gone from ob1's queues) and not yet completed or
        // freed. Scanned first, its requests are what the walk of the
        // queues finds, decoded already.
        let (mut reqs, scan_stop) = match syms.recv_requests {
            Some(fl) => self.take_requests(t, layout, fl, false, comm),
            None => (Vec::new(), None),
        };
        let scanned = reqs.len();
        let mut stop = None;
        let posted = match (&ob1_comm, &layout.ob1) {
            (Ok(oc), Ok(ob1l)) => {
                let known: ob1::Known = reqs
                    .iter()
                    .zip(0u32..)
                    .filter_map(|(r, i)| Some((r.addr, (r.link?, i))))
                    .collect();
                let (posted, s) = ob1::posted(t, layout, ob1l, oc, &known, &mut reqs);
                stop = s;
                Some(posted)
            }
            _ => None,
        };
        let from_queues = posted.is_some();
        if let Err(ob1::NotUsable::Read(e)) = ob1_comm {
            stop = Some(read_stop(e));
        }
        let mut shown = vec![false; reqs.len()];
        // A scanned request the walk read again (its link was unreadable
        // in the scan) is shown once, as posted.
        let read_again: AddrSet = reqs[scanned.min(reqs.len())..]
            .iter()
            .map(|r| r.addr)
            .collect();
        let mut ops = Vec::with_capacity(reqs.len());
        let mut k = 0;
        for p in posted.into_iter().flatten() {
            shown[p.index as usize] = true;
            if !self.keep_tag(reqs[p.index as usize].tag) {
                continue;
            }
            k += 1;
            let order = Order::Posted {
                number: k,
                wild: p.wild,
            };
            ops.push(self.item(t, layout, &reqs, p.index, order));
        }
        if syms.recv_requests.is_none() {
            return from_queues.then_some((reqs, ops, stop));
        }
        stop = stop.or(scan_stop);
        let mut rest: Vec<u32> = (0u32..)
            .zip(&reqs)
            .filter(|&(i, r)| {
                !shown[i as usize]
                    && !read_again.contains(&r.addr)
                    && r.kind.is_receive()
                    && self.keep_tag(r.tag)
            })
            .map(|(i, _)| i)
            .collect();
        // ob1 numbers receives as they are posted; a PML that does not (all
        // equal) leaves allocation order.
        let sequence = |i: &u32| reqs[*i as usize].sequence;
        let distinct = rest.iter().filter_map(sequence).collect::<AddrSet>().len();
        let sequenced =
            rest.iter().all(|i| sequence(i).is_some()) && (rest.len() <= 1 || distinct > 1);
        if sequenced {
            rest.sort_by_key(|i| sequence(i).unwrap_or(u64::MAX));
        }
        let order = Order::Text(if from_queues {
            "not in ob1's posted queues (matched or probing)"
        } else if sequenced {
            "order: by posting sequence (no ob1 queue info)"
        } else {
            "order: allocation order (free list), not matching"
        });
        for i in rest {
            ops.push(self.item(t, layout, &reqs, i, order));
        }
        Some((reqs, ops, stop))
    }

    fn unexpected<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let ob1l = match &layout.ob1 {
            Ok(l) => l,
            Err(m) => {
                crate::messages::set_no_information_reason(&format!(
                    "ob1 has no debug information ({m} missing): build Open MPI with -g to see unexpected messages"
                ));
                let line = format!(
                    "mqs DLL: unexpected messages not available: ob1 has no debug information ({m} missing)"
                );
                // Said once per process, with the other consequences.
                self.say_once("no-ob1", line);
                return None;
            }
        };
        if !self.ob1_selected() {
            crate::messages::set_no_information_reason(
                "the selected PML is not ob1: only ob1's unexpected messages can be read",
            );
            return None;
        }
        let oc = match ob1::read_comm(t, layout, comm, syms.ob1_comm_class) {
            Ok(oc) => oc,
            Err(ob1::NotUsable::Read(e)) => {
                return Some((Vec::new(), Vec::new(), Some(read_stop(e))))
            }
            // No PML data on this communicator: it never communicated.
            Err(_) => return Some((Vec::new(), Vec::new(), None)),
        };
        let (frags, stop) = unexpected::frags(t, layout, ob1l, &oc);
        let ops = frags
            .into_iter()
            .filter(|f| self.keep_tag(f.tag))
            .map(Pending::Frag)
            .collect();
        Some((Vec::new(), ops, stop))
    }

    /// The global ranks of the current communicator's local group, as
    /// `mqs_get_comm_group` writes them (exactly `size` entries).
    pub fn comm_group(&self) -> Result<Vec<i32>, DllError> {
        let comm = self.current_comm()?;
        Ok(comm
            .local_ranks
            .iter()
            .map(|&r| i32::try_from(r).unwrap_or(-1))
            .collect())
    }

    /// This process's Open MPI name, read now if not yet known.
    pub fn own_name<P: ProcessAccess + ?Sized>(&mut self, p: &P) -> Option<ProcName> {
        if self.own_name.is_none() {
            let layout = self.layout.clone()?;
            let local = self.symbols?.local_proc?;
            let t = self.target(p);
            let ptr = t.read_ptr(local).ok().filter(|&p| p != 0)?;
            self.own_name = groups::proc_name(&t, &layout, ptr).ok();
        }
        self.own_name
    }
}

fn read_stop(e: ReadError) -> Stop {
    match e {
        ReadError::Budget => Stop::Budget,
        ReadError::Unreadable(a) => Stop::Unreadable(a),
        ReadError::Misaligned(a) => Stop::BadPointer(a),
        ReadError::Null => Stop::BadPointer(0),
        ReadError::OutOfRange => Stop::Corrupt,
    }
}

fn stop_error(stop: Stop) -> DllError {
    match stop {
        Stop::Budget | Stop::Limit(_) => DllError::LimitReached,
        Stop::Unreadable(_) => DllError::ReadFailed,
        Stop::Cycle(_) | Stop::BadPointer(_) | Stop::Corrupt => DllError::Corrupt,
    }
}

/// Adds a line to an operation's extra text; the fifth line is replaced if
/// all are used (the note matters more than detail).
pub fn add_note(op: &mut PendingOperation, note: String) {
    if op.extra_text.len() >= 5 {
        op.extra_text.truncate(4);
    }
    op.extra_text.push(&note);
}
