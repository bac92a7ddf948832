//! What the fixtures leave pending, as their header comments say, written
//! down once for every test that pins a DLL's output to them (our DLL's
//! replay, live and cross-check tests), and the check of our DLL's output
//! against it.
//!
//! The lists are what Open MPI 4.1 (ob1 over shared memory, as
//! [`crate::Job`] runs it) holds: its communicator table (the MPI's own
//! communicators included, in table order) and, for sends, only the
//! requests it keeps (an eager send that left at once keeps none); and, for
//! the `queues` fixture, what MPICH 4.0 ch3 holds ([`mpich_queues`]). Within
//! a queue, operations are in the order our DLL reports them: posted
//! receives in MPI matching order (posting order), then receives already
//! matched or complete; sends in the order started; unexpected messages in
//! arrival order (where that order is timing, [`Queue::AnyOrder`]).

use std::fmt::Write as _;

use mqs_abi::OpStatus;
use serde_json::Value;

/// The fixtures' datatype, and its size.
pub const DATATYPE: &str = "MPI_INT";
const INT_BYTES: i64 = 4;
/// `queues.c`'s derived datatypes with more than 2 ranks, as named by
/// `MPI_Type_set_name`, and their sizes: `MPI_Type_contiguous(2,
/// MPI_DOUBLE)` and `MPI_Type_vector(4, 1, 2, MPI_INT)`.
pub const PAIR: (&str, i64) = ("mqs-pair", 16);
pub const VEC: (&str, i64) = ("mqs-vec", 16);

/// How an unexpected message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The data came with the header.
    Eager,
    /// Only the header came; the data waits for a matching receive.
    Rendezvous,
}

/// What a matched or complete operation received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actual {
    pub peer: i64,
    pub global: i64,
    pub tag: i64,
    pub length: i64,
}

/// One pending operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub status: OpStatus,
    /// Rank in the communicator (the remote group's for an
    /// intercommunicator); -1 for MPI_ANY_SOURCE.
    pub peer: i64,
    /// MPI_COMM_WORLD rank (identity with MPI-2) of the peer; -1 for
    /// MPI_ANY_SOURCE.
    pub global: i64,
    /// None for MPI_ANY_TAG.
    pub tag: Option<i64>,
    /// Elements of `datatype`; for unexpected messages, of [`DATATYPE`].
    pub count: i64,
    /// The datatype's name and size in bytes ([`DATATYPE`] unless
    /// [`Op::of`] says otherwise).
    pub datatype: (&'static str, i64),
    pub send: bool,
    /// A send's mode as our DLL states it (`mode: standard`; Open MPI's
    /// requests say, MPICH's do not).
    pub mode: Option<&'static str>,
    /// An eager send: its data left at once, so the MPI may already count
    /// it as complete (either status is right).
    pub eager: bool,
    /// Unexpected messages: how they travel (they have no datatype).
    pub unexpected: Option<Protocol>,
    /// For matched and complete operations.
    pub actual: Option<Actual>,
    /// A matched receive of which only part of the data has arrived.
    pub partial: bool,
    /// An unexpected message waiting in its receiver's transport, not in
    /// the MPI's queues: the first line of its `extra_text` starts with
    /// [`mqs_abi::IN_TRANSIT`] (and no other's does).
    pub in_transit: bool,
}

impl Op {
    pub fn length(&self) -> i64 {
        self.count * self.datatype.1
    }

    /// A receive posted and not matched.
    pub fn recv(peer: i64, global: i64, tag: Option<i64>, count: i64) -> Op {
        Op {
            status: OpStatus::Pending,
            peer,
            global,
            tag,
            count,
            datatype: (DATATYPE, INT_BYTES),
            send: false,
            mode: None,
            eager: false,
            unexpected: None,
            actual: None,
            partial: false,
            in_transit: false,
        }
    }

    /// A send (standard mode) the receiver has not taken yet.
    pub fn send(peer: i64, global: i64, tag: i64, count: i64) -> Op {
        Op {
            send: true,
            mode: Some("standard"),
            ..Op::recv(peer, global, Some(tag), count)
        }
    }

    /// A message that arrived before any receive matched it.
    pub fn unexpected(source: i64, global: i64, tag: i64, count: i64, how: Protocol) -> Op {
        Op {
            unexpected: Some(how),
            ..Op::recv(source, global, Some(tag), count)
        }
    }

    /// This unexpected message, waiting in the transport.
    pub fn in_transit(mut self) -> Op {
        self.in_transit = true;
        self
    }

