//! Peers relative to the rank. In a ring, a halo exchange or a stencil every
//! rank's peers differ, so no two ranks' operations read alike; read
//! relative to each rank's own rank in the communicator ("recv from rank
//! r-1 (mod 8)"), they are one line. A queue's ranks are grouped both ways,
//! and each rank goes to the larger of its two groups: a relative line
//! stands for at least [`MIN_RELATIVE`] ranks, and the ranks that do not
//! fit the pattern keep lines of their own.

use std::collections::HashMap;

use crate::global::{JobComm, Op, Peer};
use crate::RankSet;

/// The fewest ranks a relative line stands for: two ranks that swap
/// messages read better as two lines.
const MIN_RELATIVE: usize = 3;

/// The texts of one queue of one communicator, rank by rank.
///
/// A rank's own text is kept only as a fingerprint: in a ring or a halo
/// exchange every rank's text differs, and 100,000 of them are tens of
/// megabytes; the lines that need one make it again ([`QueueTexts::groups`]).
/// Relative texts are few and kept once each.
pub(super) struct QueueTexts<'c> {
    comm: &'c JobComm,
    /// Each member's own rank in the communicator, by global rank; None
    /// where the two are the same.
    local_of: Option<HashMap<i64, i64>>,
    /// Each rank, its text's fingerprint, and its relative text's number.
    ranks: Vec<(i64, Fingerprint, Option<usize>)>,
    relative_texts: Vec<String>,
    relative_numbers: HashMap<String, usize>,
}

/// Two independent 64-bit hashes of a text: equal texts have equal
/// fingerprints, and two of 100,000 different ones meet with a chance
/// near 1e-29.
type Fingerprint = (u64, u64);

fn fingerprint(text: &str) -> Fingerprint {
    use std::hash::{Hash, Hasher};
    let mut first = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut first);
    let mut second = std::collections::hash_map::DefaultHasher::new();
    (0x9e37_79b9_7f4a_7c15u64, text).hash(&mut second);
    (first.finish(), second.finish())
}

impl<'c> QueueTexts<'c> {
    pub(super) fn new(comm: &'c JobComm) -> Self {
        let local_of = (!comm.is_identity()).then(|| {
            comm.group
                .iter()
                .enumerate()
                .filter_map(|(local, global)| Some(((*global)?, local as i64)))
                .collect()
        });
        Self {
            comm,
            local_of,
            ranks: Vec::new(),
            relative_texts: Vec::new(),
            relative_numbers: HashMap::new(),
        }
    }

    /// Rank `rank`'s text, and its operations to read relative peers from.
    pub(super) fn add(&mut self, rank: i64, text: &str, ops: &[&Op<'_>]) {
        let relative = self.relative(rank, ops).map(|text| {
            let next = self.relative_texts.len();
            *self
                .relative_numbers
                .entry(text)
                .or_insert_with_key(|text| {
                    self.relative_texts.push(text.clone());
                    next
                })
        });
        self.ranks.push((rank, fingerprint(text), relative));
    }

    /// The operations' text with each peer relative to `rank`; None where
    /// none is a rank, or one's rank in the communicator is not known.
    fn relative(&self, rank: i64, ops: &[&Op<'_>]) -> Option<String> {
        let size = self.comm.size;
        let me = match &self.local_of {
            None => rank,
            Some(map) => *map.get(&rank)?,
        };
        if size < 2 || ops.iter().all(|op| op.peer == Peer::Any) {
            return None;
        }
        let mut texts = Vec::with_capacity(ops.len());
        for op in ops {
            let peer = match op.peer {
                Peer::Any => "ANY_SOURCE".to_owned(),
                Peer::Rank(global) => {
                    let local = op
                        .local_peer
                        .or(self.local_of.is_none().then_some(global))?;
                    self.relative_peer(me, local)
                }
                Peer::Local(local) => self.relative_peer(me, local),
            };
            texts.push(super::op_text_with_peer(op, &peer));
        }
        Some(texts.join("; "))
    }

    /// `rank r+1 (mod 8)`, or in a communicator whose ranks are not the
    /// job's, `"ring" rank r-1 (mod 8, r = its "ring" rank)`.
    fn relative_peer(&self, me: i64, peer: i64) -> String {
        let size = self.comm.size;
        let d = (peer - me).rem_euclid(size);
        let d = if d > size / 2 { d - size } else { d };
        let r = match d {
            0 => "r".to_owned(),
            d if d > 0 => format!("r+{d}"),
            d => format!("r{d}"),
        };
        if self.local_of.is_none() {
            format!("rank {r} (mod {size})")
        } else {
            let label = self.comm.label();
            format!("{label} rank {r} (mod {size}, r = its {label} rank)")
        }
    }

    /// The lines: each text with its ranks, in order of first appearance;
    /// `text_of` makes a rank's own text again where its line needs it.
    pub(super) fn groups(self, text_of: impl Fn(i64) -> String) -> Vec<(String, RankSet)> {
        let mut absolute: HashMap<Fingerprint, usize> = HashMap::new();
        let mut relative = vec![0usize; self.relative_texts.len()];
        for (_, text, rel) in &self.ranks {
            *absolute.entry(*text).or_default() += 1;
            if let Some(rel) = rel {
                relative[*rel] += 1;
            }
        }
        #[derive(PartialEq, Eq, Hash)]
        enum Line {
            Own(Fingerprint),
            Relative(usize),
        }
        let mut groups: Vec<(String, RankSet)> = Vec::new();
        let mut group_of: HashMap<Line, usize> = HashMap::new();
        for (rank, text, rel) in &self.ranks {
            let line = match rel {
                Some(rel) if relative[*rel] >= MIN_RELATIVE.max(absolute[text] + 1) => {
                    Line::Relative(*rel)
                }
                _ => Line::Own(*text),
            };
            match group_of.get(&line) {
                Some(&g) => {
                    groups[g].1.insert(*rank);
                }
                None => {
                    let words = match line {
                        Line::Relative(rel) => self.relative_texts[rel].clone(),
                        Line::Own(_) => text_of(*rank),
                    };
                    group_of.insert(line, groups.len());
                    groups.push((words, std::iter::once(*rank).collect()));
                }
            }
        }
        groups
    }
}
