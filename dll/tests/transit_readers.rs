//! The transport readers on synthetic memory: Open MPI's shared-memory BTL
//! (`openmpi::sm`, laid out as Open MPI 4.1.4's vader on LP64) and MPICH
//! nemesis (`mpich::nemesis`), each ring, queue and header built by hand:
//! the order messages are listed in, fast boxes that wrap and skip, entries
//! the progress engine had handled when the process stopped, writers
//! stopped half way, and corrupt positions, sizes, ranks and links, each
//! ending the walk with what it found and why.

use mqs_dll::mpich::layout::{MatchParts, NemesisLayout};
use mqs_dll::mpich::nemesis::{self, NemesisSymbols};
use mqs_dll::openmpi::layout::{Ob1Layout, SmLayout};
use mqs_dll::openmpi::sm::{self, SmSymbols};
use mqs_dll::target::{ByteOrder, Sizes, Target};
use mqs_dll::testing::FakeProcess;
use mqs_dll::transit::{Message, Protocol, Scan};
use mqs_dll::walk::Stop;

// ---------------------------------------------------------------------------
// Open MPI

/// vader's types as Open MPI 4.1.4 lays them out (the header's offsets
/// seen with gdb); the component's own offsets are made up.
fn sm_layout() -> SmLayout {
    SmLayout {
        name: "vader",
        symbol: "mca_btl_vader_component",
        comp_segment_size: Some(0x10),
        comp_endpoints: 0x20,
        comp_fbox_in_endpoints: 0x28,
        comp_num_fbox_in: 0x30,
        comp_my_fifo: 0x38,
        comp_fbox_size: 0x40,
        ep_size: 0x100,
        ep_fbox_in: 0x28,
        ep_segment_base: 0x78,
        hdr_size: 48,
        hdr_next: 0,
        hdr_tag: 16,
        hdr_flags: 17,
        hdr_len: 20,
        hdr_sc_iov: Some(24),
        hdr_fbox_base: 40,
        fifo_head: 0,
        fifo_tail: 8,
        num_local_peers: Some(4),
    }
}

/// ob1's header offsets as in Open MPI 4.1.4 (a 14-byte match header, a
/// 32-byte rendezvous header); what the readers do not use is 0.
fn ob1_layout() -> Ob1Layout {
    Ob1Layout {
        comm_size: 0,
        comm_wild_receives: 0,
        comm_procs: 0,
        comm_num_procs: 0,
        proc_size: 0,
        proc_frags_cant_match: None,
        proc_specific_receives: 0,
        proc_unexpected_frags: 0,
        frag_size: 0,
        frag_hdr: 0,
        frag_num_segments: 0,
        frag_range: None,
        frag_segments: 0,
        frag_max_segments: 0,
        seg_size: 0,
        seg_addr: 0,
        seg_len: 0,
        hdr_type: 0,
        hdr_ctx: 2,
        hdr_src: 4,
        hdr_tag: 8,
        hdr_seq: 12,
        match_hdr_len: 14,
        rndv_msg_length: 16,
        rndv_hdr_len: 32,
        send_req_recv: None,
        send_bytes_delivered: None,
        recv_bytes_received: None,
        cid: None,
    }
}

const COMPONENT: u64 = 0x10000;
const PROCESS_INFO: u64 = 0x11000;
const FBOX_IN: u64 = 0x12000;
const ENDPOINTS: u64 = 0x20000;
const SEGMENT_SIZE: u64 = 0x10000;
const FBOX_SIZE: u64 = 4096;
const FREE: u64 = u64::MAX - 1;
const MATCH: u8 = 0x41;
const RGET: u8 = 0x43;

/// A job of three local ranks seen from rank 2: each rank's segment, the
/// endpoints that map them, an empty FIFO at the start of our own.
struct Vader {
    p: FakeProcess,
    l: SmLayout,
}

fn segment(rank: u64) -> u64 {
    0x100_0000 * (rank + 1)
}

fn relative(rank: u64, offset: u64) -> u64 {
    rank << 32 | offset
}

