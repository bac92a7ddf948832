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
pub(super) struct QueueTexts<'c> {
    comm: &'c JobComm,
    /// Each member's own rank in the communicator, by global rank; None
    /// where the two are the same.
    local_of: Option<HashMap<i64, i64>>,
    /// Each rank, its text, and its text with relative peers.
    ranks: Vec<(i64, String, Option<String>)>,
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
        }
    }

    /// Rank `rank`'s text, and its operations to read relative peers from.
    pub(super) fn add(&mut self, rank: i64, text: String, ops: &[&Op<'_>]) {
        let relative = self.relative(rank, ops);
        self.ranks.push((rank, text, relative));
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

    /// The lines: each text with its ranks, in order of first appearance.
    pub(super) fn groups(self) -> Vec<(String, RankSet)> {
        let mut absolute: HashMap<&str, usize> = HashMap::new();
        let mut relative: HashMap<&str, usize> = HashMap::new();
        for (_, text, rel) in &self.ranks {
            *absolute.entry(text).or_default() += 1;
            if let Some(rel) = rel {
                *relative.entry(rel).or_default() += 1;
            }
        }
        let mut groups: Vec<(String, RankSet)> = Vec::new();
        let mut group_of: HashMap<&str, usize> = HashMap::new();
        for (rank, text, rel) in &self.ranks {
            let chosen = match rel {
                Some(rel)
                    if relative[rel.as_str()] >= MIN_RELATIVE.max(absolute[text.as_str()] + 1) =>
                {
                    rel
                }
                _ => text,
            };
            match group_of.get(chosen.as_str()) {
                Some(&g) => {
                    groups[g].1.insert(*rank);
                }
                None => {
                    group_of.insert(chosen, groups.len());
                    groups.push((chosen.clone(), std::iter::once(*rank).collect()));
                }
            }
        }
        groups
    }
}
