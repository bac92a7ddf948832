//! Where corruption hurts: what a clean session of our DLL reads in a
//! recorded process (the byte ranges it fetched, the list links and
//! pointers in them), found by running the session once over a target that
//! writes its reads down. Both fuzzers aim their mutations there
//! (`fuzz.rs` in process, `strict_host.rs` through the C host).

use std::cell::{Cell, RefCell};
use std::path::PathBuf;

use mqs_host::process::{Environment, Liveness, MappedObject, SnapshotProcess, Target, Thread};

use super::fuzzing::{field, one, read_u64};
use super::session::Recorded;

/// A target that reads from `inner`, counts reads, writes down what was
/// read (if `log`), and refuses every read past `budget`.
pub struct Fuzzed<'a> {
    pub inner: &'a SnapshotProcess,
    pub budget: u64,
    pub reads: &'a Cell<u64>,
    pub refused: &'a Cell<u64>,
    pub log: Option<&'a RefCell<Vec<(u64, usize)>>>,
}

impl Target for Fuzzed<'_> {
    fn pid(&self) -> i32 {
        self.inner.pid
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> mqs_host::Result<()> {
        self.reads.set(self.reads.get() + 1);
        if self.reads.get() > self.budget {
            self.refused.set(self.refused.get() + 1);
            return Err(mqs_host::Error::Read {
                pid: self.inner.pid,
                addr,
                len: buf.len(),
                detail: "the fuzz budget is spent".into(),
            });
        }
        let r = self.inner.read(addr, buf);
        if let (Some(log), Ok(())) = (self.log, &r) {
            log.borrow_mut().push((addr, buf.len()));
        }
        r
    }
    fn mapped_objects(&self) -> mqs_host::Result<Vec<MappedObject>> {
        self.inner.mapped_objects()
    }
    fn executable(&self) -> mqs_host::Result<PathBuf> {
        self.inner.executable()
    }
    fn environment(&self) -> mqs_host::Result<Environment> {
        self.inner.environment()
    }
    fn threads(&self) -> mqs_host::Result<Vec<Thread>> {
        self.inner.threads()
    }
    fn liveness(&self) -> Liveness {
        Liveness::Offline
    }
    fn pointer_size(&self) -> u32 {
        self.inner.pointer_size
    }
}

/// What a clean session read in one recorded process.
#[derive(Debug, Clone)]
pub struct Aim {
    /// The byte ranges it read (start, length), merged.
    pub regions: Vec<(u64, usize)>,
    /// Addresses of the `next` link of list items (`opal_list_item_t`),
    /// with the item's address: found in the clean session's memory where
    /// the next item's `prev` leads back.
    pub links: Vec<(u64, u64)>,
    /// Offset of `opal_list_prev` in a list item.
    pub prev: u64,
    /// Addresses of pointer words whose value lies in `regions`.
    pub pointers: Vec<u64>,
    /// Fetches of a clean session.
    pub clean_fetches: u64,
}

impl Aim {
    /// No aim: these regions (say, every recorded page), no links or
    /// pointers.
    pub fn pages(regions: Vec<(u64, usize)>) -> Aim {
        Aim {
            regions,
            links: Vec::new(),
            prev: 0,
            pointers: Vec::new(),
            clean_fetches: 0,
        }
    }
}

/// Runs a clean session over `process` and finds where it read.
pub fn aim(name: &str, process: &Recorded) -> Aim {
    let (reads, refused) = (Cell::new(0), Cell::new(0));
    let log = RefCell::new(Vec::new());
    let target = Fuzzed {
        inner: &process.target,
        budget: u64::MAX,
        reads: &reads,
        refused: &refused,
        log: Some(&log),
    };
    let d = one(process, Box::new(target), process.symbols.clone());
    assert!(
        d.added.is_ok(),
        "{name}: a clean session fails: {:?}",
        d.added
    );
    let mut ranges = log.into_inner();
    ranges.sort_unstable();
    let mut regions: Vec<(u64, usize)> = Vec::new();
    for (addr, len) in ranges {
        match regions.last_mut() {
            Some((start, n)) if addr <= *start + *n as u64 => {
                *n = (*n).max((addr + len as u64 - *start) as usize);
            }
            _ => regions.push((addr, len)),
        }
    }
    let inside = |v: u64| regions.iter().any(|&(a, n)| v >= a && v < a + n as u64);
    let log = &process.symbols;
    let next = field(log, "opal_list_item_t", "opal_list_next").unwrap_or(16);
    let prev = field(log, "opal_list_item_t", "opal_list_prev").unwrap_or(24);
    let mut pointers = Vec::new();
    let mut links = Vec::new();
    for &(start, n) in &regions {
        let mut a = start.div_ceil(8) * 8;
        while a + 8 <= start + n as u64 {
            if let Some(v) = read_u64(&process.target, a) {
                if v % 8 == 0 && inside(v) {
                    pointers.push(a);
                    // `a` is an item's next link if the next item's prev
                    // leads back to that item.
                    let item = a.wrapping_sub(next);
                    if read_u64(&process.target, v.wrapping_add(prev)) == Some(item) {
                        links.push((a, item));
                    }
                }
            }
            a += 8;
        }
    }
    Aim {
        regions,
        links,
        prev,
        pointers,
        clean_fetches: reads.get(),
    }
}