/// ob1's match header and `payload` bytes of data (or, for a rendezvous
/// get, its header announcing `payload` bytes).
fn ob1(kind: u8, ctx: u16, src: i32, tag: i32, seq: u16, payload: u64) -> Vec<u8> {
    let mut b = vec![0u8; if kind == MATCH { 14 } else { 40 }];
    b[0] = kind;
    b[2..4].copy_from_slice(&ctx.to_le_bytes());
    b[4..8].copy_from_slice(&src.to_le_bytes());
    b[8..12].copy_from_slice(&tag.to_le_bytes());
    b[12..14].copy_from_slice(&seq.to_le_bytes());
    if kind == MATCH {
        b.extend(std::iter::repeat_n(0xab, payload as usize));
    } else {
        b[16..24].copy_from_slice(&payload.to_le_bytes());
    }
    b
}

impl Vader {
    fn new() -> Vader {
        let mut p = FakeProcess::new();
        let l = sm_layout();
        p.map(COMPONENT, vec![0; 0x100]);
        p.write_u64(COMPONENT + l.comp_segment_size.unwrap(), SEGMENT_SIZE);
        p.write_u64(COMPONENT + l.comp_endpoints, ENDPOINTS);
        p.write_u64(COMPONENT + l.comp_fbox_in_endpoints, FBOX_IN);
        p.write_u32(COMPONENT + l.comp_num_fbox_in, 0);
        p.write_u64(COMPONENT + l.comp_my_fifo, segment(2));
        p.write_u32(COMPONENT + l.comp_fbox_size, FBOX_SIZE as u32);
        p.map(PROCESS_INFO, vec![0; 16]);
        p.write_u32(PROCESS_INFO + 4, 2);
        p.map(ENDPOINTS, vec![0; 3 * 0x100]);
        for rank in 0..3 {
            p.map(segment(rank), vec![0; SEGMENT_SIZE as usize]);
            p.write_u64(ENDPOINTS + rank * 0x100 + l.ep_segment_base, segment(rank));
        }
        p.write_u64(segment(2) + l.fifo_head, FREE);
        p.write_u64(segment(2) + l.fifo_tail, FREE);
        Vader { p, l }
    }

    fn scan(&self) -> Scan {
        let t = Target::new(&self.p, Sizes::LP64, ByteOrder::Same);
        let syms = SmSymbols {
            component: Some(COMPONENT),
            process_info: Some(PROCESS_INFO),
            btls: None,
        };
        sm::scan(&t, &self.l, &ob1_layout(), None, &syms).0
    }

    /// A fragment at `offset` of `rank`'s segment carrying `data`.
    fn fragment(&mut self, rank: u64, offset: u64, flags: u8, data: &[u8], fbox_base: u64) {
        let at = segment(rank) + offset;
        let l = self.l;
        self.p.write_u64(at + l.hdr_next, FREE);
        self.p.map(
            at + l.hdr_tag,
            vec![data.first().copied().unwrap_or(0), flags],
        );
        self.p.write_u32(at + l.hdr_len, data.len() as u32);
        self.p.write_u64(at + l.hdr_fbox_base, fbox_base);
        self.p.map(at + l.hdr_size, data.to_vec());
    }

    /// Links fragments (relative pointers) into our FIFO, in order.
    fn fifo(&mut self, values: &[u64]) {
        let head = segment(2) + self.l.fifo_head;
        self.p
            .write_u64(head, values.first().copied().unwrap_or(FREE));
        for pair in values.windows(2) {
            let at = segment(pair[0] >> 32) + (pair[0] & 0xffff_ffff);
            self.p.write_u64(at + self.l.hdr_next, pair[1]);
        }
        let tail = segment(2) + self.l.fifo_tail;
        self.p
            .write_u64(tail, values.last().copied().unwrap_or(FREE));
    }

    /// A fast box entry at `pos` of the box at `boxed`.
    fn entry(&mut self, boxed: u64, pos: u64, tag: u16, seq: u16, data: &[u8]) {
        self.p.write_u32(boxed + pos, data.len() as u32);
        self.p.write_u16(boxed + pos + 4, tag);
        self.p.write_u16(boxed + pos + 6, seq);
        self.p.map(boxed + pos + 8, data.to_vec());
    }

    /// Makes the box at `boxed` known to rank 2 (sent by `rank`), read
    /// from `start` expecting `seq`.
    fn register(&mut self, rank: u64, boxed: u64, start: u32, seq: u16) {
        let ep = ENDPOINTS + rank * 0x100;
        let fbox_in = ep + self.l.ep_fbox_in;
        self.p.write_u64(fbox_in, boxed);
        self.p.write_u64(fbox_in + 8, boxed);
        self.p.write_u32(fbox_in + 16, start);
        self.p.write_u16(fbox_in + 20, seq);
        let n = self.registered();
        self.p.write_u64(FBOX_IN + 8 * u64::from(n), ep);
        self.p.write_u32(COMPONENT + self.l.comp_num_fbox_in, n + 1);
    }

