//! The wait-for graph as Graphviz DOT: one node per rank that waits or is
//! waited for (the others merged into one), an edge per wait labelled
//! with its communicator and tag; receives solid, sends dashed, OR-waits
//! (ANY_SOURCE) through a diamond, collectives bold, unexpected messages
//! dotted grey from sender to receiver; the edges of a deadlock cycle red;
//! waits only a rank's stack names (the blocking call it is in) blue,
//! labelled `(stack)`. A long cycle of alike waits (a ring of 100,000
//! ranks) is one node for its ranks with one red loop saying how each
//! waits, not a node per rank; a graph of many ranks is drawn by classes
//! of alike ranks (`classes.rs`).

use std::collections::BTreeSet;
use std::fmt::Write;

use mqs_abi::OpClass;

use super::drawing::{escape, Edges, RankEdge, RankNode};
use crate::calls::Blocked;
use crate::collectives::whereabouts;
use crate::global::Peer;
use crate::waitfor::WaitKind;
use crate::{Analysis, RankSet};

/// The graph of `analysis` in DOT.
pub fn dot(analysis: &Analysis<'_, '_>) -> String {
    let job = analysis.job;
    let mut out = String::new();
    let _ = writeln!(out, "digraph waitfor {{");
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  node [shape=box, style=rounded, fontname=\"Helvetica\"];"
    );
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=10];");

    let cycle_edges: BTreeSet<(i64, usize, i64)> = analysis
        .cycles
        .iter()
        .flatten()
        .map(|s| (s.rank, s.wait, s.to))
        .collect();
    // Cycles told once in words are drawn once too.
    let alike: Vec<(RankSet, String)> = analysis
        .cycles
        .iter()
        .filter_map(|c| {
            let words = analysis.alike_steps_words(c)?;
            Some((c.iter().map(|s| s.rank).collect(), words))
        })
        .collect();
    let collapsed: RankSet = alike.iter().flat_map(|(r, _)| r.iter()).collect();
    let mut involved = RankSet::new();
    let mut edges = Edges::default();
    for (i, w) in analysis.waits.iter().enumerate() {
        let Some(on) = &w.on else { continue };
        let in_alike_cycle = collapsed.contains(w.rank)
            && on
                .iter()
                .all(|to| collapsed.contains(to) && cycle_edges.contains(&(w.rank, i, to)));
        if in_alike_cycle {
            continue;
        }
        match w.kind {
            WaitKind::Op(o) => {
                let op = &job.ops[o];
                let edge = Edge {
                    class: op.class,
                    comm: job.comms[op.comm].label(),
                    tag: op.tag,
                    any: op.peer == Peer::Any,
                    stack: false,
                };
                edge.draw(analysis, i, on, &cycle_edges, &mut involved, &mut edges);
            }
            WaitKind::Stack { call, op } => {
                let Blocked::Ops { ops, .. } = &analysis.calls[call].blocked else {
                    continue;
                };
                let op = &ops[op];
                let edge = Edge {
                    class: op.class,
                    comm: op
                        .comm
                        .map_or("communicator not known".into(), |c| job.comms[c].label()),
                    tag: op.tag,
                    any: op.peer == Peer::Any,
                    stack: true,
                };
                edge.draw(analysis, i, on, &cycle_edges, &mut involved, &mut edges);
            }
            // The receiving end of another rank's send on its stack.
            WaitKind::Sending { call, op } => {
                let Blocked::Ops { ops, .. } = &analysis.calls[call].blocked else {
                    continue;
                };
                let op = &ops[op];
                let edge = Edge {
                    class: OpClass::PendingReceives,
                    comm: op
                        .comm
                        .map_or("communicator not known".into(), |c| job.comms[c].label()),
                    tag: op.tag,
                    any: false,
                    stack: true,
                };
                edge.draw(analysis, i, on, &cycle_edges, &mut involved, &mut edges);
            }
            WaitKind::Collective(c) => {
                let name = &analysis.collectives[c].name;
                involved.insert(w.rank);
                for to in on.iter() {
                    involved.insert(to);
                    let cycle = if cycle_edges.contains(&(w.rank, i, to)) {
                        ", color=red, penwidth=2.5, fontcolor=red"
                    } else {
                        ""
                    };
                    edges.push(RankEdge {
                        from: w.rank,
                        to,
                        style: "style=bold",
                        label: format!("{name}: not entered"),
                        color: cycle,
                    });
                }
            }
        }
    }
    unexpected_edges(analysis, &mut involved, &mut edges);
    let nodes = rank_nodes(analysis, &involved);
    let mut tail = String::new();
    if nodes.len() > super::classes::DRAWN_ONE_BY_ONE {
        super::classes::draw(&nodes, &edges, &mut out, &mut tail);
    } else {
        for node in &nodes {
            node.draw(&mut out);
        }
        edges.draw(&mut tail);
    }
    for (k, (ranks, words)) in alike.iter().enumerate() {
        let _ = writeln!(
            out,
            "  cycle{k} [label=\"{}\\ndeadlocked\", color=red];",
            ranks.labelled()
        );
        let _ = writeln!(
            tail,
            "  cycle{k} -> cycle{k} [label=\"{}\", color=red, penwidth=2.5, fontcolor=red];",
            escape(words)
        );
    }
    let rest: RankSet = job
        .ranks
        .iter()
        .map(|r| r.rank)
        .filter(|r| !involved.contains(*r) && !collapsed.contains(*r))
        .collect();
    if !rest.is_empty() {
        let _ = writeln!(
            out,
            "  rest [label=\"{}\\nno waits\", style=\"rounded,dashed\"];",
            rest.labelled()
        );
    }
    out.push_str(&tail);
    let _ = writeln!(out, "}}");
    out
}

