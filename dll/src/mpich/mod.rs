//! The MPICH backend (4.0 ch3 and ch4, 4.1+ debugger queues): image
//! checks, per-process state, the communicator list and the three queues.
//!
//! Better than MPICH's own `libtvmpich.so`: lengths in bytes (the
//! datatype's size from its object, derived types included) and the
//! datatype's name; the actual length and source of unexpected messages;
//! global ranks through the communicator's group (or the device's rank
//! map); context ids at their full width; the communicators MPICH makes
//! for itself (node subcommunicators, its copy of the world) hidden unless
//! `MQS_SHOW_INTERNAL=1`; sends in the order they were started; and a list
//! kept whole when a communicator disappears while it is read.

pub mod communicators;
pub mod datatypes;
pub mod layout;
pub mod nemesis;
pub mod objects;
pub mod requests;
pub mod ucx;

#[cfg(test)]
mod cart_tests;
#[cfg(test)]
mod debugq_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod test_image;

use std::sync::Arc;

use mqs_abi::{OpClass, PendingOperation, ProcessLocation};

use crate::access::{ImageAccess, ProcessAccess, TypeSizes};
use crate::by_key::PerStop;
use crate::errors::DllError;
use crate::iteration::{Call, CommInfo, Listed, Made, MpiBackend, Queue, QueueOf, Setup};
use crate::messages::{self, Failure};
use crate::names::ProcName;
use crate::target::{ByteOrder, ReadError, Sizes, Target};
use crate::transit;
use crate::types::Missing;
use crate::walk::Stop;

use communicators::{Comm, ListHead, PoolSymbols, OWN_JOB};
use layout::{Device, Layout, Queues, RequestDevice};
use requests::{Class, Found, OpContext, Scan};

/// The communicator list (`MPIR_Comm_list`): its presence is what makes an
/// image MPICH with debugger support.
pub const SYM_ALL_COMMUNICATORS: &str = "MPIR_All_communicators";
/// Without debugger support: the communicator objects themselves, the
/// builtin ones and their allocator.
pub const SYM_COMM_BUILTIN: &str = "MPIR_Comm_builtin";
pub const SYM_COMM_MEM: &str = "MPIR_Comm_mem";
/// `MQS_MPICH_COMMS=pool` in the debugger's environment reads an MPICH
/// built with debugger support as one built without: communicators from
/// the pools, ch4's queues from `MPIDI_global` (a cross-check of both
/// ways on the same process).
pub const ENV_COMMS: &str = "MQS_MPICH_COMMS";
/// 4.0: pointers to the device's queue heads.
pub const SYM_POSTED: &str = "MPID_Recvq_posted_head_ptr";
pub const SYM_UNEXPECTED: &str = "MPID_Recvq_unexpected_head_ptr";
/// The debugger's send queue (4.0 `MPIR_Sendq`, 4.1+ `MPIR_Debugq`).
pub const SYM_SENDQ: &str = "MPIR_Sendq_head";
/// 4.1+: the debugger's receive queues (the first declared with the
/// layout, which asks for it; so is ch4's `MPIDI_global`).
pub use layout::{SYM_CH4_GLOBAL, SYM_RECVQ};
pub const SYM_UNEXPQ: &str = "MPIR_Unexpq_head";
/// Datatype objects.
pub const SYM_DT_BUILTIN: &str = "MPIR_Datatype_builtin";
pub const SYM_DT_DIRECT: &str = "MPIR_Datatype_direct";
pub const SYM_DT_MEM: &str = "MPIR_Datatype_mem";
/// What MPICH says of itself.
pub const SYM_VERSION: &str = "MPII_Version_string";
pub const SYM_DEVICE: &str = "MPII_Version_device";
/// ch4: how it matches.
pub const SYM_CVAR_TAGGED: &str = "MPIR_CVAR_CH4_OFI_ENABLE_TAGGED";
pub const SYM_CVAR_VCIS: &str = "MPIR_CVAR_CH4_NUM_VCIS";
/// In the file whose types the DLL reads (`dbginit.c`): asking for it makes
/// lazy debuggers load them.
pub const FN_WAIT_FOR_DEBUGGER: &str = "MPII_Wait_for_debugger";

