//! Messages in transit: what arrived at a rank's shared-memory transport
//! and was not handled yet by its progress engine, shown after the MPI's
//! own unexpected messages, each saying where it was found.
//!
//! An MPI moves a message from its transport into its matching queues only
//! while the receiving rank runs its progress engine (inside an MPI call).
//! A rank that stopped calling MPI leaves what arrives since in the
//! transport: Open MPI's shared-memory FIFO and fast boxes, MPICH
//! nemesis' receive queue and fast boxes. Each backend reads its
//! transports ([`crate::openmpi::sm`], [`crate::mpich::nemesis`]) into a
//! [`Scan`]; this module holds what they share: the message as found, the
//! operation it becomes (its first `extra_text` line starts with
//! [`mqs_abi::IN_TRANSIT`]), and what is said when a transport cannot be
//! read ("messages in transit on tcp not listed": never an empty list that
//! looks complete).

use mqs_abi::{OpStatus, PendingOperation, IN_TRANSIT};

use crate::by_key::ByKey;
use crate::walk::Stop;

/// How a message travels, as its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The data came with the header.
    Eager,
    /// Only the header (and perhaps the first bytes) came; the rest waits
    /// for a matching receive.
    Rendezvous,
    /// A rendezvous whose receiver reads the data from the sender.
    RendezvousGet,
}

/// One message found in a transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Where it was found, after the marker: `vader fast box`.
    pub place: &'static str,
    /// The source's rank in the communicator (its remote group's).
    pub source: i64,
    pub tag: i64,
    /// The message's full length in bytes (a rendezvous header's
    /// announced length).
    pub length: u64,
    /// Bytes of it that came with the header.
    pub arrived: u64,
    pub protocol: Protocol,
    /// The MPI's sequence number of the message, where it has one.
    pub seq: Option<u64>,
    /// Where the bytes that came are (0: none).
    pub buffer: u64,
    /// The fragment or cell it was found in.
    pub at: u64,
    /// What is special about it ("not linked yet: its writer stopped").
    pub note: Option<&'static str>,
    /// Its place in the order the transports were read (arrival order as
    /// far as the transport keeps it): merges messages kept under two keys.
    pub order: u32,
}

impl Message {
    /// The operation of the unexpected queue this message is shown as,
    /// with `global` its source's global rank.
    pub fn to_operation(&self, global: i64) -> PendingOperation {
        let length = i64::try_from(self.length).unwrap_or(i64::MAX);
        let kind = match self.protocol {
            Protocol::Eager => "eager",
            Protocol::Rendezvous => "rendezvous",
            Protocol::RendezvousGet => "rendezvous (RDMA get)",
        };
        let mut lines = vec![
            format!("{IN_TRANSIT}{}", self.place),
            format!("{kind} message at {:#x}", self.at),
        ];
        if self.protocol != Protocol::Eager {
            lines.push(format!("{} of {} bytes arrived", self.arrived, self.length));
        }
        if let Some(seq) = self.seq {
            lines.push(format!("sequence {seq}"));
        }
        if let Some(note) = self.note {
            lines.push(note.to_string());
        }
        PendingOperation {
            status: OpStatus::Pending,
            desired_local_rank: self.source,
            desired_global_rank: global,
            desired_tag: Some(self.tag),
            desired_length: length,
            system_buffer: true,
            buffer: self.buffer,
            actual_local_rank: self.source,
            actual_global_rank: global,
            actual_tag: self.tag,
            actual_length: length,
            extra_text: lines.into(),
        }
    }
}

/// Longest line of `extra_text` (the interface's buffer holds 64 bytes
/// with the NUL).
const MAX_LINE: usize = 63;

/// Why messages in transit may be missing from what was listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unlisted {
    /// Each reason: in full, and in short for a line of its own.
    reasons: Vec<(String, String)>,
}

impl Unlisted {
    pub fn add(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        self.add_detailed(reason.clone(), reason);
    }

    /// A reason whose full text does not fit a line: `short` goes on the
    /// line, `full` in the reason of an empty queue.
    pub fn add_detailed(&mut self, short: String, full: String) {
        if !self.reasons.iter().any(|(f, _)| *f == full) {
            self.reasons.push((full, short));
        }
    }

