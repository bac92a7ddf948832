//! The operations UCX's lists hold, as the DLL reports them, for any MPI:
//! a posted receive, a message that arrived and waits (unexpected), a
//! message a matched probe holds, a send its request pool holds. The MPI says what the tag means
//! ([`Tag`]) and who the peer is globally; the lines naming its own
//! requests are its own too.

use mqs_abi::{OpStatus, PendingOperation};

use super::matching::{Posted, Protocol, Unexpected};
use super::sends::Send;

/// A UCX tag as an MPI means it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// The MPI's context field: the communicator's `c_contextid` (Open
    /// MPI 4.1) or `c_index` (5.0), MPICH's `recvcontext_id` (+1: its
    /// collectives).
    pub context: u64,
    /// None: MPI_ANY_SOURCE.
    pub source: Option<i64>,
    /// None: MPI_ANY_TAG. Negative: Open MPI's own (collectives).
    pub tag: Option<i64>,
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A posted receive: pending, into the user's buffer, from `decoded`'s
/// source (`global` gives its global rank), without lines yet.
pub fn posted(posted: &Posted, decoded: &Tag, global: impl Fn(i64) -> i64) -> PendingOperation {
    PendingOperation {
        status: OpStatus::Pending,
        desired_local_rank: decoded.source.unwrap_or(-1),
        desired_global_rank: decoded.source.map_or(-1, global),
        desired_tag: decoded.tag,
        desired_length: clamp(posted.length),
        system_buffer: false,
        buffer: posted.buffer,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: Default::default(),
    }
}

/// A message in UCX's keeping (its descriptor the buffer): `Pending` when
/// it waits unexpected, `Complete` when a matched probe holds it (as ob1's
/// DLL view shows such a request: complete for matching, the data still in
/// the message). Without lines yet.
pub fn message(
    message: &Unexpected,
    decoded: &Tag,
    global: impl Fn(i64) -> i64,
    status: OpStatus,
) -> PendingOperation {
    let source = decoded.source.unwrap_or(-1);
    let global = global(source);
    let tag = decoded.tag.unwrap_or(-1);
    let length = message.length.map_or(-1, clamp);
    PendingOperation {
        status,
        desired_local_rank: source,
        desired_global_rank: global,
        desired_tag: Some(tag),
        desired_length: length,
        system_buffer: true,
        buffer: message.descriptor,
        actual_local_rank: source,
        actual_global_rank: global,
        actual_tag: tag,
        actual_length: length,
        extra_text: Default::default(),
    }
}

/// `posted #3 in UCX 1.13.1 matching order (hash)`, `where` added inside
/// the parentheses (MPICH's `, VCI 1`).
pub fn posted_line(posted: &Posted, number: usize, ucx: &str, place: &str) -> String {
    let queue = if posted.wild {
        "wildcard queue"
    } else {
        "hash"
    };
    format!("posted #{number} in {ucx} matching order ({queue}{place})")
}

/// How an unexpected message came (`eager message, UCX 1.13.1 descriptor
/// 0x...`, `place` added), and whether its sender waits for the match.
pub fn arrival_lines(message: &Unexpected, ucx: &str, place: &str) -> Vec<String> {
    let kind = match message.protocol {
        Protocol::EagerOnly => "eager".to_string(),
        Protocol::EagerFirst => "eager, first fragment".to_string(),
        Protocol::Rendezvous => "rendezvous".to_string(),
        Protocol::Other(f) => format!("descriptor flags {f:#x}"),
    };
    let mut lines = vec![format!(
        "{kind} message, {ucx} descriptor {:#x}{place}",
        message.descriptor
    )];
    if message.sync {
        lines.push("synchronous: its sender waits for the match".to_string());
    }
    lines
}

/// The lines of a message taken by `MPI_Mprobe`, held at `holder`.
pub fn probe_lines(message: &Unexpected, holder: u64, ucx: &str) -> Vec<String> {
    vec![
        format!("message taken by MPI_Mprobe: {holder:#x}"),
        "waits for MPI_Mrecv".to_string(),
        format!("{ucx} descriptor {:#x}", message.descriptor),
    ]
}

/// A send UCX holds, to `peer` (its rank in the communicator, None when
/// its endpoint was not found among the members; `global` gives its
/// global rank): pending, or complete and not yet waited for. Without
/// lines yet.
pub fn send(
    send: &Send,
    decoded: &Tag,
    peer: Option<i64>,
    global: impl Fn(i64) -> i64,
) -> PendingOperation {
    let local = peer.unwrap_or(-1);
    let global = peer.map_or(-1, global);
    let tag = decoded.tag.unwrap_or(-1);
    let length = clamp(send.length);
    PendingOperation {
        status: if send.completed {
            OpStatus::Complete
        } else {
            OpStatus::Pending
        },
        desired_local_rank: local,
        desired_global_rank: global,
        desired_tag: Some(tag),
        desired_length: length,
        system_buffer: false,
        buffer: send.buffer,
        actual_local_rank: local,
        actual_global_rank: global,
        actual_tag: tag,
        actual_length: length,
        extra_text: Default::default(),
    }
}

/// The lines UCX's side of a send says: its request and endpoint, and
/// what it waits for.
pub fn send_lines(send: &Send, ucx: &str, found: bool) -> Vec<String> {
    let mut lines = vec![format!("{ucx} send {:#x}, ep {:#x}", send.request, send.ep)];
    if !found {
        lines.push("destination unknown: no member has its endpoint".to_string());
    }
    if send.completed {
        lines.push("complete, not yet waited for or freed".to_string());
    } else if send.sync {
        lines.push("synchronous: waits for its receiver to match it".to_string());
    }
    if send.released {
        lines.push("freed by its owner before it completed".to_string());
    }
    lines
}