/// Whether an image is MPICH with the debug info we need.
pub fn check_image<I: ImageAccess>(image: &I) -> Result<Layout, Failure> {
    let _ = image.find_function(FN_WAIT_FOR_DEBUGGER);
    Layout::resolve(image).map_err(|m| Failure {
        code: m.error(),
        message: Some(messages::mpich_missing_message(m)),
    })
}

/// The basic sizes of a process (the debugger's) and its byte order.
pub fn process_sizes<P: ProcessAccess + ?Sized>(
    p: &P,
    debugger: Option<TypeSizes>,
) -> Result<(Sizes, ByteOrder), DllError> {
    let sizes = match debugger {
        Some(ts) => Sizes::from_debugger(ts)?,
        None => Sizes::LP64,
    };
    Ok((sizes, ByteOrder::probe(p)))
}

/// Where the communicators are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommSource {
    /// `&MPIR_All_communicators` (debugger support).
    List(u64),
    /// The object pools (no debugger support).
    Pool(PoolSymbols),
}

impl Default for CommSource {
    fn default() -> Self {
        CommSource::List(0)
    }
}

/// Where a device queue's head is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// The address of a pointer to the head (`MPID_Recvq_*_head_ptr`).
    Pointer(u64),
    /// The address of the head itself (`MPIDI_global.per_vci[0]`'s lists).
    At(u64),
}

impl Head {
    /// The address of the head.
    fn address<P: ProcessAccess + ?Sized>(self, t: &Target<'_, P>) -> Option<u64> {
        match self {
            Head::Pointer(p) => t.read_ptr(p).ok(),
            Head::At(a) => Some(a),
        }
    }
}

/// Addresses of the symbols, per process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Symbols {
    pub comms: CommSource,
    pub posted: Option<Head>,
    pub unexpected: Option<Head>,
    pub sendq: Option<u64>,
    pub recvq: Option<u64>,
    pub unexpq: Option<u64>,
    pub dt_builtin: Option<u64>,
    pub dt_direct: Option<u64>,
    pub dt_mem: Option<u64>,
    /// `&MPIR_Topology_keyval`, where the symbol table has it and the
    /// types say where a topology is.
    pub topo_keyval: Option<u64>,
}

fn resolve_symbols<I: ImageAccess>(image: &I, layout: &Layout) -> Result<Symbols, Failure> {
    // The list when MPICH keeps it (debugger support), else the objects.
    let forced = std::env::var_os(ENV_COMMS).is_some_and(|v| v == "pool");
    let list = layout
        .comm_list
        .filter(|_| !(forced && layout.comm_pool.is_some()))
        .and_then(|_| image.find_symbol(SYM_ALL_COMMUNICATORS));
    let comms = match (list, layout.comm_pool) {
        (Some(a), _) => CommSource::List(a),
        (None, Some(_)) => CommSource::Pool(PoolSymbols {
            builtin: image
                .find_symbol(SYM_COMM_BUILTIN)
                .ok_or(layout_missing_symbol(SYM_COMM_BUILTIN))?,
            mem: image
                .find_symbol(SYM_COMM_MEM)
                .ok_or(layout_missing_symbol(SYM_COMM_MEM))?,
        }),
        (None, None) => return Err(layout_missing_symbol(SYM_ALL_COMMUNICATORS)),
    };
    // ch4 without debugger support: VCI 0's active-message lists in
    // `MPIDI_global`, where the debugger's pointers would point.
    let vci0 = || {
        let (posted, unexp) = layout.ch4.vci0_heads?;
        let g = image.find_symbol(SYM_CH4_GLOBAL)?;
        Some((Head::At(g + posted), Head::At(g + unexp)))
    };
    let (posted, unexpected, recvq, unexpq) = match layout.queues {
        Queues::Device => match image
            .find_symbol(SYM_POSTED)
            .filter(|_| !(forced && vci0().is_some()))
        {
            Some(p) => (
                Some(Head::Pointer(p)),
                image.find_symbol(SYM_UNEXPECTED).map(Head::Pointer),
                None,
                None,
            ),
            None => {
                let (p, u) = vci0()
                    .filter(|_| matches!(comms, CommSource::Pool(_)))
                    .ok_or(layout_missing_symbol(SYM_POSTED))?;
                (Some(p), Some(u), None, None)
            }
        },
        Queues::Debugq => (
            None,
            None,
            Some(
                image
                    .find_symbol(SYM_RECVQ)
                    .ok_or(layout_missing_symbol(SYM_RECVQ))?,
            ),
            image.find_symbol(SYM_UNEXPQ),
        ),
    };
    let datatypes = layout.datatype.is_some();
    Ok(Symbols {
        comms,
        posted,
        unexpected,
        sendq: layout.sends.and_then(|_| image.find_symbol(SYM_SENDQ)),
        recvq,
        unexpq,
        dt_builtin: datatypes
            .then(|| image.find_symbol(SYM_DT_BUILTIN))
            .flatten(),
        dt_direct: datatypes
            .then(|| image.find_symbol(SYM_DT_DIRECT))
            .flatten(),
        dt_mem: (datatypes && layout.alloc.is_some())
            .then(|| image.find_symbol(SYM_DT_MEM))
            .flatten(),
        topo_keyval: image.find_symbol(layout::SYM_TOPO_KEYVAL),
    })
}