    /// Of elements of `datatype` (name, size in bytes), not MPI_INT.
    pub fn of(mut self, datatype: (&'static str, i64)) -> Op {
        self.datatype = datatype;
        let length = self.length();
        if let Some(a) = self.actual.as_mut() {
            a.length = length;
        }
        self
    }

    /// A send whose data left at once (eager): pending or complete.
    pub fn eager(mut self) -> Op {
        self.eager = true;
        self
    }

    /// A send as MPICH keeps it: no mode stated, where it goes in its
    /// actual fields.
    fn mpich_send(mut self) -> Op {
        self.mode = None;
        self.actual = Some(self.own_actual());
        self
    }

    /// An unexpected message as MPICH keeps it: who sent it, its tag and
    /// size in its actual fields; an eager one complete.
    fn mpich_arrived(mut self) -> Op {
        if self.unexpected == Some(Protocol::Eager) {
            self.status = OpStatus::Complete;
        }
        self.actual = Some(self.own_actual());
        self
    }

    /// This receive, matched by a message of its own length from its peer
    /// with its tag; `partial`: not all of the data has arrived.
    pub fn matched(mut self, partial: bool) -> Op {
        self.status = OpStatus::Matched;
        self.partial = partial;
        self.actual = Some(self.own_actual());
        self
    }

    /// This receive, complete (all of its data arrived) and not waited for.
    pub fn complete(mut self) -> Op {
        self.status = OpStatus::Complete;
        self.actual = Some(self.own_actual());
        self
    }

    fn own_actual(&self) -> Actual {
        Actual {
            peer: self.peer,
            global: self.global,
            tag: self.tag.unwrap_or(-1),
            length: self.length(),
        }
    }
}

/// One queue of one communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queue {
    /// Exactly these operations, in this order; none: the queue must be
    /// read and empty (never "not available" or an error).
    Ops(Vec<Op>),
    /// Exactly these operations (by tag, each distinct), in an order that
    /// depends on timing (messages of several senders).
    AnyOrder(Vec<Op>),
    /// The DLL cannot read it in this build of the MPI (and must say so).
    Unavailable,
}

impl Queue {
    pub fn empty() -> Queue {
        Queue::Ops(Vec::new())
    }

    /// The operations this queue must hold (none if unavailable).
    pub fn ops(&self) -> &[Op] {
        match self {
            Queue::Ops(ops) | Queue::AnyOrder(ops) => ops,
            Queue::Unavailable => &[],
        }
    }
}

/// One communicator as the MPI lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub name: String,
    /// Global ranks of the (local) group, in communicator rank order.
    pub group: Vec<i64>,
    pub sends: Queue,
    pub receives: Queue,
    pub unexpected: Queue,
}

impl Comm {
    /// A communicator with nothing pending.
    pub fn new(name: &str, group: &[i64], unexpected_readable: bool) -> Comm {
        Comm {
            name: name.to_string(),
            group: group.to_vec(),
            sends: Queue::empty(),
            receives: Queue::empty(),
            unexpected: if unexpected_readable {
                Queue::empty()
            } else {
                Queue::Unavailable
            },
        }
    }

    fn with(mut self, sends: Vec<Op>, receives: Vec<Op>, unexpected: Vec<Op>) -> Comm {
        self.sends = Queue::Ops(sends);
        self.receives = Queue::Ops(receives);
        if self.unexpected != Queue::Unavailable {
            self.unexpected = Queue::Ops(unexpected);
        }
        self
    }

    /// The three queues, in the interface's class order.
    pub fn queues(&self) -> [(&'static str, &Queue); 3] {
        [
            ("sends", &self.sends),
            ("receives", &self.receives),
            ("unexpected", &self.unexpected),
        ]
    }
}

/// One process of a fixture's job: every communicator, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub rank: i64,
    pub comms: Vec<Comm>,
}

impl Process {
    pub fn comm(&self, name: &str) -> Option<&Comm> {
        self.comms.iter().find(|c| c.name == name)
    }

    /// Operations of the whole process.
    pub fn operations(&self) -> usize {
        self.comms
            .iter()
            .map(|c| c.queues().iter().map(|(_, q)| q.ops().len()).sum::<usize>())
            .sum()
    }
}

/// `queues.c` with `n` extra operations per side, its 2 ranks. Without
/// ob1's debug information (`unexpected_readable` false: an Open MPI
/// "release" build) no unexpected queue can be read.
pub fn queues(n: i64, unexpected_readable: bool) -> Vec<Process> {
    queues_of(2, n, unexpected_readable)
}

