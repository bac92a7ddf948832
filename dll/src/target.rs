//! Typed, bounded reads of target memory.
//!
//! Everything the DLL learns about a process goes through a [`Target`]: it
//! knows the target's basic type sizes and byte order, checks pointers
//! before following them, and counts fetches and bytes against a budget so
//! that no single call into the DLL can run for ever on corrupt data.
//! Structures are read whole, or only the [`Spans`] of them that are
//! decoded, into a [`View`] (one fetch per span) and decoded from there.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use crate::access::{ProcessAccess, TypeSizes};
use crate::errors::DllError;

/// The target's basic sizes in bytes, as the MPI was compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub short: u8,
    pub int: u8,
    pub long: u8,
    pub long_long: u8,
    pub pointer: u8,
    pub bool_: u8,
    pub size_t: u8,
}

fn valid_size(n: i32) -> Option<u8> {
    matches!(n, 1 | 2 | 4 | 8).then_some(n as u8)
}

impl Sizes {
    /// The usual 64-bit Linux sizes.
    pub const LP64: Sizes = Sizes {
        short: 2,
        int: 4,
        long: 8,
        long_long: 8,
        pointer: 8,
        bool_: 1,
        size_t: 8,
    };

    /// From the debugger's five sizes; bool and size_t are assumed 1 and
    /// pointer-sized until the MPI's own record says otherwise.
    pub fn from_debugger(ts: TypeSizes) -> Result<Sizes, DllError> {
        let pointer = valid_size(ts.pointer).ok_or(DllError::BadTypeSizes)?;
        let int = valid_size(ts.int).ok_or(DllError::BadTypeSizes)?;
        Ok(Sizes {
            short: valid_size(ts.short).unwrap_or(2),
            int,
            long: valid_size(ts.long).unwrap_or(pointer),
            long_long: valid_size(ts.long_long).unwrap_or(8),
            pointer,
            bool_: 1,
            size_t: pointer,
        })
    }

    /// Overrides with the sizes the MPI recorded about itself (Open MPI's
    /// `MPIR_debug_typedefs_sizeof`: short, int, long, long long, void*,
    /// bool, size_t), keeping ours for any value that makes no sense.
    pub fn with_mpi_record(self, record: &[i64]) -> Sizes {
        let get = |i: usize, old: u8| {
            record
                .get(i)
                .and_then(|&v| i32::try_from(v).ok())
                .and_then(valid_size)
                .unwrap_or(old)
        };
        let merged = Sizes {
            short: get(0, self.short),
            int: get(1, self.int),
            long: get(2, self.long),
            long_long: get(3, self.long_long),
            pointer: get(4, self.pointer),
            bool_: get(5, self.bool_),
            size_t: get(6, self.size_t),
        };
        // The debugger's view of pointers wins: it is what fetch_data uses.
        if merged.pointer != self.pointer {
            return Sizes {
                pointer: self.pointer,
                ..merged
            };
        }
        merged
    }
}

/// How target scalars become host scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// Same order as the host: copy.
    Same,
    /// Opposite order: reverse the bytes.
    Swapped,
    /// Something else: ask the debugger's target_to_host each time.
    Callback,
}

impl ByteOrder {
    /// Learns the conversion from the debugger's target_to_host, once per
    /// process, so that scalars need no callback each.
    pub fn probe<P: ProcessAccess + ?Sized>(p: &P) -> ByteOrder {
        let mut verdict = None;
        for n in [2usize, 4, 8] {
            let input: Vec<u8> = (1..=n as u8).collect();
            let mut out = vec![0u8; n];
            p.target_to_host(&input, &mut out);
            let this = if out == input {
                ByteOrder::Same
            } else if out.iter().rev().eq(input.iter()) {
                ByteOrder::Swapped
            } else {
                return ByteOrder::Callback;
            };
            match verdict {
                None => verdict = Some(this),
                Some(v) if v == this => {}
                Some(_) => return ByteOrder::Callback,
            }
        }
        verdict.unwrap_or(ByteOrder::Callback)
    }
}

