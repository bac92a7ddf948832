//! Where corruption hurts: what a clean session of our DLL reads in a
//! recorded process (the byte ranges it fetched, the list links and
//! pointers in them), found by running the session once over a target that
//! writes its reads down. Both fuzzers aim their mutations there
//! (`fuzz.rs` in process, `strict_host.rs` through the C host).

use std::cell::{Cell, RefCell};

use super::fuzzing::{field, one, read_u64, Fuzzed};
use super::session::Recorded;

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
