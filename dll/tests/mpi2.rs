//! The MPI-2 build: jobs, identities, processes the MPI created, and the
//! spawn breakpoint, on a parent recorded after MPI_Comm_spawn
//! (dll/tests/fixtures/spawn.c).
#![cfg(feature = "mpi2")]

mod common;

use common::host::{self, Image, Process};
use common::snapshot::Snapshot;

fn spawn_parent() -> host::Dump {
    let snap = Snapshot::load(&common::data("spawn-parent.json")).unwrap_or_default();
    assert!(!snap.memory.is_empty());
    let mut image = Image::new(snap.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(
        Box::new(snap.fake_process()),
        &mut image,
        snap.type_sizes,
        0,
    );
    let d = host::dump(&mut process);
    host::destroy_image(&mut image);
    assert_eq!(Some(d.to_json()), snap.expected);
    d
}

#[test]
fn spawned_processes_are_listed_with_what_open_mpi_knows() {
    let d = spawn_parent();
    let list = d
        .new_processes
        .clone()
        .unwrap_or(Err(-1))
        .unwrap_or_default();
    assert_eq!(list.len(), 2, "{:?}", d.new_processes);
    for (vpid, loc) in list.iter().enumerate() {
        // Open MPI keeps no pid or executable for another job's processes.
        assert_eq!(loc.pid, 0);
        assert_eq!(loc.host_name, "vm");
        assert!(loc.image_name.starts_with("(unknown"), "{}", loc.image_name);
        assert!(
            loc.image_name.contains(&format!("vpid {vpid}")),
            "{}",
            loc.image_name
        );
    }
    assert_eq!(
        d.spawn_breakpoint,
        Some(Ok("mca_pml_ob1_add_procs".to_string()))
    );
}

#[test]
fn peers_in_other_jobs_have_no_identity_until_the_debugger_gives_one() {
    let d = spawn_parent();
    let inter = d.comm("mqs-spawn").map(|c| c.queues.clone());
    let Some([_, recvs, unexpected]) = inter else {
        unreachable!("no mqs-spawn communicator");
    };
    let r = &recvs.ops()[0];
    assert_eq!(
        (r.desired_local_rank, r.desired_global_rank, r.desired_tag),
        (1, -1, Some(31))
    );
    let u = &unexpected.ops()[0];
    assert_eq!(
        (
            u.desired_local_rank,
            u.desired_global_rank,
            u.desired_tag,
            u.desired_length
        ),
        (0, -1, Some(32), 400_000)
    );
    // Our own job: the identity the debugger gave.
    let world = d.comm("MPI_COMM_WORLD").map(|c| c.group.clone());
    assert_eq!(world, Some(Ok(vec![0])));
}
