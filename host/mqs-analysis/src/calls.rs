//! What the stacks say a rank waits for: the MPI call its main thread is
//! in, with the peers, tags and requests its frame's arguments name (read
//! where the MPI has debug information, `mqs-stacks`). Where the DLL
//! cannot list a rank's queues (MPICH ch4 matches receives in its network
//! module), this is the only way to know; where it can, the two are
//! matched and disagreements said.

use mqs_abi::OpClass;
use mqs_core::model::CallArgs;

use crate::global::{Job, Op, Peer, Rank};

/// Point-to-point calls that block until a receive is matched.
pub(crate) const RECEIVES: [&str; 3] = ["MPI_Recv", "MPI_Probe", "MPI_Mprobe"];
/// Point-to-point calls that may block until the destination receives.
pub(crate) const SENDS: [&str; 4] = ["MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend"];
/// Calls that block on both a send and a receive.
pub(crate) const SENDRECVS: [&str; 2] = ["MPI_Sendrecv", "MPI_Sendrecv_replace"];
/// Calls that return by themselves, whatever is pending: a rank in one of
/// them is moving (polling), not waiting.
const POLLING: [&str; 14] = [
    "MPI_Iprobe",
    "MPI_Improbe",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
    "MPI_Isend",
    "MPI_Issend",
    "MPI_Irsend",
    "MPI_Ibsend",
    "MPI_Irecv",
    "MPI_Imrecv",
    "MPI_Wtime",
    "MPI_Request_get_status",
];
/// `MPI_Wait*`: (name, whether every request must complete).
pub(crate) const WAITS: [(&str, bool); 4] = [
    ("MPI_Wait", true),
    ("MPI_Waitall", true),
    ("MPI_Waitany", false),
    ("MPI_Waitsome", false),
];
/// MPI_ANY_TAG in both MPIs.
const ANY_TAG: i64 = -1;

/// One operation a call waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOp {
    pub class: OpClass,
    /// Index into `Job::comms`, where the call's communicator is known.
    pub comm: Option<usize>,
    pub peer: Peer,
    /// The peer's rank in the communicator (None for ANY_SOURCE).
    pub local_peer: Option<i64>,
    /// None: MPI_ANY_TAG.
    pub tag: Option<i64>,
    /// The operation the DLL lists for it (index into `Job::ops`).
    pub listed: Option<usize>,
}

impl CallOp {
    /// The operation the DLL lists as `Job::ops[index]`.
    fn listed(index: usize, o: &Op<'_>) -> Self {
        CallOp {
            class: o.class,
            comm: Some(o.comm),
            peer: o.peer,
            local_peer: o.local_peer,
            tag: o.tag,
            listed: Some(index),
        }
    }
}

/// What the call a rank's main thread is in tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// It waits on these; with `all`, until every one completes
    /// (`MPI_Wait`, `MPI_Waitall`), else until any does.
    Ops { ops: Vec<CallOp>, all: bool },
    /// It is in a call that returns by itself: it moves.
    Polling,
    /// It waits on requests the DLL does not list.
    Unknown(String),
}

/// The call one rank is in, as its stack tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub rank: i64,
    /// `MPI_Recv`, without the profiling `P`.
    pub entry: String,
    pub blocked: Blocked,
    /// Where the DLL's queues contradict the stack, in words.
    pub disagrees: Option<String>,
}

