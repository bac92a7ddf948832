//! The Open MPI backend (4.1 and 5.0, ob1 PML): image checks, the
//! communicator table and the three queues, answering the iteration
//! [`crate::iteration`] keeps.

pub mod communicators;
pub mod groups;
pub mod layout;
pub mod lists;
pub mod ob1;
pub mod pml_ucx;
pub mod requests;
pub mod sm;
pub mod unexpected;

use std::sync::Arc;

use mqs_abi::{OpClass, ProcessLocation};

use crate::access::{ImageAccess, ProcessAccess, TypeSizes};
use crate::errors::DllError;
use crate::iteration::{Call, CommInfo, Context, Listed, Made, MpiBackend, Queue, QueueOf, Setup};
use crate::messages::{self, Failure};
use crate::names::ProcName;
use crate::target::{ByteOrder, ReadError, Sizes, Target};
use crate::transit::{self, Message};
use crate::types::Missing;
use crate::walk::{AddrSet, Stop};

use communicators::{Comm, Signature, Table};
use layout::{Layout, Ob1Layout};
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

/// The transport reader's symbols, for an image whose layout has ob1's
/// types: the BTLs in use always, the shared-memory BTL's only where its
/// types are there too.
pub fn resolve_sm_symbols<I: ImageAccess>(image: &I, layout: &Layout) -> sm::SmSymbols {
    if layout.ob1.is_err() {
        return sm::SmSymbols::default();
    }
    let btls = image.find_symbol(sm::SYM_BTLS);
    match &layout.sm {
        Ok(l) => sm::SmSymbols {
            component: image.find_symbol(l.symbol),
            process_info: l
                .num_local_peers
                .and_then(|_| image.find_symbol(sm::SYM_PROCESS_INFO)),
            btls,
        },
        Err(_) => sm::SmSymbols {
            btls,
            ..sm::SmSymbols::default()
        },
    }
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
        order: Order,
    },
    Frag(unexpected::Frag),
    /// A message waiting in the transport.
    Transit(Message),
    /// A receive or message read from UCX's worker (pml ucx).
    Ucx(pml_ucx::Op),
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
    /// What waits in the transports, read once per stop.
    pub transit: Option<Transit>,
    /// pml ucx: the worker's queues, read once per stop.
    pub ucx: Option<pml_ucx::Scan>,
}

/// What waits in the transports, as read in this stop: messages by
/// context, or by the 128-bit communicator ids Open MPI 5's CID headers
/// name ([`sm::CID_KEY`] plus the index into `cids`).
#[derive(Debug, Default)]
pub struct Transit {
    pub scan: transit::Scan,
    pub cids: Vec<sm::Cid>,
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

    /// A queue of `comm` under pml ucx, from the worker read once per
    /// stop (again when a communicator is asked for twice).
    fn read_ucx<P: ProcessAccess + ?Sized>(
        &mut self,
        cx: &Context,
        t: &Target<'_, P>,
        pml: &pml_ucx::PmlUcx,
        comm: &Comm,
        class: OpClass,
    ) -> Setup<Self> {
        let ucx = pml.name();
        let context = pml.context.of(comm);
        let slot = &mut self.cache.ucx;
        if slot.as_ref().is_some_and(|s| match class {
            OpClass::PendingSends => s.sends.was_taken(context),
            OpClass::PendingReceives => s.posted.was_taken(context),
            OpClass::UnexpectedMessages => s.unexpected.was_taken(context),
        }) {
            *slot = None;
        }
        let layout = &self.layout;
        let scan = slot.get_or_insert_with(|| pml_ucx::scan(t, pml, layout));
        if let Some(why) = &scan.no_worker {
            messages::set_no_information_reason(&format!("pml ucx ({ucx}): {why}"));
            return Ok(None);
        }
        let posted = match class {
            OpClass::PendingSends => {
                let ops = scan.sends.take(context);
                let (stop, new_protocols) = (scan.sends_stop, scan.new_protocols);
                return Ok(Some(ucx_send_queue(
                    cx,
                    t,
                    layout,
                    pml,
                    comm,
                    (ops, stop, new_protocols),
                )));
            }
            OpClass::PendingReceives => true,
            OpClass::UnexpectedMessages => false,
        };
        let (ops, stop) = if posted {
            // Receives in UCX's order, then the messages matched probes
            // took (matched already, as ob1's DLL view shows them).
            let mut ops = scan.posted.take(context);
            ops.extend(scan.probed.take(comm.addr));
            (ops, scan.posted_stop)
        } else {
            (scan.unexpected.take(context), scan.unexpected_stop)
        };
        let mut queue = ucx_queue(cx, ops, stop);
        if let (true, Some((counted, read))) = (posted, scan.disagrees) {
            queue.unseen = Some(format!(
                "pml ucx ({ucx}): the worker counts {counted} posted receives, the walk found {read}"
            ));
            queue.partial = Some(format!("UCX counts {counted} posted receives, {read} read"));
        }
        Ok(Some(queue))
    }

