//! What a collector and the front end say to each other over TCP.
//!
//! Each message is a frame: a 4-byte big-endian length, then that many
//! bytes of JSON. The collector speaks first ([`ToFront::Hello`], with the
//! one-time token it was started with); until it has, a frame may be at
//! most [`MAX_HELLO`] bytes, so that a stranger cannot make the front end
//! allocate much. Every read is bounded in time by the caller's socket
//! timeouts.
//!
//! ```text
//! collector                         front end
//!   Hello {token, host} ───────────▶  token checked, host matched
//!                      ◀─────────── Assignment {members, options} | Refused
//!   (--slurm: finds its node's processes of the job itself)
//!   Found {processes} ─────────────▶  they become the host's members
//!   (stops its members)
//!   Stopped ───────────────────────▶  waits for every host
//!                      ◀─────────── Go
//!   Process … Failure … Done ──────▶  merged rank by rank
//! ```
//!
//! In a tree ([`super::tree`]) every collector still says hello to the
//! front end, with the port it listens on for children. The front end
//! answers the roots with an assignment that names their children (and
//! theirs, down the tree), and the others with [`ToCollector::WaitForParent`].
//! A parent calls each child, proves the token ([`ToCollector::Parent`]) and
//! hands it its assignment; from then on the child speaks to its parent as
//! to the front end. A parent says `Stopped` once its own ranks and every
//! child's are stopped (or given up), passes `Go` down, and sends its own
//! results and its children's up, equal states merged ([`States`]), each
//! frame from a descendant naming that host; a child it lost is reported
//! ([`ToFront::Lost`]) with every host below it.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::inspect::DllChoice;
use crate::members::Member;
use mqs_core::model::{ProcessDump, RankFailure};

/// Bumped on any incompatible change of the messages.
pub const PROTOCOL: u32 = 5;

/// The largest frame read before the collector has proven its token.
pub const MAX_HELLO: usize = 64 << 10;

/// The largest frame read at all (one process's dump: a rank with a
/// hundred thousand pending operations is some 40 MB of JSON).
pub const MAX_FRAME: usize = 1 << 30;

/// A body longer than this travels deflated: a tree's states repeat the
/// same words class after class (a 100,000-rank halo exchange's 27 classes
/// from each of 32 roots were 1.3 MB of JSON).
const DEFLATE_ABOVE: usize = 16 << 10;

/// The bit of a frame's length that says its body is deflated.
const DEFLATED: u32 = 1 << 31;

/// From a collector to the front end.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToFront {
    Hello {
        protocol: u32,
        token: String,
        /// Its host's name (what the starter's table is matched against).
        host: String,
        /// Its node's name in Slurm, when it runs as a task of a Slurm step
        /// (a table written by Slurm names nodes so).
        #[serde(default)]
        node: Option<String>,
        pid: i32,
        /// The port it listens on for a parent's call, in a tree.
        #[serde(default)]
        listen: Option<u16>,
    },
    /// What it found to dump on its host, when told to look itself.
    Found {
        processes: Vec<FoundProcess>,
        /// Why it could not look, if it could not.
        problem: Option<String>,
        /// The host (key) it was found on, when relayed from below.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// Every member assigned is stopped (or failed to stop).
    Stopped,
    Process {
        process: Box<ProcessDump>,
        /// The host (key) it ran on, when relayed from below.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// Ranks in equal states, from a parent: one dump and who is in it.
    States { states: Box<States> },
    Failure {
        failure: RankFailure,
        /// The host (key) it ran on, when relayed from below.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// A parent lost the collector of `hosts` (a child and every host
    /// below it): their ranks not sent yet are out of reach.
    Lost { hosts: Vec<String>, reason: String },
    /// Everything was sent (in a tree: the whole subtree's).
    Done,
}

/// From the front end to a collector.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToCollector {
    Refused {
        reason: String,
    },
    /// The processes to dump (none: nothing to do on this host) and how.
    Assignment {
        members: Vec<Member>,
        options: ShareOptions,
        /// How long to wait for [`ToCollector::Go`] with the members
        /// stopped before letting them go unread.
        go_timeout_ms: u64,
        /// Find the members on this host: the MPI processes of this Slurm
        /// job (or step), as the node's slurmd lists them.
        #[serde(default)]
        discover: Option<Discover>,
        /// The collectors this one is the parent of, in a tree.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        children: Vec<Child>,
        /// It is part of a tree (with or without children): it sends its
        /// results as [`ToFront::States`].
        #[serde(default)]
        in_tree: bool,
    },
    /// Every host's members are stopped: dump.
    Go,
    /// In a tree: a parent collector will call, at the port given in the
    /// hello, within this time; this connection ends.
    WaitForParent {
        timeout_ms: u64,
    },
    /// A parent's first words to its child: the run's token.
    Parent {
        protocol: u32,
        token: String,
    },
}

/// A child in a tree, as its parent learns it: where it listens, its own
/// members, and its children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    /// The front end's key of its host (what relayed frames name).
    pub key: String,
    /// Its host's name, for messages.
    pub name: String,
    pub address: SocketAddr,
    pub members: Vec<Member>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
}

