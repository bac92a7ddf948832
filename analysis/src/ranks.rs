//! Sets of ranks, written the way people write them: `0-3,7`.

use std::collections::BTreeSet;
use std::fmt;

/// A set of (global) ranks.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RankSet(BTreeSet<i64>);

impl RankSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `0-3,7` (ranges inclusive, in any order; spaces allowed).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut set = Self::new();
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!("empty item in rank list '{text}'"));
            }
            let number = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("'{s}' is not a rank in rank list '{text}'"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("range {part} goes down in rank list '{text}'"));
                    }
                    if b - a > 1 << 20 {
                        return Err(format!("range {part} is too large"));
                    }
                    set.0.extend(a..=b);
                }
                None => {
                    set.0.insert(number(part)?);
                }
            }
        }
        Ok(set)
    }

    pub fn insert(&mut self, rank: i64) -> bool {
        self.0.insert(rank)
    }

    pub fn contains(&self, rank: i64) -> bool {
        self.0.contains(&rank)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.0.iter().copied()
    }

    pub fn first(&self) -> Option<i64> {
        self.0.first().copied()
    }

    /// `rank 3` or `ranks 0-2,5`.
    pub fn labelled(&self) -> String {
        if self.len() == 1 {
            format!("rank {self}")
        } else {
            format!("ranks {self}")
        }
    }
}

impl FromIterator<i64> for RankSet {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Extend<i64> for RankSet {
    fn extend<I: IntoIterator<Item = i64>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        if first {
            f.write_str("none")?;
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
    fn runs_keep_order() {
        assert_eq!(ordered_runs(&[7, 6, 5, 4, 3, 2, 1, 0]), "7-0");
        assert_eq!(ordered_runs(&[0, 1, 2, 3, 8, 9]), "0-3 8-9");
        assert_eq!(ordered_runs(&[1, 0]), "1-0");
        assert_eq!(ordered_runs(&[5]), "5");
        assert_eq!(ordered_runs(&[0, 2, 4]), "0 2 4");
    }
}
