//! Messages in transit (arrived, not yet seen by the receiver's MPI): a
//! rank outside MPI with messages waiting is named as the likely culprit,
//! and a receive such a message meets is no wait.

use mqs_abi::OpClass;
use mqs_core::model::{JobDump, Section, ThreadList};

use super::differing::stack;
use super::{job, op, world, Analysis, Job, OpSpec};
use crate::view::{job_view, ViewOptions};

/// Puts an unexpected message from `from` with `tag` into `rank`'s queue,
/// marked as waiting in `place` of its transport.
pub(super) fn arrived(dump: &mut JobDump, rank: usize, from: i64, tag: i64, place: &str) {
    let mut message = op(from, tag, 0);
    message.extra_text = vec![format!("{}{place}", mqs_abi::IN_TRANSIT)].into();
    if let Section::Ok { value } = &mut dump.processes[rank].communicators {
        let unexpected = value.list[0].queue_mut(OpClass::UnexpectedMessages);
        match unexpected {
            Section::Ok { value } => value.operations.push(message),
            other => {
                *other = Section::Ok {
                    value: mqs_core::model::Queue {
                        operations: vec![message],
                        truncated: None,
                        fixed_in_run: Vec::new(),
                    },
                }
            }
        }
    }
}

fn outside_mpi(dump: &mut JobDump, rank: usize) {
    let p = &mut dump.processes[rank];
    p.stacks = Some(Section::Ok {
        value: ThreadList {
            list: vec![stack(p.pid, &["_start", "main", "compute"], 0x1000)],
        },
    });
}

#[test]
fn a_rank_outside_mpi_with_messages_waiting_is_named() {
    // Ranks 0 and 1 wait for rank 2, which computes while three messages
    // wait in its transport.
    let ops: Vec<Vec<OpSpec>> = vec![vec![(0, false, 2, 1)], vec![(0, false, 2, 2)], vec![]];
    let mut dump = job(3, &[world(3)], &ops);
    arrived(&mut dump, 2, 0, 7, "vader fast box");
    arrived(&mut dump, 2, 0, 8, "vader fast box");
    arrived(&mut dump, 2, 1, 9, "vader FIFO");
    outside_mpi(&mut dump, 2);
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let named = "rank 2 is not calling MPI: 3 messages wait in its transport: 2 from rank 0 \
                 (vader fast box), 1 from rank 1 (vader FIFO)";
    assert_eq!(a.stalled_words(2).as_deref(), Some(named));
    let words = a.words();
    assert!(
        words.contains(&format!("not calling MPI: {named}\n")),
        "{words}"
    );
    assert!(
        words.contains(&format!(
            "{named}: it is probably the one the others wait for"
        )),
        "{words}"
    );
    assert!(!a.has_deadlock(), "{words}");
    let view = job_view(&dump, &ViewOptions::default());
    assert!(view.contains(&format!("{named}\n")), "{view}");
    assert!(
        view.contains("unexpected from rank 1 tag 9, 4 bytes (in transit: vader FIFO)"),
        "{view}"
    );
}

#[test]
fn a_receive_a_message_in_transit_meets_is_no_wait() {
    // 0 waits for 1 and 1 for 0: a cycle, but the message 0 waits for is
    // already in its transport.
    let ops: Vec<Vec<OpSpec>> = vec![vec![(0, false, 1, 10)], vec![(0, false, 0, 11)]];
    let mut dump = job(2, &[world(2)], &ops);
    super::all_blocked_in(&mut dump, "MPI_Recv");
    arrived(&mut dump, 0, 1, 10, "nemesis receive queue");
    let j = Job::new(&dump);
    let a = Analysis::new(&j);
    let words = a.words();
    assert!(!a.has_deadlock(), "{words}");
    assert!(
        words.contains(
            "in transit: rank 0's recv tag 10 on MPI_COMM_WORLD is met by a message already in \
             its nemesis receive queue (its MPI has not looked yet): not a wait\n"
        ),
        "{words}"
    );
    // A message with another tag meets nothing: the cycle stays.
    let mut dump = job(2, &[world(2)], &ops);
    super::all_blocked_in(&mut dump, "MPI_Recv");
    arrived(&mut dump, 0, 1, 12, "nemesis receive queue");
    let j = Job::new(&dump);
    assert!(Analysis::new(&j).has_deadlock());
}
