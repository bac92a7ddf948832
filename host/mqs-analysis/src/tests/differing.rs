//! Ranks, stacks and snapshots that differ in exactly one field, for every
//! analysis that compares or merges them: the job view merges ranks only
//! when everything it shows is equal, the call tree never merges ranks in
//! different frames, a wait-for edge follows the field that makes it, and
//! `--confirm` keeps only the same operation. A comparison that looks at
//! part of an operation fails here on the part it leaves out.

use mqs_abi::{OpClass, OpStatus};

use super::{job_of, op, world, Placed};
use crate::confirm::persistent;
use crate::view::{self, ViewOptions};
use crate::{tree, Analysis, Job};
use mqs_core::model::{Frame, JobDump, Section, ThreadList, ThreadStack};

/// What our DLL writes in `extra_text` for a receive: the request, which
/// is at another address on every rank, and the count and datatype.
fn our_lines(rank: usize) -> mqs_abi::Lines {
    let request = format!("receive request {:#x}", 0x2000 + rank);
    [request.as_str(), "1 x MPI_INT"].into()
}

/// A receive of rank `rank` on communicator `comm` from local rank `peer`,
/// tag `tag`, 4 bytes, pending.
fn recv(rank: usize, comm: usize, peer: i64, tag: i64) -> Placed {
    let mut op = op(peer, tag, 0x1000 + 0x100 * rank as u64);
    op.extra_text = our_lines(rank);
    Placed {
        comm,
        class: OpClass::PendingReceives,
        op,
    }
}

/// The communicators of the job view's cases: the world of 4, "dup" (a
/// copy of it), and two of one name with other members, "half".
fn view_comms() -> Vec<(&'static str, Vec<i64>)> {
    vec![
        world(4),
        ("dup", (0..4).collect()),
        ("half", vec![0, 1]),
        ("half", vec![2, 3]),
    ]
}

/// Ranks 0-2 receive from rank 3 on MPI_COMM_WORLD with tag 7, 4 bytes
/// each (only their buffers and request addresses differ, which the view
/// does not show); rank 3 has nothing pending.
fn three_alike() -> Vec<Vec<Placed>> {
    let mut ops: Vec<Vec<Placed>> = (0..3).map(|r| vec![recv(r, 0, 3, 7)]).collect();
    ops.push(vec![]);
    ops
}

fn job_view(ops: &[Vec<Placed>]) -> String {
    view::job_view(&job_of(4, &view_comms(), ops), &ViewOptions::default())
}

const SUMMARY: &str = "4 ranks (0-3), 1 of 4 communicators with operations; 0 sends, 3 \
                       receives, 0 unexpected; nothing pending: 3\n";
const ALIKE: &str = "  ranks 0,2: recv from rank 3 tag 7, 4 bytes\n";

#[test]
fn the_job_view_merges_ranks_whose_shown_operations_are_equal() {
    assert_eq!(
        job_view(&three_alike()),
        format!(
            "{SUMMARY}MPI_COMM_WORLD (ranks 0-3):\n  ranks 0-2: recv from rank 3 tag 7, 4 bytes\n"
        )
    );
}

