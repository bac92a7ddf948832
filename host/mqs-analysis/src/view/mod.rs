//! Views of a whole job for people: the merged job view (ranks with the
//! same queues on one line, empty parts left out, the stacks as one call
//! tree) and the wait-for graph as Graphviz DOT ([`dot`]). The per-process
//! listing and JSON stay in `render`.

mod classes;
pub mod dot;
mod drawing;
mod relative;

use std::fmt::Write;
use std::time::Duration;

use mqs_abi::{OpClass, OpStatus};

use crate::global::{Job, JobComm, Op, Peer};
use crate::ranks::ordered_runs;
use crate::{tree, Analysis, RankSet};
use mqs_core::model::JobDump;

/// What the job view shows.
#[derive(Debug, Clone, Default)]
pub struct ViewOptions {
    /// Also empty communicators and queues, and every thread's stack.
    pub all: bool,
    /// Only these ranks.
    pub ranks: Option<RankSet>,
    /// Only communicators of this name.
    pub comm: Option<String>,
    /// Only this queue.
    pub queue: Option<OpClass>,
    /// How long reading the job took, for the summary.
    pub elapsed: Option<Duration>,
}

impl ViewOptions {
    fn rank_ok(&self, rank: i64) -> bool {
        self.ranks.as_ref().is_none_or(|r| r.contains(rank))
    }

    fn comm_ok(&self, comm: &JobComm) -> bool {
        self.comm
            .as_ref()
            .is_none_or(|n| *n == comm.name || *n == comm.label())
    }

    fn queue_ok(&self, class: OpClass) -> bool {
        self.queue.is_none_or(|q| q == class)
    }
}

fn class_words(class: OpClass) -> (&'static str, &'static str) {
    match class {
        OpClass::PendingSends => ("sends", "send to"),
        OpClass::PendingReceives => ("receives", "recv from"),
        OpClass::UnexpectedMessages => ("unexpected", "unexpected from"),
    }
}

/// One operation within its communicator's block: `recv from rank 1
/// ("ring" rank 6) tag 10, 4 bytes`.
fn op_text(job: &Job<'_>, op: &Op<'_>) -> String {
    op_text_with_peer(op, &peer_words(&job.comms[op.comm], op))
}

/// The peer of `op`, an operation on `comm`: `rank 1 ("ring" rank 6)`,
/// on a grid with its coordinates: `rank 1 ("cart" rank 4 at (2,0))`.
fn peer_words(comm: &JobComm, op: &Op<'_>) -> String {
    let at = |local: i64| grid_place(comm, local).map(|at| format!(" {at}"));
    match op.peer {
        Peer::Any => "ANY_SOURCE".to_string(),
        Peer::Rank(g) => match op.local_peer {
            Some(l) if l != g || !comm.is_identity() => format!(
                "rank {g} ({} rank {l}{})",
                comm.label(),
                at(l).unwrap_or_default()
            ),
            _ => match grid_place(comm, g) {
                Some(at) => format!("rank {g} ({at})"),
                None => format!("rank {g}"),
            },
        },
        Peer::Local(l) => format!("{} rank {l}{}", comm.label(), at(l).unwrap_or_default()),
    }
}

/// `at (2,0)`: where rank `local` of `comm` is on its grid, if it has one.
fn grid_place(comm: &JobComm, local: i64) -> Option<String> {
    let grid = comm.grid()?;
    let mut coords = [0i64; mqs_abi::MAX_CART_DIMS];
    if !grid.coords(local, &mut coords) {
        return None;
    }
    let parts: Vec<String> = coords[..grid.dims.len()]
        .iter()
        .map(i64::to_string)
        .collect();
    Some(format!("at ({})", parts.join(",")))
}

/// `; a 3x2 grid, periodic in dimension 0` for a communicator with one.
fn grid_words(comm: &JobComm) -> String {
    match comm.grid() {
        Some(grid) => format!("; a {} grid, {}", grid.shape(), grid.wrapping()),
        None => String::new(),
    }
}

