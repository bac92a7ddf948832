//! A page cache over a [`Target`] for one stopped snapshot.
//!
//! A message-queue DLL reads target memory a few bytes at a time; through
//! the cache each 4 KiB page costs one system call at most, and a read
//! spanning several missing pages fetches them together. Valid only while
//! the target does not change: call [`PageCache::invalidate`] after resuming.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;

use crate::interface::{MappedObject, Target, PAGE_SIZE};
use crate::{Error, Result};

const PAGE: usize = PAGE_SIZE as usize;
/// Pages a limited cache reads past the last one a read wants.
const READ_AHEAD: u64 = 15;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls to `read`.
    pub reads: u64,
    /// Bytes those calls returned.
    pub bytes: u64,
    /// Reading system calls the underlying target made since the cache was
    /// created (also for reads made past the cache, if it is shared).
    pub syscalls: u64,
    /// Readable pages held.
    pub pages_cached: u64,
}

enum Page {
    Data(Box<[u8]>),
    /// Known unreadable (unmapped, or not readable) in this snapshot.
    Unreadable,
}

/// Page numbers are small, well-spread integers: a multiplicative hash is
/// enough, and much cheaper than the default SipHash on this hot path.
#[derive(Default)]
struct PageHasher(u64);

impl std::hash::Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type PageMap = HashMap<u64, Page, std::hash::BuildHasherDefault<PageHasher>>;

#[derive(Default)]
struct State {
    /// By page number (address / PAGE_SIZE).
    pages: PageMap,
    /// With a limit: page numbers in the order they came in, oldest first.
    arrived: VecDeque<u64>,
    reads: u64,
    bytes: u64,
}

/// Reads through a cache of whole pages. Single-threaded: uses interior
/// mutability so that it can be read through `&self` like any target.
pub struct PageCache<T: Target> {
    inner: T,
    /// The target's syscall count when the cache was created.
    syscalls_before: u64,
    /// Most pages held (oldest let go first), if limited.
    limit: Option<usize>,
    state: RefCell<State>,
}

impl<T: Target> PageCache<T> {
    /// A cache that keeps every page read, as a snapshot needs.
    pub fn new(inner: T) -> Self {
        Self {
            syscalls_before: inner.syscalls(),
            inner,
            limit: None,
            state: RefCell::default(),
        }
    }

    /// A cache that holds about `max_bytes` of pages, letting the oldest go
    /// first (more while one read needs more): DLLs walk queues in address
    /// order and rarely come back, and a dump of 100,000s of operations
    /// reads over 100 MB. [`PageCache::pages`] then has only what is held.
    pub fn with_limit(inner: T, max_bytes: usize) -> Self {
        Self {
            limit: Some((max_bytes / PAGE).max(1)),
            ..Self::new(inner)
        }
    }

    pub fn stats(&self) -> CacheStats {
        let state = self.state.borrow();
        CacheStats {
            reads: state.reads,
            bytes: state.bytes,
            syscalls: self.inner.syscalls() - self.syscalls_before,
            pages_cached: state
                .pages
                .values()
                .filter(|p| matches!(p, Page::Data(_)))
                .count() as u64,
        }
    }

    /// Forgets every page (the target ran, or is about to be stopped again);
    /// the counters keep counting.
    pub fn invalidate(&self) {
        let mut state = self.state.borrow_mut();
        state.pages.clear();
        state.arrived.clear();
    }

