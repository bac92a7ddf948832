//! MPI_Comm_spawn through the host: the `spawn` fixture's two parents spawn
//! two children and leave operations pending on the intercommunicator
//! between the jobs. Dumping the job through mpirun finds the children too
//! (MPIR lists only the parents), numbers them after the parents (identities
//! 2 and 3), and our MPI-2 DLL reports every peer in the other job by the
//! identity the host gave it.

mod support;

use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// Our DLL's MPI-2 build (scripts/test builds it into target/mpi2).
fn our_mpi2_dll() -> std::path::PathBuf {
    mqs_tests::our_dll(true)
}

/// The parents (READY) and children (SPAWNED): each (world rank in its own
/// job, pid), waiting for the children's lines.
fn launch() -> (Job, Vec<(u32, u32)>) {
    let options = LaunchOptions {
        env: vec![
            // Open MPI 4.1's shared-memory transport does not reach another
            // job's processes: spawned jobs talk over TCP on loopback.
            ("OMPI_MCA_btl".into(), "self,vader,tcp".into()),
            ("OMPI_MCA_btl_tcp_if_include".into(), "lo".into()),
        ],
        ..LaunchOptions::default()
    };
    let mut job = Job::launch_with(Mpi::OpenMpiG, "spawn", 2, &[], &options).expect("launch");
    let deadline = Instant::now() + Duration::from_secs(60);
    let children = loop {
        let (out, err) = job.output();
        let children: Vec<(u32, u32)> = out
            .lines()
            .filter_map(|l| {
                let mut f = l.strip_prefix("SPAWNED ")?.split_whitespace();
                let rank = f.next()?.strip_prefix("rank=")?.parse().ok()?;
                let pid = f.next()?.strip_prefix("pid=")?.parse().ok()?;
                Some((rank, pid))
            })
            .collect();
        if children.len() == 2 {
            break children;
        }
        assert!(
            Instant::now() < deadline,
            "the children did not report:\n{out}\n{err}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Teardown must cover the children too.
    job.refresh_pids();
    let mut children = children;
    children.sort_unstable();
    (job, children)
}

fn comm<'a>(process: &'a Value, name: &str) -> &'a Value {
    process["communicators"]["list"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {process:#}"))
}

/// (status, peer local rank, peer global rank, tag, length) of a queue.
fn queue(process: &Value, comm_name: &str, which: &str) -> Vec<(String, i64, i64, i64, i64)> {
    let section = &comm(process, comm_name)[which];
    assert_eq!(section["status"], "ok", "{which} of {comm_name}: {section}");
    assert!(section["truncated"].is_null(), "{section}");
    section["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["status"].as_str().unwrap_or("").to_string(),
                op["desired_local_rank"].as_i64().unwrap_or(i64::MIN),
                op["desired_global_rank"].as_i64().unwrap_or(i64::MIN),
                op["desired_tag"].as_i64().unwrap_or(i64::MIN),
                op["desired_length"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect()
}

/// The unexpected queue of `comm_name`: the jobs talk over TCP, whose
/// messages in transit no DLL can list, so an empty queue is "not
/// available" saying so, and a full one says so on its last line.
fn unexpected(process: &Value, comm_name: &str) -> Vec<(String, i64, i64, i64, i64)> {
    let section = &comm(process, comm_name)["unexpected"];
    let note = "messages in transit on tcp not listed";
    if section["status"] == "not_available" {
        let reason = section["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(note), "{section}");
        return Vec::new();
    }
    let ops = queue(process, comm_name, "unexpected");
    let last = section["operations"]
        .as_array()
        .and_then(|l| l.last())
        .map(|op| op["extra_text"].to_string())
        .unwrap_or_default();
    assert!(last.contains(note), "{section}");
    ops
}

fn op(status: &str, local: i64, global: i64, tag: i64, len: i64) -> (String, i64, i64, i64, i64) {
    (status.to_string(), local, global, tag, len)
}

/// Dumps the job until every process has entered its final blocking
/// receive (posted just after its line is printed).
fn dump_settled(job: &Job, extra: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dump = dump_json(job.launcher_pid(), extra);
        let processes = dump["processes"].as_array().cloned().unwrap_or_default();
        let settled = processes.len() == 4
            && processes.iter().all(|p| {
                let world = &comm(p, "MPI_COMM_WORLD")["receives"]["operations"];
                world.as_array().is_some_and(|ops| {
                    ops.iter()
                        .any(|op| op["desired_tag"] == 1000 && op["desired_length"] == 4)
                })
            });
        if settled || Instant::now() > deadline {
            return dump;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn spawned_ranks_carry_the_identities_the_host_assigned() {
    let (job, children) = launch();
    let dll = our_mpi2_dll();
    let dump = dump_settled(&job, &["--dll", dll.to_str().unwrap()]);
    assert_eq!(dump["launcher"]["pid"], job.launcher_pid());
    assert_eq!(dump["failures"], serde_json::json!([]), "{dump:#}");
    let processes = dump["processes"].as_array().unwrap();

    // Parents are world ranks 0 and 1; the children follow as 2 and 3, in
    // the order of their rank in the spawned job.
    let pids: Vec<(i64, i64)> = processes
        .iter()
        .map(|p| {
            (
                p["global_rank"].as_i64().unwrap(),
                p["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<(i64, i64)> = job
        .rank_pids()
        .iter()
        .map(|&(r, p)| (i64::from(r), i64::from(p)))
        .collect();
    expected.extend(
        children
            .iter()
            .map(|&(r, p)| (2 + i64::from(r), i64::from(p))),
    );
    assert_eq!(pids, expected);
    let spawned_job = processes[2]["spawned"]["job"].clone();
    assert!(spawned_job.is_string(), "{:#}", processes[2]);
    for (i, p) in processes.iter().enumerate() {
        assert_eq!(p["dll"]["compatibility"], 3);
        if i < 2 {
            assert!(p.get("spawned").is_none(), "{p:#}");
        } else {
            assert_eq!(p["spawned"]["rank"], i - 2);
            assert_eq!(p["spawned"]["job"], spawned_job);
        }
        // Each job's MPI_COMM_WORLD, in identities.
        let world = comm(p, "MPI_COMM_WORLD");
        let members = if i < 2 { [0, 1] } else { [2, 3] };
        assert_eq!(world["size"], 2);
        assert_eq!(world["group"], serde_json::json!(members), "process {i}");
        assert_eq!(
            queue(p, "MPI_COMM_WORLD", "receives"),
            [op("pending", -1, -1, 1000, 4)],
            "process {i}"
        );
        // The intercommunicator: local group of the process's own job.
        let inter = comm(p, "mqs-spawn");
        assert_eq!(inter["size"], 2);
        assert_eq!(inter["local_rank"], i % 2);
        assert_eq!(inter["group"], serde_json::json!(members), "process {i}");
    }

    // Peers on mqs-spawn are ranks of the other job: their global ranks are
    // the identities of the processes on the other side.
    let p = |i: usize| &processes[i];
    assert_eq!(queue(p(0), "mqs-spawn", "sends"), []);
    assert_eq!(
        queue(p(0), "mqs-spawn", "receives"),
        [op("pending", 1, 3, 31, 16)]
    );
    assert_eq!(
        unexpected(p(0), "mqs-spawn"),
        [op("pending", 0, 2, 32, 400_000)]
    );
    // Parent 1's eager send has reached child 0 (the marker after it was
    // received) and the parent has polled since: complete, not yet waited.
    assert_eq!(
        queue(p(1), "mqs-spawn", "sends"),
        [op("complete", 0, 2, 33, 32)]
    );
    assert_eq!(queue(p(1), "mqs-spawn", "receives"), []);
    assert_eq!(unexpected(p(1), "mqs-spawn"), []);
    assert_eq!(
        queue(p(2), "mqs-spawn", "sends"),
        [op("pending", 0, 0, 32, 400_000)]
    );
    assert_eq!(queue(p(2), "mqs-spawn", "receives"), []);
    assert_eq!(unexpected(p(2), "mqs-spawn"), [op("pending", 1, 1, 33, 32)]);
    assert_eq!(queue(p(3), "mqs-spawn", "sends"), []);
    assert_eq!(
        queue(p(3), "mqs-spawn", "receives"),
        [op("pending", 1, 1, 34, 8)]
    );
    assert_eq!(unexpected(p(3), "mqs-spawn"), []);

    // What Open MPI records of the other job: no pid, no executable.
    for (i, p) in processes.iter().enumerate() {
        let list = p["new_processes"]["list"].as_array().unwrap();
        assert_eq!(list.len(), 2, "process {i}: {list:?}");
        for entry in list {
            assert_eq!(entry["pid"], 0);
            assert!(entry["executable"]
                .as_str()
                .unwrap()
                .contains("not recorded"));
        }
        assert_eq!(p["spawn_breakpoint"], "mca_pml_ob1_add_procs");
    }

    for pid in job
        .rank_pids()
        .iter()
        .chain(children.iter())
        .map(|r| r.1)
        .chain([job.launcher_pid()])
    {
        assert_running_untraced(pid);
    }
    job.shutdown().unwrap();
}

#[test]
fn open_mpis_own_dll_sees_the_spawned_processes_too() {
    let (job, children) = launch();
    let dump = dump_settled(&job, &[]);
    let processes = dump["processes"].as_array().unwrap();
    assert_eq!(dump["failures"], serde_json::json!([]), "{dump:#}");
    let ranks: Vec<(i64, i64)> = processes
        .iter()
        .map(|p| {
            (
                p["global_rank"].as_i64().unwrap(),
                p["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ranks[2..],
        children
            .iter()
            .map(|&(r, p)| (2 + i64::from(r), i64::from(p)))
            .collect::<Vec<_>>()
    );
    for p in processes {
        assert_eq!(p["dll"]["compatibility"], 2);
        // Its own view of the intercommunicator: the local group, in the
        // world ranks of the process's own job (it knows no identities).
        assert_eq!(comm(p, "mqs-spawn")["size"], 2);
    }
    let text = stdout(&run(&[
        "--pid",
        &job.launcher_pid().to_string(),
        "--dll",
        our_mpi2_dll().to_str().unwrap(),
        "--per-rank",
    ]));
    assert!(
        text.contains("4 ranks dumped, 0 failed")
            && text.contains("(rank 3; spawned: rank 1 of job"),
        "{text}"
    );
    job.shutdown().unwrap();
}