/// [`op_text`] with the peer given in words.
fn op_text_with_peer(op: &Op<'_>, peer: &str) -> String {
    let tag = match op.tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".into(),
    };
    let status = match (op.status(), op.in_transit()) {
        (_, Some(place)) => format!(" (in transit: {place})"),
        (OpStatus::Pending, None) => String::new(),
        (other, None) => format!(" ({})", other.name()),
    };
    format!(
        "{} {peer} {tag}, {} bytes{status}",
        class_words(op.class).1,
        op.op.desired_length
    )
}

/// The job view: a summary line, the pending operations of each
/// communicator with ranks of equal contents merged, what the DLL could
/// not tell, the merged call tree, and the ranks not dumped.
pub fn job_view(dump: &JobDump, options: &ViewOptions) -> String {
    let job = Job::new(dump);
    let analysis = Analysis::new(&job);
    let mut out = String::new();
    summary(&job, options, &mut out);
    if let Some(note) = dump.launcher.as_ref().and_then(|l| l.note.as_ref()) {
        let _ = writeln!(out, "launcher: {note}");
    }
    chosen(dump, &mut out);
    recognised(dump, &mut out);
    type_packs(dump, &mut out);
    for stopped in &analysis.stopped {
        let _ = writeln!(out, "{}", stopped.words());
    }
    for (rank, _) in &analysis.stalled {
        if let Some(words) = analysis.stalled_words(*rank) {
            let _ = writeln!(out, "{words}");
        }
    }
    if analysis.cannot_tell() && !analysis.unjudged.is_empty() {
        let _ = writeln!(
            out,
            "who waits for whom: cannot tell for {} (what they wait for could not be read; \
             --deadlock says why)",
            analysis.unjudged_ranks().labelled()
        );
    }

    // The queues that list anything: only those have lines unless all are
    // shown (a walk of every rank's empty queues is most of a large job's
    // view otherwise).
    let listing: std::collections::HashSet<(usize, OpClass)> =
        job.ops.iter().map(|o| (o.comm, o.class)).collect();
    for (index, comm) in job.comms.iter().enumerate() {
        if !options.comm_ok(comm) {
            continue;
        }
        let mut block = String::new();
        for class in OpClass::ALL {
            if !options.queue_ok(class) || !(options.all || listing.contains(&(index, class))) {
                continue;
            }
            // Ranks by the text of their operations on this queue, in
            // order of first appearance. Members and operations are both
            // in rank order: one cursor walks the operations.
            let mut texts = relative::QueueTexts::new(
                comm,
                job.ops
                    .iter()
                    .filter(|o| o.comm == index && o.class == class && options.rank_ok(o.rank)),
            );
            let mut cursor = 0;
            for rank in comm.members.iter().filter(|r| options.rank_ok(*r)) {
                while job.ops.get(cursor).is_some_and(|o| o.rank < rank) {
                    cursor += 1;
                }
                let start = cursor;
                while job.ops.get(cursor).is_some_and(|o| o.rank == rank) {
                    cursor += 1;
                }
                let ops: Vec<&Op<'_>> = job.ops[start..cursor]
                    .iter()
                    .filter(|o| o.comm == index && o.class == class)
                    .collect();
                // An empty queue has a line only when all are shown.
                if !ops.is_empty() || options.all {
                    texts.add(rank, &ops);
                }
            }
            let groups = texts.groups(|rank| {
                let ops: Vec<&Op<'_>> = job
                    .ops_of(rank)
                    .iter()
                    .filter(|o| o.comm == index && o.class == class)
                    .collect();
                queue_text(&job, &ops, class, options).unwrap_or_default()
            });
            for (text, ranks) in groups {
                let _ = writeln!(block, "  {}: {text}", ranks.labelled());
            }
        }
        if block.is_empty() && !options.all {
            continue;
        }
        let members = if comm.is_identity() {
            format!("ranks 0-{}", comm.size - 1)
        } else {
            let known: Vec<i64> = comm.group.iter().map(|g| g.unwrap_or(-1)).collect();
            if known.contains(&-1) {
                format!("{} ranks, members partly unknown", comm.size)
            } else {
                format!(
                    "{} ranks: world ranks {} in its order",
                    comm.size,
                    ordered_runs(&known)
                )
            }
        };
        let _ = writeln!(out, "{} ({members}{}):", comm.label(), grid_words(comm));
        out.push_str(&block);
    }

    not_available(&job, options, &mut out);

    stacks(&job, &analysis, options, &mut out);

    for failure in &dump.failures {
        let _ = writeln!(
            out,
            "rank {} ({}) not dumped: {}",
            failure.rank,
            mqs_core::model::pid_on(failure.pid, &failure.host),
            failure.message
        );
    }
    out
}

