//! A safe model over the raw ABI structures.
//!
//! Values keep what the DLL wrote, without second-guessing it: a DLL that
//! writes ANY_SOURCE as 4294967295 gets 4294967295 here, so hosts can show
//! and cross-check exactly what each DLL reports.

use std::ffi::c_char;
use std::fmt;

use crate::ffi::mpi1::{mqs_communicator, mqs_pending_operation};
use crate::ffi::mpi2::mqs_process_location;
use crate::lines::Lines;

/// What an ABI function returned: one of the three shared codes, or a code
/// private to the side that returned it (>= `mqs_first_user_code`), which
/// only that side can turn into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReturnCode {
    Ok,
    NoInformation,
    EndOfList,
    /// Any other value; meaningful only to the side that returned it.
    Other(i32),
}

impl ReturnCode {
    pub fn from_raw(code: i32) -> Self {
        match code {
            0 => Self::Ok,
            1 => Self::NoInformation,
            2 => Self::EndOfList,
            other => Self::Other(other),
        }
    }

    pub fn to_raw(self) -> i32 {
        match self {
            Self::Ok => 0,
            Self::NoInformation => 1,
            Self::EndOfList => 2,
            Self::Other(code) => code,
        }
    }

    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

impl fmt::Display for ReturnCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ok => f.write_str("mqs_ok"),
            Self::NoInformation => f.write_str("mqs_no_information"),
            Self::EndOfList => f.write_str("mqs_end_of_list"),
            Self::Other(code) => write!(f, "code {code}"),
        }
    }
}

/// The three queues of a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpClass {
    PendingSends,
    PendingReceives,
    UnexpectedMessages,
}

impl OpClass {
    /// Every class, in the order hosts traditionally ask for them.
    pub const ALL: [OpClass; 3] = [
        OpClass::PendingSends,
        OpClass::PendingReceives,
        OpClass::UnexpectedMessages,
    ];

    pub fn from_raw(value: i32) -> Option<Self> {
        match value {
            0 => Some(Self::PendingSends),
            1 => Some(Self::PendingReceives),
            2 => Some(Self::UnexpectedMessages),
            _ => None,
        }
    }

    pub fn to_raw(self) -> i32 {
        self as i32
    }

    /// Short stable name, used in text and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Self::PendingSends => "sends",
            Self::PendingReceives => "receives",
            Self::UnexpectedMessages => "unexpected",
        }
    }
}

/// The `status` of a pending operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpStatus {
    Pending,
    Matched,
    Complete,
    /// A value outside the enum, kept so that a misbehaving DLL is visible.
    Unknown(i32),
}

impl OpStatus {
    pub fn from_raw(value: i32) -> Self {
        match value {
            0 => Self::Pending,
            1 => Self::Matched,
            2 => Self::Complete,
            other => Self::Unknown(other),
        }
    }

    pub fn to_raw(self) -> i32 {
        match self {
            Self::Pending => 0,
            Self::Matched => 1,
            Self::Complete => 2,
            Self::Unknown(v) => v,
        }
    }

    /// The status [`OpStatus::name`] gives this name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "pending" => Some(Self::Pending),
            "matched" => Some(Self::Matched),
            "complete" => Some(Self::Complete),
            other => {
                let value = other.strip_prefix("status ")?.parse().ok()?;
                // A known value always goes by its name.
                matches!(Self::from_raw(value), Self::Unknown(_)).then_some(Self::Unknown(value))
            }
        }
    }

    pub fn name(self) -> String {
        match self {
            Self::Pending => "pending".into(),
            Self::Matched => "matched".into(),
            Self::Complete => "complete".into(),
            Self::Unknown(v) => format!("status {v}"),
        }
    }
}

/// Serialised as its name ("pending", "matched", "complete", "status N").
#[cfg(feature = "serde")]
impl serde::Serialize for OpStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

/// Read back from its name, so that a serialised dump can be read again.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for OpStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        OpStatus::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("{name:?} is not an operation status")))
    }
}

