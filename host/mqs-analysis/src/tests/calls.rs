//! Waits from the stacks: the blocking call a rank's main thread is in,
//! its arguments read from its frame, as one more source of waits beside
//! the DLL's queues.

use mqs_abi::OpClass;
use mqs_core::model::{CallArgs, FrameComm, JobDump, Section, ThreadList};

use super::differing::stack;
use super::{job, world, Analysis, Job, OpSpec};
use crate::view::dot::dot;

/// Rank `r`'s main thread in `entry` (outermost MPI frame), its `comm`
/// argument the communicator with id `comm`, its integer arguments
/// `ints`, its requests `requests`.
pub(super) fn in_call(dump: &mut JobDump, r: usize, entry: &str, comm: u64, ints: &[(&str, i64)]) {
    in_call_with(dump, r, entry, Some(comm), ints, &[]);
}

pub(super) fn in_call_with(
    dump: &mut JobDump,
    r: usize,
    entry: &str,
    comm: Option<u64>,
    ints: &[(&str, i64)],
    requests: &[u64],
) {
    let p = &mut dump.processes[r];
    let mut thread = stack(
        p.pid,
        &["_start", "main", entry, "progress", "poll"],
        0x1000,
    );
    let frame = thread
        .frames
        .iter_mut()
        .find(|f| f.function.as_deref() == Some(entry))
        .expect("the call's frame");
    frame.comm = comm.map(|id| FrameComm {
        unique_id: id,
        address: 0x9000 + id,
    });
    frame.call = Some(CallArgs {
        mpi: "openmpi".into(),
        ints: ints.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
        requests: requests.to_vec(),
    });
    p.stacks = Some(Section::Ok {
        value: ThreadList { list: vec![thread] },
    });
}

/// Rank `r`'s receive queues: not listed by the DLL.
fn blind(dump: &mut JobDump, r: usize) {
    if let Section::Ok { value } = &mut dump.processes[r].communicators {
        for c in &mut value.list {
            *c.queue_mut(OpClass::PendingReceives) = Section::NotAvailable {
                reason: "the netmod matches receives itself".into(),
            };
        }
    }
}

#[test]
fn a_ring_the_dll_cannot_list_is_found_from_the_stacks() {
    let mut dump = job(3, &[world(3)], &[vec![], vec![], vec![]]);
    for r in 0..3 {
        blind(&mut dump, r);
        in_call(
            &mut dump,
            r,
            "MPI_Recv",
            0,
            &[("source", (r as i64 + 1) % 3), ("tag", 10)],
        );
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock(), "{}", a.words());
    assert!(a.unjudged.is_empty());
    assert_eq!(
        a.words(),
        "deadlock: rank 0 waits for rank 1 (recv tag 10 on MPI_COMM_WORLD, from its stack: \
         MPI_Recv), rank 1 waits for rank 2 (recv tag 10 on MPI_COMM_WORLD, from its stack: \
         MPI_Recv), rank 2 waits for rank 0 (recv tag 10 on MPI_COMM_WORLD, from its stack: \
         MPI_Recv)\ndeadlocked: ranks 0-2 in 1 cycle\n"
    );
}

#[test]
fn a_call_the_queue_lists_is_one_wait_in_the_queues_words() {
    let ops: Vec<Vec<OpSpec>> = vec![vec![(0, false, 1, 10)], vec![(0, false, 0, 11)]];
    let mut dump = job(2, &[world(2)], &ops);
    in_call(&mut dump, 0, "MPI_Recv", 0, &[("source", 1), ("tag", 10)]);
    super::blocked_in(&mut dump, 1, "MPI_Recv");
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert_eq!(a.waits.len(), 2, "{:?}", a.waits);
    assert!(a.waits.iter().any(|w| w.rank == 0 && w.from_stack));
    let words = a.words();
    assert!(
        words.starts_with(
            "deadlock: rank 0 waits for rank 1 (recv tag 10 on MPI_COMM_WORLD), rank 1 waits \
             for rank 0 (recv tag 11 on MPI_COMM_WORLD)\n"
        ),
        "{words}"
    );
    assert!(!words.contains("disagree"), "{words}");
}