impl Child {
    /// How many levels of collectors are below it (0 for a leaf).
    pub fn height(&self) -> u32 {
        self.children
            .iter()
            .map(|c| 1 + c.height())
            .max()
            .unwrap_or(0)
    }

    /// The ranks assigned to it and to every host below it, each host
    /// counted as at least `per_host` (hosts that find their ranks
    /// themselves are told none).
    pub fn ranks(&self, per_host: u32) -> u32 {
        let own = u32::try_from(self.members.len())
            .unwrap_or(u32::MAX)
            .max(per_host);
        self.children
            .iter()
            .fold(own, |sum, c| sum.saturating_add(c.ranks(per_host)))
    }

    /// Its key and the keys of every host below it.
    pub fn subtree(&self) -> Vec<String> {
        let mut keys = vec![self.key.clone()];
        for c in &self.children {
            keys.extend(c.subtree());
        }
        keys
    }
}

pub use super::states::States;

/// A Slurm job or step whose processes a collector finds on its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discover {
    pub job: String,
    pub step: Option<String>,
}

/// A process a collector found, with the MPI job it belongs to (ranks of
/// different MPI jobs are numbered one job after the other).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundProcess {
    pub member: Member,
    pub group: String,
}

/// The dump options that travel to collectors: paths are as the nodes see
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareOptions {
    pub dll: DllChoice,
    pub trust_dll: bool,
    pub no_stop: bool,
    pub debug_dirs: Vec<PathBuf>,
    /// Also unwind every thread's call stack.
    pub stacks: bool,
    /// Send what only a per-rank output shows (buffer and frame addresses,
    /// thread ids, request addresses): off when the front end shows the job
    /// view, `--deadlock` or DOT, so that ranks whose views are equal travel
    /// as one state. A front end that does not say wants it.
    #[serde(default = "per_rank_detail_by_default")]
    pub per_rank_detail: bool,
    /// Ranks that no line names by pid travel by number, their hosts and
    /// pids in a roll call ([`crate::collect::states::States::by_number`]):
    /// for a job numbered by its ranks, without per-rank detail.
    #[serde(default)]
    pub ranks_by_number: bool,
}

fn per_rank_detail_by_default() -> bool {
    true
}

impl Default for ShareOptions {
    fn default() -> Self {
        Self {
            dll: DllChoice::default(),
            trust_dll: false,
            no_stop: false,
            debug_dirs: Vec::new(),
            stacks: false,
            per_rank_detail: true,
            ranks_by_number: false,
        }
    }
}

/// Writes one frame: its body's length (the top bit set if the body is
/// deflated, as bodies over [`DEFLATE_ABOVE`] are), then the body.
pub fn send(to: &mut impl Write, message: &impl Serialize) -> io::Result<()> {
    let mut body = serde_json::to_vec(message).map_err(io::Error::other)?;
    let mut deflated = 0;
    if body.len() > DEFLATE_ABOVE {
        let mut packer = DeflateEncoder::new(Vec::new(), Compression::fast());
        packer.write_all(&body)?;
        body = packer.finish()?;
        deflated = DEFLATED;
    }
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::other(format!("a message of {} bytes", body.len())))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(len | deflated).to_be_bytes());
    frame.extend_from_slice(&body);
    to.write_all(&frame)?;
    to.flush()
}