/// Decodes a fixed-size C character array: up to the first NUL or the end of
/// the array, whichever comes first, with invalid UTF-8 replaced.
pub fn decode_c_chars(chars: &[c_char]) -> String {
    // c_char is i8 or u8 depending on the platform; the bytes are what
    // matter. One allocation for a valid line, none for an empty one: a
    // dump decodes several lines per operation, of 100,000s.
    let len = chars.iter().position(|&c| c == 0).unwrap_or(chars.len());
    let bytes: Vec<u8> = chars[..len].iter().map(|&c| c as u8).collect();
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Writes `text` into a fixed-size C character array, always NUL-terminated,
/// truncated at a character boundary if it does not fit; the rest is zeroed.
/// Returns whether the whole text fitted.
pub fn encode_c_chars(text: &str, out: &mut [c_char]) -> bool {
    out.fill(0);
    let Some(room) = out.len().checked_sub(1) else {
        return text.is_empty();
    };
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    for (slot, &b) in out.iter_mut().zip(text.as_bytes()[..end].iter()) {
        *slot = b as c_char;
    }
    end == text.len()
}

/// A communicator as a DLL described it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Communicator {
    pub unique_id: u64,
    pub local_rank: i64,
    pub size: i64,
    pub name: String,
}

impl Communicator {
    pub fn from_raw(raw: &mqs_communicator) -> Self {
        Self {
            unique_id: raw.unique_id,
            local_rank: raw.local_rank,
            size: raw.size,
            name: decode_c_chars(&raw.name),
        }
    }

    /// Fills a raw structure (as a DLL does); the name is truncated to fit.
    pub fn write_raw(&self, raw: &mut mqs_communicator) {
        raw.unique_id = self.unique_id;
        raw.local_rank = self.local_rank;
        raw.size = self.size;
        encode_c_chars(&self.name, &mut raw.name);
    }
}

/// `MPI_ANY_TAG` (and `MPI_ANY_SOURCE`) in Open MPI and MPICH: what a wild
/// receive's `desired_tag` holds next to `tag_wild`.
pub const ANY_TAG: i64 = -1;

/// How an unexpected message that arrived but was not yet handled by its
/// rank's progress engine is told apart: the first line of its
/// `extra_text` starts with this marker, followed by where it was found
/// (`in transit: vader fast box`, `in transit: nemesis receive queue`).
/// Such a message waits in the receiver's transport, not in the MPI's own
/// queues: the receiver has not called MPI since it arrived. DLLs that read
/// transports put it there; hosts look for it to tell the two apart.
pub const IN_TRANSIT: &str = "in transit: ";

/// A pending send, posted receive or unexpected message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PendingOperation {
    pub status: OpStatus,
    pub desired_local_rank: i64,
    pub desired_global_rank: i64,
    /// `None` when the DLL set `tag_wild` (MPI_ANY_TAG).
    pub desired_tag: Option<i64>,
    pub desired_length: i64,
    pub system_buffer: bool,
    pub buffer: u64,
    pub actual_local_rank: i64,
    pub actual_global_rank: i64,
    pub actual_tag: i64,
    pub actual_length: i64,
    /// The lines of `extra_text` up to the first empty one.
    pub extra_text: Lines,
}

impl Default for PendingOperation {
    fn default() -> Self {
        Self::from_raw(&mqs_pending_operation::default())
    }
}

impl PendingOperation {
    /// Whether this operation waits in its receiver's transport: the first
    /// line of its `extra_text` starts with [`IN_TRANSIT`].
    pub fn is_in_transit(&self) -> bool {
        self.extra_text
            .first()
            .is_some_and(|l| l.starts_with(IN_TRANSIT))
    }