/// Why a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// A NULL (or null-page) pointer was about to be followed.
    Null,
    /// A pointer not aligned for what it should point to.
    Misaligned(u64),
    /// The debugger could not read these bytes.
    Unreadable(u64),
    /// An offset beyond what was read, or a size that cannot be right.
    OutOfRange,
    /// The per-call budget of fetches or bytes is spent.
    Budget,
}

impl From<ReadError> for DllError {
    fn from(e: ReadError) -> DllError {
        match e {
            ReadError::Unreadable(_) => DllError::ReadFailed,
            ReadError::Budget => DllError::LimitReached,
            ReadError::Null | ReadError::Misaligned(_) | ReadError::OutOfRange => DllError::Corrupt,
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Null => f.write_str("NULL pointer"),
            ReadError::Misaligned(a) => write!(f, "misaligned pointer {a:#x}"),
            ReadError::Unreadable(a) => write!(f, "unreadable memory at {a:#x}"),
            ReadError::OutOfRange => f.write_str("value out of range"),
            ReadError::Budget => f.write_str("read budget spent"),
        }
    }
}

/// Per-call read limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_fetches: u64,
    pub max_bytes: u64,
}

impl Budget {
    /// Generous for any real job, small enough to return promptly.
    pub const DEFAULT: Budget = Budget {
        max_fetches: 200_000,
        max_bytes: 256 << 20,
    };
}

/// Largest single read (a group of 2M ranks, a table of 2M communicators);
/// anything bigger is a corrupt size.
pub const MAX_READ: usize = 16 << 20;
/// Addresses below this are never valid (the null page).
pub const MIN_ADDRESS: u64 = 4096;

/// Typed access to one process for the duration of one call.
pub struct Target<'a, P: ProcessAccess + ?Sized> {
    process: &'a P,
    pub sizes: Sizes,
    order: ByteOrder,
    budget: Budget,
    fetches: Cell<u64>,
    bytes: Cell<u64>,
}

impl<P: ProcessAccess + ?Sized> std::fmt::Debug for Target<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("sizes", &self.sizes)
            .field("order", &self.order)
            .field("fetches", &self.fetches.get())
            .finish_non_exhaustive()
    }
}

impl<'a, P: ProcessAccess + ?Sized> Target<'a, P> {
    pub fn new(process: &'a P, sizes: Sizes, order: ByteOrder) -> Self {
        Self::with_budget(process, sizes, order, Budget::DEFAULT)
    }

    pub fn with_budget(process: &'a P, sizes: Sizes, order: ByteOrder, budget: Budget) -> Self {
        Target {
            process,
            sizes,
            order,
            budget,
            fetches: Cell::new(0),
            bytes: Cell::new(0),
        }
    }

    /// How many fetch callbacks this target made.
    pub fn fetches(&self) -> u64 {
        self.fetches.get()
    }

    /// Whether the budget is spent.
    pub fn exhausted(&self) -> bool {
        self.fetches.get() >= self.budget.max_fetches || self.bytes.get() >= self.budget.max_bytes
    }

    /// Checks a pointer before following it: not in the null page, aligned,
    /// and with room for `len` bytes before the end of the address space.
    pub fn check_ptr(&self, addr: u64, align: u64, len: u64) -> Result<u64, ReadError> {
        if addr < MIN_ADDRESS {
            return Err(ReadError::Null);
        }
        if align > 1 && addr.checked_rem(align) != Some(0) {
            return Err(ReadError::Misaligned(addr));
        }
        let end = addr.checked_add(len).ok_or(ReadError::OutOfRange)?;
        if self.sizes.pointer < 8 && end > (1u64 << (8 * u32::from(self.sizes.pointer))) {
            return Err(ReadError::OutOfRange);
        }
        Ok(addr)
    }

    /// The alignment a pointer to a pointer-holding struct must have.
    pub fn ptr_align(&self) -> u64 {
        u64::from(self.sizes.pointer)
    }