fn layout_missing_symbol(s: &'static str) -> Failure {
    Failure {
        code: DllError::MissingSymbol,
        message: Some(messages::mpich_missing_message(Missing::Symbol(s))),
    }
}

/// Per-stop caches: dropped when the list is updated or its iterator set
/// up again.
#[derive(Debug, Default)]
struct Cache {
    /// The queues' scans, by context id.
    sends: PerStop<Scan>,
    posted: PerStop<Scan>,
    unexpected: PerStop<Scan>,
    datatypes: datatypes::Cache,
    /// What waits in the transport.
    transit: PerStop<transit::Scan>,
    /// ch4:ucx: the workers' queues.
    ucx: PerStop<ucx::Scan>,
}

/// One communicator's entries of a device queue, taken out of the stop's
/// scan.
#[derive(Debug)]
struct DeviceQueue {
    /// Each entry, with whether it is on the collective context.
    entries: Vec<(Found, bool)>,
    /// Why the walk of the queue ended early.
    stop: Option<Stop>,
}

/// How messages in transit are found in a process.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Transport {
    /// ch3:nemesis of MPICH 4.0: its fast boxes and receive queue.
    Nemesis(nemesis::NemesisSymbols),
    /// Not read: why.
    NotListed(String),
    /// ch4:ucx: what UCX holds is read from its workers (the unexpected
    /// messages among it); nothing else is a transport of its own.
    Ucx,
}

impl Cache {
    /// The scan of one queue.
    fn queue(&mut self, class: Class) -> &mut PerStop<Scan> {
        match class {
            Class::Send => &mut self.sends,
            Class::Posted => &mut self.posted,
            Class::Unexpected => &mut self.unexpected,
        }
    }
}

/// What the MPICH backend keeps per process.
#[derive(Debug)]
pub struct Mpich {
    layout: Arc<Layout>,
    symbols: Option<Symbols>,
    /// ch4: why the receive queues can be incomplete (None: complete).
    incomplete: Option<String>,
    /// ch4:ucx: what reading UCX's workers needs, or why it cannot be
    /// read (None: not the ucx netmod).
    ucx: Option<Result<ucx::Netmod, String>>,
    cache: Cache,
    /// MPI_COMM_WORLD's size and this process's rank in it.
    world: Option<(u64, i64)>,
    transport: Transport,
}

impl Mpich {
    pub fn new(layout: Arc<Layout>) -> Self {
        Mpich {
            layout,
            symbols: None,
            incomplete: None,
            ucx: None,
            cache: Cache::default(),
            world: None,
            transport: Transport::NotListed(transit::not_listed("this device")),
        }
    }