    /// Every readable page held, by address: what was read since the
    /// cache was created or last invalidated (for saving a snapshot).
    pub fn pages(&self) -> Vec<(u64, Box<[u8]>)> {
        let state = self.state.borrow();
        let mut pages: Vec<(u64, Box<[u8]>)> = state
            .pages
            .iter()
            .filter_map(|(&n, page)| match page {
                Page::Data(data) => Some((n * PAGE_SIZE, data.clone())),
                Page::Unreadable => None,
            })
            .collect();
        pages.sort_by_key(|&(addr, _)| addr);
        pages
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    pub fn into_inner(self) -> T {
        self.inner
    }

    /// Makes sure pages `first..=last` are known, readable or not, fetching
    /// each run of missing pages with one call to the target.
    fn fill(&self, first: u64, last: u64) -> Result<()> {
        let mut state = self.state.borrow_mut();
        if let Some(limit) = self.limit {
            // Room first, so that nothing this read needs is let go.
            let wanted = usize::try_from(last - first + 1).unwrap_or(usize::MAX);
            let mut turns = state.arrived.len();
            while state.pages.len().saturating_add(wanted) > limit && turns > 0 {
                turns -= 1;
                let Some(old) = state.arrived.pop_front() else {
                    break;
                };
                if (first..=last).contains(&old) {
                    state.arrived.push_back(old);
                } else {
                    state.pages.remove(&old);
                }
            }
        }
        let mut page = first;
        while page <= last {
            if state.pages.contains_key(&page) {
                page += 1;
                continue;
            }
            let mut end = page + 1;
            while end <= last && !state.pages.contains_key(&end) {
                end += 1;
            }
            // The page above the missing run is cached: a walk going down
            // through memory (lists whose items were allocated downwards,
            // as MPICH's ch4 requests are). Read the missing pages below
            // it along, in the same call.
            if self.limit.is_some() && state.pages.contains_key(&end) {
                let mut behind = page;
                while behind > 0
                    && page - behind < READ_AHEAD
                    && !state.pages.contains_key(&(behind - 1))
                {
                    behind -= 1;
                }
                if behind < page && self.fetch_behind(&mut state, behind, end)? {
                    page = end;
                    continue;
                }
                // What that call did not bring is read the usual way.
                while page < end && state.pages.contains_key(&page) {
                    page += 1;
                }
                if page == end {
                    continue;
                }
            }
            // A limited cache reads ahead of the last page wanted, as far
            // as the pages are missing and readable: walks go up through
            // memory, and one call for 16 pages costs little more than one
            // for a page.
            let mut ahead = end;
            if self.limit.is_some() && end > last {
                while ahead < end + READ_AHEAD && !state.pages.contains_key(&ahead) {
                    ahead += 1;
                }
            }
            self.fetch(&mut state, page, end, ahead)?;
            page = end;
        }
        Ok(())
    }

    /// Fetches pages `page..end`, all missing, and what is readable of
    /// `end..ahead` (missing too) in the same call.
    fn fetch(&self, state: &mut State, mut page: u64, end: u64, ahead: u64) -> Result<()> {
        let mut upto = ahead.max(end);
        while page < end {
            let mut buf = vec![0; (upto - page) as usize * PAGE];
            let n = self.inner.read_prefix(page * PAGE_SIZE, &mut buf)?;
            for chunk in buf[..n / PAGE * PAGE].chunks_exact(PAGE) {
                self.insert(state, page, Page::Data(chunk.into()));
                page += 1;
            }
            upto = end;
            if page < end {
                // Ask the target why this page failed: only "unreadable" is
                // remembered; "the process is gone" is the caller's error.
                let mut one = vec![0; PAGE];
                let known = match self.inner.read(page * PAGE_SIZE, &mut one) {
                    Ok(()) => Page::Data(one.into()),
                    Err(Error::Read { .. }) => Page::Unreadable,
                    Err(other) => return Err(other),
                };
                self.insert(state, page, known);
                page += 1;
            }
        }
        Ok(())
    }

    /// Reads pages `from..end`, all missing, in one call, keeping what it
    /// returns: whether all of them came (else the caller reads the rest
    /// as usual, which tells unreadable pages apart).
    fn fetch_behind(&self, state: &mut State, from: u64, end: u64) -> Result<bool> {
        let mut buf = vec![0; (end - from) as usize * PAGE];
        let n = match self.inner.read_prefix(from * PAGE_SIZE, &mut buf) {
            Ok(n) => n,
            // Below a mapping's start, say: the usual way finds out.
            Err(Error::Read { .. }) => 0,
            Err(other) => return Err(other),
        };
        let mut page = from;
        for chunk in buf[..n / PAGE * PAGE].chunks_exact(PAGE) {
            self.insert(state, page, Page::Data(chunk.into()));
            page += 1;
        }
        Ok(page == end)
    }

    fn insert(&self, state: &mut State, page: u64, known: Page) {
        if self.limit.is_some() {
            state.arrived.push_back(page);
        }
        state.pages.insert(page, known);
    }

    /// Copies cached bytes into `buf` until the first unreadable page.
    fn copy_prefix(&self, addr: u64, buf: &mut [u8]) -> usize {
        let state = self.state.borrow();
        let mut done = 0;
        while done < buf.len() {
            let at = addr + done as u64;
            let Some(Page::Data(data)) = state.pages.get(&(at / PAGE_SIZE)) else {
                break;
            };
            let offset = (at % PAGE_SIZE) as usize;
            let len = (PAGE - offset).min(buf.len() - done);
            buf[done..done + len].copy_from_slice(&data[offset..offset + len]);
            done += len;
        }
        done
    }

    /// Fills the pages under `addr..addr + len`, returning the range's end.
    fn prepare(&self, addr: u64, len: usize) -> Result<u64> {
        let end = addr.checked_add(len as u64).ok_or_else(|| Error::Read {
            pid: self.inner.pid(),
            addr,
            len,
            detail: "range wraps around".into(),
        })?;
        self.fill(addr / PAGE_SIZE, (end - 1) / PAGE_SIZE)?;
        Ok(end)
    }
}

impl<T: Target> Target for PageCache<T> {
    fn pid(&self) -> i32 {
        self.inner.pid()
    }

