//! The embedding example (`host/mqs-core/examples/embed.rs`: a debugger of its own
//! that implements the memory and symbol traits and drives a DLL through a
//! session, with no ptrace of ours) gets the same queues from a live rank
//! as mqs-dump does, with Open MPI's DLL and with ours.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use mqs_tests::{Job, Mpi};
use serde_json::Value;
use support::*;

fn example() -> std::path::PathBuf {
    mqs_tests::core_example("embed")
}

fn embedded(pid: u32, dll: &str) -> Value {
    let out = Command::new(example())
        .arg(pid.to_string())
        .arg(dll)
        .output()
        .expect("run the embed example");
    assert!(
        out.status.success(),
        "embed failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("embed prints JSON")
}

#[test]
fn the_embedding_example_sees_what_mqs_dump_sees() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("queues job");
    let theirs = Mpi::OpenMpiG
        .prefix()
        .unwrap()
        .join("lib/openmpi/libompi_dbg_msgq.so");
    let ours = mqs_tests::our_dll(false);
    for dll in [theirs, ours] {
        let dll = dll.to_str().unwrap().to_string();
        for (rank, pid) in job.rank_pids() {
            // The blocking receive is posted just after READY: look again
            // until both sides have seen it.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let ours = embedded(pid, &dll);
                let dump = dump_json(pid, &["--dll", &dll]);
                let theirs = &dump["processes"][0]["communicators"];
                let operations = theirs.to_string().matches("\"status\":\"pending\"").count();
                if &ours == theirs && operations > 0 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "rank {rank} with {dll}: the example saw\n{ours:#}\nmqs-dump saw\n{theirs:#}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}
