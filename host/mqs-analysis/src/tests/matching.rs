//! Waits from what each rank is blocked in, the matching rule of sends
//! and receives across ranks, and ranks stopped before mqs came.

use mqs_abi::{OpClass, OpStatus};
use mqs_core::interface::OsState;
use mqs_core::model::JobDump;

use super::calls::{in_call, in_call_with};
use super::transit::arrived;
use super::{blocked_in, job, job_of, op, world, Analysis, Job, OpSpec, Placed, RankSet};
use crate::global::Peer;
use crate::waitfor::{Fate, Half, Matcher};

/// SIGSTOP on Linux.
const SIGSTOP: i32 = 19;

/// `(comm, class, peer, tag, length, status)` of one operation.
fn placed(class: OpClass, peer: i64, tag: i64, length: i64, status: OpStatus) -> Placed {
    let mut o = op(peer, tag, 0x5000);
    o.desired_length = length;
    o.status = status;
    Placed {
        comm: 0,
        class,
        op: o,
    }
}

/// The fate of rank 0's send to rank 1 (tag 5, 400,000 bytes) against
/// rank 1's operations `theirs`.
fn send_fate(theirs: Vec<Placed>) -> Fate {
    let dump = job_of(2, &[world(2)], &[vec![], theirs]);
    let j = Job::new(&dump);
    let send = Half {
        rank: 0,
        comm: 0,
        peer: Peer::Rank(1),
        tag: Some(5),
        length: Some(400_000),
    };
    Matcher::new(&j).send_fate(&j, &send)
}

#[test]
fn a_send_is_taken_when_its_receive_at_the_peer_is_complete_or_matched() {
    use OpClass::PendingReceives as R;
    for status in [OpStatus::Complete, OpStatus::Matched] {
        assert!(
            matches!(
                send_fate(vec![placed(R, 0, 5, 400_000, status)]),
                Fate::Taken(_)
            ),
            "{status:?}"
        );
        // ANY_SOURCE and ANY_TAG receives match it too.
        assert!(matches!(
            send_fate(vec![placed(R, -1, -1, 1 << 20, status)]),
            Fate::Taken(_)
        ));
    }
    // Another tag, another source, or a buffer too small: not its receive.
    assert_eq!(
        send_fate(vec![placed(R, 0, 6, 400_000, OpStatus::Complete)]),
        Fate::Waits
    );
    assert_eq!(
        send_fate(vec![placed(R, 1, 5, 400_000, OpStatus::Complete)]),
        Fate::Waits
    );
    assert_eq!(
        send_fate(vec![placed(R, 0, 5, 64, OpStatus::Complete)]),
        Fate::Waits
    );
}

#[test]
fn a_send_whose_receive_is_posted_is_met_by_progress() {
    let fate = send_fate(vec![placed(
        OpClass::PendingReceives,
        0,
        5,
        400_000,
        OpStatus::Pending,
    )]);
    assert!(matches!(fate, Fate::Progress(_)), "{fate:?}");
}

#[test]
fn a_send_whose_message_is_only_in_transit_at_the_peer_waits_for_it() {
    // The message sits in the peer's transport: the peer must still post
    // a receive for it.
    let mut dump = job_of(2, &[world(2)], &[vec![], vec![]]);
    arrived(&mut dump, 1, 0, 5, "vader fast box");
    let j = Job::new(&dump);
    let send = Half {
        rank: 0,
        comm: 0,
        peer: Peer::Rank(1),
        tag: Some(5),
        length: None,
    };
    assert_eq!(Matcher::new(&j).send_fate(&j, &send), Fate::Waits);
}