/// A rank's operations on one queue of one communicator, as one line's
/// text (None: nothing to say of an empty queue).
fn queue_text(
    job: &Job<'_>,
    ops: &[&Op<'_>],
    class: OpClass,
    options: &ViewOptions,
) -> Option<String> {
    if ops.is_empty() {
        return options
            .all
            .then(|| format!("{}: none", class_words(class).0));
    }
    let texts: Vec<String> = ops.iter().map(|o| op_text(job, o)).collect();
    Some(texts.join("; "))
}

/// What the DLL could not tell, said per queue and summed over
/// communicators: a rank that lists such operations on another
/// communicator is named apart.
fn not_available(job: &Job<'_>, options: &ViewOptions, out: &mut String) {
    // The ranks that list some, by queue, in one pass over the operations.
    let mut listing: std::collections::HashMap<&str, RankSet> = Default::default();
    if !job.not_available.is_empty() {
        for o in &job.ops {
            listing
                .entry(crate::global::class_name(o.class))
                .or_default()
                .insert(o.rank);
        }
    }
    let none = RankSet::new();
    for ((what, reason), ranks) in &job.not_available {
        let listing = listing.get(what.as_str()).unwrap_or(&none);
        let (mut partly, mut whole) = (RankSet::new(), RankSet::new());
        for r in ranks.iter().filter(|r| options.rank_ok(*r)) {
            if listing.contains(r) {
                partly.insert(r);
            } else {
                whole.insert(r);
            }
        }
        if partly.is_empty() && whole.is_empty() {
            continue;
        }
        let which = match (whole.is_empty(), partly.is_empty()) {
            (_, true) => whole.labelled(),
            (true, false) => format!(
                "{} for the communicators they list none on",
                partly.labelled()
            ),
            (false, false) => format!(
                "{}, and on {} for the communicators they list none on",
                whole.labelled(),
                partly.labelled()
            ),
        };
        let _ = writeln!(out, "{what} not available on {which}: {reason}");
    }
}

/// Which DLL the tool chose, when it chose (no DLL was asked for).
fn chosen(dump: &JobDump, out: &mut String) {
    let kinds = by_kind(dump, |p| p.dll.chosen.clone());
    for (chosen, on) in &kinds {
        let _ = writeln!(out, "DLL: {chosen}{on}");
    }
}

/// The MPI the DLL recognised, and its backend, when the DLL says (mqs's
/// DLL does): one line, or one per kind if the ranks differ.
fn recognised(dump: &JobDump, out: &mut String) {
    let kinds = by_kind(dump, |p| {
        let mpi = p.dll.mpi.as_deref()?;
        let backend = p.dll.backend.as_deref().unwrap_or("?");
        Some(format!("{mpi} (the DLL's {backend} backend)"))
    });
    for (what, on) in &kinds {
        let _ = writeln!(out, "MPI: {what}{on}");
    }
}

/// The type packs the processes were read through (docs/typepacks.md):
/// each distinct line once, in order of first appearance, with its ranks
/// when not every rank's dump says it.
fn type_packs(dump: &JobDump, out: &mut String) {
    let mut lines: Vec<(&str, Vec<i64>)> = Vec::new();
    let mut all = 0usize;
    for p in &dump.processes {
        let ranks: Vec<i64> = p.run_members().map(|(_, rank)| i64::from(rank)).collect();
        all += ranks.len();
        for line in &p.type_packs {
            match lines.iter_mut().find(|(seen, _)| *seen == line.as_str()) {
                Some((_, seen)) => seen.extend(&ranks),
                None => lines.push((line, ranks.clone())),
            }
        }
    }
    for (line, ranks) in lines {
        let on = if ranks.len() == all {
            String::new()
        } else {
            format!(" on ranks {}", crate::ranks::ordered_runs(&ranks))
        };
        let _ = writeln!(out, "Types: {line}{on}");
    }
}

/// The distinct values `kind` gives the processes, in order of first
/// appearance, each with " on ranks ..." when the ranks differ.
fn by_kind(
    dump: &JobDump,
    kind: impl Fn(&mqs_core::model::ProcessDump) -> Option<String>,
) -> Vec<(String, String)> {
    let mut kinds: Vec<(String, Vec<i32>)> = Vec::new();
    for p in &dump.processes {
        let Some(k) = kind(p) else {
            continue;
        };
        let ranks = p.run_members().map(|(_, rank)| rank);
        match kinds.iter_mut().find(|(seen, _)| *seen == k) {
            Some((_, seen)) => seen.extend(ranks),
            None => kinds.push((k, ranks.collect())),
        }
    }
    let several = kinds.len() > 1;
    kinds
        .into_iter()
        .map(|(k, ranks)| {
            let on = if several {
                let ranks: Vec<String> = ranks.iter().map(i32::to_string).collect();
                format!(" on ranks {}", ranks.join(","))
            } else {
                String::new()
            };
            (k, on)
        })
        .collect()
}

fn summary(job: &Job<'_>, options: &ViewOptions, out: &mut String) {
    let shown: RankSet = job
        .ranks
        .iter()
        .map(|r| r.rank)
        .filter(|r| options.rank_ok(*r))
        .collect();
    let mut counts = [0usize; 3];
    for op in job.ops.iter().filter(|o| shown.contains(o.rank)) {
        if options.comm_ok(&job.comms[op.comm]) {
            counts[op.class as usize] += 1;
        }
    }
    let mut with_ops = vec![false; job.comms.len()];
    for op in job.ops.iter().filter(|o| shown.contains(o.rank)) {
        with_ops[op.comm] = true;
    }
    let busy = job
        .comms
        .iter()
        .zip(&with_ops)
        .filter(|(c, busy)| **busy && options.comm_ok(c))
        .count();
    let idle: RankSet = job
        .idle_ranks()
        .iter()
        .filter(|r| shown.contains(*r))
        .collect();
    // Snapshots saved before ranks named by pid had no launcher recorded
    // the first rank as one, without an executable: naming it would read
    // as "job of  (pid 123)".
    let who = match &job.dump.launcher {
        Some(l) if !l.executable.is_empty() => {
            let name = std::path::Path::new(&l.executable)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("job of {name} (pid {}): ", l.pid)
        }
        _ => String::new(),
    };
    let time = options
        .elapsed
        .map(|d| format!("; read in {:.2} s", d.as_secs_f64()))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{who}{} ranks ({}), {busy} of {} communicators with operations; {} sends, {} receives, \
         {} unexpected; nothing pending: {}{time}",
        shown.len(),
        shown,
        job.comms.len(),
        counts[OpClass::PendingSends as usize],
        counts[OpClass::PendingReceives as usize],
        counts[OpClass::UnexpectedMessages as usize],
        idle
    );
}