/// Rank 1 (between two ranks that agree) differs in one field: it gets a
/// line of its own that shows the difference, and ranks 0 and 2 still
/// merge.
#[test]
fn the_job_view_never_merges_ranks_that_differ_in_one_field() {
    type Change = fn(&mut Placed);
    let world = "MPI_COMM_WORLD (ranks 0-3):\n";
    let cases: [(&str, Change, String); 10] = [
        (
            "peer",
            |p| p.op.desired_local_rank = 2,
            format!("{SUMMARY}{world}{ALIKE}  rank 1: recv from rank 2 tag 7, 4 bytes\n"),
        ),
        (
            "peer (ANY_SOURCE)",
            |p| p.op.desired_local_rank = -1,
            format!("{SUMMARY}{world}{ALIKE}  rank 1: recv from ANY_SOURCE tag 7, 4 bytes\n"),
        ),
        (
            "tag",
            |p| p.op.desired_tag = Some(8),
            format!("{SUMMARY}{world}{ALIKE}  rank 1: recv from rank 3 tag 8, 4 bytes\n"),
        ),
        (
            "tag (ANY_TAG)",
            |p| p.op.desired_tag = None,
            format!("{SUMMARY}{world}{ALIKE}  rank 1: recv from rank 3 any tag, 4 bytes\n"),
        ),
        (
            "length",
            |p| p.op.desired_length = 8,
            format!("{SUMMARY}{world}{ALIKE}  rank 1: recv from rank 3 tag 7, 8 bytes\n"),
        ),
        (
            "status (matched)",
            |p| p.op.status = OpStatus::Matched,
            format!(
                "{}{world}{ALIKE}  rank 1: recv from rank 3 tag 7, 4 bytes (matched)\n",
                SUMMARY.replace("nothing pending: 3", "nothing pending: 1,3")
            ),
        ),
        (
            "status (complete)",
            |p| p.op.status = OpStatus::Complete,
            format!(
                "{}{world}{ALIKE}  rank 1: recv from rank 3 tag 7, 4 bytes (complete)\n",
                SUMMARY.replace("nothing pending: 3", "nothing pending: 1,3")
            ),
        ),
        (
            "queue (sends)",
            |p| p.class = OpClass::PendingSends,
            format!(
                "{}{world}  rank 1: send to rank 3 tag 7, 4 bytes\n{ALIKE}",
                SUMMARY.replace("0 sends, 3 receives", "1 sends, 2 receives")
            ),
        ),
        (
            "queue (unexpected)",
            |p| p.class = OpClass::UnexpectedMessages,
            format!(
                "{}{world}{ALIKE}  rank 1: unexpected from rank 3 tag 7, 4 bytes\n",
                SUMMARY
                    .replace("3 receives, 0 unexpected", "2 receives, 1 unexpected")
                    .replace("nothing pending: 3", "nothing pending: 1,3")
            ),
        ),
        (
            "communicator",
            |p| p.comm = 1,
            format!(
                "{}{world}{ALIKE}\"dup\" (ranks 0-3):\n  rank 1: recv from rank 3 tag 7, 4 bytes\n",
                SUMMARY.replace("1 of 4", "2 of 4")
            ),
        ),
    ];
    for (what, change, expected) in cases {
        let mut ops = three_alike();
        change(&mut ops[1][0]);
        assert_eq!(job_view(&ops), expected, "rank 1 differs in its {what}");
    }
}

#[test]
fn the_job_view_keeps_a_rank_with_one_operation_more_apart() {
    let mut ops = three_alike();
    ops[1].push(recv(1, 0, 3, 9));
    assert_eq!(
        job_view(&ops),
        format!(
            "{}MPI_COMM_WORLD (ranks 0-3):\n{ALIKE}  rank 1: recv from rank 3 tag 7, 4 bytes; \
             recv from rank 3 tag 9, 4 bytes\n",
            SUMMARY.replace("3 receives", "4 receives")
        )
    );
}

/// The same operations in another order are another queue: MPI matches a
/// message with the first receive that fits.
#[test]
fn the_job_view_keeps_ranks_with_their_operations_in_another_order_apart() {
    let mut ops = three_alike();
    for (r, ops) in ops.iter_mut().enumerate().take(3) {
        ops.push(recv(r, 0, 3, 9));
    }
    ops[1].reverse();
    assert_eq!(
        job_view(&ops),
        "4 ranks (0-3), 1 of 4 communicators with operations; 0 sends, 6 receives, 0 \
         unexpected; nothing pending: 3\n\
         MPI_COMM_WORLD (ranks 0-3):\n\
         \x20 ranks 0,2: recv from rank 3 tag 7, 4 bytes; recv from rank 3 tag 9, 4 bytes\n\
         \x20 rank 1: recv from rank 3 tag 9, 4 bytes; recv from rank 3 tag 7, 4 bytes\n"
    );
}

