//! What the wait-for graph is drawn from: a node per rank and the edges
//! between ranks, and how each is written in DOT.

use std::fmt::Write;

/// `s` inside a DOT string: backslashes and quotes escaped.
pub(super) fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The graph's edges between ranks, and the lines of its OR-waits (a
/// diamond each), in the order they were found.
#[derive(Default)]
pub(super) struct Edges {
    pub list: Vec<Drawn>,
}

/// An edge between two ranks, or a line drawn as it is (with the ranks
/// it names).
pub(super) enum Drawn {
    Ranks(RankEdge),
    Line(String, i64),
}

/// An edge from rank `from` to rank `to`: its style, label and colour
/// (the colour's attributes, each after a comma).
pub(super) struct RankEdge {
    pub from: i64,
    pub to: i64,
    pub style: &'static str,
    pub label: String,
    pub color: &'static str,
}

impl Edges {
    pub(super) fn push(&mut self, edge: RankEdge) {
        self.list.push(Drawn::Ranks(edge));
    }

    pub(super) fn line(&mut self, line: String, rank: i64) {
        self.list.push(Drawn::Line(line, rank));
    }

    /// Every edge, a line each.
    pub(super) fn draw(&self, out: &mut String) {
        for drawn in &self.list {
            match drawn {
                Drawn::Ranks(e) => {
                    let _ = writeln!(
                        out,
                        "  r{} -> r{} [{}, label=\"{}\"{}];",
                        e.from,
                        e.to,
                        e.style,
                        escape(&e.label),
                        e.color
                    );
                }
                Drawn::Line(line, _) => {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
    }
}

/// A rank's node: its label's text after "rank N" and its colour.
pub(super) struct RankNode {
    pub rank: i64,
    /// Escaped for DOT already.
    pub place: String,
    pub color: &'static str,
}

impl RankNode {
    pub(super) fn draw(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "  r{} [label=\"rank {}\\n{}\"{}];",
            self.rank, self.rank, self.place, self.color
        );
    }
}
