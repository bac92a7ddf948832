//! The stacks of many ranks merged into one call tree, each branch with
//! the ranks that took it (as STAT and padb show them).

use std::fmt::Write;

use super::ranks::RankSet;
use crate::global::Job;
use mqs_core::model::ThreadStack;

/// One function on the way down, with the ranks whose stacks pass it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub ranks: RankSet,
    pub children: Vec<Node>,
}

/// The frames above `main` (`_start`, `__libc_start_main`...) tell nothing.
fn path_of(thread: &ThreadStack) -> Vec<String> {
    let mut path: Vec<String> = thread.call_path().map(str::to_owned).collect();
    if let Some(main) = path.iter().position(|f| f == "main") {
        path.drain(..main);
    }
    if thread.truncated.is_some() && !path.is_empty() {
        path.insert(0, "(incomplete stack)".into());
    }
    path
}

fn insert(nodes: &mut Vec<Node>, rank: i64, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let at = match nodes.iter().position(|n| n.name == *first) {
        Some(i) => i,
        None => {
            nodes.push(Node {
                name: first.clone(),
                ranks: RankSet::new(),
                children: Vec::new(),
            });
            nodes.len() - 1
        }
    };
    nodes[at].ranks.insert(rank);
    insert(&mut nodes[at].children, rank, rest);
}

/// The merged tree of the main threads of `ranks` (every thread with
/// `all_threads`).
pub fn merge(job: &Job<'_>, ranks: &RankSet, all_threads: bool) -> Vec<Node> {
    let mut roots = Vec::new();
    for r in job.ranks.iter().filter(|r| ranks.contains(r.rank)) {
        let threads = r
            .main
            .into_iter()
            .chain(r.others.iter().copied().filter(|_| all_threads));
        for thread in threads {
            insert(&mut roots, r.rank, &path_of(thread));
        }
    }
    sort(&mut roots);
    roots
}

fn sort(nodes: &mut [Node]) {
    nodes.sort_by(|a, b| {
        a.ranks
            .first()
            .cmp(&b.ranks.first())
            .then(a.name.cmp(&b.name))
    });
    for n in nodes {
        sort(&mut n.children);
    }
}

/// The tree as text: a chain of functions that all the same ranks pass is
/// one line, `ranks 0-7: main > MPI_Recv > ...`; branches are indented.
pub fn render(nodes: &[Node], indent: usize, out: &mut String) {
    for node in nodes {
        let mut names = vec![node.name.as_str()];
        let mut at = node;
        while at.children.len() == 1 && at.children[0].ranks == at.ranks {
            at = &at.children[0];
            names.push(&at.name);
        }
        let _ = writeln!(
            out,
            "{:indent$}{}: {}",
            "",
            at.ranks.labelled(),
            names.join(" > ")
        );
        render(&at.children, indent + 2, out);
    }
}