#[test]
fn a_send_to_a_peer_whose_receives_were_not_read_cannot_be_decided() {
    let mut dump = job_of(2, &[world(2)], &[vec![], vec![]]);
    if let mqs_core::model::Section::Ok { value } = &mut dump.processes[1].communicators {
        *value.list[0].queue_mut(OpClass::PendingReceives) =
            mqs_core::model::Section::NotAvailable {
                reason: "the netmod matches receives itself".into(),
            };
    }
    let j = Job::new(&dump);
    let send = Half {
        rank: 0,
        comm: 0,
        peer: Peer::Rank(1),
        tag: Some(5),
        length: None,
    };
    assert_eq!(Matcher::new(&j).send_fate(&j, &send), Fate::Unknown);
    // Nor can a receive from a rank not dumped.
    let recv = Half {
        rank: 0,
        comm: 0,
        peer: Peer::Rank(7),
        tag: Some(5),
        length: None,
    };
    assert_eq!(Matcher::new(&j).recv_fate(&j, &recv), Fate::Unknown);
}

#[test]
fn a_receive_whose_send_the_peer_holds_is_met_by_progress() {
    let ops: Vec<Vec<OpSpec>> = vec![vec![], vec![(0, true, 0, 5)], vec![]];
    let dump = job(3, &[world(3)], &ops);
    let j = Job::new(&dump);
    let m = Matcher::new(&j);
    let recv = |peer, tag| Half {
        rank: 0,
        comm: 0,
        peer,
        tag,
        length: None,
    };
    assert!(matches!(
        m.recv_fate(&j, &recv(Peer::Rank(1), Some(5))),
        Fate::Progress(_)
    ));
    assert!(matches!(
        m.recv_fate(&j, &recv(Peer::Any, None)),
        Fate::Progress(_)
    ));
    assert_eq!(m.recv_fate(&j, &recv(Peer::Rank(1), Some(6))), Fate::Waits);
    assert_eq!(m.recv_fate(&j, &recv(Peer::Rank(2), Some(5))), Fate::Waits);
}

/// A 4-rank ring of blocking receives (each from the next), every rank
/// in `MPI_Recv` by its stack with its arguments.
fn ring() -> JobDump {
    let ops: Vec<Vec<OpSpec>> = (0..4i64)
        .map(|r| vec![(0, false, (r + 1) % 4, 10)])
        .collect();
    let mut dump = job(4, &[world(4)], &ops);
    for r in 0..4 {
        in_call(
            &mut dump,
            r,
            "MPI_Recv",
            0,
            &[("source", (r as i64 + 1) % 4), ("tag", 10)],
        );
    }
    dump
}

#[test]
fn a_rank_stopped_by_a_signal_is_named_never_deadlocked() {
    let mut dump = ring();
    dump.processes[2].os_state = Some(OsState::new('T', Some(SIGSTOP)));
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(!a.cannot_tell(), "{words}");
    assert!(a.deadlocked.is_empty());
    assert!(
        words.contains(
            "stopped: rank 2 (pid 1002) is stopped by a signal (SIGSTOP), not by mqs: the ranks \
             waiting for it go on when it resumes (kill -CONT 1002)\n"
        ),
        "{words}"
    );
    assert!(
        words.contains(
            "chain: rank 3 waits for rank 0 (recv tag 10 on MPI_COMM_WORLD), rank 0 waits for \
             rank 1 (recv tag 10 on MPI_COMM_WORLD), rank 1 waits for rank 2 (recv tag 10 on \
             MPI_COMM_WORLD); rank 2 (pid 1002) is stopped by a signal (SIGSTOP)"
        ),
        "{words}"
    );
    assert!(
        words.ends_with(
            "no deadlock: no cycle of waits among 4 ranks (4 waiting; rank 2 stopped, not by \
             mqs: the others go on when it is let go)\n"
        ),
        "{words}"
    );
    // Held by a debugger: the same.
    let mut dump = ring();
    dump.processes[1].held_by = Some(mqs_core::interface::HeldBy {
        pid: 77,
        name: "gdb".into(),
        for_debugger: None,
    });
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock(), "{}", a.words());
    assert!(
        a.words()
            .contains("rank 1 (pid 1001) is held stopped by gdb (pid 77), not by mqs"),
        "{}",
        a.words()
    );
    // A rank merely sleeping is no excuse: the ring is a deadlock.
    let mut dump = ring();
    dump.processes[2].os_state = Some(OsState::new('S', None));
    let j = Job::new(&dump);
    assert!(Analysis::new(&j).has_deadlock());
}

