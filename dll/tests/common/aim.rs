//! Where corruption hurts: what a clean session of our DLL reads in a
//! recorded process (the byte ranges it fetched, the list links and
//! pointers in them), found by running the session once over a target that
//! writes its reads down. Both fuzzers aim their mutations there
//! (`fuzz.rs` in process, `strict_host.rs` through the C host).

use super::fuzzing::{clean_regions, field, opal_links, pointers_in};
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
    let (regions, clean_fetches) = clean_regions(name, process);
    let pointers = pointers_in(process, &regions);
    let prev = field(&process.symbols, "opal_list_item_t", "opal_list_prev").unwrap_or(24);
    let links = opal_links(process, &regions)
        .into_iter()
        .map(|l| (l.at, l.item))
        .collect();
    Aim {
        regions,
        links,
        prev,
        pointers,
        clean_fetches,
    }
}
