//! A large wait-for graph drawn by classes of ranks: a 100,000-node graph
//! is of no use to anyone. Ranks whose nodes read alike and whose edges
//! leave them alike (the same words, to a rank as far away, or to the same
//! rank where many wait on it) are one node, labelled with their ranks;
//! an edge is drawn once from a class to each class its ranks' edges reach,
//! its label saying how far each goes ("each to r+1"). A rank with an
//! OR-wait, whose diamond names it, keeps a node of its own.

use std::collections::BTreeSet;
use std::fmt::Write;

use rustc_hash::{FxHashMap, FxHashSet};

use super::drawing::{escape, Drawn, Edges, RankEdge, RankNode};
use crate::RankSet;

/// Up to this many ranks' nodes the graph is drawn rank by rank.
pub(super) const DRAWN_ONE_BY_ONE: usize = 64;

/// A rank waited on by more ranks than this is a hub: the ranks' edges to
/// it are alike as they are (everyone waits for rank 0), not by distance.
const HUB: usize = 8;

/// Where an edge of a class goes: this far from each rank, or to this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Reach {
    By(i64),
    To(i64),
}

/// One class: its ranks, the node that speaks for it, and its edges (a
/// member's, each with how it reaches).
struct Class<'a> {
    ranks: RankSet,
    node: usize,
    edges: Vec<(Reach, &'a RankEdge)>,
}

/// Draws `nodes` and `edges` by classes: nodes into `out`, edges into
/// `tail`.
pub(super) fn draw(nodes: &[RankNode], edges: &Edges, out: &mut String, tail: &mut String) {
    let mut own_node: FxHashSet<i64> = FxHashSet::default();
    let mut waited_on: FxHashMap<i64, usize> = FxHashMap::default();
    let mut leaving: FxHashMap<i64, Vec<&RankEdge>> = FxHashMap::default();
    for drawn in &edges.list {
        match drawn {
            Drawn::Ranks(e) => {
                *waited_on.entry(e.to).or_default() += 1;
                leaving.entry(e.from).or_default().push(e);
            }
            Drawn::Line(_, rank) => {
                own_node.insert(*rank);
            }
        }
    }
    let reach = |e: &RankEdge| {
        if waited_on.get(&e.to).copied().unwrap_or(0) > HUB {
            Reach::To(e.to)
        } else {
            Reach::By(e.to - e.from)
        }
    };

    let mut classes: Vec<Class> = Vec::new();
    let mut by_key: FxHashMap<String, usize> = FxHashMap::default();
    let mut class_of: FxHashMap<i64, usize> =
        FxHashMap::with_capacity_and_hasher(nodes.len(), Default::default());
    for (n, node) in nodes.iter().enumerate() {
        let words = |(reach, e): &(Reach, &RankEdge)| (*reach, e.style, e.label.clone(), e.color);
        let mut out_edges: Vec<(Reach, &RankEdge)> = leaving
            .get(&node.rank)
            .into_iter()
            .flatten()
            .map(|&e| (reach(e), e))
            .collect();
        out_edges.sort_by_key(words);
        out_edges.dedup_by_key(|e| words(e));
        let mut key = format!("{}\u{0}{}", node.place, node.color);
        if own_node.contains(&node.rank) {
            let _ = write!(key, "\u{0}own {}", node.rank);
        }
        for (reach, e) in &out_edges {
            let _ = write!(
                key,
                "\u{0}{reach:?}\u{1}{}\u{1}{}\u{1}{}",
                e.style, e.label, e.color
            );
        }
        let at = *by_key.entry(key).or_insert_with(|| {
            classes.push(Class {
                ranks: RankSet::new(),
                node: n,
                edges: out_edges,
            });
            classes.len() - 1
        });
        classes[at].ranks.insert(node.rank);
        class_of.insert(node.rank, at);
    }

    let id = |c: &Class| {
        if c.ranks.len() == 1 {
            format!("r{}", nodes[c.node].rank)
        } else {
            format!("c{}", nodes[c.node].rank)
        }
    };
    for class in &classes {
        let node = &nodes[class.node];
        if class.ranks.len() == 1 {
            node.draw(out);
        } else {
            let _ = writeln!(
                out,
                "  {} [label=\"{}\\n{}\"{}];",
                id(class),
                short_label(&class.ranks),
                node.place,
                node.color
            );
        }
    }
    for class in &classes {
        let from = id(class);
        let many = class.ranks.len() > 1;
        // A rank alone waits on a class by several distances: one edge.
        let mut drawn: FxHashSet<String> = FxHashSet::default();
        for (reach, e) in &class.edges {
            let targets: BTreeSet<usize> = class
                .ranks
                .iter()
                .filter_map(|r| {
                    let to = match reach {
                        Reach::By(d) => r + d,
                        Reach::To(to) => *to,
                    };
                    class_of.get(&to).copied()
                })
                .collect();
            let how = match reach {
                Reach::By(d) if many => format!(" (each to r{d:+})"),
                _ => String::new(),
            };
            for t in targets {
                let line = format!(
                    "  {from} -> {} [{}, label=\"{}{how}\"{}];",
                    id(&classes[t]),
                    e.style,
                    escape(&e.label),
                    e.color
                );
                if drawn.insert(line.clone()) {
                    let _ = writeln!(tail, "{line}");
                }
            }
        }
    }
    for drawn in &edges.list {
        if let Drawn::Line(line, _) = drawn {
            let _ = writeln!(tail, "{line}");
        }
    }
}

/// Up to this many runs of ranks a class's label lists them all.
const RUNS_LISTED: usize = 8;

/// `ranks 1-30`, or for a class of many runs (a halo's inner ranks, row
/// after row) `9,000 ranks from 33 to 990 in 30 runs`.
fn short_label(ranks: &RankSet) -> String {
    if ranks.runs().len() > RUNS_LISTED {
        ranks.summary()
    } else {
        ranks.labelled()
    }
}
