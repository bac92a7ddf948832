//! The wait-for graph settled: which ranks may move, by fixpoint; the
//! cycles among the rest, claimed or only possible; the chains of ranks
//! that wait, through one another, for a rank that may move.

use rustc_hash::FxHashMap;

use super::{Analysis, Chain, Step, WaitKind};
use crate::ranks::RankSet;

impl Analysis<'_, '_> {
    /// Fills `free`, `deadlocked`, `maybe`, `cycles`, `unsure`, `feeders`
    /// and `chains` from the waits.
    pub(super) fn settle(&mut self) {
        let job = self.job;
        let unknown = self.unjudged_ranks();
        let halted: RankSet = self.stopped.iter().map(|s| s.rank).collect();
        self.free = job
            .ranks
            .iter()
            .filter(|r| {
                !halted.contains(r.rank)
                    && (r.inside_mpi == Some(false)
                        || !(self.by_rank.contains_key(&r.rank) || unknown.contains(r.rank)))
            })
            .map(|r| r.rank)
            .collect();
        let dumped = job.all_ranks();

        // The ranks that may move: the free ones, the stopped ones (once
        // let go), the ones not dumped or not judged, and the ones whose
        // waits those can meet, until nothing changes. Each rank added
        // keeps the step that let it in, towards a rank added before it:
        // the chains follow those down to their sink.
        let mut may = self.free.clone();
        may.extend(unknown.iter());
        may.extend(halted.iter());
        let mut via: Vec<Step> = Vec::new();
        // Passes over the ranks in order, until one changes nothing. Most
        // waits point down or across, so few passes are needed; a rank
        // let in earlier in a pass counts for the ones after it.
        loop {
            let mut changed = false;
            for r in dumped.iter() {
                if may.contains(r) {
                    continue;
                }
                if let Some(step) = self.moves(r, &may, &dumped) {
                    if let Some((wait, to)) = step {
                        via.push(Step { rank: r, wait, to });
                    }
                    may.insert(r);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let stuck: RankSet = dumped.iter().filter(|r| !may.contains(*r)).collect();
        self.find_cycles(&stuck);
        self.find_chains(&via);
    }

    /// Whether `rank` can move given the ranks that may: None if not; else
    /// the step that lets it, when one names a rank (None for a wait whose
    /// peer is not known).
    fn moves(&self, rank: i64, may: &RankSet, dumped: &RankSet) -> Option<Option<(usize, i64)>> {
        let waits = self.by_rank.get(&rank).unwrap_or(&[]);
        let all = self.basis_of(rank).is_some_and(|b| b.all);
        let moves = |s: i64| may.contains(s) || !dumped.contains(s);
        let met = |i: usize| -> Option<Option<i64>> {
            let w = &self.waits[i];
            match &w.on {
                None => Some(None),
                // The peer holds the other half: its MPI, running or
                // blocked anywhere inside, moves it on. Only a peer that
                // cannot run holds it, and that one is in `may`.
                Some(on) if w.progress => Some(on.first().filter(|&p| moves(p))),
                Some(on) if w.all => on.iter().all(moves).then(|| on.first()),
                // The lowest member that moves.
                Some(on) => match (on.first_common(may), on.first_not_in(dumped)) {
                    (Some(a), Some(b)) => Some(Some(a.min(b))),
                    (Some(a), None) | (None, Some(a)) => Some(Some(a)),
                    (None, None) => None,
                },
            }
        };
        if all {
            // Every wait must be met; the step names the last one's peer.
            let mut step = None;
            for &i in waits {
                let to = met(i)?;
                step = to.map(|t| (i, t)).or(step);
            }
            Some(step)
        } else {
            waits
                .iter()
                .find_map(|&i| met(i).map(|to| to.map(|t| (i, t))))
        }
    }

    /// The waits of `rank`, the specific ones (one peer) first, then
    /// collectives, then OR-waits.
    pub(super) fn waits_of(&self, rank: i64) -> Vec<usize> {
        let mut list: Vec<usize> = self
            .by_rank
            .get(&rank)
            .map(<[usize]>::to_vec)
            .unwrap_or_default();
        list.sort_by_key(|&i| {
            let w = &self.waits[i];
            let n = w.on.as_ref().map_or(usize::MAX, RankSet::len);
            (
                matches!(w.kind, WaitKind::Collective(_)) as u8 + 2 * (n > 1 && !w.all) as u8,
                i,
            )
        });
        list
    }

    /// The step a stuck rank is shown taking: its most specific wait,
    /// towards a stuck rank.
    fn step_within(&self, rank: i64, within: &RankSet) -> Option<Step> {
        self.waits_of(rank).into_iter().find_map(|w| {
            let to = self.waits[w].on.as_ref()?.first_common(within)?;
            Some(Step { rank, wait: w, to })
        })
    }

    /// The cycles among the stuck ranks: claimed where no rank on them has
    /// waits inferred from its queues alone, else possible; and which
    /// ranks are deadlocked (through a claimed cycle) or may be.
    fn find_cycles(&mut self, stuck: &RankSet) {
        let inferred = self.inferred_ranks();
        let mut covered = RankSet::new();
        // Each stuck rank's path into its cycle, with that cycle's index
        // (claimed or not).
        let mut found: Vec<(Vec<Step>, bool)> = Vec::new();
        let mut into: Vec<(Vec<Step>, usize)> = Vec::new();
        let mut cycle_of: FxHashMap<i64, usize> = FxHashMap::default();
        for start in stuck.iter() {
            if covered.contains(start) {
                continue;
            }
            let mut path: Vec<Step> = Vec::new();
            // Where each rank stands on the path: a ring of 100,000 ranks is
            // one path, and looking along it at each step is quadratic.
            let mut on_path: FxHashMap<i64, usize> = FxHashMap::default();
            let mut cur = start;
            loop {
                if let Some(&at) = on_path.get(&cur) {
                    let cycle = path[at..].to_vec();
                    let sure = cycle.iter().all(|s| !inferred.contains(s.rank));
                    let c = found.len();
                    for s in &path {
                        cycle_of.insert(s.rank, c);
                    }
                    into.push((path[..at].to_vec(), c));
                    found.push((cycle, sure));
                    break;
                }
                // Into a path already followed: its cycle is that one's.
                if let Some(&c) = cycle_of.get(&cur) {
                    for s in &path {
                        cycle_of.insert(s.rank, c);
                    }
                    into.push((path.clone(), c));
                    break;
                }
                if covered.contains(cur) {
                    break;
                }
                let Some(step) = self.step_within(cur, stuck) else {
                    break;
                };
                on_path.insert(step.rank, path.len());
                path.push(step);
                cur = step.to;
                if path.len() > stuck.len() + 1 {
                    break;
                }
            }
            covered.extend(path.iter().map(|s| s.rank));
        }
        for (path, c) in into {
            let (_, sure) = &found[c];
            let ranks = path.iter().map(|s| s.rank);
            if *sure {
                self.deadlocked.extend(ranks);
                self.feeders.extend(path);
            } else {
                self.maybe.extend(ranks);
            }
        }
        for (cycle, sure) in found {
            let ranks = cycle.iter().map(|s| s.rank);
            if sure {
                self.deadlocked.extend(ranks);
                self.cycles.push(cycle);
            } else {
                self.maybe.extend(ranks);
                self.unsure.push(cycle);
            }
        }
        // A rank whose path reaches a claimed cycle is deadlocked even if
        // it also feeds an unsure one.
        let deadlocked = self.deadlocked.clone();
        self.maybe = self
            .maybe
            .iter()
            .filter(|r| !deadlocked.contains(*r))
            .collect();
    }

    fn find_chains(&mut self, via: &[Step]) {
        // Each step leads to a rank let in earlier (or free from the
        // start), so one pass in order gives every step its sink and the
        // length of its path there.
        let at: FxHashMap<i64, usize> = via.iter().enumerate().map(|(i, s)| (s.rank, i)).collect();
        let mut sink = vec![0i64; via.len()];
        let mut depth = vec![0usize; via.len()];
        for (i, s) in via.iter().enumerate() {
            match at.get(&s.to).filter(|&&j| j < i) {
                Some(&j) => {
                    sink[i] = sink[j];
                    depth[i] = depth[j] + 1;
                }
                None => {
                    sink[i] = s.to;
                    depth[i] = 1;
                }
            }
        }
        // Chains by sink, in order of first appearance; each shows the
        // longest path (the first of that length).
        let mut chains: Vec<(Chain, usize)> = Vec::new();
        let mut chain_of: FxHashMap<i64, usize> = FxHashMap::default();
        for (i, first) in via.iter().enumerate() {
            match chain_of.get(&sink[i]).map(|&c| &mut chains[c]) {
                Some((chain, longest)) => {
                    chain.waiting.insert(first.rank);
                    if depth[i] > depth[*longest] {
                        *longest = i;
                    }
                }
                None => {
                    chain_of.insert(sink[i], chains.len());
                    chains.push((
                        Chain {
                            steps: Vec::new(),
                            sink: sink[i],
                            waiting: std::iter::once(first.rank).collect(),
                        },
                        i,
                    ));
                }
            }
        }
        self.chains = chains
            .into_iter()
            .map(|(mut chain, longest)| {
                let mut path = vec![via[longest]];
                while let Some(&j) = at.get(&path[path.len() - 1].to) {
                    if path.len() > via.len() {
                        break;
                    }
                    path.push(via[j]);
                }
                chain.steps = path;
                chain
            })
            .collect();
    }
}