/// Two communicators of one name and size but other members are two
/// blocks, though their operations read alike.
#[test]
fn the_job_view_keeps_communicators_of_one_name_with_other_members_apart() {
    let ops = vec![
        vec![recv(0, 2, -1, 7)],
        vec![],
        vec![recv(2, 3, -1, 7)],
        vec![],
    ];
    assert_eq!(
        job_view(&ops),
        "4 ranks (0-3), 2 of 4 communicators with operations; 0 sends, 2 receives, 0 \
         unexpected; nothing pending: 1,3\n\
         \"half\" (ranks 0-1):\n\
         \x20 rank 0: recv from ANY_SOURCE tag 7, 4 bytes\n\
         \"half\" (2 ranks: world ranks 2-3 in its order):\n\
         \x20 rank 2: recv from ANY_SOURCE tag 7, 4 bytes\n"
    );
}

/// The view shows no `extra_text` (the request's address differs on every
/// rank, and the lines are each DLL's own words; `--per-rank` and `--json`
/// show them), so a datatype line of other words with the same length in
/// bytes does not split a range.
#[test]
fn the_job_view_merges_ranks_whose_operations_differ_only_in_what_it_does_not_show() {
    let mut ops = three_alike();
    ops[1][0].op.extra_text = ["receive request 0x7777", "4 x MPI_BYTE"].into();
    ops[1][0].op.buffer = 0x9000;
    assert_eq!(
        job_view(&ops),
        format!(
            "{SUMMARY}MPI_COMM_WORLD (ranks 0-3):\n  ranks 0-2: recv from rank 3 tag 7, 4 bytes\n"
        )
    );
}

/// What a DLL could not list is merged by its reason (in the reasons'
/// order).
#[test]
fn the_job_view_keeps_ranks_with_another_reason_apart() {
    let mut dump = job_of(4, &view_comms(), &three_alike());
    for (r, p) in dump.processes.iter_mut().enumerate() {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                c.unexpected = Section::NotAvailable {
                    reason: if r == 1 { "no ob1" } else { "no debug info" }.into(),
                };
            }
        }
    }
    let text = view::job_view(&dump, &ViewOptions::default());
    assert!(
        text.ends_with(
            "unexpected messages not available on ranks 0,2-3: no debug info\n\
             unexpected messages not available on rank 1: no ob1\n"
        ),
        "{text}"
    );
}

/// A main thread whose stack is `path`, outermost first; each frame at an
/// address of its own (`base` apart between ranks) that the tree does not
/// show.
pub(super) fn stack(tid: i32, path: &[&str], base: u64) -> ThreadStack {
    let frames = path
        .iter()
        .enumerate()
        .rev()
        .map(|(depth, name)| Frame {
            address: base + 0x10 * depth as u64,
            function: (*name != "??").then(|| (*name).to_owned()),
            offset: Some(0x10),
            inlined: false,
            object: Some("libmpi.so".into()),
            file: Some("recv.c".into()),
            line: Some(100 + depth as u32 + base as u32),
            comm: None,
            call: None,
        })
        .collect();
    ThreadStack {
        tid,
        name: None,
        frames,
        truncated: None,
    }
}

const PATH: [&str; 5] = ["_start", "main", "MPI_Recv", "pml_recv", "poll"];

/// Ranks 0-2 with nothing pending, their main threads in `PATH`, rank 1
/// in `rank1` instead.
fn stacks_dump(rank1: &[&str]) -> JobDump {
    let mut dump = job_of(3, &[world(3)], &[vec![], vec![], vec![]]);
    for (r, p) in dump.processes.iter_mut().enumerate() {
        let path: &[&str] = if r == 1 { rank1 } else { &PATH };
        p.stacks = Some(Section::Ok {
            value: ThreadList {
                list: vec![stack(p.pid, path, 0x1000 * r as u64)],
            },
        });
    }
    dump
}

fn tree_text(dump: &JobDump) -> String {
    let job = Job::new(dump);
    let mut text = String::new();
    tree::render(&tree::merge(&job, &job.all_ranks(), false), 0, &mut text);
    text
}

