//! The analyses on hand-made dumps and on stacks recorded from a real
//! `barrier_mismatch` job (Open MPI 4.1.4 -g; addresses cut to their page
//! offset, paths to their file names). [`differing`]: dumps whose ranks
//! differ in one field at a time, for every analysis that compares them.

use mqs_abi::{OpClass, OpStatus, PendingOperation};

use super::confirm::persistent;
use super::{tree, Analysis, Job, RankSet};
use crate::view::{self, ViewOptions};
use mqs_core::model::{
    CommunicatorDump, CommunicatorList, DllInfo, DumpStats, JobDump, ProcessDump, Queue, Section,
    ThreadList, ThreadStack, SCHEMA_VERSION,
};

mod calls;
mod cannot_tell;
mod differing;
mod matching;
mod relative;
mod runs;
mod transit;

const ANY: i64 = -1;

/// (communicator index, is-send, peer local rank or ANY, tag)
type OpSpec = (usize, bool, i64, i64);

fn op(peer: i64, tag: i64, buffer: u64) -> PendingOperation {
    PendingOperation {
        status: OpStatus::Pending,
        desired_local_rank: peer,
        desired_global_rank: -1,
        desired_tag: Some(tag),
        desired_length: 4,
        system_buffer: false,
        buffer,
        actual_local_rank: 0,
        actual_global_rank: 0,
        actual_tag: 0,
        actual_length: 0,
        extra_text: Default::default(),
    }
}

fn queue(ops: Vec<PendingOperation>) -> Section<Queue> {
    Section::Ok {
        value: Queue {
            operations: ops,
            truncated: None,
            fixed_in_run: Vec::new(),
        },
    }
}

/// One operation of a rank, where it is listed: the communicator (index
/// into the job's list) and the queue.
#[derive(Debug, Clone)]
struct Placed {
    comm: usize,
    class: OpClass,
    op: PendingOperation,
}

/// A job of `n` ranks; communicators as (name, group), each listed by the
/// ranks its group holds, with every queue readable; each rank's ops.
fn job_of(n: usize, comms: &[(&str, Vec<i64>)], ops: &[Vec<Placed>]) -> JobDump {
    let processes = (0..n)
        .map(|r| {
            let list = comms
                .iter()
                .enumerate()
                .filter_map(|(ci, (name, group))| {
                    let local_rank = group.iter().position(|g| *g == r as i64)?;
                    let mine = |class: OpClass| {
                        queue(
                            ops[r]
                                .iter()
                                .filter(|o| o.comm == ci && o.class == class)
                                .map(|o| o.op.clone())
                                .collect(),
                        )
                    };
                    Some(CommunicatorDump {
                        unique_id: ci as u64,
                        name: (*name).into(),
                        size: group.len() as i64,
                        local_rank: local_rank as i64,
                        group: Some(group.clone()),
                        cartesian: None,
                        sends: mine(OpClass::PendingSends),
                        receives: mine(OpClass::PendingReceives),
                        unexpected: mine(OpClass::UnexpectedMessages),
                    })
                })
                .collect();
            ProcessDump {
                pid: 1000 + r as i32,
                global_rank: r as i32,
                host: None,
                spawned: None,
                executable: "/bin/app".into(),
                dll: DllInfo::new("dll.so".into(), "test".into(), 2),
                communicators: Section::Ok {
                    value: CommunicatorList { list },
                },
                new_processes: None,
                dll_output: vec![],
                held_by: None,
                os_state: None,
                spawn_breakpoint: None,
                type_packs: vec![],
                unreadable: vec![],
                stacks: None,
                stats: DumpStats::default(),
                run_len: 1,
                run_shifts_peers: false,
            }
        })
        .collect();
    JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: None,
        processes,
        failures: vec![],
    }
}