    fn executable(&self) -> Result<std::path::PathBuf> {
        self.inner.executable()
    }

    fn path_in_root(&self, path: &std::path::Path) -> std::path::PathBuf {
        self.inner.path_in_root(path)
    }

    fn environment(&self) -> Result<crate::interface::Environment> {
        self.inner.environment()
    }

    fn threads(&self) -> Result<Vec<crate::interface::Thread>> {
        self.inner.threads()
    }

    fn liveness(&self) -> crate::interface::Liveness {
        self.inner.liveness()
    }

    fn descendants(&self, limit: usize) -> Result<Vec<crate::interface::Relative>> {
        self.inner.descendants(limit)
    }

    fn pointer_size(&self) -> u32 {
        self.inner.pointer_size()
    }

    fn vdso(&self) -> Option<std::ops::Range<u64>> {
        self.inner.vdso()
    }

    fn held_by(&self) -> Option<crate::interface::HeldBy> {
        self.inner.held_by()
    }

    fn os_state(&self) -> Option<crate::interface::OsState> {
        self.inner.os_state()
    }

    fn release(&mut self) -> Result<()> {
        self.invalidate();
        self.inner.release()
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        {
            // Fast path: most DLL reads are a few bytes within one cached
            // page; serve them with a single lookup.
            let mut state = self.state.borrow_mut();
            state.reads += 1;
            if buf.is_empty() {
                return Ok(());
            }
            let offset = (addr % PAGE_SIZE) as usize;
            if offset + buf.len() <= PAGE {
                if let Some(Page::Data(data)) = state.pages.get(&(addr / PAGE_SIZE)) {
                    buf.copy_from_slice(&data[offset..offset + buf.len()]);
                    state.bytes += buf.len() as u64;
                    return Ok(());
                }
            }
        }
        self.prepare(addr, buf.len())?;
        let n = self.copy_prefix(addr, buf);
        if n < buf.len() {
            let bad = (addr + n as u64) / PAGE_SIZE * PAGE_SIZE;
            return Err(Error::Read {
                pid: self.inner.pid(),
                addr,
                len: buf.len(),
                detail: format!("the page at {bad:#x} is not readable"),
            });
        }
        self.state.borrow_mut().bytes += buf.len() as u64;
        Ok(())
    }

    fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.prepare(addr, buf.len())?;
        Ok(self.copy_prefix(addr, buf))
    }

    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        self.inner.mapped_objects()
    }

    fn syscalls(&self) -> u64 {
        self.inner.syscalls()
    }
}