#[test]
fn the_call_tree_merges_ranks_only_in_the_same_frames() {
    let cases: [(&str, &[&str], &str); 8] = [
        (
            "the same functions at other addresses and lines",
            &PATH,
            "ranks 0-2: main > MPI_Recv > pml_recv > poll\n",
        ),
        (
            "the innermost frame",
            &["_start", "main", "MPI_Recv", "pml_recv", "sched_yield"],
            "ranks 0-2: main > MPI_Recv > pml_recv\n\
             \x20 ranks 0,2: poll\n\
             \x20 rank 1: sched_yield\n",
        ),
        (
            "a frame in the middle",
            &["_start", "main", "MPI_Recv", "pml_probe", "poll"],
            "ranks 0-2: main > MPI_Recv\n\
             \x20 ranks 0,2: pml_recv > poll\n\
             \x20 rank 1: pml_probe > poll\n",
        ),
        (
            "the MPI call",
            &["_start", "main", "MPI_Send", "pml_recv", "poll"],
            "ranks 0-2: main\n\
             \x20 ranks 0,2: MPI_Recv > pml_recv > poll\n\
             \x20 rank 1: MPI_Send > pml_recv > poll\n",
        ),
        (
            "a frame with no name",
            &["_start", "main", "MPI_Recv", "??", "poll"],
            "ranks 0-2: main > MPI_Recv\n\
             \x20 ranks 0,2: pml_recv > poll\n\
             \x20 rank 1: ?? > poll\n",
        ),
        (
            "one frame more",
            &["_start", "main", "MPI_Recv", "pml_recv", "poll", "spin"],
            "ranks 0-2: main > MPI_Recv > pml_recv > poll\n\
             \x20 rank 1: spin\n",
        ),
        (
            "one frame less (rank 1 is in pml_recv)",
            &["_start", "main", "MPI_Recv", "pml_recv"],
            "ranks 0-2: main > MPI_Recv > pml_recv\n\
             \x20 ranks 0,2: poll\n",
        ),
        (
            "the frame below main",
            &["_start", "main", "compute", "pml_recv", "poll"],
            "ranks 0-2: main\n\
             \x20 ranks 0,2: MPI_Recv > pml_recv > poll\n\
             \x20 rank 1: compute > pml_recv > poll\n",
        ),
    ];
    for (what, rank1, expected) in cases {
        assert_eq!(
            tree_text(&stacks_dump(rank1)),
            expected,
            "rank 1 differs in {what}"
        );
    }
}

#[test]
fn an_incomplete_stack_is_its_own_branch() {
    let mut dump = stacks_dump(&PATH);
    if let Some(Section::Ok { value }) = &mut dump.processes[1].stacks {
        value.list[0].truncated = Some("unreadable stack".into());
    }
    assert_eq!(
        tree_text(&dump),
        "ranks 0,2: main > MPI_Recv > pml_recv > poll\n\
         rank 1: (incomplete stack) > main > MPI_Recv > pml_recv > poll\n"
    );
}

/// The job view's stacks are the same tree, and name a rank outside MPI.
#[test]
fn the_job_view_shows_the_tree_and_the_rank_outside_mpi() {
    let dump = stacks_dump(&["_start", "main", "compute", "pml_recv", "poll"]);
    assert_eq!(
        view::job_view(&dump, &ViewOptions::default()),
        "3 ranks (0-2), 0 of 1 communicators with operations; 0 sends, 0 receives, 0 \
         unexpected; nothing pending: 0-2\n\
         stacks (main threads):\n\
         \x20 ranks 0-2: main\n\
         \x20   ranks 0,2: MPI_Recv > pml_recv > poll\n\
         \x20   rank 1: compute > pml_recv > poll\n\
         rank 1 has nothing pending and is not inside MPI\n"
    );
}

/// The wait-for analysis of 3 ranks: rank 0 receives from rank 1 (tag 5),
/// rank 1 from rank 0 (tag 6) on MPI_COMM_WORLD, changed by `change`; rank
/// 2 has nothing pending. "dup" is a copy of the world, "rev" has its
/// order reversed (its rank 0 is world rank 2).
fn waits(change: fn(&mut Placed)) -> String {
    let mut ops = vec![vec![recv(0, 0, 1, 5)], vec![recv(1, 0, 0, 6)], vec![]];
    change(&mut ops[1][0]);
    let mut dump = job_of(
        3,
        &[world(3), ("dup", vec![0, 1, 2]), ("rev", vec![2, 1, 0])],
        &ops,
    );
    // Blocked in a call that may wait on any of their operations.
    super::blocked_in(&mut dump, 0, "MPI_Waitany");
    super::blocked_in(&mut dump, 1, "MPI_Waitany");
    let job = Job::new(&dump);
    Analysis::new(&job).words()
}