    pub fn from_raw(raw: &mqs_pending_operation) -> Self {
        // Exactly as many lines as there are, in one allocation of the
        // exact size: a dump holds 100,000s. (c_char is i8 or u8 depending
        // on the platform; the bytes are what matter.)
        let lines = raw.extra_text.map(|line| {
            let bytes = line.map(|c| c as u8);
            let len = memchr::memchr(0, &bytes).unwrap_or(bytes.len());
            (bytes, len)
        });
        let n = lines
            .iter()
            .position(|&(_, len)| len == 0)
            .unwrap_or(lines.len());
        let size = lines[..n].iter().map(|(_, len)| len + 1).sum();
        let mut text = String::with_capacity(size);
        for (bytes, len) in &lines[..n] {
            match std::str::from_utf8(&bytes[..*len]) {
                Ok(line) => text.push_str(line),
                Err(_) => text.push_str(&String::from_utf8_lossy(&bytes[..*len])),
            }
            text.push('\0');
        }
        let extra_text = Lines::from_nul_terminated(text);
        Self {
            status: OpStatus::from_raw(raw.status),
            desired_local_rank: raw.desired_local_rank,
            desired_global_rank: raw.desired_global_rank,
            desired_tag: (raw.tag_wild == 0).then_some(raw.desired_tag),
            desired_length: raw.desired_length,
            system_buffer: raw.system_buffer != 0,
            buffer: raw.buffer,
            actual_local_rank: raw.actual_local_rank,
            actual_global_rank: raw.actual_global_rank,
            actual_tag: raw.actual_tag,
            actual_length: raw.actual_length,
            extra_text,
        }
    }

    /// Fills a raw structure (as a DLL does). Lines past the fifth are
    /// dropped and long lines truncated; an empty line would end the list
    /// for readers, so it is written as a single space.
    pub fn write_raw(&self, raw: &mut mqs_pending_operation) {
        raw.status = self.status.to_raw();
        raw.desired_local_rank = self.desired_local_rank;
        raw.desired_global_rank = self.desired_global_rank;
        raw.tag_wild = i32::from(self.desired_tag.is_none());
        // Debuggers print desired_tag whatever tag_wild says (padb does).
        raw.desired_tag = self.desired_tag.unwrap_or(ANY_TAG);
        raw.desired_length = self.desired_length;
        raw.system_buffer = i32::from(self.system_buffer);
        raw.buffer = self.buffer;
        raw.actual_local_rank = self.actual_local_rank;
        raw.actual_global_rank = self.actual_global_rank;
        raw.actual_tag = self.actual_tag;
        raw.actual_length = self.actual_length;
        // Each line found with memchr (a NUL is one byte in UTF-8, so both
        // sides of it are whole chars): once per operation of 100,000s.
        let mut rest = self.extra_text.as_nul_terminated();
        for slot in raw.extra_text.iter_mut() {
            match memchr::memchr(0, rest.as_bytes()) {
                Some(end) => {
                    let line = &rest[..end];
                    encode_c_chars(if line.is_empty() { " " } else { line }, slot);
                    rest = &rest[end + 1..];
                }
                None => slot.fill(0),
            }
        }
    }
}

/// Where a process created by the MPI lives (MPI-2 `mqs_process_location`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessLocation {
    pub pid: i64,
    pub image_name: String,
    pub host_name: String,
}

impl ProcessLocation {
    pub fn from_raw(raw: &mqs_process_location) -> Self {
        Self {
            pid: raw.pid,
            image_name: decode_c_chars(&raw.image_name),
            host_name: decode_c_chars(&raw.host_name),
        }
    }

    pub fn write_raw(&self, raw: &mut mqs_process_location) {
        raw.pid = self.pid;
        encode_c_chars(&self.image_name, &mut raw.image_name);
        encode_c_chars(&self.host_name, &mut raw.host_name);
    }
}

/// The line of an operation's `extra_text` that names the MPI request it
/// is (mqs's DLL writes one: `receive request 0x7f...`): how a host matches
/// the requests a rank waits on in `MPI_Wait*` to the operations listed.
pub fn request_line(what: &str, address: u64) -> String {
    format!("{what} request {address:#x}")
}

/// [`request_line`] as parts of a [`crate::LinesBuf`] line, without the
/// formatting machinery (the collectors renumber every operation's).
pub fn request_parts(what: &str, address: u64) -> [crate::Part<'_>; 3] {
    [
        crate::Part::Text(what),
        crate::Part::Lit(" request "),
        crate::Part::Hex(address),
    ]
}

/// How the first `extra_text` line of a receive starts when a blocking call
/// (`MPI_Recv`) waits on it and it has no MPI request (mqs's DLL under
/// Open MPI's pml ucx: the request lives on the caller's stack). A host
/// whose stack shows the rank in a blocking receive, but cannot read the
/// call's arguments, takes the one such receive for the call's.
pub const BLOCKING_RECEIVE: &str = "blocking receive: ";