impl<T: Target + fmt::Debug> fmt::Debug for PageCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("inner", &self.inner)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A fake address space: pages 0x10..0x40 readable except 0x14, each byte
    /// the low byte of its address; counts calls like a syscall.
    #[derive(Debug, Default)]
    struct Fake {
        calls: Cell<u64>,
        gone: Cell<bool>,
    }

    impl Fake {
        fn readable(addr: u64) -> bool {
            let page = addr / PAGE_SIZE;
            (0x10..0x40).contains(&page) && page != 0x14
        }
    }

    impl Target for Fake {
        fn pid(&self) -> i32 {
            1
        }
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
            let n = self.read_prefix(addr, buf)?;
            if n < buf.len() {
                return Err(Error::Read {
                    pid: 1,
                    addr,
                    len: buf.len(),
                    detail: "fake".into(),
                });
            }
            Ok(())
        }
        fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
            self.calls.set(self.calls.get() + 1);
            if self.gone.get() {
                return Err(Error::ProcessGone { pid: 1 });
            }
            for (i, b) in buf.iter_mut().enumerate() {
                let at = addr + i as u64;
                if !Self::readable(at) {
                    return Ok(i);
                }
                *b = at as u8;
            }
            Ok(buf.len())
        }
        fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
            Ok(Vec::new())
        }
        fn executable(&self) -> Result<std::path::PathBuf> {
            Ok("/fake".into())
        }
        fn environment(&self) -> Result<crate::interface::Environment> {
            Ok(Default::default())
        }
        fn threads(&self) -> Result<Vec<crate::interface::Thread>> {
            Ok(Vec::new())
        }
        fn liveness(&self) -> crate::interface::Liveness {
            crate::interface::Liveness::Offline
        }
        fn syscalls(&self) -> u64 {
            self.calls.get()
        }
    }

    fn expected(addr: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| (addr + i) as u8).collect()
    }

    #[test]
    fn hits_cost_nothing() {
        let cache = PageCache::new(Fake::default());
        let mut buf = [0; 8];
        cache.read(0x10_010, &mut buf).unwrap();
        assert_eq!(buf.to_vec(), expected(0x10_010, 8));
        for i in 0..100 {
            cache.read(0x10_000 + i * 40, &mut buf).unwrap();
        }
        let s = cache.stats();
        assert_eq!(s.reads, 101);
        assert_eq!(s.bytes, 808);
        assert_eq!(s.syscalls, 1);
        assert_eq!(s.pages_cached, 1);
    }

    #[test]
    fn spanning_read_fetches_missing_run_at_once() {
        let cache = PageCache::new(Fake::default());
        let mut buf = vec![0; 3 * PAGE];
        cache.read(0x10_800, &mut buf).unwrap();
        assert_eq!(buf, expected(0x10_800, 3 * PAGE));
        assert_eq!(cache.stats().syscalls, 1);
        assert_eq!(cache.stats().pages_cached, 4);
        cache.read(0x11_000, &mut buf[..2 * PAGE]).unwrap();
        assert_eq!(cache.stats().syscalls, 1, "all cached");
        // Missing pages on both sides of a cached one: one call per run.
        let cache = PageCache::new(Fake::default());
        cache.read(0x16_000, &mut buf[..8]).unwrap();
        cache.read(0x15_000, &mut buf).unwrap();
        assert_eq!(buf, expected(0x15_000, 3 * PAGE));
        assert_eq!(cache.stats().syscalls, 3);
    }

    #[test]
    fn unreadable_page_fails_without_poisoning_neighbours() {
        let cache = PageCache::new(Fake::default());
        let mut buf = vec![0; 16];
        let err = cache.read(0x14_000 - 8, &mut buf).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Read {
                    addr: 0x13_ff8,
                    len: 16,
                    ..
                }
            ),
            "{err}"
        );
        // Both neighbours read fine, the bad page keeps failing without new calls.
        cache.read(0x13_ff0, &mut buf).unwrap();
        cache.read(0x15_000, &mut buf).unwrap();
        let calls = cache.stats().syscalls;
        assert!(cache.read(0x14_100, &mut buf).is_err());
        assert_eq!(cache.stats().syscalls, calls);
        let mut all = vec![0; 3 * PAGE];
        assert_eq!(cache.read_prefix(0x13_000, &mut all).unwrap(), PAGE);
        // A run with a hole in the middle: the pages after it are fetched too.
        let cache = PageCache::new(Fake::default());
        assert!(cache.read(0x13_000, &mut all).is_err());
        assert_eq!(cache.stats().pages_cached, 2);
    }

    #[test]
    fn gone_is_not_cached_as_unreadable() {
        let cache = PageCache::new(Fake::default());
        cache.get_ref().gone.set(true);
        let mut buf = [0; 8];
        assert!(matches!(
            cache.read(0x10_000, &mut buf),
            Err(Error::ProcessGone { pid: 1 })
        ));
        cache.get_ref().gone.set(false);
        cache.read(0x10_000, &mut buf).unwrap();
    }

    #[test]
    fn a_limited_cache_lets_the_oldest_pages_go() {
        // Downwards every other page, so that each call brings the page
        // wanted and the one above it (read ahead up to the cached one).
        let cache = PageCache::with_limit(Fake::default(), 4 * PAGE);
        let mut buf = [0; 8];
        // (0x40 is unreadable: the first brings one page.) Room is made for
        // the page wanted; the one read ahead may pass the limit by one.
        for page in (0x36..0x40u64).rev().step_by(2) {
            cache.read(page * PAGE_SIZE, &mut buf).unwrap();
            assert_eq!(buf.to_vec(), expected(page * PAGE_SIZE, 8));
        }
        assert_eq!(cache.stats().pages_cached, 5);
        assert_eq!(cache.stats().syscalls, 5);
        // The newest are held, the oldest read again.
        cache.read(0x37_000, &mut buf).unwrap();
        assert_eq!(cache.stats().syscalls, 5);
        cache.read(0x3f_000, &mut buf).unwrap();
        assert_eq!(cache.stats().syscalls, 6);
        // Reading ahead: one call for the page wanted and those after it,
        // up to the first unreadable one (0x14), which is not probed.
        let cache = PageCache::with_limit(Fake::default(), 64 * PAGE);
        cache.read(0x10_000, &mut buf).unwrap();
        assert_eq!(cache.stats().syscalls, 1);
        assert_eq!(cache.stats().pages_cached, 4);
        for page in 0x10..0x14u64 {
            cache.read(page * PAGE_SIZE + 8, &mut buf).unwrap();
            assert_eq!(buf.to_vec(), expected(page * PAGE_SIZE + 8, 8));
        }
        assert_eq!(cache.stats().syscalls, 1);
        assert!(cache.read(0x14_000, &mut buf).is_err());
        // A read larger than the limit still gets all of its pages.
        let cache = PageCache::with_limit(Fake::default(), 4 * PAGE);
        let mut big = vec![0; 6 * PAGE];
        cache.read(0x18_000, &mut big).unwrap();
        assert_eq!(big, expected(0x18_000, 6 * PAGE));
        cache.invalidate();
        assert_eq!(cache.stats().pages_cached, 0);
        cache.read(0x18_000, &mut big).unwrap();
        assert_eq!(big, expected(0x18_000, 6 * PAGE));
    }

    #[test]
    fn a_walk_down_through_memory_reads_behind() {
        let cache = PageCache::with_limit(Fake::default(), 64 * PAGE);
        let mut buf = [0; 8];
        cache.read(0x3f_000, &mut buf).unwrap();
        assert_eq!(cache.stats().syscalls, 1);
        // The page above is cached: this page and the 15 below it at once.
        cache.read(0x3e_010, &mut buf).unwrap();
        assert_eq!(buf.to_vec(), expected(0x3e_010, 8));
        assert_eq!(cache.stats().syscalls, 2);
        for page in (0x2f..0x3eu64).rev() {
            cache.read(page * PAGE_SIZE + 16, &mut buf).unwrap();
            assert_eq!(buf.to_vec(), expected(page * PAGE_SIZE + 16, 8));
        }
        assert_eq!(cache.stats().syscalls, 2);
        // Below it an unreadable page: that call brings nothing, and the
        // page wanted is read the usual way.
        cache.read(0x16_000, &mut buf).unwrap();
        let calls = cache.stats().syscalls;
        cache.read(0x15_ff8, &mut buf).unwrap();
        assert_eq!(buf.to_vec(), expected(0x15_ff8, 8));
        assert_eq!(cache.stats().syscalls, calls + 2);
        assert!(cache.read(0x14_000, &mut buf).is_err());
    }

    #[test]
    fn invalidate_refetches() {
        let cache = PageCache::new(Fake::default());
        let mut buf = [0; 8];
        cache.read(0x10_000, &mut buf).unwrap();
        cache.invalidate();
        assert_eq!(cache.stats().pages_cached, 0);
        cache.read(0x10_000, &mut buf).unwrap();
        assert_eq!(cache.stats().syscalls, 2);
        assert!(cache.read(u64::MAX - 3, &mut buf).is_err());
        assert!(cache.read(0, &mut []).is_ok());
    }
}