#[test]
fn a_wait_follows_each_field_of_its_operation() {
    type Change = fn(&mut Placed);
    let cycle = |second: &str| {
        format!(
            "deadlock: rank 0 waits for rank 1 (recv tag 5 on MPI_COMM_WORLD), rank 1 waits for \
             rank 0 ({second})\ndeadlocked: ranks 0-1 in 1 cycle\n"
        )
    };
    let rank1_free = "chain: rank 0 waits for rank 1 (recv tag 5 on MPI_COMM_WORLD); rank 1 has \
                      nothing pending (in MPI_Waitany): the chain waits for rank 1\n\
                      no deadlock: no cycle of waits among 3 ranks (1 waiting)\n"
        .to_string();
    let through_rank2 = |second: &str| {
        format!(
            "chain: rank 0 waits for rank 1 (recv tag 5 on MPI_COMM_WORLD), rank 1 waits for \
             rank 2 ({second}); rank 2 has nothing pending (stack unknown): the chain waits for \
             rank 2\nno deadlock: no cycle of waits among 3 ranks (2 waiting)\n"
        )
    };
    let cases: [(&str, Change, String); 12] = [
        ("nothing", |_| {}, cycle("recv tag 6 on MPI_COMM_WORLD")),
        (
            "length (no part of a wait)",
            |p| p.op.desired_length = 400,
            cycle("recv tag 6 on MPI_COMM_WORLD"),
        ),
        (
            "tag",
            |p| p.op.desired_tag = Some(7),
            cycle("recv tag 7 on MPI_COMM_WORLD"),
        ),
        (
            "tag (ANY_TAG)",
            |p| p.op.desired_tag = None,
            cycle("recv any tag on MPI_COMM_WORLD"),
        ),
        (
            "queue (a send waits on its destination)",
            |p| p.class = OpClass::PendingSends,
            cycle("send tag 6 on MPI_COMM_WORLD"),
        ),
        (
            "queue (an unexpected message waits for nothing)",
            |p| p.class = OpClass::UnexpectedMessages,
            rank1_free.clone(),
        ),
        (
            "status (matched: only its data is to come, as rank 0's MPI runs)",
            |p| p.op.status = OpStatus::Matched,
            "chain: rank 0 waits for rank 1 (recv tag 5 on MPI_COMM_WORLD); rank 1 has nothing \
             pending but a receive matched, its data still arriving (in MPI_Waitany): the chain \
             waits for rank 1\n\
             no deadlock: no cycle of waits among 3 ranks (2 waiting)\n"
                .to_string(),
        ),
        (
            "status (complete)",
            |p| p.op.status = OpStatus::Complete,
            rank1_free.clone(),
        ),
        (
            "peer",
            |p| p.op.desired_local_rank = 2,
            through_rank2("recv tag 6 on MPI_COMM_WORLD"),
        ),
        (
            "peer (ANY_SOURCE: rank 2 can match it)",
            |p| p.op.desired_local_rank = -1,
            through_rank2("recv from ANY_SOURCE tag 6 on MPI_COMM_WORLD"),
        ),
        (
            "communicator (the same members)",
            |p| p.comm = 1,
            cycle("recv tag 6 on \"dup\""),
        ),
        (
            "communicator (its rank 0 is world rank 2)",
            |p| p.comm = 2,
            through_rank2("recv tag 6 on \"rev\""),
        ),
    ];
    for (what, change, expected) in cases {
        assert_eq!(
            waits(change),
            expected,
            "rank 1's receive differs in its {what}"
        );
    }
}

/// Two ranks, on MPI_COMM_WORLD and "dup": rank 0 has a receive that is
/// matched and still arriving (a progress line says how far), rank 1 a
/// pending receive.
fn confirm_first() -> JobDump {
    let mut first = recv(0, 0, 1, 5);
    first.op.status = OpStatus::Matched;
    first.op.desired_length = 400;
    first.op.actual_length = 64;
    first.op.extra_text = [
        "receive request 0x2000",
        "100 x MPI_INT",
        "matched; 64 of 400 bytes received",
    ]
    .into();
    job_of(
        2,
        &[world(2), ("dup", vec![0, 1])],
        &[vec![first], vec![recv(1, 0, 0, 6)]],
    )
}