/// The halo exchange of issue 38: each rank posted `MPI_Irecv` from its
/// left neighbour and is in `MPI_Send` (rendezvous) to its right one.
/// Rank 2 was stopped by a signal inside its `MPI_Send`, whose receive at
/// rank 3 is already complete, and its own receive is met by a message in
/// its transport. Nobody is deadlocked: rank 2 waits for nobody, and the
/// others wait for it.
#[test]
fn a_stopped_rank_in_a_halo_exchange_is_the_one_waited_for() {
    let n = 4usize;
    let big = 400_000;
    let mut ops: Vec<Vec<Placed>> = Vec::new();
    for r in 0..n {
        let left = (r + n - 1) % n;
        let right = (r + 1) % n;
        let recv_status = if r == 3 {
            OpStatus::Complete
        } else {
            OpStatus::Pending
        };
        ops.push(vec![
            placed(OpClass::PendingReceives, left as i64, 1, big, recv_status),
            placed(
                OpClass::PendingSends,
                right as i64,
                1,
                big,
                OpStatus::Pending,
            ),
        ]);
    }
    // Rank 2's send to 3 went through; rank 2's receive from 1 is met by
    // the message in its fast box.
    let mut dump = job_of(n, &[world(n as i64)], &ops);
    arrived(&mut dump, 2, 1, 1, "vader fast box");
    for r in 0..n {
        in_call(
            &mut dump,
            r,
            "MPI_Send",
            0,
            &[("dest", ((r + 1) % n) as i64), ("tag", 1)],
        );
    }
    dump.processes[2].os_state = Some(OsState::new('T', Some(SIGSTOP)));
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(words.contains("stopped: rank 2 (pid 1002)"), "{words}");
    assert!(
        words.contains(
            "taken: rank 2's send tag 1 on MPI_COMM_WORLD to rank 3: its receive there is \
             complete: not a wait"
        ),
        "{words}"
    );
    // Rank 1's send to 2 is met once rank 2 runs: rank 1 waits for it.
    assert!(
        words.contains("rank 1 waits for rank 2 (send tag 1 on MPI_COMM_WORLD"),
        "{words}"
    );
    assert!(words.contains("the chain waits for rank 2"), "{words}");
}

/// The MPICH ch4 case of issue 38: rank 1 is blocked in `MPI_Send` to rank
/// 0, which spins outside MPI; it also has nonblocking receives pending
/// from rank 2. It waits for rank 0, not for rank 2.
#[test]
fn a_blocked_send_is_the_wait_not_the_pending_nonblocking_receives() {
    let ops: Vec<Vec<OpSpec>> = vec![vec![], vec![(0, false, 2, 3), (0, false, 2, 4)], vec![]];
    let mut dump = job(3, &[world(3)], &ops);
    // ch4 lists no sends.
    for p in &mut dump.processes {
        if let mqs_core::model::Section::Ok { value } = &mut p.communicators {
            value.list[0].sends = mqs_core::model::Section::NotAvailable {
                reason: "the netmod keeps them".into(),
            };
        }
    }
    in_call(&mut dump, 1, "MPI_Send", 0, &[("dest", 0), ("tag", 9)]);
    let p = &mut dump.processes[0];
    p.stacks = Some(mqs_core::model::Section::Ok {
        value: mqs_core::model::ThreadList {
            list: vec![super::differing::stack(
                p.pid,
                &["_start", "main", "spin"],
                0x1000,
            )],
        },
    });
    blocked_in(&mut dump, 2, "MPI_Barrier");
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    let rank1: Vec<_> = a.waits.iter().filter(|w| w.rank == 1).collect();
    assert_eq!(rank1.len(), 1, "{words}");
    assert_eq!(rank1[0].on, Some(RankSet::parse("0").unwrap()));
    assert!(
        words.contains(
            "chain: rank 1 waits for rank 0 (send tag 9 on MPI_COMM_WORLD, from its stack: \
             MPI_Send"
        ),
        "{words}"
    );
    assert!(!words.contains("rank 1 waits for rank 2"), "{words}");
}

