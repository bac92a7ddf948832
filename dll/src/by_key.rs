//! What one scan of a queue or free list found, grouped by a key (the
//! communicator, the context id), each group taken out once by the queue
//! that shows it: a queue of 100,000 entries is then held once, by the
//! operations made from it, not also by the scan. A group asked for again
//! in the same stop is not there any more; [`ByKey::was_taken`] tells the
//! caller to scan again.

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

#[cfg(test)]
mod tests {
    use super::ByKey;

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
}
