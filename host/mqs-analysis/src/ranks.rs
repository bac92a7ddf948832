//! Sets of ranks, written the way people write them: `0-3,7`.
//!
//! Kept as sorted, disjoint runs of consecutive ranks: the sets a job
//! makes are mostly ranges (a communicator's members, ranks in one state),
//! so a set of 100,000 ranks is a few runs, not 100,000 entries.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use smallvec::SmallVec;

/// A set of (global) ranks.
#[derive(Debug, Clone, Default)]
pub struct RankSet {
    /// Inclusive runs `(first, last)`, sorted, with a gap between any two.
    /// One run is held inline: most sets are one peer or one range, and a
    /// wait-for graph of 100,000 ranks holds half a million of them.
    runs: SmallVec<[(i64, i64); 1]>,
    /// How many ranks the runs hold.
    len: usize,
}

impl PartialEq for RankSet {
    fn eq(&self, other: &Self) -> bool {
        self.runs == other.runs
    }
}

impl Eq for RankSet {}

impl Hash for RankSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.runs.hash(state);
    }
}

impl PartialOrd for RankSet {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RankSet {
    /// Element by element, as a sorted set of ranks compares.
    fn cmp(&self, other: &Self) -> Ordering {
        self.iter().cmp(other.iter())
    }
}

impl RankSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The ranks `first..=last` (none if `last < first`).
    pub fn range(first: i64, last: i64) -> Self {
        let mut set = Self::new();
        set.insert_run(first, last);
        set
    }