/// [`queues`] with `size` ranks (2 or more): ranks 0 and 1 as with 2, but
/// world rank 1 is split rank `size - 2`, and each world rank r >= 2 has a
/// receive on "mqs-split" (tag 20 + r) and sent rank 1 an eager message on
/// "mqs-dup" (tag 40 + r, no request left), which rank 1 holds unexpected.
pub fn queues_of(size: i64, n: i64, unexpected_readable: bool) -> Vec<Process> {
    let u = unexpected_readable;
    let new = |name: &str, group: &[i64]| Comm::new(name, group, u);
    let world: Vec<i64> = (0..size).collect();
    let reversed: Vec<i64> = (0..size).rev().collect();
    let wait =
        || new("mqs-wait", &world).with(vec![], vec![Op::recv(-1, -1, Some(1000), 1)], vec![]);
    let rank0 = Process {
        rank: 0,
        comms: vec![
            new("MPI_COMM_WORLD", &world).with(
                vec![],
                vec![Op::recv(-1, -1, Some(8), 8)],
                vec![
                    Op::unexpected(1, 1, 99, 16, Protocol::Eager),
                    Op::unexpected(1, 1, 5, 100_000, Protocol::Rendezvous),
                ],
            ),
            new("MPI_COMM_SELF", &[0]),
            new("mqs-dup", &world).with(
                vec![],
                std::iter::once(Op::recv(1, 1, Some(7), 4))
                    .chain((0..n).map(|i| Op::recv(1, 1, Some(1_000_000 + i), 1)))
                    .collect(),
                (0..n)
                    .map(|i| Op::unexpected(1, 1, 3000 + i, 1, Protocol::Eager))
                    .collect(),
            ),
            // World rank 1 is split rank size - 2.
            new("mqs-split", &reversed).with(vec![], vec![Op::recv(size - 2, 1, None, 2)], vec![]),
            wait(),
        ],
    };
    // The messages of ranks 2 and up arrive in an order of their own.
    let mut dup = new("mqs-dup", &world).with(vec![], vec![Op::recv(0, 0, Some(11), 8)], vec![]);
    if u && size > 2 {
        dup.unexpected = Queue::AnyOrder(
            (2..size)
                .map(|r| Op::unexpected(r, r, 40 + r, 4, Protocol::Eager))
                .collect(),
        );
    }
    let rank1 = Process {
        rank: 1,
        comms: vec![
            // The eager sends (tag 99, 3000+i) left at once: no request.
            new("MPI_COMM_WORLD", &world).with(vec![Op::send(0, 0, 5, 100_000)], vec![], vec![]),
            new("MPI_COMM_SELF", &[1]),
            dup,
            new("mqs-split", &reversed),
            wait(),
        ],
    };
    let others = (2..size).map(|r| Process {
        rank: r,
        comms: vec![
            new("MPI_COMM_WORLD", &world),
            new("MPI_COMM_SELF", &[r]),
            // The eager send to rank 1 left at once: no request.
            new("mqs-dup", &world),
            // World rank 0 is split rank size - 1.
            new("mqs-split", &reversed).with(
                vec![],
                vec![Op::recv(size - 1, 0, Some(20 + r), 2).of(PAIR)],
                vec![],
            ),
            wait(),
        ],
    });
    [rank0, rank1].into_iter().chain(others).collect()
}

/// `procs` as our DLL shows them when messages may wait in a transport it
/// does not read (a network: TCP between nodes, OFI): an empty unexpected
/// queue cannot be told empty, so it is "not available".
pub fn over_network(mut procs: Vec<Process>) -> Vec<Process> {
    for c in procs.iter_mut().flat_map(|p| p.comms.iter_mut()) {
        if c.unexpected.ops().is_empty() {
            c.unexpected = Queue::Unavailable;
        }
    }
    procs
}

/// [`queues_of`] across nodes of `per_node` ranks each, world ranks 0..
/// on the first (as `srun --distribution=block` places them). Between
/// nodes Open MPI's ob1 goes over TCP, where it keeps the request of an
/// eager send (complete once TCP sent it; nobody waits for it): a world
/// rank r >= 2 on another node than rank 1 lists its send to rank 1. Every
/// rank has peers on the other node: [`over_network`].
pub fn queues_on_nodes(size: i64, per_node: i64, n: i64) -> Vec<Process> {
    let mut procs = queues_of(size, n, true);
    let node = |rank: i64| rank / per_node.max(1);
    for p in procs
        .iter_mut()
        .filter(|p| p.rank >= 2 && node(p.rank) != node(1))
    {
        let r = p.rank;
        if let Some(dup) = p.comms.iter_mut().find(|c| c.name == "mqs-dup") {
            dup.sends = Queue::Ops(vec![Op::send(1, 1, 40 + r, 1).of(VEC).eager()]);
        }
    }
    over_network(procs)
}

/// `intercomm.c`, its 4 ranks, as Open MPI 4.1 names its hidden
/// communicator.
pub fn intercomm() -> Vec<Process> {
    intercomm_with_hidden("MPI COMMUNICATOR 4 DUP FROM 3")
}

/// `intercomm.c` under Open MPI 5, which shortens the hidden
/// communicator's name.
pub fn intercomm_open_mpi_5() -> Vec<Process> {
    intercomm_with_hidden("MPI COMM 4 DUP FROM 3")
}