    fn registered(&self) -> u32 {
        let mut b = [0u8; 4];
        use mqs_dll::access::ProcessAccess;
        self.p.fetch(COMPONENT + self.l.comp_num_fbox_in, &mut b);
        u32::from_le_bytes(b)
    }
}

/// (place, source, tag, length) of every message of the scan, in order.
fn listed(scan: &mut Scan, ctxs: &[u64]) -> Vec<(&'static str, i64, i64, u64)> {
    let mut all: Vec<Message> = ctxs.iter().flat_map(|&c| scan.by_key.take(c)).collect();
    all.sort_by_key(|m| m.order);
    all.iter()
        .map(|m| (m.place, m.source, m.tag, m.length))
        .collect()
}

#[test]
fn known_boxes_first_then_the_fifo_each_new_box_after_the_fragment_announcing_it() {
    let mut v = Vader::new();
    // Rank 1's box, known: its position after two handled entries.
    let box1 = segment(1) + 0x8000;
    v.register(1, box1, 96, 2);
    v.entry(box1, 96, MATCH.into(), 2, &ob1(MATCH, 0, 1, 300, 3, 4));
    v.entry(box1, 128, MATCH.into(), 3, &ob1(MATCH, 3, 1, 200, 0, 4));
    // Rank 0's fragments on our FIFO: a medium message, one of ours coming
    // back (no message), then the one that sets rank 0's box up.
    v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 500, 0, 2000), 0);
    v.fragment(2, 0x2000, 2, &ob1(MATCH, 0, 2, 999, 0, 4), 0);
    let box0 = segment(0) + 0x9000;
    v.fragment(
        0,
        0x3000,
        4,
        &ob1(MATCH, 0, 0, 600, 1, 4),
        relative(0, 0x9000),
    );
    v.entry(box0, 32, MATCH.into(), 0, &ob1(MATCH, 0, 0, 601, 2, 4));
    // A fragment too big for the box, named by its relative pointer.
    v.fragment(0, 0x4000, 0, &ob1(MATCH, 0, 0, 501, 3, 2000), 0);
    v.entry(box0, 64, 0xfe, 1, &relative(0, 0x4000).to_le_bytes());
    v.entry(box0, 96, RGET.into(), 2, &ob1(RGET, 3, 0, 400, 0, 400_000));
    v.fifo(&[
        relative(0, 0x1000),
        relative(2, 0x2000),
        relative(0, 0x3000),
    ]);
    let mut scan = v.scan();
    assert_eq!(scan.stop, None);
    assert!(scan.unlisted.is_empty(), "{:?}", scan.unlisted);
    assert_eq!(
        listed(&mut scan, &[0, 3]),
        [
            ("vader fast box", 1, 300, 4),
            ("vader fast box", 1, 200, 4),
            ("vader FIFO", 0, 500, 2000),
            ("vader FIFO", 0, 600, 4),
            ("vader fast box", 0, 601, 4),
            ("vader fast box", 0, 501, 2000),
            ("vader fast box", 0, 400, 400_000),
        ]
    );
}

#[test]
fn a_rendezvous_shows_its_full_length_and_the_sequence_and_buffer_of_each() {
    let mut v = Vader::new();
    v.fragment(0, 0x1000, 0, &ob1(RGET, 5, 0, 400, 7, 400_000), 0);
    v.fragment(0, 0x2000, 0, &ob1(MATCH, 5, 0, 401, 8, 16), 0);
    v.fifo(&[relative(0, 0x1000), relative(0, 0x2000)]);
    let mut scan = v.scan();
    let got = scan.by_key.take(5);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].protocol, Protocol::RendezvousGet);
    assert_eq!(
        (got[0].length, got[0].arrived, got[0].buffer),
        (400_000, 0, 0)
    );
    assert_eq!(got[0].seq, Some(7));
    assert_eq!(got[1].protocol, Protocol::Eager);
    // The data after the 48-byte fragment header and the 14-byte match header.
    assert_eq!(got[1].buffer, segment(0) + 0x2000 + 48 + 14);
    assert_eq!(got[1].at, segment(0) + 0x2000);
    let op = got[0].to_operation(0);
    assert_eq!(op.extra_text.first(), Some("in transit: vader FIFO"));
    assert_eq!(op.desired_length, 400_000);
}