    fn ob1_selected(&self) -> bool {
        self.pml.as_ref().is_none_or(|p| p.name == "ob1")
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
        cx: &Context,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let fl = syms.send_requests?;
        let (mut reqs, stop) = self.take_requests(t, layout, fl, true, comm);
        reqs.retain(|r| r.kind == requests::Kind::Send && keep_tag(cx, r.tag));
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
        cx: &Context,
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
            if !keep_tag(cx, reqs[p.index as usize].tag) {
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
                    && keep_tag(cx, r.tag)
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
        cx: &mut Context,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<(Built, transit::Unlisted)> {
        let ob1l = match &layout.ob1 {
            Ok(l) => l,
            Err(m) => {
                let btl = layout::btl_name(layout.comm.index.is_some());
                messages::set_no_information_reason(&format!(
                    "ob1 has no debug information ({m} missing): build Open MPI with -g to see unexpected messages ({} either)",
                    transit::not_listed(btl)
                ));
                let line = format!(
                    "mqs DLL: unexpected messages not available: ob1 has no debug information ({m} missing)"
                );
                // Said once per process, with the other consequences.
                cx.say_once("no-ob1", line);
                return None;
            }
        };
        if !self.ob1_selected() {
            messages::set_no_information_reason(
                "the selected PML is not ob1: only ob1's unexpected messages can be read",
            );
            return None;
        }
        let (frags, stop) = match ob1::read_comm(t, layout, comm, syms.ob1_comm_class) {
            Ok(oc) => unexpected::frags(t, layout, ob1l, &oc),
            Err(ob1::NotUsable::Read(e)) => (Vec::new(), Some(read_stop(e))),
            // No PML data on this communicator: it never communicated.
            Err(_) => (Vec::new(), None),
        };
        let mut ops: Vec<Pending> = frags
            .into_iter()
            .filter(|f| keep_tag(cx, f.tag))
            .map(Pending::Frag)
            .collect();
        // What waits in the transport comes after what ob1 holds: the
        // progress engine hands it to ob1 after those.
        let (waiting, cut, unlisted) = self.transit(t, layout, ob1l, syms, comm);
        ops.extend(
            waiting
                .into_iter()
                .filter(|m| keep_tag(cx, m.tag))
                .map(Pending::Transit),
        );
        Some(((Vec::new(), ops, stop.or(cut)), unlisted))
    }

    /// The messages in transit to `comm` (read once per stop, each
    /// communicator's taken out once), why the walk of the transport ended
    /// early, and what could not be read.
    fn transit<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        ob1: &Ob1Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> (Vec<Message>, Option<Stop>, transit::Unlisted) {
        let slot = &mut self.cache.transit;
        if slot
            .as_ref()
            .is_some_and(|tr| tr.scan.by_key.was_taken(comm.id))
        {
            *slot = None;
        }
        let tr = slot.get_or_insert_with(|| read_transit(t, layout, ob1, syms));
        let mut found = tr.scan.by_key.take(comm.id);
        let cid = comm
            .extended_id
            .and_then(|id| tr.cids.iter().position(|&c| c == id));
        if let Some(i) = cid {
            found.extend(tr.scan.by_key.take(sm::CID_KEY + i as u64));
            found.sort_by_key(|m| m.order);
        }
        (found, tr.scan.stop, tr.scan.unlisted.clone())
    }
}

/// Reads what waits in the process's transports: the shared-memory BTL
/// when it is in use and its types are there; every other BTL in use
/// (but `self`, which hands a message over at once) is said not listed.
fn read_transit<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    ob1: &Ob1Layout,
    syms: &Symbols,
) -> Transit {
    let shared = layout::btl_name(layout.comm.index.is_some());
    let mut unlisted = transit::Unlisted::default();
    let btls = syms.sm.btls.and_then(|l| sm::btls_in_use(t, layout, l));
    let Some(btls) = btls else {
        unlisted.add("messages in transit not listed: the BTLs in use are unknown");
        return Transit {
            scan: transit::Scan {
                unlisted,
                ..transit::Scan::default()
            },
            cids: Vec::new(),
        };
    };
    for btl in btls.iter().filter(|b| *b != "self" && *b != shared) {
        unlisted.add(transit::not_listed(btl));
    }
    let mut out = Transit::default();
    if btls.iter().any(|b| b == shared) {
        match &layout.sm {
            Ok(l) => {
                let (scan, cids) = sm::scan(t, l, ob1, ob1.cid, &syms.sm);
                out = Transit { scan, cids };
            }
            Err(m) => unlisted.add(format!(
                "{} (no debug information: {m} missing)",
                transit::not_listed(shared)
            )),
        }
    }
    out.scan.unlisted.merge(&unlisted);
    out
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
        syms.sm = resolve_sm_symbols(image, &layout);
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

/// `comm`'s sends in UCX's request pool as taken out of this stop's scan
/// (with why its walk ended early, and whether UCX runs its new
/// protocols), their destinations found from their endpoints; what the
/// pool cannot hold said for an empty queue, and as the last line
/// otherwise.
fn ucx_send_queue<P: ProcessAccess + ?Sized>(
    cx: &Context,
    t: &Target<'_, P>,
    layout: &Layout,
    pml: &pml_ucx::PmlUcx,
    comm: &Comm,
    (mut ops, stop, new_protocols): (Vec<pml_ucx::Op>, Option<Stop>, bool),
) -> QueueOf<OpenMpi> {
    let ucx = pml.name();
    let why = match &pml.sends {
        Err(m) => format!("{ucx}'s request pool cannot be read ({m} missing)"),
        Ok(_) if new_protocols => format!(
            "{ucx} runs its new protocols (UCX_PROTO_ENABLE), whose requests \
             mark no tag send"
        ),
        Ok(_) => pml_ucx::SENDS_WHY.to_string(),
    };
    if let Ok(r) = &pml.sends {
        pml_ucx::peers(t, layout, &r.endpoints, comm, &mut ops);
    }
    let mut queue = ucx_queue(cx, ops, stop);
    queue.unseen = Some(format!(
        "pml ucx ({ucx}): {}: {why}",
        pml_ucx::SENDS_NOT_LISTED
    ));
    queue.partial = Some(pml_ucx::SENDS_NOT_LISTED.to_string());
    queue
}

/// A queue of UCX's operations, Open MPI's internal ones left out unless
/// asked for.
fn ucx_queue(cx: &Context, ops: Vec<pml_ucx::Op>, stop: Option<Stop>) -> QueueOf<OpenMpi> {
    let items = ops
        .into_iter()
        .filter(|op| op.tag().is_none_or(|tag| keep_tag(cx, tag)))
        .map(Pending::Ucx)
        .collect();
    Queue::new(Vec::new(), items, stop)
}

/// Whether an operation with `tag` is shown: Open MPI's collectives use
/// negative tags.
fn keep_tag(cx: &Context, tag: i64) -> bool {
    cx.show_internal || !requests::is_internal_tag(tag)
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