fn intercomm_with_hidden(hidden: &'static str) -> Vec<Process> {
    (0..4)
        .map(|rank: i64| {
            let even = rank % 2 == 0;
            // Local and remote halves: evens 0, 2; odds 1, 3.
            let local: Vec<i64> = if even { vec![0, 2] } else { vec![1, 3] };
            let half = if even { "mqs-even" } else { "mqs-odd" };
            // Open MPI's hidden intracommunicator over the local group of
            // mqs-inter, between the split and the intercommunicator.
            let (sends, receives, unexpected) = match rank {
                0 => (
                    vec![],
                    vec![Op::recv(0, 1, Some(21), 4)],
                    vec![Op::unexpected(0, 1, 22, 100_000, Protocol::Rendezvous)],
                ),
                2 => (vec![], vec![Op::recv(0, 1, Some(21), 4)], vec![]),
                1 => (vec![Op::send(0, 0, 22, 100_000)], vec![], vec![]),
                _ => (vec![], vec![], vec![]),
            };
            Process {
                rank,
                comms: vec![
                    Comm::new("MPI_COMM_WORLD", &[0, 1, 2, 3], true),
                    Comm::new("MPI_COMM_SELF", &[rank], true),
                    Comm::new(half, &local, true),
                    Comm::new(hidden, &local, true),
                    Comm::new("mqs-inter", &local, true).with(sends, receives, unexpected),
                    Comm::new("mqs-wait", &[0, 1, 2, 3], true).with(
                        vec![],
                        vec![Op::recv(-1, -1, Some(1000), 1)],
                        vec![],
                    ),
                ],
            }
        })
        .collect()
}

/// `ring.c` with `size` ranks.
pub fn ring(size: i64) -> Vec<Process> {
    let world: Vec<i64> = (0..size).collect();
    (0..size)
        .map(|rank| {
            let left = (rank + size - 1) % size;
            Process {
                rank,
                comms: vec![
                    Comm::new("MPI_COMM_WORLD", &world, true).with(
                        vec![],
                        vec![Op::recv(left, left, Some(42), 1)],
                        vec![],
                    ),
                    Comm::new("MPI_COMM_SELF", &[rank], true),
                ],
            }
        })
        .collect()
}

/// `progress.c`, its 2 ranks (Open MPI with ob1's debug information).
pub fn progress() -> Vec<Process> {
    let rank0 = Process {
        rank: 0,
        comms: vec![
            Comm::new("MPI_COMM_WORLD", &[0, 1], true).with(
                vec![],
                vec![
                    // Still in ob1's queues, in matching order.
                    Op::recv(1, 1, Some(42), 2),
                    Op::recv(-1, -1, Some(1000), 1),
                    // Out of the queues, in posting order.
                    Op::recv(1, 1, Some(40), 100_000).matched(true),
                    Op::recv(1, 1, Some(41), 4).complete(),
                ],
                vec![],
            ),
            Comm::new("MPI_COMM_SELF", &[0], true),
        ],
    };
    let rank1 = Process {
        rank: 1,
        comms: vec![
            // The eager send (tag 41) left at once: no request.
            Comm::new("MPI_COMM_WORLD", &[0, 1], true).with(
                vec![Op::send(0, 0, 40, 100_000)],
                vec![],
                vec![],
            ),
            Comm::new("MPI_COMM_SELF", &[1], true),
        ],
    };
    vec![rank0, rank1]
}

/// [`mpich_queues`] as MPICH's ch4 leaves it: its active-message path
/// keeps an eager unexpected message pending (ch3 completes it). Our DLL
/// does not read ch4's transport: an empty unexpected queue is "not
/// available" (messages in transit may be there).
pub fn mpich_ch4_queues(size: i64, n: i64) -> Vec<Process> {
    let mut procs = over_network(mpich_queues(size, n));
    for c in procs.iter_mut().flat_map(|p| p.comms.iter_mut()) {
        if let Queue::Ops(ops) | Queue::AnyOrder(ops) = &mut c.unexpected {
            for op in ops
                .iter_mut()
                .filter(|o| o.unexpected == Some(Protocol::Eager))
            {
                op.status = OpStatus::Pending;
            }
        }
    }
    procs
}