#[test]
fn a_box_wraps_past_a_skip_entry_and_keeps_its_sequence() {
    let mut v = Vader::new();
    let boxed = segment(1) + 0x8000;
    // The last slot holds a skip marker sized to the ring's end; the lap
    // bit of the position says which lap the reader is on.
    v.register(1, boxed, 0x8000_0000 | (FBOX_SIZE as u32 - 64), 10);
    v.entry(
        boxed,
        FBOX_SIZE - 64,
        MATCH.into(),
        10,
        &ob1(MATCH, 0, 1, 110, 0, 4),
    );
    v.entry(boxed, FBOX_SIZE - 32, 0xff, 11, &[0; 24]);
    v.entry(boxed, 32, MATCH.into(), 12, &ob1(MATCH, 0, 1, 112, 0, 4));
    v.entry(boxed, 64, MATCH.into(), 13, &ob1(MATCH, 0, 1, 113, 0, 4));
    // Left from the lap before: the end.
    v.entry(
        boxed,
        96,
        MATCH.into(),
        13u16.wrapping_sub(100),
        &ob1(MATCH, 0, 1, 1, 0, 4),
    );
    let mut scan = v.scan();
    assert_eq!(scan.stop, None);
    let tags: Vec<i64> = listed(&mut scan, &[0]).iter().map(|m| m.2).collect();
    assert_eq!(tags, [110, 112, 113]);
}

#[test]
fn entries_handled_in_the_pass_the_process_stopped_in_are_not_listed_again() {
    let mut v = Vader::new();
    let boxed = segment(1) + 0x8000;
    // The progress engine handled seq 5 and 6 and was stopped before it
    // saved its position (still 32): seq 7 is the next it expects.
    v.register(1, boxed, 32, 7);
    for (i, seq) in (5u16..9).enumerate() {
        let pos = 32 * (i as u64 + 1);
        v.entry(
            boxed,
            pos,
            MATCH.into(),
            seq,
            &ob1(MATCH, 0, 1, i32::from(seq), 0, 4),
        );
    }
    let mut scan = v.scan();
    let tags: Vec<i64> = listed(&mut scan, &[0]).iter().map(|m| m.2).collect();
    assert_eq!(tags, [7, 8]);
}

#[test]
fn half_written_and_short_entries_are_said_not_decoded_never_read_past_their_length() {
    let mut v = Vader::new();
    let boxed = segment(1) + 0x8000;
    v.register(1, boxed, 32, 0);
    v.entry(boxed, 32, MATCH.into(), 0, &ob1(MATCH, 0, 1, 10, 0, 4));
    // Its size written, its tag and sequence not yet: the writer stopped.
    v.entry(boxed, 64, 0, 0, &ob1(MATCH, 0, 1, 11, 1, 4));
    // A fragment whose length is shorter than a match header.
    v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 12, 0, 0)[..6], 0);
    v.fifo(&[relative(0, 0x1000)]);
    let mut scan = v.scan();
    assert_eq!(scan.stop, None);
    let tags: Vec<i64> = listed(&mut scan, &[0]).iter().map(|m| m.2).collect();
    assert_eq!(tags, [10]);
    let why = scan.unlisted.why().unwrap_or_default();
    assert!(
        why.contains("2 vader entries cut short or half written"),
        "{why}"
    );
}

#[test]
fn a_fragment_its_writer_did_not_link_yet_is_listed_from_the_tail() {
    let mut v = Vader::new();
    v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 20, 0, 4), 0);
    v.fragment(1, 0x1000, 0, &ob1(MATCH, 0, 1, 21, 0, 4), 0);
    v.fifo(&[relative(0, 0x1000)]);
    // The tail taken by rank 1, the link from the one before not written.
    v.p.write_u64(segment(2) + v.l.fifo_tail, relative(1, 0x1000));
    let mut scan = v.scan();
    let got = scan.by_key.take(0);
    assert_eq!(got.iter().map(|m| m.tag).collect::<Vec<_>>(), [20, 21]);
    assert_eq!(got[1].note, Some("not linked yet: its writer stopped"));
}