#[test]
fn a_call_its_queue_does_not_list_is_said_and_still_waited_on() {
    // Rank 0's receive queue was read and holds nothing; its stack is in
    // MPI_Recv from rank 1 with ANY_TAG (-1).
    let mut dump = job(2, &[world(2)], &[vec![], vec![(0, false, 0, 11)]]);
    in_call(&mut dump, 0, "MPI_Recv", 0, &[("source", 1), ("tag", -1)]);
    super::blocked_in(&mut dump, 1, "MPI_Recv");
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(
        words.contains(
            "stack and queues disagree: rank 0 is in MPI_Recv from rank 1 any tag on \
             MPI_COMM_WORLD, which its receive queue does not list\n"
        ),
        "{words}"
    );
    assert!(a.has_deadlock(), "{words}");
}

#[test]
fn any_source_and_sends_and_proc_null_from_the_stack() {
    // Rank 0 receives from ANY_SOURCE (-1 in Open MPI), rank 1 sends to
    // rank 2, rank 2 sends to MPI_PROC_NULL (-2): it moves.
    let mut dump = job(3, &[world(3)], &[vec![], vec![], vec![]]);
    for r in 0..3 {
        blind(&mut dump, r);
        if let Section::Ok { value } = &mut dump.processes[r].communicators {
            value.list[0].sends = Section::NotAvailable {
                reason: "test".into(),
            };
        }
    }
    in_call(&mut dump, 0, "MPI_Recv", 0, &[("source", -1), ("tag", 5)]);
    in_call(&mut dump, 1, "MPI_Ssend", 0, &[("dest", 2), ("tag", 6)]);
    in_call(&mut dump, 2, "MPI_Send", 0, &[("dest", -2), ("tag", 7)]);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock(), "{}", a.words());
    assert!(!a.cannot_tell(), "{}", a.words());
    let words = a.words();
    let send = a
        .waits
        .iter()
        .position(|w| w.rank == 1)
        .expect("rank 1's wait");
    assert_eq!(
        a.wait_words(send, None),
        "send tag 6 on MPI_COMM_WORLD, from its stack: MPI_Ssend"
    );
    assert_eq!(
        a.waits[send].on.as_ref().map(|on| on.labelled()),
        Some("rank 2".into())
    );
    assert!(
        words.contains("rank 2 is in MPI_Send, which returns by itself"),
        "{words}"
    );
    assert!(words.contains("no deadlock"), "{words}");
    let graph = dot(&a);
    assert!(
        graph.contains("label=\"recv (OR-wait) (stack)\", color=blue"),
        "{graph}"
    );
    assert!(
        graph.contains(
            "r1 -> r2 [style=dashed, arrowhead=empty, label=\"send MPI_COMM_WORLD tag 6 \
             (stack)\", color=blue, fontcolor=blue]"
        ),
        "{graph}"
    );
}

#[test]
fn a_polling_call_moves_and_an_unlisted_waitall_cannot_tell() {
    // Rank 0 in MPI_Recv from 1; rank 1 polls in MPI_Iprobe: a chain, no
    // deadlock, although neither's queues were read.
    let mut dump = job(3, &[world(3)], &[vec![], vec![], vec![]]);
    for r in 0..3 {
        blind(&mut dump, r);
    }
    in_call(&mut dump, 0, "MPI_Recv", 0, &[("source", 1), ("tag", 20)]);
    in_call(
        &mut dump,
        1,
        "MPI_Iprobe",
        0,
        &[("source", -1), ("tag", 99)],
    );
    // Rank 2 waits in MPI_Waitall on requests nobody lists.
    in_call_with(
        &mut dump,
        2,
        "MPI_Waitall",
        None,
        &[("count", 2)],
        &[0xa0, 0xb0],
    );
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(
        words.contains(
            "rank 1 is in MPI_Iprobe, which returns by itself: it waits on nothing (it spins, \
             if it calls MPI_Iprobe in a loop): the chain waits for rank 1"
        ),
        "{words}"
    );
    assert!(
        words.contains("in MPI_Waitall on 2 requests the DLL does not list"),
        "{words}"
    );
    assert!(a.cannot_tell(), "{words}");
    assert_eq!(a.unjudged_ranks().labelled(), "rank 2");
}