/// `queues.c` with `n` extra operations per side as MPICH 4.0 ch3 holds
/// it, every rank of a job of `size` ranks (2 or more). Unlike Open MPI,
/// MPICH keeps every send request (eager ones too, perhaps complete), an
/// eager unexpected message is a complete request, and our DLL lists only
/// the communicators the program made, newest first after the two
/// predefined ones (MPICH's own are hidden).
pub fn mpich_queues(size: i64, n: i64) -> Vec<Process> {
    let world: Vec<i64> = (0..size).collect();
    let reversed: Vec<i64> = (0..size).rev().collect();
    let new = |name: &str, group: &[i64]| Comm::new(name, group, true);
    let unexpected =
        |source, tag, count, how| Op::unexpected(source, source, tag, count, how).mpich_arrived();
    let send = |peer, tag, count| Op::send(peer, peer, tag, count).mpich_send();
    (0..size)
        .map(|rank| {
            let (mut sends, mut receives, mut unexp) = (vec![], vec![], vec![]);
            let (mut dup_sends, mut dup_receives, mut dup_unexp) = (vec![], vec![], vec![]);
            let mut split_receives = vec![];
            match rank {
                0 => {
                    receives.push(Op::recv(-1, -1, Some(8), 8));
                    unexp.push(unexpected(1, 99, 16, Protocol::Eager));
                    unexp.push(unexpected(1, 5, 100_000, Protocol::Rendezvous));
                    dup_receives.push(Op::recv(1, 1, Some(7), 4));
                    for i in 0..n {
                        dup_receives.push(Op::recv(1, 1, Some(1_000_000 + i), 1));
                        dup_unexp.push(unexpected(1, 3000 + i, 1, Protocol::Eager));
                    }
                    // World rank 1 is split rank size - 2.
                    split_receives.push(Op::recv(size - 2, 1, None, 2));
                }
                1 => {
                    sends.push(send(0, 99, 16).eager());
                    sends.push(send(0, 5, 100_000));
                    dup_receives.push(Op::recv(0, 0, Some(11), 8));
                    for i in 0..n {
                        dup_sends.push(send(0, 3000 + i, 1).eager());
                    }
                    for r in 2..size {
                        dup_unexp.push(unexpected(r, 40 + r, 4, Protocol::Eager));
                    }
                }
                r => {
                    dup_sends.push(send(1, 40 + r, 1).of(VEC).eager());
                    // World rank 0 is split rank size - 1.
                    split_receives.push(Op::recv(size - 1, 0, Some(20 + r), 2).of(PAIR));
                }
            }
            let mut dup = new("mqs-dup", &world).with(dup_sends, dup_receives, vec![]);
            dup.unexpected = if rank == 1 {
                Queue::AnyOrder(dup_unexp)
            } else {
                Queue::Ops(dup_unexp)
            };
            Process {
                rank,
                comms: vec![
                    new("MPI_COMM_WORLD", &world).with(sends, receives, unexp),
                    new("MPI_COMM_SELF", &[rank]),
                    new("mqs-wait", &world).with(
                        vec![],
                        vec![Op::recv(-1, -1, Some(1000), 1)],
                        vec![],
                    ),
                    new("mqs-split", &reversed).with(vec![], split_receives, vec![]),
                    dup,
                ],
            }
        })
        .collect()
}

/// Which MPI holds a `spin_ring` job, as far as its contents differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinMpi {
    /// Open MPI (ob1 over its shared-memory BTL), with ob1's debug
    /// information (`true`) or without (a release build: no unexpected
    /// queue can be read, and receives come in posting order).
    OpenMpi(bool),
    /// MPICH 4.0 ch3:nemesis.
    Mpich,
}

/// `spin_ring.c`'s small and medium messages per pair (its defaults), and
/// the counts of its three sizes of message.
pub const SPIN_SMALL: i64 = 20;
pub const SPIN_MEDIUM: i64 = 2;
const MEDIUM_INTS: i64 = 500;
const BIG_INTS: i64 = 100_000;

/// One message `spin_ring.c` sends: on which communicator, from and to
/// which rank (world ranks, which are the ranks of both communicators),
/// its tag and count of ints, whether it waits in the transport (phase B)
/// rather than in the MPI's queues (phase A), and whether a receive posted
/// before it arrived matched it (then it is no unexpected message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinMessage {
    pub comm: &'static str,
    pub from: i64,
    pub to: i64,
    pub tag: i64,
    pub count: i64,
    pub in_transit: bool,
    pub matched: bool,
}

/// Every message of a `spin_ring` job of `size` ranks (3 or more), in the
/// order each sender sent them.
pub fn spin_messages(size: i64) -> Vec<SpinMessage> {
    let mut out = Vec::new();
    for from in 0..size {
        let right = (from + 1) % size;
        let right2 = (from + 2) % size;
        let m = |comm, to, tag, count, in_transit| SpinMessage {
            comm,
            from,
            to,
            tag,
            count,
            in_transit,
            matched: !in_transit && tag == 100,
        };
        for i in 0..SPIN_SMALL {
            out.push(m("MPI_COMM_WORLD", right, 100 + i, 1, false));
        }
        for i in 0..SPIN_MEDIUM {
            out.push(m("MPI_COMM_WORLD", right, 300 + i, MEDIUM_INTS, true));
        }
        for i in 0..SPIN_SMALL {
            out.push(m("mqs-spin", right, 200 + i, 1, true));
        }
        out.push(m("mqs-spin", right, 400, BIG_INTS, true));
        for i in 0..SPIN_MEDIUM {
            out.push(m("MPI_COMM_WORLD", right2, 500 + i, MEDIUM_INTS, true));
        }
        for i in 0..SPIN_SMALL {
            out.push(m("MPI_COMM_WORLD", right2, 600 + i, 1, true));
        }
    }
    out
}