/// Reads one frame of at most `max` bytes (deflated, and once inflated).
pub fn receive<T: DeserializeOwned>(from: &mut impl Read, max: usize) -> io::Result<T> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    let (deflated, len) = (len & DEFLATED != 0, (len & !DEFLATED) as usize);
    let too_long = |len: usize| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {max} expected here)"),
        )
    };
    if len > max {
        return Err(too_long(len));
    }
    let mut body = vec![0u8; len];
    from.read_exact(&mut body)?;
    if deflated {
        let mut inflated = Vec::new();
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        DeflateDecoder::new(body.as_slice())
            .take(limit)
            .read_to_end(&mut inflated)?;
        if inflated.len() > max {
            return Err(too_long(inflated.len()));
        }
        body = inflated;
    }
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A secret for one run: 128 random bits, in hex.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new() -> io::Result<Self> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Self(mqs_core::hex::hex(&bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, in time that does not depend on
    /// where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// A token given (to a collector, in its arguments).
impl From<String> for Token {
    fn from(token: String) -> Self {
        Self(token)
    }
}

/// Never printed, even in debug output.
impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_are_bounded() {
        let mut wire = Vec::new();
        let hello = ToFront::Hello {
            protocol: PROTOCOL,
            token: "abc".into(),
            host: "nodea".into(),
            node: None,
            pid: 7,
            listen: None,
        };
        send(&mut wire, &hello).unwrap();
        send(&mut wire, &ToFront::Done).unwrap();
        let mut r = &wire[..];
        match receive::<ToFront>(&mut r, MAX_HELLO).unwrap() {
            ToFront::Hello {
                token, host, pid, ..
            } => {
                assert_eq!((token.as_str(), host.as_str(), pid), ("abc", "nodea", 7))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            receive::<ToFront>(&mut r, MAX_HELLO).unwrap(),
            ToFront::Done
        ));
        // Too big for where it is read: refused before it is read.
        let mut big = Vec::new();
        send(
            &mut big,
            &ToCollector::Refused {
                reason: "x".repeat(100),
            },
        )
        .unwrap();
        let err = receive::<ToCollector>(&mut &big[..], 50).unwrap_err();
        assert!(err.to_string().contains("at most 50"), "{err}");
        // Cut short.
        assert!(receive::<ToCollector>(&mut &big[..10], MAX_FRAME).is_err());
        // Not a message.
        let mut junk = 3u32.to_be_bytes().to_vec();
        junk.extend_from_slice(b"{}x");
        assert!(receive::<ToFront>(&mut &junk[..], MAX_FRAME).is_err());
    }

    #[test]
    fn large_frames_travel_deflated_and_are_bounded_once_inflated() {
        let reason = "the same words again and again; ".repeat(2_000);
        let mut wire = Vec::new();
        send(
            &mut wire,
            &ToCollector::Refused {
                reason: reason.clone(),
            },
        )
        .unwrap();
        let len = u32::from_be_bytes(wire[..4].try_into().unwrap());
        assert_ne!(len & DEFLATED, 0, "marked deflated");
        assert!(wire.len() < reason.len() / 10, "{} bytes", wire.len());
        match receive::<ToCollector>(&mut &wire[..], MAX_FRAME).unwrap() {
            ToCollector::Refused { reason: back } => assert_eq!(back, reason),
            other => panic!("{other:?}"),
        }
        // Small on the wire, too big once inflated: refused.
        let err = receive::<ToCollector>(&mut &wire[..], 20_000).unwrap_err();
        assert!(err.to_string().contains("at most 20000"), "{err}");
        // A small frame stays as it is.
        let mut small = Vec::new();
        send(&mut small, &ToFront::Done).unwrap();
        assert_eq!(
            u32::from_be_bytes(small[..4].try_into().unwrap()) & DEFLATED,
            0
        );
        // A deflated frame that is not deflate: an error, not a panic.
        let mut junk = (3u32 | DEFLATED).to_be_bytes().to_vec();
        junk.extend_from_slice(b"xyz");
        assert!(receive::<ToFront>(&mut &junk[..], MAX_FRAME).is_err());
    }

    #[test]
    fn tokens_are_random_and_compared_whole() {
        let a = Token::new().unwrap();
        let b = Token::new().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..31]));
        assert!(!a.matches(""));
        assert_eq!(format!("{a:?}"), "Token(..)");
    }
}