/// A job of `n` ranks; communicators as (name, group); each rank's ops;
/// no unexpected queue readable (as Open MPI's DLL on a release build).
fn job(n: usize, comms: &[(&str, Vec<i64>)], ops: &[Vec<OpSpec>]) -> JobDump {
    let placed: Vec<Vec<Placed>> = ops
        .iter()
        .enumerate()
        .map(|(r, ops)| {
            ops.iter()
                .map(|&(comm, send, peer, tag)| Placed {
                    comm,
                    class: if send {
                        OpClass::PendingSends
                    } else {
                        OpClass::PendingReceives
                    },
                    op: op(peer, tag, 0x1000 + r as u64),
                })
                .collect()
        })
        .collect();
    let mut dump = job_of(n, comms, &placed);
    for p in &mut dump.processes {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                c.unexpected = Section::NotAvailable {
                    reason: "test".into(),
                };
            }
        }
    }
    dump
}

fn world(n: i64) -> (&'static str, Vec<i64>) {
    ("MPI_COMM_WORLD", (0..n).collect())
}

/// Every process's main thread in `entry`, as [`blocked_in`].
fn all_blocked_in(dump: &mut JobDump, entry: &str) {
    for r in 0..dump.processes.len() {
        blocked_in(dump, r, entry);
    }
}

/// Rank `r`'s main thread in `entry`, its arguments not read (a release
/// build of the MPI): it waits on one of its pending operations of the
/// kinds `entry` waits on.
fn blocked_in(dump: &mut JobDump, r: usize, entry: &str) {
    let p = &mut dump.processes[r];
    p.stacks = Some(Section::Ok {
        value: ThreadList {
            list: vec![differing::stack(
                p.pid,
                &["_start", "main", entry, "progress", "poll"],
                0x1000,
            )],
        },
    });
}

#[test]
fn ring_through_a_reversed_communicator_is_a_deadlock() {
    let n = 4;
    let ring: Vec<i64> = (0..n).rev().collect();
    // World rank r is ring rank n-1-r and receives from ring rank n-2-r.
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| {
            let mut v = vec![(1, false, (2 * n - 2 - r) % n, 10)];
            if r == 0 {
                v.push((0, false, ANY, 11));
            }
            v
        })
        .collect();
    let mut dump = job(n as usize, &[world(n), ("ring", ring)], &ops);
    for r in 0..n as usize {
        blocked_in(&mut dump, r, "MPI_Recv");
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock());
    assert_eq!(a.deadlocked, RankSet::parse("0-3").unwrap());
    let words = a.words();
    assert!(
        words.starts_with(
            "deadlock: rank 0 waits for rank 1 (recv tag 10 on \"ring\"), rank 1 waits for rank 2 \
             (recv tag 10 on \"ring\"), rank 2 waits for rank 3 (recv tag 10 on \"ring\"), rank 3 \
             waits for rank 0 (recv tag 10 on \"ring\")\n"
        ),
        "{words}"
    );
    assert!(
        words.contains("OR-wait (recv from ANY_SOURCE tag 11 on MPI_COMM_WORLD): any of ranks 1-3"),
        "{words}"
    );
}

#[test]
fn a_ring_in_the_queues_alone_is_a_possible_deadlock_never_claimed() {
    // The same ring without stacks: nothing says any rank is blocked in
    // its receive (it may be computing, about to send).
    let n = 4;
    let ops: Vec<Vec<OpSpec>> = (0..n).map(|r| vec![(0, false, (r + 1) % n, 10)]).collect();
    let dump = job(n as usize, &[world(n)], &ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock());
    assert!(a.cannot_tell());
    assert!(a.deadlocked.is_empty());
    assert_eq!(a.maybe, RankSet::parse("0-3").unwrap());
    let words = a.words();
    assert!(
        words.starts_with(
            "possible deadlock: rank 0 waits for rank 1 (recv tag 10 on MPI_COMM_WORLD)"
        ),
        "{words}"
    );
    assert!(
        words.ends_with(
            "cannot tell: ranks 0-3 may be deadlocked, but the cycle rests on waits inferred \
             from the queues alone (ranks 0-3: no stack was read): whether they are blocked in \
             those operations is not known (--stacks shows what each rank is blocked in)\n"
        ),
        "{words}"
    );
    // One rank's stack saying it is in the receive is not enough: the
    // cycle still rests on the others.
    let mut dump = dump;
    blocked_in(&mut dump, 0, "MPI_Recv");
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock() && a.cannot_tell(), "{}", a.words());
    // Every rank's does.
    for r in 1..n as usize {
        blocked_in(&mut dump, r, "MPI_Recv");
    }
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock(), "{}", a.words());
}