    /// Where messages in transit can be read in a process of MPICH
    /// `version` on `device` (as MPICH names them).
    fn transport<I: ImageAccess>(
        &self,
        image: &I,
        version: Option<&str>,
        device: Option<&str>,
    ) -> Transport {
        let layout = &self.layout;
        let device = device.unwrap_or_else(|| layout.device.name());
        if layout.device != Device::Ch3 || layout.queues != Queues::Device {
            return Transport::NotListed(transit::not_listed(device));
        }
        if let Err(m) = &layout.nemesis {
            return Transport::NotListed(format!(
                "{} (no debug information: {m} missing)",
                transit::not_listed(device)
            ));
        }
        // The packet types are the values of 4.0's enumeration.
        let version = version.unwrap_or("(version not recorded)");
        if !version.starts_with("4.0.") && version != "4.0" {
            return Transport::NotListed(format!(
                "{} (packet types of MPICH {version} not known)",
                transit::not_listed(device)
            ));
        }
        Transport::Nemesis(nemesis::NemesisSymbols {
            region: image.find_symbol(nemesis::SYM_REGION),
            base: image.find_symbol(nemesis::SYM_BASE),
            seqno: image.find_symbol(nemesis::SYM_SEQNO),
        })
    }

    /// What says the communicators changed: the list's sequence number and
    /// head, or, from the pool, a fingerprint of the objects in use.
    fn comm_marker<P: ProcessAccess + ?Sized>(
        &self,
        t: &Target<'_, P>,
        comms: CommSource,
    ) -> Result<ListHead, ReadError> {
        match (comms, self.layout.comm_pool) {
            (CommSource::List(a), _) => communicators::read_head(t, &self.layout, a),
            (CommSource::Pool(p), Some(pool)) => {
                let (objects, _) = communicators::pool_objects(t, &self.layout, &pool, p)?;
                Ok(ListHead {
                    sequence: communicators::fingerprint(&objects),
                    head: 0,
                })
            }
            (CommSource::Pool(_), None) => Err(ReadError::OutOfRange),
        }
    }