    /// Parses `0-3,7` (ranges inclusive, in any order; spaces allowed),
    /// and progressions as they are written: `0,8,16,...,56`, `0-1,8-9,16-17,...,56-57`
    /// (the three items before `...` give the step, the one after it the
    /// last).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut set = Self::new();
        // The runs of the last three items, for a progression.
        let mut last: Vec<(i64, i64)> = Vec::new();
        let mut progression = false;
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!("empty item in rank list '{text}'"));
            }
            if part == "..." {
                progression = true;
                continue;
            }
            let number = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("'{s}' is not a rank in rank list '{text}'"))
            };
            let run = match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("range {part} goes down in rank list '{text}'"));
                    }
                    if b - a > 1 << 20 {
                        return Err(format!("range {part} is too large"));
                    }
                    (a, b)
                }
                None => {
                    let a = number(part)?;
                    (a, a)
                }
            };
            if std::mem::take(&mut progression) {
                set.insert_progression(&last, run)
                    .map_err(|why| format!("'...' {why} in rank list '{text}'"))?;
            }
            set.insert_run(run.0, run.1);
            last.push(run);
        }
        if progression {
            return Err(format!("'...' ends rank list '{text}'"));
        }
        Ok(set)
    }

    /// The runs of a progression between the three written before `...`
    /// (`before`'s last three) and `end`, its last.
    fn insert_progression(&mut self, before: &[(i64, i64)], end: (i64, i64)) -> Result<(), String> {
        let [(a, b), (c, d), (e, g)] = before
            .get(before.len().saturating_sub(3)..)
            .and_then(|three| <[(i64, i64); 3]>::try_from(three).ok())
            .ok_or("needs three items before it")?;
        let (stride, len) = (c - a, b - a);
        if stride <= len || e - c != stride || d - c != len || g - e != len || end.1 - end.0 != len
        {
            return Err("needs alike items at equal steps around it".into());
        }
        if (end.0 - e) % stride != 0 || end.0 <= e {
            return Err("is not followed by a later item of its steps".into());
        }
        if (end.0 - e) / stride > 1 << 20 {
            return Err("stands for too many items".into());
        }
        let mut at = e + stride;
        while at < end.0 {
            self.insert_run(at, at + len);
            at += stride;
        }
        Ok(())
    }

    /// The index of the first run that ends at or after `rank`.
    fn run_at_or_after(&self, rank: i64) -> usize {
        self.runs.partition_point(|&(_, last)| last < rank)
    }

    /// Adds `first..=last`, merging the runs it touches.
    pub fn insert_run(&mut self, first: i64, last: i64) {
        if last < first {
            return;
        }
        // Runs that overlap or touch the new one: from the first that ends
        // at or after first - 1, while they start at or before last + 1.
        let from = self.run_at_or_after(first.saturating_sub(1));
        let mut to = from;
        let (mut lo, mut hi) = (first, last);
        while to < self.runs.len() && self.runs[to].0 <= last.saturating_add(1) {
            lo = lo.min(self.runs[to].0);
            hi = hi.max(self.runs[to].1);
            to += 1;
        }
        let removed: usize = self.runs[from..to]
            .iter()
            .map(|&(a, b)| run_len(a, b))
            .sum();
        self.runs.drain(from..to);
        self.runs.insert(from, (lo, hi));
        self.len = self.len - removed + run_len(lo, hi);
    }

    pub fn insert(&mut self, rank: i64) -> bool {
        if self.contains(rank) {
            return false;
        }
        // The common case: ranks come in ascending order.
        match self.runs.last_mut() {
            Some(last) if last.1 + 1 == rank => {
                last.1 = rank;
                self.len += 1;
            }
            Some(last) if last.1 < rank => {
                self.runs.push((rank, rank));
                self.len += 1;
            }
            None => {
                self.runs.push((rank, rank));
                self.len = 1;
            }
            _ => self.insert_run(rank, rank),
        }
        true
    }

    pub fn contains(&self, rank: i64) -> bool {
        self.runs
            .get(self.run_at_or_after(rank))
            .is_some_and(|&(first, _)| first <= rank)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs.iter().flat_map(|&(a, b)| a..=b)
    }

    /// The runs of consecutive ranks, `(first, last)` inclusive, in order.
    pub fn runs(&self) -> &[(i64, i64)] {
        &self.runs
    }

    pub fn first(&self) -> Option<i64> {
        self.runs.first().map(|r| r.0)
    }

    /// The set without `rank`.
    pub fn without(&self, rank: i64) -> Self {
        let mut out = Self::new();
        for &(a, b) in &self.runs {
            if (a..=b).contains(&rank) {
                out.insert_run(a, rank - 1);
                out.insert_run(rank + 1, b);
            } else {
                out.insert_run(a, b);
            }
        }
        out
    }

    /// Every rank of `other` added.
    pub fn union_with(&mut self, other: &RankSet) {
        for &(a, b) in &other.runs {
            self.insert_run(a, b);
        }
    }

    /// The lowest rank in both sets.
    pub fn first_common(&self, other: &RankSet) -> Option<i64> {
        let (mut i, mut j) = (0, 0);
        while i < self.runs.len() && j < other.runs.len() {
            let (a, b) = self.runs[i];
            let (c, d) = other.runs[j];
            let lo = a.max(c);
            if lo <= b.min(d) {
                return Some(lo);
            }
            if b < d {
                i += 1;
            } else {
                j += 1;
            }
        }
        None
    }

    /// The lowest rank of this set that `other` lacks.
    pub fn first_not_in(&self, other: &RankSet) -> Option<i64> {
        for &(a, b) in &self.runs {
            // Walk `other`'s runs across a..=b, looking for a gap.
            let mut at = a;
            let mut j = other.run_at_or_after(a);
            while at <= b {
                match other.runs.get(j) {
                    Some(&(c, d)) if c <= at => {
                        at = d.saturating_add(1);
                        j += 1;
                    }
                    _ => return Some(at),
                }
            }
        }
        None
    }

    /// `rank 3` or `ranks 0-2,5`; a set that takes more than
    /// [`LABEL_WIDTH`] characters to write (a face of a 3-D grid: rows of
    /// ranks in plane after plane) as its [`RankSet::summary`].
    pub fn labelled(&self) -> String {
        let text = self.to_string();
        if self.len() == 1 {
            format!("rank {text}")
        } else if text.len() > LABEL_WIDTH {
            self.summary()
        } else {
            format!("ranks {text}")
        }
    }

    /// `9000 ranks from 33 to 990 in 30 runs`.
    pub fn summary(&self) -> String {
        match (self.runs.first(), self.runs.last()) {
            (Some(first), Some(last)) => format!(
                "{} ranks from {} to {} in {} runs",
                self.len,
                first.0,
                last.1,
                self.runs.len()
            ),
            _ => "no ranks".to_owned(),
        }
    }

    /// How many runs from `runs[at]` on are alike (equally long) and
    /// equally spaced: 1 if the next is not.
    fn progression_at(&self, at: usize) -> usize {
        let runs = &self.runs[at..];
        let (Some(&(a, b)), Some(&(c, _))) = (runs.first(), runs.get(1)) else {
            return 1;
        };
        let stride = c - a;
        let mut n = 1;
        while let Some(&(x, y)) = runs.get(n) {
            if y - x != b - a || x - runs[n - 1].0 != stride {
                break;
            }
            n += 1;
        }
        n
    }
}