/// `spin_ring.c` with `size` ranks (3 or more) and its default counts,
/// every rank once READY: the receives it posted, what MPI moved into its
/// unexpected queue before the rank left MPI, then what waits in the
/// transport (in an order of the transport's: by tag here), and its
/// sends as the MPI keeps them.
pub fn spin_ring(size: i64, mpi: SpinMpi) -> Vec<Process> {
    let world: Vec<i64> = (0..size).collect();
    let messages = spin_messages(size);
    let readable = mpi != SpinMpi::OpenMpi(false);
    let mpich = mpi == SpinMpi::Mpich;
    (0..size)
        .map(|rank| {
            let left = (rank + size - 1) % size;
            let left2 = (rank + size - 2) % size;
            let new = |name: &str| Comm::new(name, &world, readable);
            let mut comms = vec![new("MPI_COMM_WORLD"), new("MPI_COMM_SELF"), new("mqs-spin")];
            comms[1].group = vec![rank];
            // Receives: tag 600 pending; tag 100 matched by phase A and
            // complete (MPICH keeps no request of a complete receive on
            // any queue). With ob1's queues pending ones come first; from
            // the free list, in posting order.
            let pending = Op::recv(left2, left2, Some(600), 1);
            let complete = Op::recv(left, left, Some(100), 1).complete();
            comms[0].receives = Queue::Ops(match mpi {
                SpinMpi::Mpich => vec![pending],
                SpinMpi::OpenMpi(true) => vec![pending, complete],
                SpinMpi::OpenMpi(false) => vec![complete, pending],
            });
            comms[2].receives = Queue::Ops(vec![
                Op::recv(left, left, Some(200), 1),
                Op::recv(left, left, Some(400), BIG_INTS),
            ]);
            if readable {
                for (i, name) in [(0, "MPI_COMM_WORLD"), (2, "mqs-spin")] {
                    let mut held = Vec::new();
                    let mut waiting = Vec::new();
                    for m in messages
                        .iter()
                        .filter(|m| m.to == rank && m.comm == name && !m.matched)
                    {
                        let how = if m.count == BIG_INTS {
                            Protocol::Rendezvous
                        } else {
                            Protocol::Eager
                        };
                        let op = Op::unexpected(m.from, m.from, m.tag, m.count, how);
                        if m.in_transit {
                            waiting.push(op.in_transit());
                        } else if mpich {
                            held.push(op.mpich_arrived());
                        } else {
                            held.push(op);
                        }
                    }
                    // Tags are distinct per queue and the checker sorts both
                    // sides by them: that the MPI's own come first is for
                    // the caller to check.
                    held.extend(waiting);
                    comms[i].unexpected = Queue::AnyOrder(held);
                }
            }
            // Sends: the phase B Isends the MPI keeps requests of. ob1
            // keeps none of a small eager message sent inline; MPICH
            // keeps every one, an eager one complete.
            for (i, name) in [(0, "MPI_COMM_WORLD"), (2, "mqs-spin")] {
                let sends: Vec<Op> = messages
                    .iter()
                    .filter(|m| m.from == rank && m.comm == name && m.in_transit)
                    .filter(|m| mpich || m.count > 1)
                    .map(|m| {
                        let op = Op::send(m.to, m.to, m.tag, m.count);
                        let op = if mpich { op.mpich_send() } else { op };
                        if m.count == BIG_INTS {
                            op
                        } else {
                            op.eager()
                        }
                    })
                    .collect();
                comms[i].sends = Queue::AnyOrder(sends);
            }
            Process { rank, comms }
        })
        .collect()
}

/// Checks our DLL's dump of one process (the JSON of its `communicators`
/// section, docs/json.md) against what the fixture left: every
/// communicator in order, its group, and every queue exactly, operation by
/// operation in order: status, ranks, tag, length, actual fields, and in
/// `extra_text` the count and datatype, the send mode and the progress
/// lines our DLL writes (dll/README.md). Every difference is reported.
pub fn check_ours(expected: &Process, communicators: &Value) -> Result<(), String> {
    let mut errors = String::new();
    let mut fail = |text: String| {
        let _ = writeln!(errors, "  {text}");
    };
    if communicators["status"] != "ok" {
        return Err(format!(
            "rank {}: communicators not listed: {communicators}",
            expected.rank
        ));
    }
    let list = communicators["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = list.iter().filter_map(|c| c["name"].as_str()).collect();
    let wanted: Vec<&str> = expected.comms.iter().map(|c| c.name.as_str()).collect();
    if names != wanted {
        fail(format!("communicators {names:?}, expected {wanted:?}"));
    }
    for comm in &expected.comms {
        let Some(got) = list.iter().find(|c| c["name"] == comm.name.as_str()) else {
            continue;
        };
        if got["group"] != serde_json::json!(comm.group) {
            fail(format!(
                "{}: group {}, expected {:?}",
                comm.name, got["group"], comm.group
            ));
        }
        for (class, queue) in comm.queues() {
            let what = format!("{} {class}", comm.name);
            check_queue(&what, queue, &got[class], &mut fail);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "rank {}: our DLL's dump differs from the fixture:\n{errors}",
            expected.rank
        ))
    }
}