    /// The backend's name, for the version string.
    pub fn backend_name(&self) -> &'static str {
        match (self.layout.queues, self.layout.device) {
            (Queues::Debugq, _) => "mpich-debugq",
            (_, Device::Ch3) => "mpich-ch3",
            (_, Device::Ch4) => "mpich-ch4",
            (_, Device::Unknown) => "mpich",
        }
    }

    /// ch4 in 4.0 remembers only the receives of its active-message path,
    /// and only on VCI 0: says why the queues can be incomplete, or None
    /// when the process runs every message through that path on one VCI.
    fn ch4_incompleteness<I: ImageAccess, P: ProcessAccess + ?Sized>(
        &self,
        image: &I,
        t: &Target<'_, P>,
    ) -> Option<String> {
        if self.layout.device != Device::Ch4 || self.layout.queues != Queues::Device {
            return None;
        }
        match &self.ucx {
            // Every receive the netmod matches is read from UCX, the
            // active-message path's from the device queues.
            Some(Ok(_)) => return None,
            Some(Err(why)) => {
                return Some(format!(
                    "queues can be incomplete: MPICH's ucx netmod keeps its receives inside UCX, which cannot be read here: {why}"
                ))
            }
            None => {}
        }
        let ch4 = &self.layout.ch4;
        // Set by the user: 0 sends every message through the active-message
        // path; -1 (the default) leaves it to the provider, which matches.
        let tagged = image
            .find_symbol(SYM_CVAR_TAGGED)
            .and_then(|a| t.read_int(a).ok());
        let vcis = ch4
            .n_vcis
            .zip(image.find_symbol(SYM_CH4_GLOBAL))
            .and_then(|(off, g)| t.read_int(g + off).ok())
            .or_else(|| {
                image
                    .find_symbol(SYM_CVAR_VCIS)
                    .and_then(|a| t.read_int(a).ok())
            })
            .unwrap_or(1);
        match tagged {
            Some(0) if vcis <= 1 => None,
            Some(0) => Some(format!(
                "queues can be incomplete: MPICH 4.0's ch4 shows only VCI 0's receives, and this process uses {vcis} VCIs (MPIR_CVAR_CH4_NUM_VCIS=1 keeps them all on VCI 0)"
            )),
            _ => Some(
                "queues can be incomplete: MPICH 4.0's ch4 remembers only receives of its active-message path, not those the OFI netmod matches itself (MPIR_CVAR_CH4_OFI_ENABLE_TAGGED=0 in the job's environment sends every message through that path)"
                    .to_string(),
            ),
        }
    }

    /// The messages in transit to `comm` (its context, and its collective
    /// one when MPICH's own traffic is shown), read once per stop; why the
    /// walk ended early; what could not be read.
    fn transit<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        comm: &Comm,
        internal: bool,
        ctx_size: u8,
    ) -> (Vec<transit::Message>, Option<Stop>, transit::Unlisted) {
        let ctx = comm.recvcontext_id;
        let (transport, nemesis) = (&self.transport, &self.layout.nemesis);
        let scan = self.cache.transit.get(
            |s| &s.by_key,
            &[ctx, ctx + 1],
            || match (transport, nemesis) {
                (Transport::Nemesis(syms), Ok(n)) => nemesis::scan(t, n, syms, ctx_size),
                (Transport::NotListed(why), _) => {
                    let mut s = transit::Scan::default();
                    s.unlisted.add(why.clone());
                    s
                }
                (Transport::Ucx, _) => transit::Scan::default(),
                (Transport::Nemesis(_), Err(m)) => {
                    let mut s = transit::Scan::default();
                    s.unlisted
                        .add(format!("{} ({m} missing)", transit::not_listed("nemesis")));
                    s
                }
            },
        );
        let mut found = scan.by_key.take(ctx);
        if internal {
            found.extend(scan.by_key.take(ctx + 1));
            found.sort_by_key(|m| m.order);
        }
        (found, scan.stop, scan.unlisted.clone())
    }

    /// The device queue's entries of `class` on context `ctx` (and on its
    /// collective context, `ctx + 1`, when MPICH's own traffic is shown),
    /// taken out of this stop's scan. None: the queue cannot be read here.
    fn take_device_queue<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        class: Class,
        ctx: u64,
        internal: bool,
    ) -> Option<DeviceQueue> {
        let syms = self.symbols?;
        let layout = &self.layout;
        // A context asked for again in this stop (its entries were taken
        // by the first asking) gets a new scan.
        let scan = self.cache.queue(class).try_get(
            |s| &s.by_ctx,
            &[ctx, ctx + 1],
            || scan_queue(t, layout, &syms, class),
        )?;
        let own = scan.by_ctx.take(ctx);
        // The communicator's collective context (its id + 1).
        let collective = if internal {
            scan.by_ctx.take(ctx + 1)
        } else {
            Vec::new()
        };
        let mut entries = Vec::with_capacity(own.len() + collective.len());
        entries.extend(own.into_iter().map(|f| (f, false)));
        entries.extend(collective.into_iter().map(|f| (f, true)));
        Some(DeviceQueue {
            entries,
            stop: scan.stop,
        })
    }

    /// Why a queue of `class` cannot be read in this process.
    fn no_queue_reason(&self, class: Class) -> &'static str {
        let pool = self
            .symbols
            .is_some_and(|s| matches!(s.comms, CommSource::Pool(_)));
        match class {
            Class::Send if pool => {
                "MPICH built without debugger support keeps no send queue: sends that completed locally are not known"
            }
            Class::Send => "MPICH keeps no send queue here (MPIR_Sendq_head missing)",
            _ => "MPICH's queue heads cannot be read in this process",
        }
    }

    /// The device queue's entries (each with whether it is on the
    /// collective context) as `comm`'s operations of `class`: with their
    /// datatypes (read once per stop), posted receives numbered in
    /// matching order, and under ch4 what its path leaves unknown said.
    fn device_operations<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        comm: &Comm,
        class: Class,
        found: Vec<(Found, bool)>,
    ) -> Vec<PendingOperation> {
        let Some(syms) = self.symbols else {
            return Vec::new();
        };
        let layout = Arc::clone(&self.layout);
        let ch4_native_sends =
            class == Class::Send && (self.incomplete.is_some() || self.ucx.is_some());
        let note = match class {
            Class::Send => None,
            _ => self
                .incomplete
                .as_ref()
                .map(|_| "queue can be incomplete: ch4 active-message path only"),
        };
        let ucx_sends = match &self.ucx {
            Some(Ok(n)) if class == Class::Send => Some(n.clone()),
            _ => None,
        };
        let mut ops = Vec::with_capacity(found.len());
        for (k, (mut f, internal)) in found.into_iter().enumerate() {
            // ch4:ucx: a send still in progress has its UCP request, which
            // knows its buffer and length.
            let ucx_send = ucx_sends.as_ref().and_then(|n| {
                let r = f.request.as_ref().ok().filter(|r| r.cc != 0)?;
                ucx::send_of(t, n, r.addr)
            });
            if ch4_native_sends {
                // Natively sent: the request's active-message part holds
                // nothing of it; only the send queue entry is sure.
                if let Ok(r) = f.request.as_mut() {
                    r.buffer = None;
                    r.count = None;
                    r.datatype = None;
                }
            }
            let dt = f
                .request
                .as_ref()
                .ok()
                .and_then(|r| r.datatype)
                .and_then(|h| datatypes::datatype(t, &layout, &syms, &mut self.cache.datatypes, h));
            let oc = OpContext {
                comm,
                datatype: dt.as_ref(),
                internal,
                order: (class == Class::Posted).then_some(k + 1),
                note: match (ch4_native_sends, ucx_send) {
                    (true, Some(_)) => Some(ucx::SEND_FROM_UCX),
                    (true, None) => Some("ch4 native send: buffer and length not recorded"),
                    (false, _) => note,
                },
            };
            let mut op = requests::to_operation(&f, class, &oc);
            if let Some((buffer, length)) = ucx_send {
                op.buffer = buffer;
                op.desired_length = i64::try_from(length).unwrap_or(i64::MAX);
            }
            ops.push(op);
        }
        ops
    }

    /// Adds to an unexpected queue what waits in the transport, after
    /// MPICH's own messages (its progress engine hands it over after
    /// those), and what could not be read there.
    fn add_transit<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        comm: &Comm,
        internal: bool,
        queue: &mut QueueOf<Self>,
    ) {
        let ctx_size = self.layout.comm.ctx_size;
        let (found, cut, unlisted) = self.transit(t, comm, internal, ctx_size);
        queue.items.extend(
            found
                .iter()
                .map(|m| m.to_operation(comm.peer_global(m.source))),
        );
        queue.stop = queue.stop.or(cut);
        // Messages in transit this DLL cannot read may be there too.
        if let Some(why) = unlisted.why() {
            queue.unseen = Some(match queue.unseen.take() {
                Some(other) => format!("{other}; {why}"),
                None => format!("no unexpected message in MPICH's queues, but {why}"),
            });
        }
        queue.partial = unlisted.line();
    }
}

