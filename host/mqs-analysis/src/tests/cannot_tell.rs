//! "Cannot tell" is an answer of its own: ranks whose queues could not be
//! read are never counted as waiting for nothing, and "no deadlock" is said
//! only when every rank was judged.

use mqs_abi::OpClass;
use mqs_core::model::{RankFailure, Section, ThreadList};

use super::differing::stack;
use super::{job, world, Analysis, Job, OpSpec, RankSet};
use crate::view::{self, ViewOptions};

/// A 4-rank ring (each receives from the next) whose receive queues are
/// listed, except on `blind` ranks, where the DLL could not list them.
fn ring_with_blind(blind: &[usize]) -> mqs_core::model::JobDump {
    let ops: Vec<Vec<OpSpec>> = (0..4i64)
        .map(|r| vec![(0, false, (r + 1) % 4, 10)])
        .collect();
    let mut dump = job(4, &[world(4)], &ops);
    // The ranks read are blocked in their receives (their stacks say so).
    for r in (0..4).filter(|r| !blind.contains(r)) {
        super::blocked_in(&mut dump, r, "MPI_Recv");
    }
    for &r in blind {
        if let Section::Ok { value } = &mut dump.processes[r].communicators {
            for c in &mut value.list {
                *c.queue_mut(OpClass::PendingReceives) = Section::NotAvailable {
                    reason: "the netmod matches receives itself".into(),
                };
            }
        }
    }
    dump
}

#[test]
fn every_queue_read_gives_the_deadlock_as_before() {
    let dump = ring_with_blind(&[]);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock());
    assert!(!a.cannot_tell());
    assert!(a.unjudged.is_empty());
    assert!(!a.words().contains("not judged"), "{}", a.words());
}

#[test]
fn receives_that_cannot_be_read_are_cannot_tell_never_no_deadlock() {
    let dump = ring_with_blind(&[0, 1, 2, 3]);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock());
    assert!(a.cannot_tell());
    assert_eq!(a.unjudged_ranks(), RankSet::parse("0-3").unwrap());
    let words = a.words();
    assert!(!words.contains("no deadlock"), "{words}");
    assert_eq!(
        words,
        "not judged: ranks 0-3 (receives not available: the netmod matches receives itself; \
         counted as able to move: what they wait for is unknown)\n\
         cannot tell: ranks 0-3 not judged; no cycle of waits among the 0 ranks that were \
         (0 waiting)\n"
    );
    // The job view's summary says so, and counts nobody as idle.
    let text = view::job_view(&dump, &ViewOptions::default());
    assert!(text.contains("nothing pending: none"), "{text}");
    assert!(
        text.contains("who waits for whom: cannot tell for ranks 0-3"),
        "{text}"
    );
}

#[test]
fn one_blind_rank_breaks_the_ring_into_cannot_tell() {
    // Rank 2 might have no receive at all: the others' waits are known,
    // but whether they are stuck depends on it.
    let dump = ring_with_blind(&[2]);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock(), "{}", a.words());
    assert!(a.cannot_tell());
    assert_eq!(a.unjudged_ranks(), RankSet::parse("2").unwrap());
    let words = a.words();
    assert!(
        words.contains("what rank 2 waits for is not known (receives not available"),
        "{words}"
    );
    assert!(
        words.contains("cannot tell: rank 2 not judged; no cycle of waits among the 3 ranks"),
        "{words}"
    );
}

#[test]
fn a_blind_rank_whose_stack_is_outside_mpi_is_judged_free() {
    let mut dump = ring_with_blind(&[2]);
    let p = &mut dump.processes[2];
    p.stacks = Some(Section::Ok {
        value: ThreadList {
            list: vec![stack(p.pid, &["_start", "main", "compute"], 0x1000)],
        },
    });
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.cannot_tell(), "{}", a.words());
    assert!(a.unjudged.is_empty());
    assert!(a.words().contains("no deadlock"), "{}", a.words());
}

#[test]
fn a_cycle_among_judged_ranks_is_a_deadlock_whatever_the_others() {
    // Ranks 0 and 1 wait for each other; rank 2 cannot be read.
    let ops: Vec<Vec<OpSpec>> = vec![vec![(0, false, 1, 1)], vec![(0, false, 0, 2)], vec![]];
    let mut dump = job(3, &[world(3)], &ops);
    super::blocked_in(&mut dump, 0, "MPI_Recv");
    super::blocked_in(&mut dump, 1, "MPI_Recv");
    if let Section::Ok { value } = &mut dump.processes[2].communicators {
        value.list[0].sends = Section::Error {
            message: "the DLL failed".into(),
        };
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock());
    assert!(!a.cannot_tell());
    let words = a.words();
    assert!(
        words.contains("not judged: rank 2 (sends not available: the DLL failed;"),
        "{words}"
    );
    assert!(
        words.ends_with("deadlocked: ranks 0-1 in 1 cycle\n"),
        "{words}"
    );
}

#[test]
fn a_queue_cut_short_or_a_rank_not_dumped_is_not_judged() {
    let ops: Vec<Vec<OpSpec>> = vec![vec![], vec![], vec![]];
    let mut dump = job(3, &[world(3)], &ops);
    if let Section::Ok { value } = &mut dump.processes[1].communicators {
        if let Section::Ok { value } = &mut value.list[0].receives {
            value.truncated = Some("list cut: read budget spent".into());
        }
    }
    let gone = dump.processes.remove(2);
    dump.failures.push(RankFailure {
        rank: 2,
        pid: gone.pid,
        host: "node2".into(),
        message: "no collector called back".into(),
        exit_code: 14,
    });
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.cannot_tell());
    assert_eq!(a.unjudged_ranks(), RankSet::parse("1-2").unwrap());
    let words = a.words();
    assert!(
        words.contains("not judged: rank 1 (receives cut short: list cut: read budget spent;"),
        "{words}"
    );
    assert!(
        words.contains("not judged: rank 2 (not dumped: no collector called back;"),
        "{words}"
    );
    assert!(
        words.contains(
            "cannot tell: ranks 1-2 not judged; no cycle of waits among the 1 rank that was"
        ),
        "{words}"
    );
}

#[test]
fn a_rank_left_out_of_the_processes_named_is_cannot_tell() {
    // World has 3 ranks; only 0 and 1 were named. 1 waits for 0, 0 waits
    // for 2, whose waits nobody read: it may close a cycle.
    let ops = vec![vec![(0, false, 2, 42)], vec![(0, false, 0, 42)]];
    let dump = job(2, &[world(3)], &ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock());
    assert!(a.cannot_tell(), "{}", a.words());
    assert_eq!(a.unjudged_ranks(), RankSet::parse("2").unwrap());
    let words = a.words();
    assert!(!words.contains("no deadlock"), "{words}");
    assert!(
        words.contains("not judged: rank 2 (not dumped: not among the processes read"),
        "{words}"
    );
    assert!(
        words.contains("cannot tell: rank 2 not judged; no cycle of waits among the 2 ranks"),
        "{words}"
    );
    // Every member named: judged as before.
    let ops = vec![vec![(0, false, 2, 42)], vec![(0, false, 0, 42)], vec![]];
    let dump = job(3, &[world(3)], &ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.cannot_tell(), "{}", a.words());
    assert!(a.words().contains("no deadlock"), "{}", a.words());
}