/// A corruption: what it is, how it is made, how the walk must end and how
/// many messages it keeps.
type Case = (&'static str, Box<dyn Fn(&mut Vader)>, Stop, usize);

#[test]
fn corrupt_positions_sizes_ranks_and_links_end_the_walk_with_why() {
    const BOX_AT: u64 = 0x200_0000 + 0x8000;
    assert_eq!(BOX_AT, segment(1) + 0x8000);
    let cases: Vec<Case> = vec![
        (
            "a position inside an entry",
            Box::new(|v| v.register(1, BOX_AT, 33, 0)),
            Stop::Corrupt,
            0,
        ),
        (
            "a position past the ring",
            Box::new(|v| v.register(1, BOX_AT, FBOX_SIZE as u32, 0)),
            Stop::Corrupt,
            0,
        ),
        (
            "an entry running past the ring's end",
            Box::new(|v| {
                v.register(1, BOX_AT, 32, 0);
                v.entry(BOX_AT, 32, MATCH.into(), 0, &ob1(MATCH, 0, 1, 1, 0, 4));
                v.p.write_u32(BOX_AT + 64, FBOX_SIZE as u32);
                v.p.write_u16(BOX_AT + 68, MATCH.into());
                v.p.write_u16(BOX_AT + 70, 1);
            }),
            Stop::Corrupt,
            1,
        ),
        (
            "more boxes than local ranks",
            Box::new(|v| v.p.write_u32(COMPONENT + v.l.comp_num_fbox_in, 4)),
            Stop::Corrupt,
            0,
        ),
        (
            "a FIFO that comes back to itself",
            Box::new(|v| {
                v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 1, 0, 4), 0);
                v.fragment(0, 0x2000, 0, &ob1(MATCH, 0, 0, 2, 0, 4), 0);
                v.fifo(&[
                    relative(0, 0x1000),
                    relative(0, 0x2000),
                    relative(0, 0x1000),
                ]);
            }),
            Stop::Cycle(relative(0, 0x1000)),
            2,
        ),
        (
            "a local rank beyond the node's",
            Box::new(|v| {
                v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 1, 0, 4), 0);
                v.fifo(&[relative(0, 0x1000), relative(7, 0x2000)]);
            }),
            Stop::BadPointer(relative(7, 0x2000)),
            1,
        ),
        (
            "an offset past the segment",
            Box::new(|v| v.fifo(&[relative(0, SEGMENT_SIZE)])),
            Stop::BadPointer(relative(0, SEGMENT_SIZE)),
            0,
        ),
    ];
    for (what, corrupt, stop, kept) in cases {
        let mut v = Vader::new();
        corrupt(&mut v);
        let mut scan = v.scan();
        assert_eq!(scan.stop, Some(stop), "{what}");
        assert_eq!(listed(&mut scan, &[0]).len(), kept, "{what}");
    }
}

#[test]
fn memory_that_cannot_be_read_is_said_of_the_transport_not_as_a_cut() {
    // A core file leaves the segments out, say: a box, a fragment.
    let mut v = Vader::new();
    v.register(1, 0x7000_0000, 32, 0);
    v.fragment(0, 0x1000, 0, &ob1(MATCH, 0, 0, 1, 0, 4), 0);
    v.fifo(&[relative(0, 0x1000), relative(1, 0x1000)]);
    v.p.write_u64(ENDPOINTS + 0x100 + v.l.ep_segment_base, 0x7100_0000);
    let mut scan = v.scan();
    assert_eq!(scan.stop, None);
    assert_eq!(listed(&mut scan, &[0]).len(), 1);
    let why = scan.unlisted.why().unwrap_or_default();
    assert!(
        why.contains("messages in transit on vader not listed (0x70000000 unreadable)"),
        "{why}"
    );
    assert!(why.contains("(0x71001000 unreadable)"), "{why}");
}

// ---------------------------------------------------------------------------
// MPICH