impl MpiBackend for Mpich {
    type Comm = Comm;
    type Marker = ListHead;
    type Head = ListHead;
    type Read = ();
    type Item = PendingOperation;

    /// Finds the symbols, checks that the communicator list can be read,
    /// and what MPICH this is.
    fn check<I: ImageAccess>(&mut self, call: &mut Call<'_>, image: &I) -> Result<(), Failure> {
        let syms = resolve_symbols(image, &self.layout)?;
        let t = call.target();
        // Where a grid is kept, asked of the debugger only once this
        // process has made a topology (its keyval is set).
        let made_topology = syms
            .topo_keyval
            .and_then(|at| t.read_int(at).ok())
            .is_some_and(|k| k != communicators::KEYVAL_INVALID);
        if made_topology && self.layout.comm.cart.is_none() {
            if let Some(cart) = layout::resolve_cart(image) {
                let mut with_cart = (*self.layout).clone();
                with_cart.comm.cart = Some(cart);
                self.layout = Arc::new(with_cart);
            }
        }
        let cx = &mut *call.cx;
        self.comm_marker(&t, syms.comms).map_err(|e| Failure {
            code: e.into(),
            message: Some(messages::MPICH_LIST_UNREADABLE),
        })?;
        if matches!(syms.comms, CommSource::Pool(_)) {
            cx.say_once(
                "no-debugger-support",
                format!("mqs DLL: {}", messages::MPICH_NO_DEBUGGER_SUPPORT),
            );
        }
        let read_string = |sym: &str| {
            image
                .find_symbol(sym)
                .and_then(|a| t.read_cstring(a, 64).ok())
                .filter(|s| !s.is_empty())
        };
        let version = read_string(SYM_VERSION);
        let device = read_string(SYM_DEVICE);
        let queues = match self.layout.queues {
            Queues::Device => "device queues",
            Queues::Debugq => "debugger queues (MPIR_Debugq)",
        };
        // MPICH 4.0's ch4 over UCX. From 4.1 the debugger queues
        // (MPIR_Debugq) record every netmod's receives: reading UCX too
        // would list them twice.
        self.ucx = (self.layout.device == Device::Ch4 && self.layout.queues == Queues::Device)
            .then(|| ucx::resolve(image, &t))
            .flatten();
        // Which transport the queues come from, when it is UCX.
        let transport = match &self.ucx {
            Some(Ok(n)) => format!(", {}", n.name()),
            Some(Err(why)) => format!(", {why}"),
            None => String::new(),
        };
        let pools = match syms.comms {
            CommSource::Pool(_) => ", communicators from MPICH's object pools",
            CommSource::List(_) => "",
        };
        let detected = format!(
            "MPICH {}, device {}, {queues}{transport}{pools}",
            version.as_deref().unwrap_or("(version not recorded)"),
            device
                .as_deref()
                .unwrap_or_else(|| self.layout.device.name())
        );
        self.incomplete = self.ch4_incompleteness(image, &t);
        self.transport = match &self.ucx {
            Some(Ok(_)) => Transport::Ucx,
            _ => self.transport(image, version.as_deref(), device.as_deref()),
        };
        if let Transport::NotListed(why) = &self.transport {
            cx.say_once("transit", format!("mqs DLL: {why}"));
        }
        self.symbols = Some(syms);
        if let Some(why) = self.incomplete.clone() {
            cx.say_once("ch4-incomplete", format!("mqs DLL: {why}"));
        }
        if let Some(Ok(n)) = &self.ucx {
            if let Err(m) = &n.pools {
                cx.say_once(
                    "ucx-mprobed",
                    format!("mqs DLL: {} ({m} missing)", ucx::MPROBED_WHY),
                );
            }
        }
        cx.detect(detected, self.backend_name());
        Ok(())
    }

