//! Bounded walks over target data structures.
//!
//! Every walk has an element cap, detects cycles with a visited set, checks
//! each pointer before following it, and stops (keeping what it found) on
//! the first unreadable or implausible element, saying why in [`Stop`].

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::access::ProcessAccess;
use crate::target::{ReadError, Target};

/// Most elements any one list may have.
pub const MAX_LIST_ITEMS: usize = 1 << 20;

/// Target addresses are well spread: a multiplicative hash does, and costs
/// a fraction of the default SipHash on sets of 100,000s of them.
#[derive(Debug, Default, Clone, Copy)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    // Keys of these widths in one step, not byte by byte.
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A set of target addresses (or other u64s).
pub type AddrSet = HashSet<u64, BuildHasherDefault<AddrHasher>>;

/// What a walk remembers of where it has been, to notice a cycle.
#[derive(Debug, Clone)]
pub enum Visited {
    /// Brent's algorithm: one remembered address, moved at powers of two.
    /// No memory per element and no hashing, but a cycle is noticed only
    /// once the walk has gone round it again, somewhere past its start: a
    /// walk that meets one is made again with [`Visited::Exact`].
    Brent {
        tortoise: Option<u64>,
        power: usize,
        steps: usize,
    },
    /// Every address: stops at the first one seen twice.
    Exact(AddrSet),
}

impl Visited {
    /// The cheap check, for the first walk of a list.
    pub fn brent() -> Visited {
        Visited::Brent {
            tortoise: None,
            power: 1,
            steps: 0,
        }
    }

    pub fn exact() -> Visited {
        Visited::Exact(AddrSet::default())
    }

    /// Visits `addr`: false when the walk has come round to an address it
    /// visited (for [`Visited::Exact`], exactly when `addr` is one).
    pub fn insert(&mut self, addr: u64) -> bool {
        match self {
            Visited::Exact(seen) => seen.insert(addr),
            Visited::Brent {
                tortoise,
                power,
                steps,
            } => {
                if *tortoise == Some(addr) {
                    return false;
                }
                *steps += 1;
                if *steps == *power {
                    *tortoise = Some(addr);
                    *power = power.saturating_mul(2);
                    *steps = 0;
                }
                true
            }
        }
    }
}

/// Why a walk ended before its natural end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// An element came round again.
    Cycle(u64),
    /// An element pointer was NULL, misaligned or implausible.
    BadPointer(u64),
    /// Memory could not be read.
    Unreadable(u64),
    /// The element cap was reached.
    Limit(usize),
    /// The per-call read budget is spent.
    Budget,
    /// Sizes or counts that cannot be right.
    Corrupt,
}

impl Stop {
    /// Why a walk stopped at `at` on a read that failed with `e`.
    pub fn from_read(e: ReadError, at: u64) -> Stop {
        match e {
            ReadError::Unreadable(a) => Stop::Unreadable(a),
            ReadError::Budget => Stop::Budget,
            ReadError::Null | ReadError::Misaligned(_) => Stop::BadPointer(at),
            ReadError::OutOfRange => Stop::Corrupt,
        }
    }

    /// One short line for `extra_text` (fits in 63 bytes).
    pub fn note(&self) -> String {
        match self {
            Stop::Cycle(a) => format!("list cut: cycle at {a:#x}"),
            Stop::BadPointer(a) => format!("list cut: bad pointer {a:#x}"),
            Stop::Unreadable(a) => format!("list cut: unreadable {a:#x}"),
            Stop::Limit(n) => format!("list cut after {n} elements"),
            Stop::Budget => "list cut: read budget spent".to_string(),
            Stop::Corrupt => "list cut: corrupt sizes or counts".to_string(),
        }
    }
}

/// The elements found, and why the walk stopped early if it did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walk {
    pub items: Vec<u64>,
    pub stop: Option<Stop>,
}

impl Walk {
    /// Takes `cur` as the next item, unless it is a bad pointer, an item
    /// seen before (a cycle) or one more than `cap`: then records why and
    /// says no.
    pub(crate) fn admit<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        cur: u64,
        item_size: u64,
        seen: &mut AddrSet,
        cap: usize,
    ) -> bool {
        let stop = if let Err(e) = t.check_ptr(cur, t.ptr_align(), item_size) {
            Stop::from_read(e, cur)
        } else if !seen.insert(cur) {
            Stop::Cycle(cur)
        } else if self.items.len() >= cap {
            Stop::Limit(cap)
        } else {
            self.items.push(cur);
            return true;
        };
        self.stop = Some(stop);
        false
    }
}

/// Walks a ring of items linked through `next_off` starting at `head`
/// (ob1's out-of-sequence fragments): until the ring closes on `head`.
pub fn ring<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    head: u64,
    next_off: u64,
    item_size: u64,
    cap: usize,
) -> Walk {
    let mut walk = Walk::default();
    if head == 0 {
        return walk;
    }
    let mut seen = AddrSet::default();
    let cap = cap.min(MAX_LIST_ITEMS);
    let mut cur = head;
    loop {
        if !walk.admit(t, cur, item_size, &mut seen, cap) {
            break;
        }
        match t.read_ptr(cur + next_off) {
            Ok(next) if next == head => break,
            Ok(next) => cur = next,
            Err(e) => {
                walk.stop = Some(Stop::from_read(e, cur));
                break;
            }
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{ByteOrder, Sizes};
    use crate::testing::FakeProcess;

    fn target(p: &FakeProcess) -> Target<'_, FakeProcess> {
        Target::new(p, Sizes::LP64, ByteOrder::Same)
    }

    /// Where each check says the walk of a list with `mu` elements before
    /// a cycle of `lambda` came round: Brent within a bounded number of
    /// steps past the first repeat, Exact at it; neither on a list without
    /// a cycle.
    #[test]
    fn both_checks_notice_every_cycle_and_no_other() {
        for mu in 0..40u64 {
            for lambda in 1..40u64 {
                let at = |i: u64| 0x1000 + 8 * if i < mu { i } else { mu + (i - mu) % lambda };
                let first_repeat = (mu + lambda) as usize;
                let came_round =
                    |mut v: Visited| (0..10_000u64).position(|i| !v.insert(at(i))).unwrap();
                assert_eq!(came_round(Visited::exact()), first_repeat);
                let brent = came_round(Visited::brent());
                assert!(brent >= first_repeat, "mu {mu} lambda {lambda}: {brent}");
                assert!(
                    brent <= 2 * (mu + lambda) as usize + lambda as usize,
                    "{brent}"
                );
            }
        }
        let mut v = Visited::brent();
        assert!((0..100_000u64).all(|i| v.insert(0x1000 + 8 * i)));
    }

    #[test]
    fn rings_close_on_their_head() {
        let mut p = FakeProcess::new();
        for (a, n) in [
            (0x20000u64, 0x30000u64),
            (0x30000, 0x40000),
            (0x40000, 0x20000),
        ] {
            p.map(a, vec![0; 64]);
            p.write_u64(a + 16, n);
        }
        let w = ring(&target(&p), 0x20000, 16, 40, 100);
        assert_eq!(w.items, vec![0x20000, 0x30000, 0x40000]);
        assert_eq!(w.stop, None);
        // A ring that loops back to its middle.
        p.write_u64(0x40000 + 16, 0x30000);
        let w = ring(&target(&p), 0x20000, 16, 40, 100);
        assert_eq!(w.stop, Some(Stop::Cycle(0x30000)));
        assert_eq!(ring(&target(&p), 0, 16, 40, 100), Walk::default());
    }
}