/// Why a rank's stack, in a blocking call, does not say what it waits for:
/// the call's arguments could not be read (no debug information for them
/// in the MPI library, or optimised away at that point).
pub fn arguments_missing(rank: &Rank<'_>) -> Option<String> {
    let entry = rank.entry.as_deref()?;
    let blocking = RECEIVES
        .iter()
        .chain(&SENDS)
        .chain(&SENDRECVS)
        .any(|n| *n == entry)
        || WAITS.iter().any(|(n, _)| *n == entry);
    if !blocking || rank.call_args.is_some() {
        return None;
    }
    let object = rank
        .main?
        .frames
        .iter()
        .rev()
        .find(|f| {
            f.function
                .as_deref()
                .is_some_and(|n| n.trim_start_matches('P') == entry)
        })
        .and_then(|f| f.object.as_deref())
        .map(|o| {
            std::path::Path::new(o)
                .file_name()
                .map_or(o.to_owned(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "the MPI library".into());
    Some(format!(
        "its stack is in {entry}, whose arguments {object} has no debug information for \
         here (its debug file, --debug-dir, or debuginfod would give them)"
    ))
}

/// The calls of every rank whose stack says something about its waits.
pub fn calls(job: &Job<'_>) -> Vec<Call> {
    job.ranks.iter().filter_map(|r| call_of(job, r)).collect()
}

fn call_of(job: &Job<'_>, rank: &Rank<'_>) -> Option<Call> {
    let entry = rank.entry.clone()?;
    let name = entry.as_str();
    let call = |blocked| Call {
        rank: rank.rank,
        entry: entry.clone(),
        blocked,
        disagrees: None,
    };
    if POLLING.contains(&name) {
        return Some(call(Blocked::Polling));
    }
    let args = rank.call_args?;
    if let Some(&(_, all)) = WAITS.iter().find(|(n, _)| *n == name) {
        return Some(call(waiting_on_requests(job, rank, args, all)));
    }
    let comm = rank.comm_arg.and_then(|c| job.frame_comm(rank.rank, &c));
    let mut ops = Vec::new();
    let mut wanted = |class: OpClass, peer: &str, tag: &str| -> Option<()> {
        let peer = args.int(peer)?;
        if args.is_proc_null(peer) {
            // MPI_PROC_NULL completes at once: nothing to wait for.
            return Some(());
        }
        let tag = args.int(tag)?;
        ops.push(p2p(job, rank.rank, class, comm, args, peer, tag));
        Some(())
    };
    if RECEIVES.contains(&name) {
        if wanted(OpClass::PendingReceives, "source", "tag").is_none() {
            // The arguments are gone (optimised away at this point of the
            // call): the DLL may still say which receive the call waits on.
            return blocking_receive(job, rank.rank).map(|op| {
                call(Blocked::Ops {
                    ops: vec![op],
                    all: false,
                })
            });
        }
    } else if SENDS.contains(&name) {
        wanted(OpClass::PendingSends, "dest", "tag")?;
    } else if SENDRECVS.contains(&name) {
        wanted(OpClass::PendingSends, "dest", "sendtag")?;
        wanted(OpClass::PendingReceives, "source", "recvtag")?;
    } else {
        return None;
    }
    if ops.is_empty() {
        return Some(call(Blocked::Polling));
    }
    let disagrees = disagreement(job, rank.rank, &entry, &ops);
    Some(Call {
        disagrees,
        ..call(Blocked::Ops { ops, all: false })
    })
}

/// A point-to-point operation of the call, matched to the DLL's listing of
/// the same (rank, queue, communicator, peer, tag) where there is one.
fn p2p(
    job: &Job<'_>,
    rank: i64,
    class: OpClass,
    comm: Option<usize>,
    args: &CallArgs,
    peer: i64,
    tag: i64,
) -> CallOp {
    let (peer, local_peer) = match comm {
        _ if args.is_any_source(peer) => (Peer::Any, None),
        Some(c) => (job.peer_of(c, peer), Some(peer)),
        None => (Peer::Local(peer), Some(peer)),
    };
    let tag = (tag != ANY_TAG).then_some(tag);
    let listed = comm.and_then(|c| {
        job.op_indices(rank).find(|&i| {
            let o = &job.ops[i];
            o.class == class && o.comm == c && o.peer == peer && o.tag == tag
        })
    });
    CallOp {
        class,
        comm,
        peer,
        local_peer,
        tag,
        listed,
    }
}

/// The one receive of `rank` the DLL marks as a blocking call's
/// ([`mqs_abi::BLOCKING_RECEIVE`]), as the operation the call waits on.
fn blocking_receive(job: &Job<'_>, rank: i64) -> Option<CallOp> {
    let range = job.op_indices(rank);
    let first = range.start;
    let mut marked = job.ops[range].iter().enumerate().filter(|(_, o)| {
        o.class == OpClass::PendingReceives
            && o.op
                .extra_text
                .first()
                .is_some_and(|l| l.starts_with(mqs_abi::BLOCKING_RECEIVE))
    });
    let (i, o) = marked.next()?;
    let i = first + i;
    if marked.next().is_some() {
        return None;
    }
    Some(CallOp::listed(i, o))
}

/// The requests of an `MPI_Wait*` call, matched by address to the
/// operations the DLL lists with them (mqs's DLL names each request).
fn waiting_on_requests(job: &Job<'_>, rank: &Rank<'_>, args: &CallArgs, all: bool) -> Blocked {
    let mut ops = Vec::new();
    for request in &args.requests {
        let found = job.op_indices(rank.rank).find(|&i| {
            let o = &job.ops[i];
            o.class != OpClass::UnexpectedMessages
                && o.op
                    .extra_text
                    .iter()
                    .any(|l| mqs_abi::request_of(l) == Some(*request))
        });
        if let Some(i) = found {
            ops.push(CallOp::listed(i, &job.ops[i]));
        }
    }
    if !ops.is_empty() {
        return Blocked::Ops { ops, all };
    }
    let n = args.requests.len();
    Blocked::Unknown(format!(
        "in {} on {n} request{} the DLL does not list",
        if all { "MPI_Waitall" } else { "MPI_Waitany" },
        if n == 1 { "" } else { "s" }
    ))
}

/// Where the rank's queue of that class on that communicator was read and
/// holds no such operation: the stack and the DLL disagree.
fn disagreement(job: &Job<'_>, rank: i64, entry: &str, ops: &[CallOp]) -> Option<String> {
    let r = job.rank(rank)?;
    let missing: Vec<String> = ops
        .iter()
        .filter(|op| op.listed.is_none())
        .filter_map(|op| {
            let comm = &job.comms[op.comm?];
            let read = match &r.process.communicators {
                mqs_core::model::Section::Ok { value } => value.list.iter().any(|c| {
                    job.comm_of(rank, c.unique_id) == op.comm
                        && matches!(c.queue(op.class), mqs_core::model::Section::Ok { .. })
                }),
                _ => false,
            };
            read.then(|| {
                let peer = match op.peer {
                    Peer::Any => "ANY_SOURCE".to_string(),
                    Peer::Rank(g) => format!("rank {g}"),
                    Peer::Local(l) => format!("{} rank {l}", comm.label()),
                };
                let tag = op.tag.map_or("any tag".to_string(), |t| format!("tag {t}"));
                let (what, queue) = if op.class == OpClass::PendingSends {
                    ("to", "send queue")
                } else {
                    ("from", "receive queue")
                };
                format!(
                    "rank {rank} is in {entry} {what} {peer} {tag} on {}, which its {queue} does \
                     not list",
                    comm.label()
                )
            })
        })
        .collect();
    (!missing.is_empty()).then(|| missing.join("; "))
}