    /// Reads `buf.len()` bytes at `addr`, counted against the budget.
    pub fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.len() > MAX_READ {
            return Err(ReadError::OutOfRange);
        }
        self.check_ptr(addr, 1, buf.len() as u64)?;
        if self.exhausted() {
            return Err(ReadError::Budget);
        }
        self.fetches.set(self.fetches.get() + 1);
        self.bytes.set(self.bytes.get() + buf.len() as u64);
        if buf.is_empty() || self.process.fetch(addr, buf) {
            Ok(())
        } else {
            Err(ReadError::Unreadable(addr))
        }
    }

    /// Reads `len` bytes at `addr`.
    pub fn read_bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>, ReadError> {
        if len > MAX_READ {
            return Err(ReadError::OutOfRange);
        }
        let mut buf = vec![0u8; len];
        self.read_into(addr, &mut buf)?;
        Ok(buf)
    }

    /// Reads a structure of `len` bytes at `addr` for decoding.
    pub fn view(&self, addr: u64, len: u64) -> Result<View<'_, 'a, P>, ReadError> {
        let len = usize::try_from(len).map_err(|_| ReadError::OutOfRange)?;
        let bytes = self.read_bytes(addr, len)?;
        Ok(self.view_from(addr, bytes))
    }

    /// Reads only the parts `spans` of the structure at `addr`, one fetch
    /// per span; the view decodes at the structure's own offsets and refuses
    /// any offset outside the spans.
    pub fn view_spans(&self, addr: u64, spans: &Spans) -> Result<View<'_, 'a, P>, ReadError> {
        let total = usize::try_from(spans.total()).map_err(|_| ReadError::OutOfRange)?;
        if total > MAX_READ {
            return Err(ReadError::OutOfRange);
        }
        let mut bytes = vec![0u8; total];
        let mut done = 0usize;
        for &(lo, hi) in spans.iter() {
            let at = addr.checked_add(lo).ok_or(ReadError::OutOfRange)?;
            let len = usize::try_from(hi - lo).map_err(|_| ReadError::OutOfRange)?;
            let part = bytes
                .get_mut(done..done + len)
                .ok_or(ReadError::OutOfRange)?;
            self.read_into(at, part)?;
            done += len;
        }
        Ok(View {
            target: self,
            addr,
            bytes: Cow::Owned(bytes),
            spans: *spans,
        })
    }

    /// A view over bytes already read (part of a larger read).
    pub fn view_from(&self, addr: u64, bytes: Vec<u8>) -> View<'_, 'a, P> {
        let spans = Spans::whole(bytes.len() as u64);
        View {
            target: self,
            addr,
            bytes: Cow::Owned(bytes),
            spans,
        }
    }

    /// A view of the parts `spans` of a structure at `addr` whose first
    /// bytes are `whole` (part of a larger read); spans beyond `whole` are
    /// cut to it, so a short structure loses only its last fields.
    pub fn view_within<'r>(&'r self, addr: u64, whole: &'r [u8], spans: &Spans) -> View<'r, 'a, P> {
        let cut = spans.clipped(whole.len() as u64);
        let mut parts = cut.iter();
        let bytes = match (parts.next(), parts.next()) {
            // One span (a request's): its bytes as they are, no copy.
            (Some(&(lo, hi)), None) => {
                Cow::Borrowed(whole.get(lo as usize..hi as usize).unwrap_or_default())
            }
            _ => {
                let mut bytes = Vec::with_capacity(usize::try_from(cut.total()).unwrap_or(0));
                for &(lo, hi) in cut.iter() {
                    // Clipped to `whole`, so the range is in bounds.
                    if let Some(part) = whole.get(lo as usize..hi as usize) {
                        bytes.extend_from_slice(part);
                    }
                }
                Cow::Owned(bytes)
            }
        };
        View {
            target: self,
            addr,
            bytes,
            spans: cut,
        }
    }

    /// Converts target-order bytes (1..=8 of them) to an unsigned value.
    pub fn decode(&self, raw: &[u8]) -> Result<u64, ReadError> {
        let n = raw.len();
        if n == 0 || n > 8 {
            return Err(ReadError::OutOfRange);
        }
        // The common case, the target's order, in one load.
        if self.order == ByteOrder::Same {
            match n {
                8 => return Ok(u64::from_ne_bytes(raw.try_into().unwrap_or([0; 8]))),
                4 => {
                    return Ok(u64::from(u32::from_ne_bytes(
                        raw.try_into().unwrap_or([0; 4]),
                    )))
                }
                _ => {}
            }
        }
        let mut host = [0u8; 8];
        let dest = &mut host[..n];
        match self.order {
            ByteOrder::Same => dest.copy_from_slice(raw),
            ByteOrder::Swapped => {
                for (d, s) in dest.iter_mut().zip(raw.iter().rev()) {
                    *d = *s;
                }
            }
            ByteOrder::Callback => self.process.target_to_host(raw, dest),
        }
        // `host[..n]` now holds a host-order n-byte integer.
        Ok(if cfg!(target_endian = "little") {
            u64::from_le_bytes(host)
        } else {
            let mut be = [0u8; 8];
            be[8 - n..].copy_from_slice(&host[..n]);
            u64::from_be_bytes(be)
        })
    }

    /// An unsigned scalar of `size` bytes.
    pub fn read_uint(&self, addr: u64, size: u8) -> Result<u64, ReadError> {
        let mut buf = [0u8; 8];
        let slot = buf
            .get_mut(..usize::from(size))
            .ok_or(ReadError::OutOfRange)?;
        self.read_into(addr, slot)?;
        self.decode(slot)
    }

    /// A pointer.
    pub fn read_ptr(&self, addr: u64) -> Result<u64, ReadError> {
        self.read_uint(addr, self.sizes.pointer)
    }

    /// A C `int`, sign-extended.
    pub fn read_int(&self, addr: u64) -> Result<i64, ReadError> {
        Ok(sign_extend(
            self.read_uint(addr, self.sizes.int)?,
            self.sizes.int,
        ))
    }

    /// `n` C `int`s in a row, sign-extended (one read).
    pub fn read_ints(&self, addr: u64, n: usize) -> Result<Vec<i64>, ReadError> {
        let width = u64::from(self.sizes.int);
        let len = width.checked_mul(n as u64).ok_or(ReadError::OutOfRange)?;
        let v = self.view(self.check_ptr(addr, width, len)?, len)?;
        (0..n as u64).map(|i| v.int(i * width)).collect()
    }

    /// A `size_t`.
    pub fn read_size_t(&self, addr: u64) -> Result<u64, ReadError> {
        self.read_uint(addr, self.sizes.size_t)
    }

    /// A `uint64_t`.
    pub fn read_u64(&self, addr: u64) -> Result<u64, ReadError> {
        self.read_uint(addr, 8)
    }

    /// A NUL-terminated string of at most `max` bytes (invalid UTF-8
    /// replaced). Reads page by page so a short string at the end of a
    /// mapping is still readable.
    pub fn read_cstring(&self, addr: u64, max: usize) -> Result<String, ReadError> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let to_page = (4096 - (at % 4096)) as usize;
            let chunk = to_page.min(max - out.len()).min(256);
            let bytes = self.read_bytes(at, chunk)?;
            if let Some(nul) = bytes.iter().position(|&b| b == 0) {
                out.extend_from_slice(&bytes[..nul]);
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(&bytes);
            at = at.checked_add(chunk as u64).ok_or(ReadError::OutOfRange)?;
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// Sign-extends the low `size` bytes of `v`.
pub fn sign_extend(v: u64, size: u8) -> i64 {
    match size {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

/// Most separate byte ranges one [`View`] may hold.
pub const MAX_SPANS: usize = 4;

/// The byte ranges of a structure worth reading: sorted, disjoint,
/// non-empty `(start, end)` offsets, at most [`MAX_SPANS`] of them. Reading
/// only these instead of the whole structure saves copying what is never
/// decoded (a receive fragment is 656 bytes of which 100 matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spans {
    n: usize,
    at: [(u64, u64); MAX_SPANS],
}

impl Spans {
    /// One span `0..len` (nothing if `len` is 0).
    pub fn whole(len: u64) -> Spans {
        // Made directly: every view of a whole structure has one, so the
        // sorting `cover` does is not worth its allocation here.
        let mut out = Spans {
            n: 0,
            at: [(0, 0); MAX_SPANS],
        };
        if len > 0 {
            out.at[0] = (0, len);
            out.n = 1;
        }
        out
    }

    /// The spans covering every `(offset, size)` field, joining fields
    /// less than `max_gap` bytes apart (each span is one fetch; a short gap
    /// costs less to copy than a fetch). Beyond [`MAX_SPANS`] the last span
    /// grows to cover the rest.
    pub fn cover(fields: &[(u64, u64)], max_gap: u64) -> Spans {
        let mut sorted: Vec<(u64, u64)> = fields
            .iter()
            .filter(|&&(_, size)| size > 0)
            .map(|&(off, size)| (off, off.saturating_add(size)))
            .collect();
        sorted.sort_unstable();
        let mut out = Spans {
            n: 0,
            at: [(0, 0); MAX_SPANS],
        };
        for (lo, hi) in sorted {
            if out.n > 0 {
                let last = &mut out.at[out.n - 1];
                if lo <= last.1.saturating_add(max_gap) || out.n == MAX_SPANS {
                    last.1 = last.1.max(hi);
                    continue;
                }
            }
            out.at[out.n] = (lo, hi);
            out.n += 1;
        }
        out
    }

    /// The spans, in order.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, u64)> {
        self.at[..self.n].iter()
    }

    /// How many bytes they cover.
    pub fn total(&self) -> u64 {
        self.iter().map(|&(lo, hi)| hi - lo).sum()
    }

    /// Where the last span ends (0 if none).
    pub fn end(&self) -> u64 {
        self.iter().last().map_or(0, |&(_, hi)| hi)
    }

    /// Whether `off..off + size` lies within one span.
    pub fn contains(&self, off: u64, size: u64) -> bool {
        off.checked_add(size)
            .is_some_and(|end| self.iter().any(|&(lo, hi)| lo <= off && end <= hi))
    }

    /// The spans cut at `len`.
    pub fn clipped(&self, len: u64) -> Spans {
        let mut out = Spans {
            n: 0,
            at: [(0, 0); MAX_SPANS],
        };
        for &(lo, hi) in self.iter() {
            if lo < len {
                out.at[out.n] = (lo, hi.min(len));
                out.n += 1;
            }
        }
        out
    }
}

/// The pieces a [`Paged`] region is read in: what a debugger that answers
/// through another process fetches at a time (padb asks gdb for 256 bytes).
pub const PAGE: u64 = 256;

/// A region read page by page as it is looked at, each run of missing
/// pages in one fetch: for a large buffer of which little is usually in use
/// (a shared-memory ring), so that a debugger is asked only for what is
/// decoded.
pub struct Paged<'t, 'a, P: ProcessAccess + ?Sized> {
    target: &'t Target<'a, P>,
    addr: u64,
    bytes: RefCell<Vec<u8>>,
    have: RefCell<Vec<bool>>,
}

impl<P: ProcessAccess + ?Sized> std::fmt::Debug for Paged<'_, '_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Paged")
            .field("addr", &self.addr)
            .field("len", &self.bytes.borrow().len())
            .finish()
    }
}