/// The widest rank list a label writes out (see [`RankSet::labelled`]).
pub const LABEL_WIDTH: usize = 80;

/// The fewest alike, equally spaced runs written as a progression
/// (`0,8,16,...,56`): it leaves out at least three.
const PROGRESSION: usize = 7;

/// `7` or `3-5`.
fn write_run(f: &mut fmt::Formatter<'_>, (start, end): (i64, i64)) -> fmt::Result {
    if end == start {
        write!(f, "{start}")
    } else {
        write!(f, "{start}-{end}")
    }
}

fn run_len(first: i64, last: i64) -> usize {
    usize::try_from(last - first + 1).unwrap_or(0)
}

impl FromIterator<i64> for RankSet {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        let mut set = Self::new();
        set.extend(iter);
        set
    }
}

impl Extend<i64> for RankSet {
    fn extend<I: IntoIterator<Item = i64>>(&mut self, iter: I) {
        for rank in iter {
            self.insert(rank);
        }
    }
}

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.runs.is_empty() {
            return f.write_str("none");
        }
        // Alike runs at equal distances (a row of a grid, a face of it,
        // every 8th rank) as the first three, `...` and the last.
        let mut i = 0;
        while i < self.runs.len() {
            if i > 0 {
                f.write_str(",")?;
            }
            let n = self.progression_at(i);
            if n >= PROGRESSION {
                for run in &self.runs[i..i + 3] {
                    write_run(f, *run)?;
                    f.write_str(",")?;
                }
                f.write_str("...,")?;
                write_run(f, self.runs[i + n - 1])?;
                i += n;
            } else {
                write_run(f, self.runs[i])?;
                i += 1;
            }
        }
        Ok(())
    }
}

