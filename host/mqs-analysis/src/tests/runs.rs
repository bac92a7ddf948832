//! A compact job (ranks in equal states kept as one dump per run, as a
//! collector tree sends them) gives the same job view, wait-for analysis
//! and DOT as the same job with one dump per rank.

use super::*;
use crate::view::dot;

/// Ranks 0-7 on MPI_COMM_WORLD and a copy of it: rank 0 waits for rank 1;
/// ranks 1-5, one run, each wait for rank 0 and have an unexpected
/// message from rank 7; ranks 6-7, another run, wait on ANY_SOURCE.
fn compact() -> JobDump {
    let n = 8;
    let copy = ("copy", (0..n).collect::<Vec<i64>>());
    let ops = vec![
        vec![(0, false, 1, 5)],
        vec![(0, false, 0, 7), (1, true, 0, 9)],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![(1, false, ANY, 3)],
        vec![],
    ];
    let mut dump = job(n as usize, &[world(n), copy], &ops);
    if let Section::Ok { value } = &mut dump.processes[1].communicators {
        value.list[0].unexpected = queue(vec![op(7, 11, 0)]);
    }
    // Blocked in calls that may wait on any of their operations.
    all_blocked_in(&mut dump, "MPI_Waitany");
    dump.processes[1].run_len = 5;
    dump.processes[6].run_len = 2;
    dump.processes
        .retain(|p| matches!(p.global_rank, 0 | 1 | 6));
    dump
}

#[test]
fn a_compact_job_reads_as_one_dump_per_rank() {
    let compact = compact();
    assert_eq!(compact.processes.len(), 3);
    assert_eq!(compact.rank_count(), 8);
    let mut each = compact.clone();
    each.expand();
    assert_eq!(each.processes.len(), 8);
    assert!(!each.is_compact());
    // Each rank of a run is its own rank on the copies of the world.
    let locals: Vec<i64> = each
        .processes
        .iter()
        .map(|p| match &p.communicators {
            Section::Ok { value } => value.list[1].local_rank,
            _ => -1,
        })
        .collect();
    assert_eq!(locals, (0..8).collect::<Vec<i64>>());
    let pids: Vec<i32> = each.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, (1000..1008).collect::<Vec<i32>>());

    for all in [false, true] {
        let options = ViewOptions {
            all,
            ..ViewOptions::default()
        };
        assert_eq!(
            view::job_view(&compact, &options),
            view::job_view(&each, &options)
        );
    }
    let (jc, je) = (Job::new(&compact), Job::new(&each));
    let (ac, ae) = (Analysis::new(&jc), Analysis::new(&je));
    assert!(ac.has_deadlock() && ae.has_deadlock());
    assert_eq!(ac.words(), ae.words());
    assert_eq!(dot::dot(&ac), dot::dot(&ae));
    let text = view::job_view(&compact, &ViewOptions::default());
    assert!(
        text.contains("ranks 1-5: recv from rank 0 tag 7, 4 bytes"),
        "{text}"
    );
    assert!(
        text.contains("ranks 1-5: unexpected from rank 7 tag 11"),
        "{text}"
    );
    // The communicator each rank's id names is found for every rank.
    for rank in 0..8 {
        assert_eq!(jc.comm_of(rank, 1), je.comm_of(rank, 1), "rank {rank}");
    }
}

/// A ring of 100 ranks as a tree sends it: three runs whose peers shift
/// (each rank receives from the one before it), on the world and on a copy.
#[test]
fn a_compact_ring_whose_peers_shift_reads_as_one_dump_per_rank() {
    let n = 100i64;
    let copy = ("copy", (0..n).collect::<Vec<i64>>());
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| vec![(0, false, (r + n - 1) % n, 10), (1, true, (r + 1) % n, 4)])
        .collect();
    let mut each = job(n as usize, &[world(n), copy], &ops);
    // As a ring's ranks are: alike but for their peers.
    for p in &mut each.processes {
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                for q in [&mut c.sends, &mut c.receives] {
                    if let Section::Ok { value } = q {
                        for op in &mut value.operations {
                            (op.buffer, op.actual_local_rank, op.actual_global_rank) = (0, -1, -1);
                        }
                    }
                }
            }
        }
    }
    all_blocked_in(&mut each, "MPI_Recv");
    let mut compact = each.clone();
    for (first, len) in [(0, 40), (40, 30), (70, 30)] {
        let p = &mut compact.processes[first];
        p.run_len = len;
        p.run_shifts_peers = true;
    }
    compact
        .processes
        .retain(|p| matches!(p.global_rank, 0 | 40 | 70));
    assert_eq!(compact.rank_count(), 100);
    let mut expanded = compact.clone();
    expanded.expand();
    // Each rank's own peers (short messages: a whole dump is long).
    for (got, want) in expanded.processes.iter().zip(&each.processes) {
        assert!(
            got.communicators == want.communicators,
            "rank {}: its communicators differ from its own",
            want.global_rank
        );
    }
    assert_eq!(
        view::job_view(&compact, &ViewOptions::default()),
        view::job_view(&each, &ViewOptions::default())
    );
    let (jc, je) = (Job::new(&compact), Job::new(&each));
    let (ac, ae) = (Analysis::new(&jc), Analysis::new(&je));
    assert!(ac.has_deadlock());
    assert_eq!(ac.words(), ae.words());
    assert_eq!(dot::dot(&ac), dot::dot(&ae));
    let text = view::job_view(&compact, &ViewOptions::default());
    assert!(
        text.contains("ranks 0-99: recv from rank r-1 (mod 100) tag 10, 4 bytes"),
        "{text}"
    );
}
