//! Open MPI's shared-memory BTL, read from the receive side (4.1's `vader`,
//! 5.0's `sm`: one protocol under two names): what arrived at this rank
//! and was not handled yet by its progress engine.
//!
//! A sender writes to its receiver in two ways:
//! - the receiver's FIFO (`my_fifo`, in the receiver's segment): a list of
//!   fragment headers (`mca_btl_vader_hdr_t`: `next`, `tag`, `flags`,
//!   `len`, then `len` bytes of data) linked through relative pointers, a
//!   `fifo_value_t` holding the owner's local rank in its high bits and an
//!   offset into that rank's segment in the low ones (each process maps
//!   every segment at its own address: `endpoints[rank].segment_base`).
//!   `fifo_head` is the oldest, -2 (`VADER_FIFO_FREE`) ends the list. The
//!   FIFO also brings back our own fragments once their receiver is done
//!   with them (flag `COMPLETE`): those are no messages;
//! - after 16 sends to a peer (`fbox_threshold`) a fast box: a ring of
//!   `fbox_size` bytes in the sender's segment whose first 32 bytes hold
//!   the receiver's read position. Entries are 32-byte aligned, each an
//!   8-byte header (`size` u32, `tag` u16, `seq` u16, the tag and
//!   sequence written last) and `size` bytes; tag 0xff skips to the ring's
//!   start, tag 0xfe carries the relative pointer of a FIFO-style fragment
//!   (one too big for the box, kept in order with the box's). The receiver
//!   reads from `fbox_in.start` (bit 31: which lap) while an entry's tag
//!   is set and its sequence is `fbox_in.seq`. It learns of a peer's box
//!   from the FIFO fragment that carries flag `SETUP_FBOX` and the box's
//!   relative address (`fbox_base`): until it has handled that fragment,
//!   the box is not in `fbox_in_endpoints` and is read from there.
//!
//! The data of each message starts with ob1's header: its type (the BTL
//! tag), context, source, tag and sequence number; a rendezvous header
//! gives the full length. Open MPI 5's first message on a communicator
//! whose index a peer does not know yet is wrapped in a CID header naming
//! the communicator by its 128-bit id.
//!
//! Every walk is bounded: the FIFO by a cap and a set of the entries seen,
//! a fast box by one lap of its ring, every position and size checked
//! against the ring and every local rank against the number of local
//! processes; nothing is decoded past an entry's length.
//!
//! For the backend: the reader's symbols ([`resolve_symbols`]) and one
//! read of the process's transports per stop, each communicator's messages
//! taken out of it by its unexpected queue.

use crate::access::{ImageAccess, ProcessAccess};
use crate::openmpi::communicators::Comm;
use crate::openmpi::layout::{CidLayout, Layout, Ob1Layout, SmLayout};
use crate::openmpi::lists;
use crate::openmpi::unexpected::{HDR_MATCH, HDR_RGET, HDR_RNDV};
use crate::openmpi::{OpenMpi, Symbols};
use crate::target::{Paged, ReadError, Spans, Target, View};
use crate::transit::{self, Message, Protocol, Scan};
use crate::walk::{AddrSet, Stop, MAX_LIST_ITEMS};

/// Open MPI 5: a match or rendezvous header behind a CID header.
const HDR_CID: u64 = 0x4a;

/// Fast box tags: skip to the ring's start; a fragment's relative pointer.
const FBOX_SKIP: u64 = 0xff;
const FBOX_FRAG: u64 = 0xfe;
/// Fast box entries are aligned to 32 bytes; the first 32 of the ring hold
/// the receiver's position.
const FBOX_ALIGN: u64 = 32;
/// Bit 31 of a fast box position: which lap of the ring.
const FBOX_LAP: u64 = 0x8000_0000;
/// The progress engine handles at most 32 entries of a box in one pass,
/// saving its position only after: entries up to 32 behind the expected
/// sequence are ones it handled in the pass it was stopped in.
const FBOX_PASS: u64 = 32;
/// The largest fast box read (the default is 4 KiB).
const MAX_FBOX: u64 = 1 << 20;

/// Fragment header flags.
const FLAG_SINGLE_COPY: u64 = 1;
const FLAG_COMPLETE: u64 = 2;
const FLAG_SETUP_FBOX: u64 = 4;