impl<'t, 'a, P: ProcessAccess + ?Sized> Paged<'t, 'a, P> {
    /// `len` bytes at `addr`, none read yet.
    pub fn new(target: &'t Target<'a, P>, addr: u64, len: u64) -> Result<Self, ReadError> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= MAX_READ)
            .ok_or(ReadError::OutOfRange)?;
        addr.checked_add(len as u64).ok_or(ReadError::OutOfRange)?;
        Ok(Self {
            target,
            addr,
            bytes: RefCell::new(vec![0u8; len]),
            have: RefCell::new(vec![false; (len as u64).div_ceil(PAGE) as usize]),
        })
    }

    /// The bytes at `off..off + len`, reading the pages they lie in that
    /// were not read yet.
    pub fn bytes(&self, off: u64, len: u64) -> Result<Vec<u8>, ReadError> {
        let end = off.checked_add(len).ok_or(ReadError::OutOfRange)?;
        let total = self.bytes.borrow().len() as u64;
        if end > total {
            return Err(ReadError::OutOfRange);
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let (first, last) = (off / PAGE, (end - 1) / PAGE);
        let mut page = first;
        while page <= last {
            if self.have.borrow()[page as usize] {
                page += 1;
                continue;
            }
            let mut run_end = page;
            while run_end < last && !self.have.borrow()[(run_end + 1) as usize] {
                run_end += 1;
            }
            let lo = page * PAGE;
            let hi = ((run_end + 1) * PAGE).min(total);
            let at = self.addr + lo;
            self.target
                .read_into(at, &mut self.bytes.borrow_mut()[lo as usize..hi as usize])?;
            for p in page..=run_end {
                self.have.borrow_mut()[p as usize] = true;
            }
            page = run_end + 1;
        }
        Ok(self.bytes.borrow()[off as usize..end as usize].to_vec())
    }

    pub fn u32(&self, off: u64) -> Result<u64, ReadError> {
        self.target.decode(&self.bytes(off, 4)?)
    }

    pub fn u16(&self, off: u64) -> Result<u64, ReadError> {
        self.target.decode(&self.bytes(off, 2)?)
    }
}