#[test]
fn an_or_wait_that_a_free_rank_can_meet_is_no_deadlock() {
    // 0 waits for 1; 1 waits on ANY_SOURCE, which rank 2 (idle) can meet;
    // and 1 waits for 0 specifically too: a cycle 0 -> 1 -> 0 only if
    // the OR-wait is ignored.
    let ops = vec![
        vec![(0, false, 1, 5)],
        vec![(0, false, 0, 6), (0, false, ANY, 7)],
        vec![],
    ];
    let dump = job(3, &[world(3)], &ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock(), "{}", a.words());
    assert!(a.deadlocked.is_empty());
    let words = a.words();
    assert!(words.contains("the chain waits for rank 2"), "{words}");
    assert!(words.contains("no deadlock"), "{words}");
}

#[test]
fn a_pending_send_waits_on_its_destination() {
    // 0 sends to 1 (rendezvous), 1 sends to 0: both wait.
    let ops = vec![vec![(0, true, 1, 1)], vec![(0, true, 0, 2)]];
    let dump = job(2, &[world(2)], &ops);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    assert!(a
        .words()
        .contains("rank 0 waits for rank 1 (send tag 1 on MPI_COMM_WORLD)"));
}

/// The recorded main-thread stacks of barrier_mismatch's four ranks.
fn recorded_stacks() -> Vec<(i64, ThreadStack)> {
    #[derive(serde::Deserialize)]
    struct Recorded {
        rank: i64,
        main: ThreadStack,
    }
    let recorded: Vec<Recorded> =
        serde_json::from_str(include_str!("../testdata/barrier_mismatch_stacks.json")).unwrap();
    recorded.into_iter().map(|r| (r.rank, r.main)).collect()
}

fn barrier_dump() -> JobDump {
    let mut ops = vec![vec![]; 4];
    ops[3].push((0, false, 0, 30));
    let mut dump = job(4, &[world(4)], &ops);
    for (rank, mut main) in recorded_stacks() {
        let p = &mut dump.processes[rank as usize];
        main.tid = p.pid;
        p.stacks = Some(Section::Ok {
            value: ThreadList { list: vec![main] },
        });
    }
    dump
}

#[test]
fn recorded_barrier_mismatch_names_the_missing_rank_and_the_cycle() {
    let dump = barrier_dump();
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(a.has_deadlock(), "{words}");
    assert!(
        words.contains(
            "collective: ranks 0-2 are in MPI_Barrier (communicator unknown (no debug info for \
             the call's arguments), MPI_COMM_WORLD assumed); missing: rank 3 (in MPI_Recv, \
             waiting for rank 0 (recv tag 30 on MPI_COMM_WORLD))"
        ),
        "{words}"
    );
    assert!(
        words.contains(
            "deadlock: rank 0 waits for rank 3 (MPI_Barrier, which rank 3 has not entered), \
             rank 3 waits for rank 0 (recv tag 30 on MPI_COMM_WORLD)"
        ),
        "{words}"
    );
    assert!(
        words.contains("ranks 1-2 deadlocked through the cycle"),
        "{words}"
    );
}

