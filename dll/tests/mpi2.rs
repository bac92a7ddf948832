//! The MPI-2 build in the real host's session: jobs, identities, processes
//! the MPI created, and the spawn breakpoint, on the `spawn` fixture
//! (tests/fixtures/spawn.c) recorded with its two parents and two spawned
//! children, every one handed to one session as mqs-dump does (parents
//! identities 0 and 1, children 2 and 3).
#![cfg(feature = "mpi2")]

mod common;

use common::session::{ops, recording, replay, Dumped};

fn spawn() -> Vec<(i32, Dumped)> {
    let rec = recording("spawn");
    assert_eq!(rec.processes.len(), 4, "parents and children recorded");
    rec.processes
        .iter()
        .map(|p| p.member.identity)
        .zip(replay(rec))
        .collect()
}

fn process(all: &[(i32, Dumped)], identity: i32) -> &Dumped {
    all.iter()
        .find(|(id, _)| *id == identity)
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("no process {identity}"))
}

#[test]
fn spawned_processes_are_listed_with_what_open_mpi_knows() {
    let all = spawn();
    let parent = process(&all, 0);
    let list = match &parent.new_processes {
        Some(mqs_core::model::Section::Ok { value }) => value.list.clone(),
        other => panic!("new processes: {other:?}"),
    };
    assert_eq!(list.len(), 2, "{list:?}");
    for (vpid, loc) in list.iter().enumerate() {
        // Open MPI keeps no pid or executable for another job's processes.
        assert_eq!(loc.pid, 0, "{loc:?}");
        assert!(!loc.host.is_empty(), "{loc:?}");
        assert!(loc.executable.starts_with("(unknown"), "{loc:?}");
        assert!(loc.executable.contains(&format!("vpid {vpid}")), "{loc:?}");
    }
    assert_eq!(
        parent.spawn_breakpoint.as_deref(),
        Some("mca_pml_ob1_add_procs")
    );
}

#[test]
fn peers_in_the_other_job_are_reported_by_the_identities_the_host_gave() {
    let all = spawn();
    // Parent 0: a receive from child 1, an unexpected message from child 0.
    let p0 = process(&all, 0).comm("mqs-spawn");
    let r: Vec<_> = ops(&p0.receives)
        .iter()
        .map(|o| (o.desired_local_rank, o.desired_global_rank, o.desired_tag))
        .collect();
    assert_eq!(r, [(1, 3, Some(31))]);
    let u: Vec<_> = ops(&p0.unexpected)
        .iter()
        .map(|o| {
            (
                o.desired_local_rank,
                o.desired_global_rank,
                o.desired_tag,
                o.desired_length,
            )
        })
        .collect();
    assert_eq!(u, [(0, 2, Some(32), 400_000)]);
    // Child 0 (identity 2): its rendezvous send to parent 0, and parent 1's
    // eager message waiting.
    let c0 = process(&all, 2).comm("mqs-spawn");
    let s: Vec<_> = ops(&c0.sends)
        .iter()
        .map(|o| (o.desired_local_rank, o.desired_global_rank, o.desired_tag))
        .collect();
    assert_eq!(s, [(0, 0, Some(32))]);
    let u: Vec<_> = ops(&c0.unexpected)
        .iter()
        .map(|o| (o.desired_global_rank, o.desired_tag, o.desired_length))
        .collect();
    assert_eq!(u, [(1, Some(33), 32)]);
    // Each job's own world: its identities.
    assert_eq!(
        process(&all, 0).comm("MPI_COMM_WORLD").group,
        Some(vec![0, 1])
    );
    assert_eq!(
        process(&all, 3).comm("MPI_COMM_WORLD").group,
        Some(vec![2, 3])
    );
}
