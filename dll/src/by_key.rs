//! What one scan of a queue or free list found, grouped by a key (the
//! communicator, the context id), each group taken out once by the queue
//! that shows it: a queue of 100,000 entries is then held once, by the
//! operations made from it, not also by the scan. A group asked for again
//! in the same stop is not there any more: [`PerStop`] keeps a scan for the
//! rest of the stop and makes it again when a group it is asked for was
//! taken ([`ByKey::was_taken`]).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::walk::{AddrHasher, AddrSet};

#[derive(Debug, Clone)]
pub struct ByKey<T> {
    groups: HashMap<u64, Vec<T>, BuildHasherDefault<AddrHasher>>,
    taken: AddrSet,
}

impl<T> Default for ByKey<T> {
    fn default() -> Self {
        ByKey {
            groups: HashMap::default(),
            taken: AddrSet::default(),
        }
    }
}

impl<T> ByKey<T> {
    /// Adds `item` at the end of `key`'s group.
    pub fn push(&mut self, key: u64, item: T) {
        self.groups.entry(key).or_default().push(item);
    }

    /// Takes `key`'s group out, in the order it was pushed (empty if none).
    pub fn take(&mut self, key: u64) -> Vec<T> {
        self.taken.insert(key);
        self.groups.remove(&key).unwrap_or_default()
    }

    /// Whether `key`'s group was taken out already.
    pub fn was_taken(&self, key: u64) -> bool {
        self.taken.contains(&key)
    }

    /// Every item not taken yet.
    pub fn items_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.groups.values_mut().flatten()
    }

    /// Lets go of the spare room the groups grew with (they are held for
    /// the rest of the stop).
    pub fn shrink_to_fit(&mut self) {
        self.groups.values_mut().for_each(Vec::shrink_to_fit);
    }
}

/// A scan made once per stop (every communicator takes its groups out of
/// it), and made again when a group it is asked for was taken already:
/// the same communicator asked for twice in one stop. Emptied when the
/// stop ends (the communicator list is updated or its iterator set up
/// again).
#[derive(Debug)]
pub struct PerStop<S> {
    scan: Option<S>,
}

impl<S> Default for PerStop<S> {
    fn default() -> Self {
        PerStop { scan: None }
    }
}

impl<S> PerStop<S> {
    /// This stop's scan, made with `scan` if there is none yet or if any
    /// of `keys` was taken out of its `groups` already.
    pub fn get<T>(
        &mut self,
        groups: impl Fn(&S) -> &ByKey<T>,
        keys: &[u64],
        scan: impl FnOnce() -> S,
    ) -> &mut S {
        self.forget_if_taken(groups, keys);
        self.scan.get_or_insert_with(scan)
    }

    /// As [`PerStop::get`], for a scan that may not be possible (None:
    /// nothing kept, made again when asked next).
    pub fn try_get<T>(
        &mut self,
        groups: impl Fn(&S) -> &ByKey<T>,
        keys: &[u64],
        scan: impl FnOnce() -> Option<S>,
    ) -> Option<&mut S> {
        self.forget_if_taken(groups, keys);
        if self.scan.is_none() {
            self.scan = scan();
        }
        self.scan.as_mut()
    }

    fn forget_if_taken<T>(&mut self, groups: impl Fn(&S) -> &ByKey<T>, keys: &[u64]) {
        if self
            .scan
            .as_ref()
            .is_some_and(|s| keys.iter().any(|&k| groups(s).was_taken(k)))
        {
            self.scan = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ByKey, PerStop};

    #[test]
    fn a_group_is_taken_once_in_order() {
        let mut g = ByKey::default();
        g.push(7, "a");
        g.push(9, "x");
        g.push(7, "b");
        assert!(!g.was_taken(7));
        assert_eq!(g.take(7), vec!["a", "b"]);
        assert!(g.was_taken(7));
        assert_eq!(g.take(7), Vec::<&str>::new());
        assert_eq!(g.items_mut().map(|s| *s).collect::<Vec<_>>(), vec!["x"]);
    }

    #[test]
    fn a_scan_is_made_again_once_a_group_asked_for_was_taken() {
        let mut made = 0;
        let mut cache: PerStop<ByKey<u32>> = PerStop::default();
        let mut scan = || {
            made += 1;
            let mut g = ByKey::default();
            g.push(1, 10);
            g.push(2, 20);
            g
        };
        assert_eq!(cache.get(|g| g, &[1], &mut scan).take(1), vec![10]);
        // Another group of the same scan.
        assert_eq!(cache.get(|g| g, &[2], &mut scan).take(2), vec![20]);
        // A group taken already: scanned again.
        assert_eq!(cache.get(|g| g, &[1, 3], &mut scan).take(1), vec![10]);
        assert_eq!(made, 2);
        let mut none: PerStop<ByKey<u32>> = PerStop::default();
        assert!(none.try_get(|g| g, &[1], || None).is_none());
        assert!(none
            .try_get(|g| g, &[1], || Some(ByKey::default()))
            .is_some());
    }
}