/// Ranks 0-1 in a barrier on "trio" (id 1), rank 2 in one on the world
/// (id 0), as the frames' `comm` arguments say: two collectives, each
/// missing the other's ranks.
#[test]
fn collectives_are_told_apart_by_the_communicator_of_their_frames() {
    let mut ops = vec![vec![]; 4];
    ops[3].push((0, false, 0, 30));
    let mut dump = job(4, &[world(4), ("trio", vec![0, 1, 2, 3])], &ops);
    for (rank, mut main) in recorded_stacks() {
        if rank < 3 {
            let id = if rank < 2 { 1 } else { 0 };
            let barrier = main
                .frames
                .iter_mut()
                .find(|f| f.function.as_deref() == Some("MPI_Barrier"))
                .expect("the recorded stack is in MPI_Barrier");
            barrier.comm = Some(mqs_core::model::FrameComm {
                unique_id: id,
                address: 0x5000 + id,
            });
        }
        let p = &mut dump.processes[rank as usize];
        main.tid = p.pid;
        p.stacks = Some(Section::Ok {
            value: ThreadList { list: vec![main] },
        });
    }
    let j = Job::new(&dump);
    let words = Analysis::new(&j).words();
    assert!(
        words.contains(
            "collective: ranks 0-1 are in MPI_Barrier (\"trio\"); missing: rank 2 (in a \
             different collective, MPI_Barrier on MPI_COMM_WORLD), rank 3 (in MPI_Recv, waiting \
             for rank 0 (recv tag 30 on MPI_COMM_WORLD))"
        ),
        "{words}"
    );
    assert!(
        words.contains(
            "collective: rank 2 is in MPI_Barrier (MPI_COMM_WORLD); missing: rank 0 (in a \
             different collective, MPI_Barrier on \"trio\"), rank 1 (in a different collective, \
             MPI_Barrier on \"trio\"), rank 3"
        ),
        "{words}"
    );
    assert!(!words.contains("assumed"), "{words}");
}

#[test]
fn recorded_stacks_merge_into_one_tree() {
    let dump = barrier_dump();
    let j = Job::new(&dump);
    let roots = tree::merge(&j, &j.all_ranks(), false);
    let mut text = String::new();
    tree::render(&roots, 0, &mut text);
    assert_eq!(
        text,
        "ranks 0-3: main\n\
         \x20 ranks 0-2: MPI_Barrier > ompi_coll_base_barrier_intra_basic_linear\n\
         \x20   rank 0: ompi_request_default_wait_all > sync_wait_st > sched_yield\n\
         \x20   ranks 1-2: mca_pml_ob1_recv > ompi_request_wait_completion > sched_yield\n\
         \x20 rank 3: MPI_Recv > mca_pml_ob1_recv > ompi_request_wait_completion > sched_yield\n"
    );
}

/// The packs the dumps were read through: each line once, its ranks named
/// only when not all ranks say it.
#[test]
fn job_view_names_the_type_packs_once() {
    let mut dump = job(3, &[world(3)], &[vec![], vec![], vec![]]);
    for p in &mut dump.processes {
        p.type_packs = vec!["ob1.so: types from a.json, made for another build".into()];
    }
    dump.processes[2]
        .type_packs
        .push("vader.so: the type pack b.json, made for another build, does not fit".into());
    let text = view::job_view(&dump, &ViewOptions::default());
    assert!(
        text.contains(
            "\nTypes: ob1.so: types from a.json, made for another build\n\
             Types: vader.so: the type pack b.json, made for another build, does not fit on ranks 2\n"
        ),
        "{text}"
    );
    assert_eq!(text.matches("Types: ob1.so").count(), 1, "{text}");
    for p in &mut dump.processes {
        p.type_packs.clear();
    }
    assert!(!view::job_view(&dump, &ViewOptions::default()).contains("Types:"));
}