#[test]
fn waitall_needs_every_request_and_waitany_one() {
    // Rank 0 waits on receives from 1 (which is idle) and from 2, which
    // waits for 0: in MPI_Waitall, rank 0 and 2 are deadlocked; in
    // MPI_Waitany, rank 0 may return through rank 1's message.
    let ops: Vec<Vec<OpSpec>> = vec![
        vec![(0, false, 1, 40), (0, false, 2, 41)],
        vec![],
        vec![(0, false, 0, 42)],
    ];
    for (entry, deadlock) in [("MPI_Waitall", true), ("MPI_Waitany", false)] {
        let mut dump = job(3, &[world(3)], &ops);
        if let mqs_core::model::Section::Ok { value } = &mut dump.processes[0].communicators {
            if let mqs_core::model::Section::Ok { value } = &mut value.list[0].receives {
                for (op, addr) in value.operations.iter_mut().zip([0xa0u64, 0xb0]) {
                    op.extra_text = vec![mqs_abi::request_line("receive", addr)].into();
                }
            }
        }
        in_call_with(&mut dump, 0, entry, None, &[("count", 2)], &[0xa0, 0xb0]);
        in_call(&mut dump, 2, "MPI_Recv", 0, &[("source", 0), ("tag", 42)]);
        let j = Job::new(&dump);
        let a = Analysis::new(&j);
        assert_eq!(a.has_deadlock(), deadlock, "{entry}: {}", a.words());
    }
}

#[test]
fn a_watch_does_not_count_a_stopped_rank_as_stuck() {
    // Ranks 0-2 wait in a chain for rank 3, outside MPI in both snapshots:
    // a watch reports that chain, unless rank 3 is stopped by a signal.
    let ops: Vec<Vec<OpSpec>> = (0..4i64)
        .map(|r| {
            if r < 3 {
                vec![(0, false, r + 1, 10)]
            } else {
                vec![]
            }
        })
        .collect();
    let mut dump = job(4, &[world(4)], &ops);
    for r in 0..3 {
        in_call(
            &mut dump,
            r,
            "MPI_Recv",
            0,
            &[("source", r as i64 + 1), ("tag", 10)],
        );
    }
    let p = &mut dump.processes[3];
    p.stacks = Some(mqs_core::model::Section::Ok {
        value: mqs_core::model::ThreadList {
            list: vec![super::differing::stack(
                p.pid,
                &["_start", "main", "compute"],
                0x1000,
            )],
        },
    });
    assert!(crate::confirm::persistent_finding(&dump, &dump).is_some());
    dump.processes[3].os_state = Some(OsState::new('T', Some(SIGSTOP)));
    assert_eq!(crate::confirm::persistent_finding(&dump, &dump), None);
    // Its DOT names it stopped, in orange.
    let j = Job::new(&dump);
    let graph = crate::view::dot::dot(&Analysis::new(&j));
    assert!(
        graph.contains(
            "r3 [label=\"rank 3\\nstopped by a signal (SIGSTOP)\\nnot inside MPI (in _start > \
             main > compute)\", color=orange"
        ),
        "{graph}"
    );
    // The job view says so first.
    let view = crate::view::job_view(&dump, &crate::view::ViewOptions::default());
    assert!(
        view.contains(
            "\nrank 3 (pid 1003) is stopped by a signal (SIGSTOP), not by mqs: the ranks waiting \
             for it go on when it resumes (kill -CONT 1003)\n"
        ),
        "{view}"
    );
}