    /// The list's head; its sequence number and head are the marker.
    fn list_head(&mut self, call: &mut Call<'_>) -> Result<(ListHead, ListHead), DllError> {
        let syms = self.symbols.ok_or(DllError::ImageHasNoQueues)?;
        self.cache = Cache::default();
        let head = self.comm_marker(&call.target(), syms.comms)?;
        Ok((head, head))
    }

    /// Walks the list; what MPICH made for itself is left out unless asked
    /// for.
    fn build_list(&mut self, call: &mut Call<'_>, head: ListHead) -> Listed<Self> {
        let t = call.target();
        let syms = self.symbols.ok_or(DllError::ImageHasNoQueues)?;
        // Which attribute is a topology: read once per list.
        let keyval = syms.topo_keyval.and_then(|a| t.read_int(a).ok());
        let built = match (syms.comms, self.layout.comm_pool) {
            (CommSource::Pool(p), Some(pool)) => {
                communicators::build_from_pool(&t, &self.layout, &pool, p, call.names, keyval)?
            }
            _ => communicators::build(&t, &self.layout, head.head, call.names, keyval)?,
        };
        let cx = &mut *call.cx;
        if built.skipped > 0 {
            cx.say(format!(
                "mqs DLL: {} communicator(s) could not be read and are not shown",
                built.skipped
            ));
        }
        if let Some(stop) = built.stop {
            // A communicator freed (or corrupt) while the list was read: the
            // ones before it are shown.
            cx.say(format!(
                "mqs DLL: the communicator list ends early ({})",
                stop.note()
            ));
        }
        let hidden = built.comms.iter().filter(|c| c.internal.is_some()).count();
        if hidden > 0 && !cx.show_internal {
            cx.say_once(
                "internal-comms",
                format!(
                    "mqs DLL: {hidden} communicator(s) MPICH made for itself are not shown (MQS_SHOW_INTERNAL=1 in the debugger's environment shows them)"
                ),
            );
        }
        self.world = built.world;
        Ok(built
            .comms
            .into_iter()
            .filter(|c| cx.show_internal || c.internal.is_none())
            .collect())
    }

    fn forget_stop(&mut self) {
        self.cache = Cache::default();
    }

    fn is_checked(&self) -> bool {
        self.symbols.is_some()
    }