/// A structure (or the parts of it in [`Spans`]) read once, decoded field
/// by field at the structure's own offsets.
pub struct View<'t, 'a, P: ProcessAccess + ?Sized> {
    target: &'t Target<'a, P>,
    pub addr: u64,
    /// The spans' bytes, one after the other (borrowed from a larger read
    /// when that is how they lie).
    bytes: Cow<'t, [u8]>,
    spans: Spans,
}

impl<P: ProcessAccess + ?Sized> std::fmt::Debug for View<'_, '_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("addr", &self.addr)
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl<P: ProcessAccess + ?Sized> View<'_, '_, P> {
    /// The raw bytes at `off..off + len` of the structure, if they were
    /// read.
    pub fn bytes(&self, off: u64, len: u64) -> Result<&[u8], ReadError> {
        let end = off.checked_add(len).ok_or(ReadError::OutOfRange)?;
        let mut base = 0u64;
        for &(lo, hi) in self.spans.iter() {
            if lo <= off && end <= hi {
                let start =
                    usize::try_from(base + (off - lo)).map_err(|_| ReadError::OutOfRange)?;
                let len = usize::try_from(len).map_err(|_| ReadError::OutOfRange)?;
                let stop = start.checked_add(len).ok_or(ReadError::OutOfRange)?;
                return self.bytes.get(start..stop).ok_or(ReadError::OutOfRange);
            }
            base += hi - lo;
        }
        Err(ReadError::OutOfRange)
    }

    pub fn uint(&self, off: u64, size: u8) -> Result<u64, ReadError> {
        self.target.decode(self.bytes(off, u64::from(size))?)
    }

    pub fn ptr(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, self.target.sizes.pointer)
    }

    pub fn int(&self, off: u64) -> Result<i64, ReadError> {
        let size = self.target.sizes.int;
        Ok(sign_extend(self.uint(off, size)?, size))
    }

    pub fn i32(&self, off: u64) -> Result<i64, ReadError> {
        Ok(sign_extend(self.uint(off, 4)?, 4))
    }

    pub fn u32(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, 4)
    }

    pub fn u16(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, 2)
    }

    pub fn u8(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, 1)
    }

    pub fn u64(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, 8)
    }

    pub fn size_t(&self, off: u64) -> Result<u64, ReadError> {
        self.uint(off, self.target.sizes.size_t)
    }

    pub fn bool(&self, off: u64) -> Result<bool, ReadError> {
        Ok(self.uint(off, self.target.sizes.bool_)? != 0)
    }

    /// An inline character array of `len` bytes, up to its first NUL.
    pub fn chars(&self, off: u64, len: u64) -> Result<String, ReadError> {
        let raw = self.bytes(off, len)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeProcess;

    #[test]
    fn decodes_in_both_orders_and_sign_extends() {
        let mut p = FakeProcess::new();
        p.map(0x10000, vec![0xfe, 0xff, 0xff, 0xff, 0x01, 0, 0, 0]);
        let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
        assert_eq!(t.read_int(0x10000), Ok(-2));
        assert_eq!(t.read_ptr(0x10000), Ok(0x1_ffff_fffe));
        p.swap = true;
        let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
        assert_eq!(t.read_uint(0x10000, 2), Ok(0xfeff));
        assert_eq!(ByteOrder::probe(&p), ByteOrder::Swapped);
    }

    #[test]
    fn refuses_null_misaligned_and_budget() {
        let mut p = FakeProcess::new();
        p.map(0x10000, vec![0; 64]);
        let budget = Budget {
            max_fetches: 2,
            max_bytes: 1000,
        };
        let t = Target::with_budget(&p, Sizes::LP64, ByteOrder::Same, budget);
        assert_eq!(t.read_ptr(0), Err(ReadError::Null));
        assert_eq!(
            t.check_ptr(0x10001, 8, 8),
            Err(ReadError::Misaligned(0x10001))
        );
        assert!(t.read_ptr(0x10000).is_ok());
        assert_eq!(t.read_ptr(0x20000), Err(ReadError::Unreadable(0x20000)));
        assert_eq!(t.read_ptr(0x10000), Err(ReadError::Budget));
        assert_eq!(t.fetches(), 2);
    }

    #[test]
    fn cstrings_are_bounded_and_cross_pages() {
        let mut p = FakeProcess::new();
        p.map(0x10ffe, b"abcdef\0".to_vec());
        let t = Target::new(&p, Sizes::LP64, ByteOrder::Same);
        assert_eq!(t.read_cstring(0x10ffe, 64).as_deref(), Ok("abcdef"));
        assert_eq!(t.read_cstring(0x10ffe, 3).as_deref(), Ok("abc"));
    }

    #[test]
    fn spans_join_near_fields_and_views_refuse_the_rest() {
        let s = Spans::cover(
            &[(176, 8), (16, 8), (56, 4), (456, 8), (488, 8), (0, 0)],
            128,
        );
        assert_eq!(
            s.iter().copied().collect::<Vec<_>>(),
            vec![(16, 184), (456, 496)]
        );
        assert_eq!((s.total(), s.end()), (208, 496));
        assert!(s.contains(60, 4) && !s.contains(180, 8) && !s.contains(300, 1));
        assert_eq!(
            s.clipped(470).iter().copied().collect::<Vec<_>>(),
            vec![(16, 184), (456, 470)]
        );
        // More fields than spans: the last one covers the rest.
        let many: Vec<(u64, u64)> = (0..10).map(|i| (i * 1000, 4)).collect();
        let s = Spans::cover(&many, 0);
        assert_eq!(s.iter().count(), MAX_SPANS);
        assert_eq!(s.end(), 9004);

        let mut p = FakeProcess::new();
        p.map(0x10000, (0..=255).collect());
        let t = Target::new(&p, Sizes::LP64, ByteOrder::Same);
        let spans = Spans::cover(&[(8, 2), (200, 1)], 16);
        let v = t.view_spans(0x10000, &spans).unwrap();
        assert_eq!(t.fetches(), 2);
        assert_eq!((v.u16(8), v.u8(200)), (Ok(0x0908), Ok(200)));
        assert_eq!(v.u8(7), Err(ReadError::OutOfRange));
        assert_eq!(v.u16(9), Err(ReadError::OutOfRange));
        assert_eq!(v.u8(100), Err(ReadError::OutOfRange));
        // Beyond the mapping: the read fails, it is not cut short.
        let past = Spans::cover(&[(4090, 10)], 0);
        assert!(t.view_spans(0x10000, &past).is_err());
        let whole: Vec<u8> = (0..=255).collect();
        let v = t.view_within(0x10000, &whole[..100], &spans);
        assert_eq!(
            (v.u16(8), v.u8(200)),
            (Ok(0x0908), Err(ReadError::OutOfRange))
        );
    }

    #[test]
    fn mpi_record_overrides_sizes_but_not_pointer_width() {
        let s = Sizes::LP64.with_mpi_record(&[2, 4, 8, 8, 4, 4, 8]);
        assert_eq!(s.pointer, 8);
        assert_eq!(s.bool_, 4);
        let s = Sizes::LP64.with_mpi_record(&[2, 4, 8, 8, 8, 99, -1]);
        assert_eq!((s.bool_, s.size_t), (1, 8));
    }
}