#[test]
fn job_view_names_the_starter_and_nothing_for_ranks_named_by_pid() {
    let ops = vec![vec![(0, false, 1, 7)], vec![]];
    let mut dump = job(2, &[world(2)], &ops);
    let headline = |dump: &JobDump| {
        let text = view::job_view(dump, &ViewOptions::default());
        text.lines().next().unwrap_or_default().to_string()
    };
    dump.launcher = Some(mqs_core::model::Launcher {
        pid: 41,
        executable: "/opt/mpi/bin/mpiexec.hydra".to_string(),
        note: None,
    });
    assert!(
        headline(&dump).starts_with("job of mpiexec.hydra (pid 41): 2 ranks (0-1)"),
        "{}",
        headline(&dump)
    );
    // `--pid RANK --pid RANK`: no starter was read.
    dump.launcher = Some(mqs_core::model::Launcher {
        pid: 42,
        executable: String::new(),
        note: None,
    });
    assert!(
        headline(&dump).starts_with("2 ranks (0-1), "),
        "{}",
        headline(&dump)
    );
    // A rank of this host that failed has no host to name; one elsewhere has.
    for (host, place) in [("", "(pid 43)"), ("node2", "(pid 43 on node2)")] {
        dump.failures = vec![mqs_core::model::RankFailure {
            rank: 2,
            pid: 43,
            host: host.to_string(),
            message: "gone".to_string(),
            exit_code: 3,
        }];
        let text = view::job_view(&dump, &ViewOptions::default());
        assert!(
            text.contains(&format!("rank 2 {place} not dumped: gone")),
            "{text}"
        );
    }
}

#[test]
fn job_view_merges_equal_ranks_and_leaves_out_empty_parts() {
    let ops = vec![vec![(0, false, 2, 7)], vec![(0, false, 2, 7)], vec![]];
    let dump = job(3, &[world(3), ("idle", vec![0, 1, 2])], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        text,
        "3 ranks (0-2), 1 of 2 communicators with operations; 0 sends, 2 receives, 0 \
         unexpected; nothing pending: 2\n\
         MPI_COMM_WORLD (ranks 0-2):\n\
         \x20 ranks 0-1: recv from rank 2 tag 7, 4 bytes\n\
         unexpected messages not available on ranks 0-2: test\n"
    );
    let all = view::job_view(
        &dump,
        &ViewOptions {
            all: true,
            ..ViewOptions::default()
        },
    );
    assert!(
        all.contains("\"idle\" (ranks 0-2):\n  ranks 0-2: sends: none\n"),
        "{all}"
    );
    let filtered = view::job_view(
        &dump,
        &ViewOptions {
            ranks: Some(RankSet::parse("1").unwrap()),
            ..ViewOptions::default()
        },
    );
    assert!(
        filtered.contains("  rank 1: recv from rank 2 tag 7"),
        "{filtered}"
    );
    assert!(!filtered.contains("ranks 0-1"), "{filtered}");
}

#[test]
fn confirm_keeps_only_what_both_snapshots_have() {
    let mut first = job(
        2,
        &[world(2)],
        &[vec![(0, false, 1, 5)], vec![(0, false, 0, 6)]],
    );
    all_blocked_in(&mut first, "MPI_Recv");
    let mut second = first.clone();
    // Rank 1's receive completed and another, elsewhere, was posted.
    if let Section::Ok { value } = &mut second.processes[1].communicators {
        if let Section::Ok { value: q } = &mut value.list[0].receives {
            q.operations[0].buffer = 0x9999;
        }
    }
    let kept = persistent(&first, &second);
    let j = Job::new(&kept);
    assert_eq!(j.waits().count(), 1);
    let a = Analysis::new(&j);
    assert!(!a.has_deadlock());
    // Each snapshot alone shows the cycle.
    let j2 = Job::new(&second);
    assert!(Analysis::new(&j2).has_deadlock());
    let j1 = Job::new(&first);
    assert!(Analysis::new(&j1).has_deadlock());
}

/// Ranks on two nodes with the same node-local pids (as collectors read
/// them): each is compared with itself in the snapshot before, not with
/// the first rank of that pid, so a ring across the nodes stays a
/// deadlock.
#[test]
fn confirm_tells_ranks_of_equal_pids_apart_by_their_host() {
    let n = 4;
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| vec![(0, false, (r + n - 1) % n, 42)])
        .collect();
    let mut first = job(n as usize, &[world(n)], &ops);
    for (r, p) in first.processes.iter_mut().enumerate() {
        p.pid = 17 + (r as i32 % 2);
        p.host = Some(if r < 2 { "nodea" } else { "nodeb" }.into());
    }
    all_blocked_in(&mut first, "MPI_Recv");
    let second = first.clone();
    let kept = persistent(&first, &second);
    assert_eq!(kept.processes.len(), 4);
    let j = Job::new(&kept);
    assert_eq!(j.waits().count(), 4);
    assert!(Analysis::new(&j).has_deadlock());
}