    /// Adds the reasons of `other` not said yet.
    pub fn merge(&mut self, other: &Unlisted) {
        for (full, short) in &other.reasons {
            self.add_detailed(short.clone(), full.clone());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty()
    }

    /// Every reason, for an empty queue's "no information" reason.
    pub fn why(&self) -> Option<String> {
        (!self.reasons.is_empty()).then(|| {
            self.reasons
                .iter()
                .map(|(full, _)| full.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// One line for the last operation of a queue (at most 63 bytes).
    pub fn line(&self) -> Option<String> {
        let (_, first) = self.reasons.first()?;
        let mut line = if self.reasons.len() > 1 {
            format!("{first} (+{} more)", self.reasons.len() - 1)
        } else {
            first.clone()
        };
        if line.len() > MAX_LINE {
            let mut end = MAX_LINE - 3;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push_str("...");
        }
        Some(line)
    }
}

/// What one read of a process's transports found, grouped by the key that
/// names a communicator (a context id), in arrival order within each.
#[derive(Debug, Default)]
pub struct Scan {
    pub by_key: ByKey<Message>,
    /// Why a walk ended early: every communicator's list may lack some.
    pub stop: Option<Stop>,
    /// What could not be read at all, or not decoded.
    pub unlisted: Unlisted,
}

impl Scan {
    /// Why the walk of a transport ended early, keeping the first reason.
    pub fn cut(&mut self, stop: Stop) {
        self.stop = self.stop.or(Some(stop));
    }

    /// Why the walk of `transport` ended early. Memory that cannot be read
    /// is said of the transport, not as a cut list: a core file leaves a
    /// process's shared mappings out (the segments messages wait in), and
    /// the MPI's own queues read from it are whole.
    pub fn cut_in(&mut self, transport: &str, stop: Stop) {
        match stop {
            Stop::Unreadable(at) => self.unlisted.add_detailed(
                format!("{} (memory unreadable)", not_listed(transport)),
                format!("{} ({at:#x} unreadable)", not_listed(transport)),
            ),
            other => self.cut(other),
        }
    }
}

/// The reason said of a transport that cannot be read.
pub fn not_listed(transport: &str) -> String {
    format!("messages in transit on {transport} not listed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(protocol: Protocol) -> Message {
        Message {
            place: "vader fast box",
            source: 3,
            tag: 42,
            length: 400_000,
            arrived: 0,
            protocol,
            seq: Some(7),
            buffer: 0,
            at: 0x1000,
            note: None,
            order: 0,
        }
    }

    #[test]
    fn the_first_line_says_where_and_a_rendezvous_its_full_length() {
        let op = message(Protocol::RendezvousGet).to_operation(5);
        assert!(op.is_in_transit());
        assert_eq!(op.extra_text.first(), Some("in transit: vader fast box"));
        assert_eq!(op.desired_length, 400_000);
        assert_eq!(op.actual_length, 400_000);
        assert_eq!(op.desired_global_rank, 5);
        assert_eq!(op.status, OpStatus::Pending);
        assert!(op
            .extra_text
            .iter()
            .any(|l| l == "0 of 400000 bytes arrived"));
        assert!(op.extra_text.iter().all(|l| l.len() <= MAX_LINE));
        let eager = Message {
            length: 4,
            arrived: 4,
            note: Some("not linked yet: its writer stopped"),
            ..message(Protocol::Eager)
        }
        .to_operation(-1);
        assert_eq!(eager.extra_text.len(), 4);
        assert!(eager
            .extra_text
            .iter()
            .any(|l| l.starts_with("eager message")));
    }

    #[test]
    fn unlisted_reasons_fit_one_line() {
        let mut u = Unlisted::default();
        assert_eq!(u.line(), None);
        u.add(not_listed("tcp"));
        u.add(not_listed("tcp"));
        assert_eq!(
            u.line().as_deref(),
            Some("messages in transit on tcp not listed")
        );
        u.add("a very long reason that goes on and on and on and on and on and on");
        let line = u.line().unwrap_or_default();
        assert!(line.len() <= MAX_LINE, "{line}");
        assert!(u.why().is_some_and(|w| w.contains("on and on")));
    }
}