    /// The queue's entries of `comm`'s context (and, shown on request, of
    /// its collective context), each made into its operation at once; then
    /// what UCX's workers hold (ch4:ucx) and, for unexpected messages, what
    /// waits in the transport.
    fn read_queue(&mut self, call: &mut Call<'_>, comm: &Comm, op: OpClass) -> Setup<Self> {
        let class = match op {
            OpClass::PendingSends => Class::Send,
            OpClass::PendingReceives => Class::Posted,
            OpClass::UnexpectedMessages => Class::Unexpected,
        };
        let t = call.target();
        let cx = &mut *call.cx;
        // Sends go out on the peer's context; receives match ours.
        let ctx = match class {
            Class::Send => comm.context_id,
            _ => comm.recvcontext_id,
        };
        let Some(device) = self.take_device_queue(&t, class, ctx, cx.show_internal) else {
            messages::set_no_information_reason(self.no_queue_reason(class));
            return Ok(None);
        };
        let ops = self.device_operations(&t, comm, class, device.entries);
        let mut queue = Queue::new((), ops, device.stop);
        if class != Class::Send {
            // Empty only on the path ch4 records: the operations it does
            // not record may be there.
            queue.unseen = self
                .incomplete
                .as_ref()
                .map(|why| format!("{why}; none on that path here"));
        }
        if let Some(Ok(netmod)) = self.ucx.clone() {
            // What UCX holds comes after the active-message path's: the
            // netmod matches natively, the other path is the exception.
            let found = self.read_ucx(&t, &netmod, comm, class, cx.show_internal);
            queue.items.extend(found.ops);
            queue.stop = queue.stop.or(found.stop);
            if found.unseen.is_some() {
                queue.unseen = found.unseen;
            }
            if found.partial.is_some() {
                queue.partial = found.partial;
            }
        }
        if class == Class::Unexpected {
            self.add_transit(&t, comm, cx.show_internal, &mut queue);
        }
        Ok(Some(queue))
    }

    /// Made at setup already.
    fn make(&self, _: &(), op: PendingOperation, _: &Comm) -> Made {
        Some(op)
    }

    /// MPICH names this job's processes by world rank.
    fn own_name(&mut self, _: &mut Call<'_>) -> Option<ProcName> {
        let rank = self.world.map(|w| w.1)?;
        Some(ProcName {
            jobid: OWN_JOB,
            vpid: u32::try_from(rank).ok()?,
        })
    }

    fn new_processes(&mut self, _: &mut Call<'_>) -> Option<Vec<ProcessLocation>> {
        messages::set_no_information_reason(
            "MPICH does not record the processes it spawned or connected to where this DLL reads",
        );
        None
    }

    /// Every new communicator, the intercommunicator of a spawn or
    /// connection included, passes `MPIR_Comm_commit` once its members are
    /// known.
    fn spawn_breakpoint(&self) -> String {
        "MPIR_Comm_commit".to_string()
    }
}

/// One queue's entries of every context: the debugger's send queue, the
/// device's receive queues (4.0) or the debugger's (4.1+); None where this
/// process has no such queue or its head cannot be read.
fn scan_queue<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    syms: &Symbols,
    class: Class,
) -> Option<Scan> {
    Some(match (class, layout.queues) {
        (Class::Send, _) => {
            let e = layout.sends?;
            requests::walk_entries(t, layout, &e, syms.sendq?)
        }
        (Class::Posted, Queues::Device) => {
            let head_at = syms.posted?.address(t)?;
            requests::walk_requests(t, layout, head_at)
        }
        (Class::Unexpected, Queues::Device) => {
            let head_at = syms.unexpected?.address(t)?;
            let mut scan = requests::walk_requests(t, layout, head_at);
            if matches!(layout.request.device, RequestDevice::Ch4 { .. }) {
                for f in scan.by_ctx.items_mut() {
                    if let Ok(r) = f.request.as_mut() {
                        r.msg_type = requests::ch4_is_rts(t, layout, r).map(|rts| {
                            if rts {
                                requests::MSG_RNDV
                            } else {
                                requests::MSG_EAGER
                            }
                        });
                    }
                }
            }
            scan
        }
        (Class::Posted, Queues::Debugq) => {
            let e = layout.debugq?;
            requests::walk_entries(t, layout, &e, syms.recvq?)
        }
        (Class::Unexpected, Queues::Debugq) => {
            let e = layout.debugq?;
            requests::walk_entries(t, layout, &e, syms.unexpq?)
        }
    })
}

impl From<ReadError> for Failure {
    fn from(e: ReadError) -> Failure {
        Failure::plain(e.into())
    }
}