#[test]
fn dot_marks_the_cycle_and_the_or_wait() {
    let n = 4;
    let ring: Vec<i64> = (0..n).rev().collect();
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| {
            let mut v = vec![(1, false, (2 * n - 2 - r) % n, 10)];
            if r == 0 {
                v.push((0, false, ANY, 11));
            }
            v
        })
        .collect();
    let mut dump = job(n as usize, &[world(n), ("ring", ring)], &ops);
    all_blocked_in(&mut dump, "MPI_Recv");
    let j = Job::new(&dump);
    let dot = view::dot::dot(&Analysis::new(&j));
    assert!(dot.starts_with("digraph waitfor {\n"), "{dot}");
    assert!(dot.ends_with("}\n"), "{dot}");
    assert_eq!(dot.matches("color=red, penwidth").count(), 4, "{dot}");
    assert!(
        dot.contains("r3 -> r0 [style=solid, label=\"recv \\\"ring\\\" tag 10\", color=red"),
        "{dot}"
    );
    assert!(dot.contains("any"), "{dot}");
    assert!(
        dot.contains("shape=diamond, label=\"ANY_SOURCE\\nMPI_COMM_WORLD tag 11\""),
        "{dot}"
    );
    assert_eq!(dot.matches("style=dotted];").count(), 3, "{dot}");
}

#[test]
fn groups_are_rebuilt_from_the_members_when_the_dll_gives_none() {
    // As MPICH's own DLL: no groups, no global ranks; each member's local
    // rank in "ring" says where it sits.
    let n = 4;
    let ring: Vec<i64> = (0..n).rev().collect();
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| vec![(1, false, (2 * n - 2 - r) % n, 10)])
        .collect();
    let mut dump = job(n as usize, &[world(n), ("ring", ring)], &ops);
    for p in &mut dump.processes {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                c.group = None;
            }
        }
    }
    all_blocked_in(&mut dump, "MPI_Recv");
    let j = Job::new(&dump);
    assert_eq!(j.comms[1].group, vec![Some(3), Some(2), Some(1), Some(0)]);
    let a = Analysis::new(&j);
    assert!(a.has_deadlock(), "{}", a.words());
    assert!(
        a.words()
            .contains("rank 3 waits for rank 0 (recv tag 10 on \"ring\")"),
        "{}",
        a.words()
    );
}

/// A queue not available is said per queue, summed over communicators: a
/// rank that lists such operations on another communicator is named apart
/// (the 64-rank halo over TCP: unexpected messages listed on
/// MPI_COMM_WORLD, none said on MPI_COMM_SELF).
#[test]
fn a_queue_not_available_names_apart_the_ranks_that_list_some() {
    let mut unexpected = op(0, 7, 0x2000);
    unexpected.desired_length = 16;
    let ops = vec![
        vec![],
        vec![Placed {
            comm: 0,
            class: OpClass::UnexpectedMessages,
            op: unexpected,
        }],
        vec![],
    ];
    let mut dump = job_of(3, &[world(3), ("self", vec![0, 1, 2])], &ops);
    for (r, p) in dump.processes.iter_mut().enumerate() {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                // Rank 1's world queue lists its message; every other
                // queue is "cannot tell".
                if !(r == 1 && c.unique_id == 0) {
                    c.unexpected = Section::NotAvailable {
                        reason: "no message in the MPI's queues, but tcp not listed".into(),
                    };
                }
            }
        }
    }
    let text = view::job_view(&dump, &ViewOptions::default());
    assert!(
        text.contains(
            "unexpected messages not available on ranks 0,2, and on rank 1 for the \
             communicators they list none on: no message in the MPI's queues, but tcp not \
             listed\n"
        ),
        "{text}"
    );
}