fn stacks(job: &Job<'_>, analysis: &Analysis<'_, '_>, options: &ViewOptions, out: &mut String) {
    let with_stacks: RankSet = job
        .ranks
        .iter()
        .filter(|r| r.main.is_some() && options.rank_ok(r.rank))
        .map(|r| r.rank)
        .collect();
    if with_stacks.is_empty() {
        return;
    }
    let roots = tree::merge(job, &with_stacks, options.all);
    let others: usize = job
        .ranks
        .iter()
        .filter(|r| with_stacks.contains(r.rank))
        .map(|r| r.others.len())
        .sum();
    let threads = if options.all {
        "every thread".to_string()
    } else if others > 0 {
        format!("main threads; {others} other threads, MPI's own among them, with --all")
    } else {
        "main threads".to_string()
    };
    let _ = writeln!(out, "stacks ({threads}):");
    tree::render(&roots, 2, out);
    // The rank others probably wait for.
    let waiting: RankSet = analysis.waits.iter().map(|w| w.rank).collect();
    for r in &job.ranks {
        if with_stacks.contains(r.rank) && r.inside_mpi == Some(false) && !waiting.contains(r.rank)
        {
            let _ = writeln!(
                out,
                "rank {} has nothing pending and is not inside MPI",
                r.rank
            );
        }
    }
}