/// How many of rank 0's operations `--confirm` keeps from two snapshots.
fn kept(first: &JobDump, second: &JobDump) -> usize {
    let kept = persistent(first, second);
    let Section::Ok { value } = &kept.processes[0].communicators else {
        panic!("rank 0's communicators are listed");
    };
    value
        .list
        .iter()
        .flat_map(|c| OpClass::ALL.map(|class| c.queue(class)))
        .map(|q| match q {
            Section::Ok { value } => value.operations.len(),
            _ => 0,
        })
        .sum()
}

/// `dump` with rank 0's one operation changed by `change` (which may move
/// it to another communicator or queue).
fn with_rank0_op(dump: &JobDump, change: fn(&mut Placed)) -> JobDump {
    let mut dump = dump.clone();
    let Section::Ok { value: list } = &mut dump.processes[0].communicators else {
        panic!("rank 0's communicators are listed");
    };
    let (comm, class) = list
        .list
        .iter()
        .enumerate()
        .flat_map(|(i, c)| OpClass::ALL.map(|class| (i, class, c.queue(class))))
        .find_map(|(i, class, q)| match q {
            Section::Ok { value } if !value.operations.is_empty() => Some((i, class)),
            _ => None,
        })
        .expect("rank 0 has an operation");
    let Section::Ok { value } = list.list[comm].queue_mut(class) else {
        unreachable!("found there");
    };
    let mut placed = Placed {
        comm,
        class,
        op: value.operations.remove(0),
    };
    change(&mut placed);
    let Section::Ok { value } = list.list[placed.comm].queue_mut(placed.class) else {
        panic!("every queue is listed");
    };
    value.operations.push(placed.op);
    dump
}

#[test]
fn confirm_keeps_an_operation_only_when_it_is_the_same_one() {
    type Change = fn(&mut Placed);
    let first = confirm_first();
    assert_eq!(kept(&first, &first), 1, "the same snapshot twice");
    let cases: [(&str, Change, usize); 11] = [
        (
            "progress (its data still arriving)",
            |p| {
                p.op.actual_length = 128;
                p.op.extra_text = [
                    "receive request 0x2000",
                    "100 x MPI_INT",
                    "matched; 128 of 400 bytes received",
                ]
                .into();
            },
            1,
        ),
        ("status", |p| p.op.status = OpStatus::Complete, 0),
        ("peer", |p| p.op.desired_local_rank = -1, 0),
        ("tag", |p| p.op.desired_tag = Some(50), 0),
        ("tag (ANY_TAG)", |p| p.op.desired_tag = None, 0),
        ("length", |p| p.op.desired_length = 404, 0),
        ("buffer", |p| p.op.buffer += 8, 0),
        (
            "request (its address in the DLL's lines)",
            |p| {
                p.op.extra_text = [
                    "receive request 0x2008",
                    "100 x MPI_INT",
                    "matched; 64 of 400 bytes received",
                ]
                .into();
            },
            0,
        ),
        ("communicator", |p| p.comm = 1, 0),
        ("queue (sends)", |p| p.class = OpClass::PendingSends, 0),
        (
            "queue (unexpected)",
            |p| p.class = OpClass::UnexpectedMessages,
            0,
        ),
    ];
    for (what, change, expected) in cases {
        assert_eq!(
            kept(&first, &with_rank0_op(&first, change)),
            expected,
            "rank 0's operation differs in its {what} between the snapshots"
        );
    }
}

/// A communicator of the same name made again (another id) holds other
/// operations, though they read the same.
#[test]
fn confirm_keeps_no_operation_of_a_communicator_made_again() {
    let first = with_rank0_op(&confirm_first(), |p| p.comm = 1);
    assert_eq!(kept(&first, &first), 1, "the same snapshot twice");
    let mut second = first.clone();
    for p in &mut second.processes {
        if let Section::Ok { value } = &mut p.communicators {
            value.list[1].unique_id = 7;
        }
    }
    assert_eq!(kept(&first, &second), 0);
}