/// Ranks in a given order (a communicator's members), written in runs:
/// `7-0` for 7 6 5 ... 0, `0-3 8-11` for two ascending runs.
pub fn ordered_runs(ranks: &[i64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut j = i;
        let step = match ranks.get(i + 1) {
            Some(&next) if next == start + 1 => 1,
            Some(&next) if next == start - 1 => -1,
            _ => 0,
        };
        if step != 0 {
            while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + step {
                j += 1;
            }
        }
        if j == i {
            out.push(start.to_string());
        } else {
            out.push(format!("{start}-{}", ranks[j]));
        }
        i = j + 1;
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let set = RankSet::parse("0-3,7, 5").unwrap();
        assert_eq!(set.to_string(), "0-3,5,7");
        assert_eq!(set.len(), 6);
        assert!(RankSet::parse("3-1").is_err());
        assert!(RankSet::parse("a").is_err());
        assert!(RankSet::parse("1,,2").is_err());
        assert!(RankSet::parse("-1").is_err());
        assert_eq!(RankSet::new().to_string(), "none");
        assert_eq!(RankSet::parse("4").unwrap().labelled(), "rank 4");
        assert_eq!(RankSet::parse("4,5").unwrap().labelled(), "ranks 4-5");
    }

    #[test]
    fn alike_runs_at_equal_steps_are_written_as_a_progression() {
        let every_8th: RankSet = (0..8).map(|i| i * 8).collect();
        assert_eq!(every_8th.to_string(), "0,8,16,...,56");
        let rows: RankSet = (0..8)
            .flat_map(|i| [i * 10 + 1, i * 10 + 2, i * 10 + 3])
            .chain([100, 200])
            .collect();
        assert_eq!(rows.to_string(), "1-3,11-13,21-23,...,71-73,100,200");
        // Six alike runs are written out.
        let four: RankSet = (0..6).map(|i| i * 8).collect();
        assert_eq!(four.to_string(), "0,8,16,24,32,40");
        // Read back as written.
        for set in [every_8th, rows, four] {
            assert_eq!(RankSet::parse(&set.to_string()).unwrap(), set);
        }
        for bad in [
            "0,8,...,56",
            "0,8,16,...",
            "0,8,16,...,57",
            "0,8,17,...,56",
            "0,8,16,...,0",
            "0-1,8,16,...,56",
        ] {
            assert!(RankSet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_long_list_is_labelled_by_its_summary() {
        // The inner ranks of a 3-D grid's face: rows in plane after plane.
        let face: RankSet = (1..40)
            .flat_map(|z| (1..9).map(move |y| z * 100 + y * 10))
            .collect();
        assert_eq!(face.labelled(), "312 ranks from 110 to 3980 in 312 runs");
        assert_eq!(face.summary(), face.labelled());
        let short: RankSet = (0..8).map(|i| i * 8).collect();
        assert_eq!(short.labelled(), "ranks 0,8,16,...,56");
    }

    /// The runs against a plain sorted set, on pseudo-random inserts.
    #[test]
    fn runs_agree_with_a_sorted_set() {
        use std::collections::BTreeSet;
        let mut seed: u64 = 12345;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            i64::try_from((seed >> 33) % n).unwrap()
        };
        for round in 0..200 {
            let (mut set, mut plain) = (RankSet::new(), BTreeSet::new());
            let (mut other, mut other_plain) = (RankSet::new(), BTreeSet::new());
            for _ in 0..(round % 40) {
                let (a, w) = (next(60), next(4));
                if next(3) == 0 {
                    set.insert_run(a, a + w);
                    plain.extend(a..=a + w);
                } else {
                    assert_eq!(set.insert(a), plain.insert(a));
                }
                let b = next(60);
                other.insert(b);
                other_plain.insert(b);
            }
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                plain.iter().copied().collect::<Vec<_>>()
            );
            assert_eq!(set.len(), plain.len());
            for r in -1..70 {
                assert_eq!(set.contains(r), plain.contains(&r));
                let without: BTreeSet<i64> = plain.iter().copied().filter(|x| *x != r).collect();
                assert_eq!(set.without(r).iter().collect::<BTreeSet<_>>(), without);
            }
            assert_eq!(
                set.first_common(&other),
                plain.intersection(&other_plain).next().copied()
            );
            assert_eq!(
                set.first_not_in(&other),
                plain.difference(&other_plain).next().copied()
            );
            assert_eq!(set.cmp(&other), plain.cmp(&other_plain));
            let mut union = set.clone();
            union.union_with(&other);
            assert_eq!(union, plain.union(&other_plain).copied().collect());
        }
        assert_eq!(RankSet::range(3, 5).to_string(), "3-5");
        assert!(RankSet::range(5, 3).is_empty());
    }

    #[test]
    fn runs_keep_order() {
        assert_eq!(ordered_runs(&[7, 6, 5, 4, 3, 2, 1, 0]), "7-0");
        assert_eq!(ordered_runs(&[0, 1, 2, 3, 8, 9]), "0-3 8-9");
        assert_eq!(ordered_runs(&[1, 0]), "1-0");
        assert_eq!(ordered_runs(&[5]), "5");
        assert_eq!(ordered_runs(&[0, 2, 4]), "0 2 4");
    }
}