/// Bytes of a message read to decode its ob1 header (a CID header and a
/// rendezvous header behind it).
const HEADER_READ: u64 = 128;
/// Most local processes believed when their number cannot be read.
const MAX_LOCAL: u64 = 1 << 12;

/// The symbols of one process this reader needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmSymbols {
    /// The BTL's component.
    pub component: Option<u64>,
    /// `opal_process_info`.
    pub process_info: Option<u64>,
    /// `mca_btl_base_modules_initialized`: the BTLs in use.
    pub btls: Option<u64>,
}

pub const SYM_PROCESS_INFO: &str = "opal_process_info";
pub const SYM_BTLS: &str = "mca_btl_base_modules_initialized";

/// Most BTLs believed in use.
const MAX_BTLS: usize = 64;

/// The names of the BTLs this process uses (`mca_btl_base_modules_initialized`,
/// a list of `mca_btl_base_selected_module_t`: a list item, then the
/// component's pointer), or None when the list cannot be read.
pub fn btls_in_use<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    list: u64,
) -> Option<Vec<String>> {
    let w = lists::opal_list(t, &layout.list, list, MAX_BTLS);
    if w.stop.is_some() {
        return None;
    }
    let mut names = Vec::new();
    for item in w.items {
        let component = t.read_ptr(item.checked_add(layout.list.item_size)?).ok()?;
        let name = super::read_component(t, component, "btl")?.0;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Some(names)
}

/// A 128-bit communicator id (`cid_base`, `cid_sub`).
pub type Cid = (u64, u64);

/// First key of the messages named by a CID header: the ones below are
/// context ids (16 bits).
pub const CID_KEY: u64 = 1 << 32;

/// What one entry of the transport holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// A message, keyed by its context (or [`CID_KEY`] plus the index of
    /// its CID).
    Message {
        key: u64,
        source: i64,
        tag: i64,
        seq: u64,
        protocol: Protocol,
        length: u64,
        arrived: u64,
        header: u64,
    },
    /// No message of its own (protocol traffic, a reply, another user of
    /// the BTL).
    Other,
    /// Shorter than the header it announces: cut short or half written.
    Short,
}

/// The reader of one process's shared-memory BTL, for one stop.
struct Reader<'r, 't, 'a, P: ProcessAccess + ?Sized> {
    t: &'t Target<'a, P>,
    sm: &'r SmLayout,
    ob1: &'r Ob1Layout,
    cid: Option<CidLayout>,
    component: View<'t, 'a, P>,
    /// Local ranks: 0..=num_local_peers.
    ranks: u64,
    /// `endpoints[rank].segment_base`, read once each.
    bases: Vec<Option<u64>>,
    fbox_size: u64,
    scan: Scan,
    /// The CIDs named so far; a message's key is [`CID_KEY`] plus the index.
    cids: Vec<Cid>,
    /// Fast boxes read (a box is read once, from wherever it is named).
    boxes: AddrSet,
    /// Entries that could not be decoded, by where they were.
    short: usize,
    order: u32,
}

/// Reads what waits in the shared-memory BTL of a process: first the fast
/// boxes the progress engine knows (it drains them before the FIFO), then
/// the FIFO, each box the FIFO announces right after the fragment that
/// announces it. Keys are context ids, or [`CID_KEY`] plus an index into
/// the returned CIDs.
pub fn scan<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    sm: &SmLayout,
    ob1: &Ob1Layout,
    cid: Option<CidLayout>,
    syms: &SmSymbols,
) -> (Scan, Vec<Cid>) {
    let mut out = Scan::default();
    let not_listed = || transit::not_listed(sm.name);
    let Some(component) = syms.component else {
        out.unlisted.add(not_listed());
        return (out, Vec::new());
    };
    // The fields read, not the component (thousands of bytes): fields
    // within a fetch piece of one another are read together.
    let fields: Vec<(u64, u64)> = [
        Some(sm.comp_endpoints),
        Some(sm.comp_fbox_in_endpoints),
        Some(sm.comp_num_fbox_in),
        Some(sm.comp_my_fifo),
        Some(sm.comp_fbox_size),
        sm.comp_segment_size,
    ]
    .into_iter()
    .flatten()
    .map(|off| (off, 8))
    .collect();
    let spans = Spans::cover(&fields, crate::target::PAGE);
    let view = match t
        .check_ptr(component, t.ptr_align(), spans.end())
        .and_then(|a| t.view_spans(a, &spans))
    {
        Ok(v) => v,
        Err(e) => {
            out.cut_in(sm.name, Stop::from_read(e, component));
            return (out, Vec::new());
        }
    };
    let ranks = syms
        .process_info
        .zip(sm.num_local_peers)
        .and_then(|(info, off)| t.read_uint(info.checked_add(off)?, 4).ok())
        .map(|peers| peers.saturating_add(1))
        .filter(|&n| n > 0 && n <= MAX_LOCAL)
        .unwrap_or(MAX_LOCAL);
    let fbox_size = view.u32(sm.comp_fbox_size).unwrap_or(0);
    let mut r = Reader {
        t,
        sm,
        ob1,
        cid,
        component: view,
        ranks,
        bases: Vec::new(),
        fbox_size,
        scan: out,
        cids: Vec::new(),
        boxes: AddrSet::default(),
        short: 0,
        order: 0,
    };
    r.registered_boxes();
    r.fifo();
    if r.short > 0 {
        let what = if r.short == 1 { "entry" } else { "entries" };
        r.scan.unlisted.add(format!(
            "{} {} {what} cut short or half written",
            r.short, sm.name
        ));
    }
    (r.scan, r.cids)
}