/// Unexpected messages: sent by the peer, waiting at the receiver (dotted).
fn unexpected_edges(analysis: &Analysis<'_, '_>, involved: &mut RankSet, edges: &mut Edges) {
    let job = analysis.job;
    for op in &job.ops {
        if op.class != OpClass::UnexpectedMessages {
            continue;
        }
        if let Peer::Rank(from) = op.peer {
            involved.insert(from);
            involved.insert(op.rank);
            let tag = op.tag.map_or("any tag".to_string(), |t| format!("tag {t}"));
            edges.push(RankEdge {
                from,
                to: op.rank,
                style: "style=dotted, color=gray40, fontcolor=gray40",
                label: format!("unexpected {} {tag}", job.comms[op.comm].label()),
                color: "",
            });
        }
    }
}

/// A node for each rank an edge touches: where it stands, and whether it is
/// deadlocked (red) or stopped (orange, with its state).
fn rank_nodes(analysis: &Analysis<'_, '_>, involved: &RankSet) -> Vec<RankNode> {
    let job = analysis.job;
    let mut nodes = Vec::with_capacity(involved.len());
    for rank in involved.iter() {
        let place = job
            .rank(rank)
            .map(whereabouts)
            .unwrap_or_else(|| "not dumped".into());
        // A stopped rank says so on a line of its own.
        let stopped = analysis.stopped_rank(rank);
        let place = match stopped {
            Some(s) => {
                let state = match (&s.state, &s.held_by) {
                    (Some(state), None) => state.words(),
                    _ => "held stopped by a debugger".to_owned(),
                };
                format!("{}\\n{}", escape(&state), escape(&place))
            }
            None => escape(&place),
        };
        let color = if analysis.deadlocked.contains(rank) {
            ", color=red"
        } else if stopped.is_some() {
            ", color=orange, style=\"rounded,bold\""
        } else {
            ""
        };
        nodes.push(RankNode { rank, place, color });
    }
    nodes
}

/// A wait on a point-to-point operation, as drawn: from the DLL's queues,
/// or (blue, labelled so) from the blocking call a rank's stack is in.
struct Edge {
    class: OpClass,
    comm: String,
    tag: Option<i64>,
    any: bool,
    stack: bool,
}

impl Edge {
    fn draw(
        &self,
        analysis: &Analysis<'_, '_>,
        wait: usize,
        on: &RankSet,
        cycle_edges: &BTreeSet<(i64, usize, i64)>,
        involved: &mut RankSet,
        edges: &mut Edges,
    ) {
        let rank = analysis.waits[wait].rank;
        let tag = self
            .tag
            .map_or("any tag".to_string(), |t| format!("tag {t}"));
        let send = self.class == OpClass::PendingSends;
        let style = if send {
            "style=dashed, arrowhead=empty"
        } else {
            "style=solid"
        };
        // A cycle's red takes the place of a stack's blue.
        let blue = if self.stack {
            ", color=blue, fontcolor=blue"
        } else {
            ""
        };
        let what = if send { "send" } else { "recv" };
        let from = if self.stack { " (stack)" } else { "" };
        involved.insert(rank);
        if self.any {
            let node = format!("any{wait}");
            edges.line(
                format!(
                    "  {node} [shape=diamond, label=\"ANY_SOURCE\\n{} {}\"];",
                    escape(&self.comm),
                    tag
                ),
                rank,
            );
            edges.line(
                format!("  r{rank} -> {node} [{style}, label=\"{what} (OR-wait){from}\"{blue}];"),
                rank,
            );
            for to in on.iter() {
                involved.insert(to);
                edges.line(format!("  {node} -> r{to} [style=dotted];"), to);
            }
            return;
        }
        for to in on.iter() {
            involved.insert(to);
            let cycle = if cycle_edges.contains(&(rank, wait, to)) {
                ", color=red, penwidth=2.5, fontcolor=red"
            } else {
                blue
            };
            edges.push(RankEdge {
                from: rank,
                to,
                style,
                label: format!("{what} {} {tag}{from}", self.comm),
                color: cycle,
            });
        }
    }
}