#[test]
fn waitall_requests_are_matched_to_the_operations_by_address() {
    // Rank 0 waits in MPI_Waitall on its two receives (from 1 and 2); the
    // DLL names each request; rank 2 waits for rank 0.
    let ops: Vec<Vec<OpSpec>> = vec![
        vec![(0, false, 1, 40), (0, false, 2, 41)],
        vec![],
        vec![(0, false, 0, 42)],
    ];
    let mut dump = job(3, &[world(3)], &ops);
    if let Section::Ok { value } = &mut dump.processes[0].communicators {
        if let Section::Ok { value } = &mut value.list[0].receives {
            for (op, addr) in value.operations.iter_mut().zip([0xa0u64, 0xb0]) {
                op.extra_text = vec![mqs_abi::request_line("receive", addr)].into();
            }
        }
    }
    in_call_with(
        &mut dump,
        0,
        "MPI_Waitall",
        None,
        &[("count", 2)],
        &[0xa0, 0xb0],
    );
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    // Both receives are waits the stack names too; none is added.
    assert_eq!(a.waits.iter().filter(|w| w.rank == 0).count(), 2);
    assert!(a.waits.iter().filter(|w| w.rank == 0).all(|w| w.from_stack));
    assert!(a.calls[0].disagrees.is_none());
}

#[test]
fn a_blocking_call_without_its_arguments_says_which_library_lacks_them() {
    let mut dump = job(2, &[world(2)], &[vec![], vec![]]);
    blind(&mut dump, 0);
    in_call(&mut dump, 0, "MPI_Recv", 0, &[]);
    if let Some(Section::Ok { value }) = &mut dump.processes[0].stacks {
        for f in &mut value.list[0].frames {
            f.call = None;
        }
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.cannot_tell());
    let words = a.words();
    assert!(
        words.contains(
            "its stack is in MPI_Recv, whose arguments libmpi.so has no debug information for \
             here"
        ),
        "{words}"
    );
}

/// Under Open MPI's pml ucx the DLL lists receives but not sends, and a
/// blocking MPI_Recv's source and tag are often gone from its frame: the
/// receive the DLL marks as the blocking call's is the call's wait.
#[test]
fn a_receive_marked_blocking_stands_for_a_call_without_its_arguments() {
    let ops: Vec<Vec<OpSpec>> = (0..3).map(|r| vec![(0, false, (r + 2) % 3, 42)]).collect();
    let mut dump = job(3, &[world(3)], &ops);
    for r in 0..3 {
        if let Section::Ok { value } = &mut dump.processes[r].communicators {
            for c in &mut value.list {
                *c.queue_mut(OpClass::PendingSends) = Section::NotAvailable {
                    reason: "sends completed locally under UCX are not listed".into(),
                };
                if let Section::Ok { value } = c.queue_mut(OpClass::PendingReceives) {
                    for op in &mut value.operations {
                        let line = format!(
                            "{}UCP request on the stack at 0x7ff0",
                            mqs_abi::BLOCKING_RECEIVE
                        );
                        op.extra_text = vec![line].into();
                    }
                }
            }
        }
        in_call(&mut dump, r, "MPI_Recv", 0, &[("count", 1)]);
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.unjudged.is_empty(), "{}", a.words());
    assert!(a.has_deadlock(), "{}", a.words());
    assert!(
        a.words().ends_with("deadlocked: ranks 0-2 in 1 cycle\n"),
        "{}",
        a.words()
    );

    // Without the mark, their stacks still say they are in MPI_Recv: each
    // waits on its one pending receive (their sends, unknown, do not
    // matter), and whether a peer holds a matching send cannot be decided.
    let mut unmarked = dump.clone();
    for p in &mut unmarked.processes {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                if let Section::Ok { value } = c.queue_mut(OpClass::PendingReceives) {
                    for op in &mut value.operations {
                        op.extra_text = Default::default();
                    }
                }
            }
        }
    }
    let j = Job::new(&unmarked);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock(), "{}", a.words());
    assert!(
        a.words().contains(
            "  undecided: the sends of ranks 0-2 were not read, so whether one of them is on its \
             way is not known\n"
        ),
        "{}",
        a.words()
    );
    // With no stack either, nothing says what they are blocked in.
    for p in &mut unmarked.processes {
        p.stacks = None;
    }
    let j = Job::new(&unmarked);
    let a = Analysis::new(&j);
    assert!(a.cannot_tell(), "{}", a.words());
}