impl<'t, 'a, P: ProcessAccess + ?Sized> Reader<'_, 't, 'a, P> {
    fn cut(&mut self, stop: Stop) {
        self.scan.cut_in(self.sm.name, stop);
    }

    fn place(&self, fast_box: bool) -> &'static str {
        match (self.sm.name, fast_box) {
            ("sm", true) => "sm fast box",
            ("sm", false) => "sm FIFO",
            (_, true) => "vader fast box",
            _ => "vader FIFO",
        }
    }

    /// The fast boxes in `fbox_in_endpoints`, with their read positions.
    fn registered_boxes(&mut self) {
        let t = self.t;
        let (Ok(list), Ok(count)) = (
            self.component.ptr(self.sm.comp_fbox_in_endpoints),
            self.component.u32(self.sm.comp_num_fbox_in),
        ) else {
            self.cut(Stop::Corrupt);
            return;
        };
        if count == 0 {
            return;
        }
        if count > self.ranks {
            self.cut(Stop::Corrupt);
            return;
        }
        let psize = u64::from(t.sizes.pointer);
        let table = match t
            .check_ptr(list, psize, count * psize)
            .and_then(|a| t.view(a, count * psize))
        {
            Ok(v) => v,
            Err(e) => {
                self.cut(Stop::from_read(e, list));
                return;
            }
        };
        let ptr = u64::from(t.sizes.pointer);
        let int = u64::from(t.sizes.int);
        for i in 0..count {
            let Ok(ep) = table.ptr(i * psize) else {
                self.cut(Stop::Corrupt);
                return;
            };
            // fbox_in: { unsigned char *buffer; uint32_t *startp;
            // unsigned int start; uint16_t seq; }
            let at = ep.saturating_add(self.sm.ep_fbox_in);
            let len = 2 * ptr + int + 2;
            let fbox = match t
                .check_ptr(at, t.ptr_align(), len)
                .and_then(|a| t.view(a, len))
            {
                Ok(v) => v,
                Err(e) => {
                    self.cut(Stop::from_read(e, at));
                    continue;
                }
            };
            let (Ok(buffer), Ok(start), Ok(seq)) =
                (fbox.ptr(0), fbox.u32(2 * ptr), fbox.u16(2 * ptr + int))
            else {
                self.cut(Stop::Corrupt);
                continue;
            };
            if buffer != 0 {
                self.fast_box(buffer, start, seq);
            }
        }
    }

    /// The address a relative pointer names: the offset into the segment
    /// of the local rank in its high bits.
    fn relative(&mut self, value: u64) -> Result<u64, Stop> {
        let bits = if self.t.sizes.pointer >= 8 { 32 } else { 24 };
        let rank = value >> bits;
        let offset = value & ((1u64 << bits) - 1);
        if rank >= self.ranks {
            return Err(Stop::BadPointer(value));
        }
        if let Some(size) = self
            .sm
            .comp_segment_size
            .and_then(|o| self.component.size_t(o).ok())
            .filter(|&s| s > 0)
        {
            if offset.saturating_add(self.sm.hdr_size) > size {
                return Err(Stop::BadPointer(value));
            }
        }
        let base = self.segment_base(rank)?;
        base.checked_add(offset).ok_or(Stop::BadPointer(value))
    }

    /// `endpoints[rank].segment_base`.
    fn segment_base(&mut self, rank: u64) -> Result<u64, Stop> {
        let i = usize::try_from(rank).map_err(|_| Stop::Corrupt)?;
        if let Some(Some(base)) = self.bases.get(i) {
            return Ok(*base);
        }
        let t = self.t;
        let endpoints = self
            .component
            .ptr(self.sm.comp_endpoints)
            .map_err(|_| Stop::Corrupt)?;
        let at = rank
            .checked_mul(self.sm.ep_size)
            .and_then(|o| o.checked_add(self.sm.ep_segment_base))
            .and_then(|o| endpoints.checked_add(o))
            .ok_or(Stop::Corrupt)?;
        let base = t
            .check_ptr(at, t.ptr_align(), u64::from(t.sizes.pointer))
            .and_then(|a| t.read_ptr(a))
            .map_err(|e| Stop::from_read(e, at))?;
        t.check_ptr(base, 8, self.sm.hdr_size)
            .map_err(|e| Stop::from_read(e, at))?;
        if self.bases.len() <= i {
            self.bases.resize(i + 1, None);
        }
        self.bases[i] = Some(base);
        Ok(base)
    }

    /// The FIFO, oldest first; a fragment that sets a fast box up is
    /// followed by that box's entries.
    fn fifo(&mut self) {
        let t = self.t;
        let Ok(fifo) = self.component.ptr(self.sm.comp_my_fifo) else {
            self.cut(Stop::Corrupt);
            return;
        };
        if fifo == 0 {
            // Not set up: the BTL has no peer on this node.
            return;
        }
        let len = self.sm.fifo_head.max(self.sm.fifo_tail) + u64::from(t.sizes.pointer);
        let view = match t
            .check_ptr(fifo, t.ptr_align(), len)
            .and_then(|a| t.view(a, len))
        {
            Ok(v) => v,
            Err(e) => {
                self.cut(Stop::from_read(e, fifo));
                return;
            }
        };
        let free = self.free();
        let (Ok(head), Ok(tail)) = (view.ptr(self.sm.fifo_head), view.ptr(self.sm.fifo_tail))
        else {
            self.cut(Stop::Corrupt);
            return;
        };
        let mut seen = AddrSet::default();
        let mut cur = head;
        let mut last = free;
        while cur != free {
            if !seen.insert(cur) {
                self.cut(Stop::Cycle(cur));
                return;
            }
            if seen.len() > MAX_LIST_ITEMS {
                self.cut(Stop::Limit(MAX_LIST_ITEMS));
                return;
            }
            if t.exhausted() {
                self.cut(Stop::Budget);
                return;
            }
            match self.fragment(cur, false, None) {
                Ok(next) => {
                    last = cur;
                    cur = next;
                }
                Err(stop) => {
                    self.cut(stop);
                    return;
                }
            }
        }
        // A writer that stopped between taking the tail and linking its
        // fragment to the one before: the tail is written, but not
        // reachable from the head yet.
        if tail != free && tail != last && !seen.contains(&tail) {
            if let Err(stop) =
                self.fragment(tail, false, Some("not linked yet: its writer stopped"))
            {
                self.cut(stop);
            }
        }
    }

    /// `VADER_FIFO_FREE` (-2) at the target's pointer size.
    fn free(&self) -> u64 {
        let bits = 8 * u32::from(self.t.sizes.pointer.min(8));
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        (u64::MAX - 1) & mask
    }

    /// The fragment a relative pointer names (on the FIFO, or `in_box`
    /// through a fast box): decoded, its message kept; the box it sets up
    /// read. Gives its `next`.
    fn fragment(
        &mut self,
        value: u64,
        in_box: bool,
        note: Option<&'static str>,
    ) -> Result<u64, Stop> {
        let t = self.t;
        let sm = self.sm;
        let addr = self.relative(value)?;
        // The header and the first bytes of its data in one fetch (the
        // data follows the header in the fragment's buffer); the header
        // alone where that cannot be read.
        let at = t
            .check_ptr(addr, 8, sm.hdr_size + HEADER_READ)
            .map_err(|e| Stop::from_read(e, addr))?;
        let (hv, joined) = match t.view(at, sm.hdr_size + HEADER_READ) {
            Ok(v) => (v, true),
            Err(ReadError::Budget) => return Err(Stop::Budget),
            Err(_) => (
                t.view(at, sm.hdr_size)
                    .map_err(|e| Stop::from_read(e, addr))?,
                false,
            ),
        };
        let field = |r: Result<u64, ReadError>| r.map_err(|_| Stop::Corrupt);
        let next = field(hv.ptr(sm.hdr_next))?;
        let flags = field(hv.u8(sm.hdr_flags))?;
        if flags & FLAG_COMPLETE != 0 {
            // One of ours, back from its receiver: no message to us.
            return Ok(next);
        }
        let tag = field(hv.u8(sm.hdr_tag))?;
        let len = hv
            .i32(sm.hdr_len)
            .ok()
            .and_then(|l| u64::try_from(l).ok())
            .ok_or(Stop::Corrupt)?;
        let extra = match (flags & FLAG_SINGLE_COPY != 0, sm.hdr_sc_iov) {
            // The rest of the data, left in the sender's memory.
            (true, Some(iov)) => hv.size_t(iov + u64::from(t.sizes.pointer)).unwrap_or(0),
            _ => 0,
        };
        let fbox_base = field(hv.ptr(sm.hdr_fbox_base))?;
        let data = addr.saturating_add(sm.hdr_size);
        let want = len.min(HEADER_READ);
        let entry = if want == 0 {
            Entry::Short
        } else if joined {
            match hv.bytes(sm.hdr_size, want) {
                Ok(raw) => {
                    let dv = t.view_within(data, raw, &Spans::whole(want));
                    self.decode(&dv, len, tag, extra)
                }
                Err(_) => Entry::Short,
            }
        } else {
            match t.view(data, want) {
                Ok(dv) => self.decode(&dv, len, tag, extra),
                Err(ReadError::Budget) => return Err(Stop::Budget),
                Err(_) => Entry::Short,
            }
        };
        self.keep(entry, data, addr, in_box, note);
        // Only a fragment sent through the FIFO sets a box up (one sent
        // through a box never does), so boxes nest one deep at most.
        if flags & FLAG_SETUP_FBOX != 0 && !in_box {
            // A box this rank has not seen yet: its first entry is at the
            // first aligned slot, with sequence 0.
            let at = self.relative(fbox_base)?;
            self.fast_box(at, FBOX_ALIGN, 0);
        }
        Ok(next)
    }

    /// One fast box from read position `start` (bit 31: the lap) and
    /// expected sequence `seq`: one lap at most, each entry checked
    /// against the ring.
    fn fast_box(&mut self, buffer: u64, start: u64, seq: u64) {
        let t = self.t;
        let size = self.fbox_size;
        if !(2 * FBOX_ALIGN..=MAX_FBOX).contains(&size) || !size.is_multiple_of(FBOX_ALIGN) {
            self.cut(Stop::Corrupt);
            return;
        }
        if !self.boxes.insert(buffer) {
            return;
        }
        // Paged: a box is mostly empty, and only what is decoded is read.
        let ring = match t
            .check_ptr(buffer, 8, size)
            .and_then(|a| Paged::new(t, a, size))
        {
            Ok(v) => v,
            Err(e) => {
                self.cut(Stop::from_read(e, buffer));
                return;
            }
        };
        let first = start & !FBOX_LAP;
        if first < FBOX_ALIGN || first >= size || !first.is_multiple_of(FBOX_ALIGN) {
            // A read position outside the ring.
            self.cut(Stop::Corrupt);
            return;
        }
        let mut pos = first;
        let mut expect = seq & 0xffff;
        let mut found = false;
        for _ in 0..size / FBOX_ALIGN {
            let header = ring
                .u32(pos)
                .and_then(|len| Ok((len, ring.u16(pos + 4)?, ring.u16(pos + 6)?)));
            let (len, tag, hseq) = match header {
                Ok(h) => h,
                // Read as it is decoded: memory that cannot be read is
                // said as such (a core leaves the segments out).
                Err(e) => {
                    self.cut(Stop::from_read(e, buffer + pos));
                    return;
                }
            };
            if tag == 0 {
                if len != 0 {
                    // The size is written before the tag: a writer
                    // stopped in between.
                    self.short += 1;
                }
                return;
            }
            let pending = hseq == expect;
            if pending {
                found = true;
                expect = (expect + 1) & 0xffff;
            } else {
                let behind = expect.wrapping_sub(hseq) & 0xffff;
                if found || behind > FBOX_PASS {
                    // Left from an earlier lap: the end.
                    return;
                }
                // Handled in the pass the process was stopped in, whose
                // position was not saved yet: skipped.
            }
            let data = pos + 8;
            let Some(end) = data.checked_add(len).filter(|&e| e <= size) else {
                // An entry past the ring's end.
                self.cut(Stop::Corrupt);
                return;
            };
            if pending {
                if tag == FBOX_FRAG {
                    // A fragment's relative pointer, in order with the box.
                    match ring.bytes(data, u64::from(t.sizes.pointer).min(len)) {
                        Ok(raw) if len >= u64::from(t.sizes.pointer) => {
                            let value = t.decode(&raw).unwrap_or(0);
                            if let Err(stop) = self.fragment(value, true, None) {
                                self.cut(stop);
                                return;
                            }
                        }
                        _ => self.short += 1,
                    }
                } else if tag != FBOX_SKIP {
                    let entry = match ring.bytes(data, len.min(HEADER_READ)) {
                        Ok(raw) if len > 0 => {
                            let dv =
                                t.view_within(buffer + data, &raw, &Spans::whole(raw.len() as u64));
                            self.decode(&dv, len, tag, 0)
                        }
                        _ => Entry::Short,
                    };
                    self.keep(entry, buffer + data, buffer + pos, true, None);
                }
            }
            let mut next = (end + FBOX_ALIGN - 1) & !(FBOX_ALIGN - 1);
            if next >= size {
                next = FBOX_ALIGN;
            }
            pos = next;
            if pos == first {
                return;
            }
        }
    }

    /// Decodes ob1's header at the start of a message of `len` bytes (`v`
    /// holds its first bytes) sent with BTL tag `tag`; `extra` bytes of it
    /// are elsewhere (single copy).
    fn decode(&mut self, v: &View<'_, '_, P>, len: u64, tag: u64, extra: u64) -> Entry {
        let ob1 = self.ob1;
        let Ok(kind) = v.u8(ob1.hdr_type) else {
            return Entry::Short;
        };
        if kind != tag {
            // The BTL tag is ob1's header type: anything else is not ob1's.
            return Entry::Other;
        }
        match kind {
            HDR_MATCH | HDR_RNDV | HDR_RGET => match self.message(v, 0, kind, len, extra) {
                Some((ctx, entry)) => with_key(entry, ctx),
                None => Entry::Short,
            },
            HDR_CID => {
                let Some(cid) = self.cid else {
                    return Entry::Other;
                };
                if len <= cid.inner {
                    // A reply naming the communicator only.
                    return Entry::Other;
                }
                let (Ok(base), Ok(sub), Ok(inner)) = (
                    v.u64(cid.cid + cid.cid_base),
                    v.u64(cid.cid + cid.cid_sub),
                    v.u8(cid.inner + ob1.hdr_type),
                ) else {
                    return Entry::Short;
                };
                if !matches!(inner, HDR_MATCH | HDR_RNDV | HDR_RGET) {
                    return Entry::Other;
                }
                let index = match self.cids.iter().position(|&c| c == (base, sub)) {
                    Some(i) => i,
                    None => {
                        self.cids.push((base, sub));
                        self.cids.len() - 1
                    }
                };
                match self.message(v, cid.inner, inner, len - cid.inner, extra) {
                    Some((_, entry)) => with_key(entry, CID_KEY + index as u64),
                    None => Entry::Short,
                }
            }
            _ => Entry::Other,
        }
    }

    /// The match or rendezvous header at `at` of a message whose header
    /// and data are `len` bytes from there: its context and the entry.
    fn message(
        &self,
        v: &View<'_, '_, P>,
        at: u64,
        kind: u64,
        len: u64,
        extra: u64,
    ) -> Option<(u64, Entry)> {
        let ob1 = self.ob1;
        let header = if kind == HDR_MATCH {
            ob1.match_hdr_len
        } else {
            ob1.rndv_hdr_len
        };
        if len < header {
            return None;
        }
        let ctx = v.u16(at + ob1.hdr_ctx).ok()?;
        let source = v.i32(at + ob1.hdr_src).ok()?;
        let tag = v.i32(at + ob1.hdr_tag).ok()?;
        let seq = v.u16(at + ob1.hdr_seq).ok()?;
        let (protocol, length, arrived) = match kind {
            HDR_MATCH => {
                let n = (len - header).saturating_add(extra);
                (Protocol::Eager, n, n)
            }
            HDR_RNDV => {
                let full = v.u64(at + ob1.rndv_msg_length).ok()?;
                (Protocol::Rendezvous, full, (len - header).min(full))
            }
            _ => (
                Protocol::RendezvousGet,
                v.u64(at + ob1.rndv_msg_length).ok()?,
                0,
            ),
        };
        Some((
            ctx,
            Entry::Message {
                key: ctx,
                source,
                tag,
                seq,
                protocol,
                length,
                arrived,
                header: at + header,
            },
        ))
    }

    /// Keeps a decoded entry found at `at`, its data at `data`.
    fn keep(
        &mut self,
        entry: Entry,
        data: u64,
        at: u64,
        fast_box: bool,
        note: Option<&'static str>,
    ) {
        match entry {
            Entry::Message {
                key,
                source,
                tag,
                seq,
                protocol,
                length,
                arrived,
                header,
            } => {
                let m = Message {
                    place: self.place(fast_box),
                    source,
                    tag,
                    length,
                    arrived,
                    protocol,
                    seq: Some(seq),
                    buffer: if arrived > 0 {
                        data.saturating_add(header)
                    } else {
                        0
                    },
                    at,
                    note,
                    order: self.order,
                };
                self.order = self.order.saturating_add(1);
                self.scan.by_key.push(key, m);
            }
            Entry::Other => {}
            Entry::Short => self.short += 1,
        }
    }
}