/// A halo exchange over TCP with rank 2 stopped while it sends its
/// rendezvous message to rank 3: rank 3's receive is matched, none of the
/// data has come, and only rank 2 can send it. Rank 3 waits for rank 2;
/// ranks 0 and 1 wait on their left neighbours, so the chain ends at the
/// stopped rank, and nothing is a deadlock.
#[test]
fn a_receive_matched_from_a_stopped_rank_waits_for_it() {
    let n = 4usize;
    let big = 400_000;
    let mut ops: Vec<Vec<Placed>> = Vec::new();
    for r in 0..n {
        let left = (r + n - 1) % n;
        let status = if r == 3 {
            OpStatus::Matched
        } else {
            OpStatus::Pending
        };
        let mut recv = placed(OpClass::PendingReceives, left as i64, 2, big, status);
        recv.op.actual_global_rank = left as i64;
        let mut mine = vec![recv];
        if r == 2 {
            mine.push(placed(OpClass::PendingSends, 3, 2, big, OpStatus::Pending));
        }
        ops.push(mine);
    }
    // Ranks 0, 1 and 3 in MPI_Wait, rank 2 stopped.
    let dump_of = |ops: &[Vec<Placed>]| {
        let mut dump = job_of(n, &[world(n as i64)], ops);
        for r in [0, 1, 3] {
            blocked_in(&mut dump, r, "MPI_Wait");
        }
        dump.processes[2].os_state = Some(OsState::new('T', Some(SIGSTOP)));
        dump
    };
    let dump = dump_of(&ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(
        words.contains(
            "rank 3 waits for rank 2 (recv tag 2 on MPI_COMM_WORLD; matched, its data still to \
             come as the peer's MPI runs)"
        ),
        "{words}"
    );
    assert!(words.contains("the chain waits for rank 2"), "{words}");
    assert!(!words.contains("rank 3 has nothing pending"), "{words}");

    // The same receive complete: rank 3 waits on nothing, and the chain
    // ends there.
    let mut done = ops.clone();
    done[3][0].op.status = OpStatus::Complete;
    let dump = dump_of(&done);
    let j = Job::new(&dump);
    let words = Analysis::new(&j).words();
    assert!(words.contains("rank 3 has nothing pending"), "{words}");
}

/// Rank 0 receives from rank 1 (listed); rank 1 is in `MPI_Wait` with
/// nothing listed; rank 2 is in `MPI_Send` to rank 1, which its queue
/// does not list (under way in the transport, as MPICH's large messages
/// are once matched). `stopped`: rank 2 stopped by a signal mid-send.
fn waiting_for_a_send_under_way(stopped: bool) -> JobDump {
    let mut dump = job(3, &[world(3)], &[vec![(0, false, 1, 1)], vec![], vec![]]);
    in_call(&mut dump, 0, "MPI_Recv", 0, &[("source", 1), ("tag", 1)]);
    in_call_with(&mut dump, 1, "MPI_Wait", None, &[], &[0x77]);
    in_call(&mut dump, 2, "MPI_Send", 0, &[("dest", 1), ("tag", 2)]);
    if stopped {
        dump.processes[2].os_state = Some(OsState::new('T', Some(SIGSTOP)));
    }
    dump
}

#[test]
fn a_rank_in_wait_with_nothing_listed_waits_for_a_stopped_rank_sending_to_it() {
    let dump = waiting_for_a_send_under_way(true);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(
        words.contains(
            "chain: rank 0 waits for rank 1 (recv tag 1 on MPI_COMM_WORLD), rank 1 waits for \
             rank 2 (the message rank 2's stack is sending it (MPI_Send, tag 2 on \
             MPI_COMM_WORLD), which neither rank's queues list; its other half is there, so \
             only the peer's progress is missing); rank 2 (pid 1002) is stopped by a signal \
             (SIGSTOP)"
        ),
        "{words}"
    );
    assert!(words.contains("the chain waits for rank 2"), "{words}");
    // The DOT graph draws that edge too.
    let dot = crate::view::dot::dot(&a);
    assert!(dot.contains("r1 -> r2"), "{dot}");
}

#[test]
fn a_send_under_way_to_a_rank_in_wait_is_no_deadlock_while_its_sender_runs() {
    // Rank 2's send waits for rank 1, and rank 1 for rank 2's message: its
    // MPI moves the message on, so neither is deadlocked, and the chain
    // still ends at rank 1, which is inside MPI.
    let dump = waiting_for_a_send_under_way(false);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(a.maybe.is_empty(), "{words}");
    assert!(!words.contains("possible deadlock"), "{words}");
}