fn check_queue(what: &str, queue: &Queue, got: &Value, fail: &mut dyn FnMut(String)) {
    let (ops, any_order) = match queue {
        Queue::Unavailable => {
            if got["status"] != "not_available" {
                fail(format!("{what}: expected not available, got {got}"));
            }
            return;
        }
        Queue::Ops(ops) => (ops, false),
        Queue::AnyOrder(ops) => (ops, true),
    };
    if got["status"] != "ok" {
        fail(format!(
            "{what}: expected {} operations, got {got}",
            ops.len()
        ));
        return;
    }
    if !got["truncated"].is_null() {
        fail(format!("{what}: truncated: {}", got["truncated"]));
    }
    let mut list = got["operations"].as_array().cloned().unwrap_or_default();
    let mut ops = ops.clone();
    if any_order {
        list.sort_by_key(|o| o["desired_tag"].as_i64());
        ops.sort_by_key(|o| o.tag);
    }
    if list.len() != ops.len() {
        fail(format!(
            "{what}: {} operations, expected {}:\n    got {}\n    expected {ops:?}",
            list.len(),
            ops.len(),
            Value::Array(list.clone())
        ));
        return;
    }
    for (i, (op, got)) in ops.iter().zip(&list).enumerate() {
        let what = format!("{what} #{i}");
        for problem in op_problems(op, got) {
            fail(format!("{what}: {problem}; got {got}"));
        }
    }
}

/// What is wrong with one operation of ours.
fn op_problems(op: &Op, got: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let mut same = |field: &str, want: Value| {
        if got[field] != want {
            p.push(format!("{field} {} instead of {want}", got[field]));
        }
    };
    // An eager send may already count as complete.
    let status = got["status"].as_str().unwrap_or_default();
    let eager_ok = op.eager && status == OpStatus::Complete.name();
    if !eager_ok {
        same("status", Value::from(op.status.name()));
    }
    same("desired_local_rank", Value::from(op.peer));
    same("desired_global_rank", Value::from(op.global));
    same("desired_tag", op.tag.map_or(Value::Null, Value::from));
    same("desired_length", Value::from(op.length()));
    let actual = op.actual.unwrap_or(Actual {
        peer: -1,
        global: -1,
        tag: -1,
        length: -1,
    });
    // Sends say where they go in actual_* too; a receive's are only set
    // once it is matched (ours leaves a pending one's at -1).
    if op.actual.is_some() || (!op.send && op.unexpected.is_none()) {
        same("actual_local_rank", Value::from(actual.peer));
        same("actual_global_rank", Value::from(actual.global));
        same("actual_tag", Value::from(actual.tag));
        same("actual_length", Value::from(actual.length));
    }
    let lines: Vec<&str> = got["extra_text"]
        .as_array()
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let has = |line: &str| lines.contains(&line);
    let starts = |prefix: &str| lines.iter().any(|l| l.starts_with(prefix));
    if op.unexpected.is_some() {
        let transit = lines
            .first()
            .is_some_and(|l| l.starts_with(mqs_abi::IN_TRANSIT));
        if transit != op.in_transit {
            p.push(if op.in_transit {
                "not said to be in transit".into()
            } else {
                "said to be in transit, but the MPI holds it".into()
            });
        }
    }
    match op.unexpected {
        Some(Protocol::Eager) if !starts("eager message") => {
            p.push("extra_text does not say eager".into())
        }
        Some(Protocol::Rendezvous) if !starts("rendezvous") => {
            p.push("extra_text does not say rendezvous".into())
        }
        Some(_) => {}
        None => {
            let count = format!("{} x {}", op.count, op.datatype.0);
            if !has(&count) {
                p.push(format!("extra_text lacks \"{count}\""));
            }
        }
    }
    if let Some(mode) = op.mode.map(|m| format!("mode: {m}")) {
        if !has(&mode) {
            p.push(format!("extra_text lacks \"{mode}\""));
        }
    }
    match op.status {
        // An unexpected message says how much of it arrived instead.
        OpStatus::Complete
            if op.unexpected.is_none() && !has("complete, not yet waited for or freed") =>
        {
            p.push("extra_text does not say complete".into())
        }
        OpStatus::Matched if !op.send => {
            let arrived = lines.iter().find_map(|l| received(l));
            match arrived {
                Some((n, of)) if of != op.length() => p.push(format!(
                    "matched: {n} of {of} bytes, expected of {}",
                    op.length()
                )),
                Some((n, of)) if op.partial && !(0 < n && n < of) => {
                    p.push(format!("matched: {n} of {of} bytes, expected part only"))
                }
                Some(_) => {}
                None => p.push("extra_text does not say what arrived".into()),
            }
        }
        _ => {}
    }
    p
}