fn with_key(entry: Entry, key: u64) -> Entry {
    match entry {
        Entry::Message {
            source,
            tag,
            seq,
            protocol,
            length,
            arrived,
            header,
            ..
        } => Entry::Message {
            key,
            source,
            tag,
            seq,
            protocol,
            length,
            arrived,
            header,
        },
        other => other,
    }
}

// The glue of the backend: which symbols this reader needs, and what one
// stop's reading of the transports holds for each communicator.

/// The transport reader's symbols, for an image whose layout has ob1's
/// types: the BTLs in use always, the shared-memory BTL's only where its
/// types are there too.
pub fn resolve_symbols<I: ImageAccess>(image: &I, layout: &Layout) -> SmSymbols {
    if layout.ob1.is_err() {
        return SmSymbols::default();
    }
    let btls = image.find_symbol(SYM_BTLS);
    match &layout.sm {
        Ok(l) => SmSymbols {
            component: image.find_symbol(l.symbol),
            process_info: l
                .num_local_peers
                .and_then(|_| image.find_symbol(SYM_PROCESS_INFO)),
            btls,
        },
        Err(_) => SmSymbols {
            btls,
            ..SmSymbols::default()
        },
    }
}

/// What waits in the transports, as read in this stop: messages by
/// context, or by the 128-bit communicator ids Open MPI 5's CID headers
/// name ([`CID_KEY`] plus the index into `cids`).
#[derive(Debug, Default)]
pub struct Transit {
    pub scan: transit::Scan,
    pub cids: Vec<Cid>,
}

impl OpenMpi {
    /// The messages in transit to `comm` (read once per stop, each
    /// communicator's taken out once), why the walk of the transport ended
    /// early, and what could not be read.
    pub(super) fn transit<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        ob1: &Ob1Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> (Vec<Message>, Option<Stop>, transit::Unlisted) {
        let tr = self.cache.transit.get(
            |tr| &tr.scan.by_key,
            &[comm.id],
            || read_transit(t, layout, ob1, syms),
        );
        let mut found = tr.scan.by_key.take(comm.id);
        let cid = comm
            .extended_id
            .and_then(|id| tr.cids.iter().position(|&c| c == id));
        if let Some(i) = cid {
            found.extend(tr.scan.by_key.take(CID_KEY + i as u64));
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
    let shared = super::layout::btl_name(layout.comm.index.is_some());
    let mut unlisted = transit::Unlisted::default();
    let btls = syms.sm.btls.and_then(|l| btls_in_use(t, layout, l));
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
                let (scan, cids) = scan(t, l, ob1, ob1.cid, &syms.sm);
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