/// nemesis's types as MPICH 4.0.2 lays them out on LP64 (seen with gdb:
/// an 80-byte packet, the payload 32 bytes into a cell, a 64-byte cache
/// line).
fn nemesis_layout() -> NemesisLayout {
    NemesisLayout {
        region_read: 0x80,
        num_local: 0x0c,
        num_procs: 0x10,
        local_procs: 0x18,
        local_rank: 0x20,
        ext_procs: 0x30,
        mailboxes_in: 0x40,
        my_recvq: 0x70,
        q_head: 0,
        q_tail: 8,
        q_my_head: 64,
        cell_next: 0,
        cell_source: 8,
        cell_datalen: 16,
        cell_seqno: 24,
        cell_payload: 32,
        fbox_flag: 0,
        pkt_size: 80,
        send: (4, 24),
        short: (4, 16),
        lmt_rts: (4, 24),
        parts: MatchParts {
            tag: 0,
            rank: 4,
            rank_size: 2,
            ctx: 6,
        },
    }
}

const REGION: u64 = 0x10000;
const BASE_SYM: u64 = 0x11000;
const SEQNO_SYM: u64 = 0x11010;
const SEQNOS: u64 = 0x12000;
const LOCAL_PROCS: u64 = 0x13000;
const INBOX: u64 = 0x14000;
const SHM: u64 = 0x100_0000;
const RECVQ: u64 = SHM + 0x1000;
const CELL_LEN: u64 = 64 * 1024;

/// Rank 2 of three local ranks, its region mapped at `SHM` with relative
/// pointers from it.
struct Nemesis {
    p: FakeProcess,
    n: NemesisLayout,
}

impl Nemesis {
    fn new() -> Nemesis {
        let n = nemesis_layout();
        let mut p = FakeProcess::new();
        p.map(REGION, vec![0; 0x80]);
        p.write_u32(REGION + n.num_local, 3);
        p.write_u32(REGION + n.num_procs, 3);
        p.write_u64(REGION + n.local_procs, LOCAL_PROCS);
        p.write_u32(REGION + n.local_rank, 2);
        p.write_u64(REGION + n.mailboxes_in, INBOX);
        p.write_u64(REGION + n.my_recvq, RECVQ);
        p.map(BASE_SYM, vec![0; 32]);
        p.write_u64(BASE_SYM, SHM);
        p.write_u64(SEQNO_SYM, SEQNOS);
        p.map(SEQNOS, vec![0; 8]);
        p.map(LOCAL_PROCS, vec![0; 12]);
        for r in 0..3u64 {
            p.write_u32(LOCAL_PROCS + 4 * r, r as u32);
        }
        p.map(INBOX, vec![0; 24]);
        p.map(SHM, vec![0; 0x2000]);
        Nemesis { p, n }
    }

    fn scan(&self) -> Scan {
        let t = Target::new(&self.p, Sizes::LP64, ByteOrder::Same);
        let syms = NemesisSymbols {
            region: Some(REGION),
            base: Some(BASE_SYM),
            seqno: Some(SEQNO_SYM),
        };
        nemesis::scan(&t, &self.n, &syms, 2)
    }

    /// A cell at `at` from `source` (as the cell names it) with a packet
    /// of `kind` for `tag` on context `ctx` announcing `size` bytes.
    #[allow(clippy::too_many_arguments)]
    fn cell(&mut self, at: u64, source: u32, seqno: u16, kind: u32, tag: i32, ctx: u16, size: u64) {
        let n = self.n;
        self.p
            .map(at, vec![0; (n.cell_payload + n.pkt_size + 16) as usize]);
        self.p.write_u32(at + n.cell_source, source);
        let data = if kind == 0 { size.min(16) } else { 0 };
        self.p.write_u64(at + n.cell_datalen, n.pkt_size + data);
        self.p.write_u16(at + n.cell_seqno, seqno);
        let pkt = at + n.cell_payload;
        self.p.write_u32(pkt, kind);
        self.p.write_u32(pkt + 4, tag as u32);
        self.p.write_u16(pkt + 4 + 4, 1);
        self.p.write_u16(pkt + 4 + 6, ctx);
        self.p.write_u64(pkt + 24, size);
    }

    /// Links cells (absolute addresses) into the receive queue.
    fn queue(&mut self, cells: &[u64]) {
        let rel = |a: u64| a - SHM;
        self.p
            .write_u64(RECVQ + self.n.q_head, cells.first().map_or(0, |&c| rel(c)));
        for pair in cells.windows(2) {
            self.p.write_u64(pair[0] + self.n.cell_next, rel(pair[1]));
        }
        self.p
            .write_u64(RECVQ + self.n.q_tail, cells.last().map_or(0, |&c| rel(c)));
    }