/// "matched; N of M bytes received" as (N, M).
fn received(line: &str) -> Option<(i64, i64)> {
    let rest = line.strip_prefix("matched; ")?;
    let (n, rest) = rest.split_once(" of ")?;
    let m = rest.strip_suffix(" bytes received")?;
    Some((n.parse().ok()?, m.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op_json(op: &Op, lines: &[&str]) -> Value {
        let a = op.actual.unwrap_or(Actual {
            peer: -1,
            global: -1,
            tag: -1,
            length: -1,
        });
        serde_json::json!({
            "status": op.status.name(),
            "desired_local_rank": op.peer,
            "desired_global_rank": op.global,
            "desired_tag": op.tag,
            "desired_length": op.length(),
            "actual_local_rank": a.peer,
            "actual_global_rank": a.global,
            "actual_tag": a.tag,
            "actual_length": a.length,
            "extra_text": lines,
        })
    }

    #[test]
    fn the_checker_sees_each_kind_of_difference() {
        let want = Op::recv(1, 1, Some(40), 100).matched(true);
        let good = op_json(
            &want,
            &["100 x MPI_INT", "matched; 10 of 400 bytes received"],
        );
        assert!(
            op_problems(&want, &good).is_empty(),
            "{:?}",
            op_problems(&want, &good)
        );
        let mut bad = good.clone();
        bad["extra_text"][0] = "101 x MPI_INT".into();
        assert_eq!(op_problems(&want, &bad).len(), 1);
        bad = good.clone();
        bad["extra_text"][1] = "matched; 400 of 400 bytes received".into();
        assert_eq!(op_problems(&want, &bad).len(), 1);
        bad = good.clone();
        bad["status"] = "pending".into();
        assert_eq!(op_problems(&want, &bad).len(), 1);
        bad = good.clone();
        bad["actual_length"] = 0.into();
        assert_eq!(op_problems(&want, &bad).len(), 1);
    }

    #[test]
    fn any_order_takes_a_permutation_and_eager_sends_either_status() {
        let a = Op::unexpected(2, 2, 42, 4, Protocol::Eager).mpich_arrived();
        let b = Op::unexpected(3, 3, 43, 4, Protocol::Eager).mpich_arrived();
        let text = ["eager message, all 16 bytes arrived"];
        let queue = |ops: Vec<Value>| serde_json::json!({"status": "ok", "operations": ops});
        let mut problems = Vec::new();
        let swapped = queue(vec![op_json(&b, &text), op_json(&a, &text)]);
        check_queue(
            "q",
            &Queue::AnyOrder(vec![a.clone(), b.clone()]),
            &swapped,
            &mut |p| problems.push(p),
        );
        assert!(problems.is_empty(), "{problems:?}");
        check_queue(
            "q",
            &Queue::Ops(vec![a.clone(), b.clone()]),
            &swapped,
            &mut |p| problems.push(p),
        );
        assert!(!problems.is_empty());
        problems.clear();
        let twice = queue(vec![op_json(&a, &text), op_json(&a, &text)]);
        check_queue("q", &Queue::AnyOrder(vec![a, b]), &twice, &mut |p| {
            problems.push(p)
        });
        assert!(!problems.is_empty());

        let send = Op::send(0, 0, 99, 16).mpich_send();
        let lines = ["16 x MPI_INT", "complete, not yet waited for or freed"];
        let mut done = op_json(&send, &lines);
        done["status"] = "complete".into();
        assert!(!op_problems(&send, &done).is_empty());
        assert!(op_problems(&send.clone().eager(), &done).is_empty());
        done["status"] = "matched".into();
        assert!(!op_problems(&send.eager(), &done).is_empty());
    }

    #[test]
    fn an_empty_queue_must_be_read_and_empty() {
        let mut problems = Vec::new();
        let unavailable = serde_json::json!({"status": "not_available", "reason": "x"});
        check_queue("q", &Queue::empty(), &unavailable, &mut |p| {
            problems.push(p)
        });
        assert_eq!(problems.len(), 1);
        let ok = serde_json::json!({"status": "ok", "operations": [], "truncated": null});
        problems.clear();
        check_queue("q", &Queue::empty(), &ok, &mut |p| problems.push(p));
        assert!(problems.is_empty());
    }
}