/// The request address a [`request_line`] names.
pub fn request_of(line: &str) -> Option<u64> {
    request_split(line).map(|(_, address)| address)
}

/// What a [`request_line`] says the request is (`receive`), and its
/// address.
pub fn request_split(line: &str) -> Option<(&str, u64)> {
    // Asked of every line of every operation of every rank: the marker is
    // looked for from the end by hand, which unlike `rsplit_once` sets up
    // no substring searcher per line.
    const MARK: &[u8] = b" request 0x";
    let bytes = line.as_bytes();
    let at = bytes.windows(MARK.len()).rposition(|w| w == MARK)?;
    let address = u64::from_str_radix(&line[at + MARK.len()..], 16).ok()?;
    Some((&line[..at], address))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_read_back() {
        for address in [0, 1, 0x7f12_3456_7890, u64::MAX] {
            assert_eq!(request_of(&request_line("receive", address)), Some(address));
        }
        // The last marker counts; anything else is no request.
        assert_eq!(request_of("send request 0x1 request 0x2a"), Some(0x2a));
        assert_eq!(
            request_split("persistent receive request 0x10"),
            Some(("persistent receive", 0x10))
        );
        for (what, address) in [("send", 0), ("receive", 0x7f12_3456_7890), ("x", u64::MAX)] {
            let mut buf = crate::LinesBuf::with_capacity(32);
            buf.push_parts(&request_parts(what, address));
            assert_eq!(buf.finish(), [request_line(what, address).as_str()]);
        }
        for line in [
            "",
            "request 0x1",
            " request 0x",
            " request 0xzz",
            "receive 0x10",
        ] {
            assert_eq!(request_of(line), None, "{line:?}");
        }
    }

    fn chars(bytes: &[u8]) -> Vec<c_char> {
        bytes.iter().map(|&b| b as c_char).collect()
    }

    #[test]
    fn return_codes_round_trip() {
        for raw in [0, 1, 2, 3, 99, 100, 147, -1] {
            assert_eq!(ReturnCode::from_raw(raw).to_raw(), raw);
        }
        assert_eq!(ReturnCode::from_raw(1), ReturnCode::NoInformation);
        assert_eq!(ReturnCode::from_raw(100), ReturnCode::Other(100));
    }

    #[test]
    fn op_classes_match_the_header() {
        use crate::ffi::mpi1 as c;
        assert_eq!(OpClass::PendingSends.to_raw(), c::mqs_pending_sends as i32);
        assert_eq!(
            OpClass::PendingReceives.to_raw(),
            c::mqs_pending_receives as i32
        );
        assert_eq!(
            OpClass::UnexpectedMessages.to_raw(),
            c::mqs_unexpected_messages as i32
        );
        assert_eq!(OpClass::from_raw(3), None);
        assert_eq!(
            OpStatus::from_raw(c::mqs_st_matched as i32),
            OpStatus::Matched
        );
        assert_eq!(
            ReturnCode::from_raw(c::mqs_end_of_list as i32),
            ReturnCode::EndOfList
        );
    }

    #[test]
    fn only_a_first_line_with_the_marker_is_in_transit() {
        let op = |lines: &[&str]| PendingOperation {
            extra_text: lines.iter().collect(),
            ..PendingOperation::default()
        };
        assert!(op(&["in transit: vader FIFO", "eager message"]).is_in_transit());
        assert!(!op(&["eager message", "in transit: vader FIFO"]).is_in_transit());
        assert!(!op(&[]).is_in_transit());
    }

    #[test]
    fn statuses_are_read_back_from_their_names() {
        for raw in [0, 1, 2, 3, -7, 1000] {
            let status = OpStatus::from_raw(raw);
            assert_eq!(OpStatus::from_name(&status.name()), Some(status));
        }
        // A known value has only its name; nonsense has none.
        for bad in ["status 1", "status x", "Pending", "", "status"] {
            assert_eq!(OpStatus::from_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn decode_stops_at_nul_and_at_the_end() {
        assert_eq!(
            decode_c_chars(&chars(b"MPI_COMM_WORLD\0junk")),
            "MPI_COMM_WORLD"
        );
        // No NUL at all: bounded by the array.
        assert_eq!(decode_c_chars(&chars(b"abcd")), "abcd");
        assert_eq!(decode_c_chars(&chars(b"")), "");
        // Invalid UTF-8 is replaced, not rejected.
        assert_eq!(decode_c_chars(&chars(b"a\xffb\0")), "a\u{fffd}b");
    }

    #[test]
    fn encode_truncates_at_char_boundaries() {
        let mut buf = [1 as c_char; 5];
        assert!(encode_c_chars("abcd", &mut buf));
        assert_eq!(decode_c_chars(&buf), "abcd");
        assert!(!encode_c_chars("abcdef", &mut buf));
        assert_eq!(decode_c_chars(&buf), "abcd");
        assert_eq!(buf[4], 0);
        // "ééé" is 6 bytes: only whole characters fit in 4.
        assert!(!encode_c_chars("ééé", &mut buf));
        assert_eq!(decode_c_chars(&buf), "éé");
        let mut empty: [c_char; 0] = [];
        assert!(!encode_c_chars("x", &mut empty));
    }

    #[test]
    fn communicator_round_trip() {
        let comm = Communicator {
            unique_id: 0x1234,
            local_rank: 1,
            size: 2,
            name: "MPI_COMM_WORLD".into(),
        };
        let mut raw = mqs_communicator::default();
        comm.write_raw(&mut raw);
        assert_eq!(Communicator::from_raw(&raw), comm);
        // A name without a NUL in the whole array is cut at 64 bytes.
        raw.name.fill(b'x' as c_char);
        assert_eq!(Communicator::from_raw(&raw).name.len(), 64);
    }

    #[test]
    fn operation_round_trip_and_extra_text() {
        let op = PendingOperation {
            status: OpStatus::Matched,
            desired_local_rank: -1,
            desired_global_rank: -1,
            desired_tag: None,
            desired_length: 64,
            system_buffer: true,
            buffer: 0xdead_beef,
            actual_local_rank: 1,
            actual_global_rank: 3,
            actual_tag: 7,
            actual_length: 32,
            extra_text: ["first", "second"].into(),
        };
        let mut raw = mqs_pending_operation::default();
        op.write_raw(&mut raw);
        assert_eq!((raw.tag_wild, raw.desired_tag), (1, ANY_TAG));
        assert_eq!(PendingOperation::from_raw(&raw), op);
        // Read back, a wild tag is None whatever desired_tag holds.
        raw.desired_tag = 0;
        assert_eq!(PendingOperation::from_raw(&raw).desired_tag, None);

        // Long lines are cut at a char boundary, an empty one is a space
        // (it would end the list), lines past the fifth are dropped, and
        // what an earlier operation wrote is gone.
        let long = format!("{}é{}", "a".repeat(62), "b".repeat(10));
        let many = PendingOperation {
            extra_text: [long.as_str(), "", "c", "d", "e", "f"].into(),
            ..op.clone()
        };
        many.write_raw(&mut raw);
        let back = PendingOperation::from_raw(&raw).extra_text;
        assert_eq!(back, ["a".repeat(62).as_str(), " ", "c", "d", "e"]);
        op.write_raw(&mut raw);
        assert_eq!(PendingOperation::from_raw(&raw), op);
        assert!(raw.extra_text[0][5..].iter().all(|&c| c == 0));

        // Lines after the first empty one are not shown.
        raw.extra_text[1].fill(0);
        encode_c_chars("hidden", &mut raw.extra_text[2]);
        assert_eq!(PendingOperation::from_raw(&raw).extra_text, ["first"]);
    }

    #[test]
    fn location_round_trip() {
        let loc = ProcessLocation {
            pid: 4242,
            image_name: "/usr/bin/a.out".into(),
            host_name: "node1".into(),
        };
        let mut raw = mqs_process_location::default();
        loc.write_raw(&mut raw);
        assert_eq!(ProcessLocation::from_raw(&raw), loc);
    }
}