    /// A fast box from local rank `from` holding a cell, its flag set.
    fn fbox(&mut self, from: u64, at: u64, seqno: u16, tag: i32, ctx: u16) {
        self.p.write_u64(INBOX + 8 * from, at);
        self.p.map(at, vec![0; 8]);
        self.p.write_u32(at + self.n.fbox_flag, 1);
        self.cell(at + self.n.q_my_head, from as u32, seqno, 0, tag, ctx, 4);
    }
}

fn cell_at(i: u64) -> u64 {
    SHM + 0x10_0000 + i * CELL_LEN
}

#[test]
fn nemesis_fast_boxes_go_before_later_cells_of_their_sender() {
    let mut m = Nemesis::new();
    // Next expected: seqno 3 from rank 0, 5 from rank 1.
    m.p.write_u16(SEQNOS, 3);
    m.p.write_u16(SEQNOS + 2, 5);
    m.cell(cell_at(0), 1, 6, 0, 11, 0, 4);
    m.cell(cell_at(1), 0, 4, 0, 1, 0, 2000);
    m.cell(cell_at(2), 1, 7, 40, 12, 0, 400_000);
    m.cell(cell_at(3), 0, 2, 0, 99, 0, 4); // Handled already: behind.
    m.queue(&[cell_at(0), cell_at(1), cell_at(2), cell_at(3)]);
    m.fbox(0, SHM + 0x8_0000, 3, 0, 0);
    m.fbox(1, SHM + 0x9_0000, 5, 10, 0);
    let mut scan = m.scan();
    assert_eq!(scan.stop, None);
    assert!(scan.unlisted.is_empty(), "{:?}", scan.unlisted);
    let got = listed(&mut scan, &[0]);
    assert_eq!(
        got.iter().map(|g| (g.0, g.2, g.3)).collect::<Vec<_>>(),
        [
            ("nemesis fast box", 10, 4),
            ("nemesis receive queue", 11, 4),
            ("nemesis fast box", 0, 4),
            ("nemesis receive queue", 1, 2000),
            ("nemesis receive queue", 12, 400_000),
        ]
    );
}

#[test]
fn nemesis_walks_end_with_why_and_unlinked_tails_are_listed() {
    // A cycle.
    let mut m = Nemesis::new();
    m.cell(cell_at(0), 1, 0, 0, 1, 0, 4);
    m.cell(cell_at(1), 1, 1, 0, 2, 0, 4);
    m.queue(&[cell_at(0), cell_at(1)]);
    m.p.write_u64(cell_at(1), cell_at(0) - SHM);
    let mut scan = m.scan();
    assert_eq!(scan.stop, Some(Stop::Cycle(cell_at(0) - SHM)));
    assert_eq!(listed(&mut scan, &[0]).len(), 2);
    // A cell whose writer took the tail but did not link it.
    let mut m = Nemesis::new();
    m.cell(cell_at(0), 1, 0, 0, 1, 0, 4);
    m.cell(cell_at(1), 0, 0, 0, 2, 0, 4);
    m.queue(&[cell_at(0)]);
    m.p.write_u64(RECVQ + m.n.q_tail, cell_at(1) - SHM);
    let mut scan = m.scan();
    let got = scan.by_key.take(0);
    assert_eq!(got.iter().map(|g| g.tag).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(got[1].note, Some("not linked yet: its writer stopped"));
    // A source beyond the job, a cell shorter than its packet.
    let mut m = Nemesis::new();
    m.cell(cell_at(0), 1, 0, 0, 1, 0, 4);
    m.p.write_u64(cell_at(0) + m.n.cell_datalen, 8);
    m.cell(cell_at(1), 9, 0, 0, 2, 0, 4);
    m.queue(&[cell_at(0), cell_at(1)]);
    let mut scan = m.scan();
    assert_eq!(scan.stop, Some(Stop::Corrupt));
    assert!(listed(&mut scan, &[0]).is_empty());
    assert!(scan
        .unlisted
        .why()
        .is_some_and(|w| w.contains("1 nemesis cell not decoded")));
    // Peers on other nodes: their messages come through a netmod.
    let mut m = Nemesis::new();
    m.p.write_u32(REGION + m.n.ext_procs, 4);
    let scan = m.scan();
    assert!(scan
        .unlisted
        .why()
        .is_some_and(|w| w.contains("nemesis netmod")));
}
