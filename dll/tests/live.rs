//! End to end: the fixtures run as real Open MPI 4.1.4 jobs (hung in their
//! documented states), dumped by the mqs host through *this* DLL (the
//! cdylib cargo built next to this test), checked against the fixtures'
//! header comments. Both Open MPI builds: `-g` everywhere, and "release"
//! (no debug info for ob1, so no unexpected queue and free-list receives).

use std::path::PathBuf;

use mqs_host::inspect::{dump, Options};
use mqs_tests::{Job, Mpi};
use serde_json::Value;

/// The cdylib of this build (same features as this test).
fn our_dll() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().map(PathBuf::from).unwrap_or_default();
    deps.join("libmqs_dll.so")
}

/// Dumps every rank of the job through its launcher, as JSON, once the
/// state has settled: ranks post their blocking receive just after READY,
/// so a dump taken at once may precede it. Two equal dumps in a row (apart
/// from timings) are the settled state.
fn dump_job(job: &Job) -> Result<Vec<Value>, String> {
    let mut last = dump_once(job)?;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let next = dump_once(job)?;
        if strip(&next) == strip(&last) {
            return Ok(next);
        }
        last = next;
    }
    Err(format!("{}: the queues never settled", job.fixture()))
}

/// A dump without what changes between two dumps of a still process.
fn strip(procs: &[Value]) -> Vec<Value> {
    procs
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if let Some(o) = p.as_object_mut() {
                o.remove("stats");
            }
            p
        })
        .collect()
}

fn dump_once(job: &Job) -> Result<Vec<Value>, String> {
    let dll = our_dll();
    if !dll.exists() {
        return Err(format!("{} not built", dll.display()));
    }
    let options = Options {
        dll: Some(dll),
        ..Options::default()
    };
    let pid = i32::try_from(job.launcher_pid()).unwrap_or(-1);
    let d = dump(pid, &options, &mut |_, _| {})
        .map_err(|e| format!("dump of {}: {e}", job.fixture()))?;
    let json = serde_json::to_value(&d).map_err(|e| e.to_string())?;
    let mut procs: Vec<Value> = json["processes"].as_array().cloned().unwrap_or_default();
    procs.sort_by_key(|p| p["global_rank"].as_i64());
    assert_eq!(procs.len(), job.size() as usize, "{json}");
    Ok(procs)
}

fn launch(mpi: Mpi, fixture: &str, n: u32, args: &[&str]) -> Result<Job, String> {
    Job::launch(mpi, fixture, n, args).map_err(|e| format!("{fixture} on {mpi:?}: {e}"))
}

fn comm<'a>(process: &'a Value, name: &str) -> &'a Value {
    let list = process["communicators"]["list"].as_array();
    let found = list.and_then(|l| l.iter().find(|c| c["name"] == name));
    assert!(found.is_some(), "no {name} in {process}");
    found.unwrap_or(&Value::Null)
}

/// (peer, global peer, tag or None, length, status) of each operation.
fn ops(queue: &Value) -> Vec<(i64, i64, Option<i64>, i64, String)> {
    queue["operations"]
        .as_array()
        .map(|ops| {
            ops.iter()
                .map(|o| {
                    (
                        o["desired_local_rank"].as_i64().unwrap_or(i64::MIN),
                        o["desired_global_rank"].as_i64().unwrap_or(i64::MIN),
                        o["desired_tag"].as_i64(),
                        o["desired_length"].as_i64().unwrap_or(i64::MIN),
                        o["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pending(
    peer: i64,
    global: i64,
    tag: Option<i64>,
    len: i64,
) -> (i64, i64, Option<i64>, i64, String) {
    (peer, global, tag, len, "pending".to_string())
}

fn check_queues(mpi: Mpi) -> Result<(), String> {
    let job = launch(mpi, "queues", 2, &["2"])?;
    let procs = dump_job(&job)?;
    let with_ob1 = mpi == Mpi::OpenMpiG;
    let r0 = &procs[0];
    let names: Vec<_> = r0["communicators"]["list"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "MPI_COMM_WORLD",
            "MPI_COMM_SELF",
            "mqs-dup",
            "mqs-split",
            "mqs-wait"
        ]
    );
    assert_eq!(comm(r0, "mqs-split")["group"], serde_json::json!([1, 0]));
    assert_eq!(
        ops(&comm(r0, "MPI_COMM_WORLD")["receives"]),
        [pending(-1, -1, Some(8), 32)]
    );
    assert_eq!(
        ops(&comm(r0, "mqs-dup")["receives"]),
        [
            pending(1, 1, Some(7), 16),
            pending(1, 1, Some(1_000_000), 4),
            pending(1, 1, Some(1_000_001), 4)
        ],
        "posting (= matching) order"
    );
    assert_eq!(
        ops(&comm(r0, "mqs-split")["receives"]),
        [pending(0, 1, None, 8)]
    );
    assert_eq!(
        ops(&comm(r0, "mqs-wait")["receives"]),
        [pending(-1, -1, Some(1000), 4)]
    );
    let unexpected = &comm(r0, "MPI_COMM_WORLD")["unexpected"];
    let dup_unexpected = &comm(r0, "mqs-dup")["unexpected"];
    if with_ob1 {
        assert_eq!(
            ops(unexpected),
            [pending(1, 1, Some(99), 64), pending(1, 1, Some(5), 400_000)]
        );
        assert_eq!(
            ops(dup_unexpected),
            [pending(1, 1, Some(3000), 4), pending(1, 1, Some(3001), 4)]
        );
    } else {
        assert_eq!(unexpected["status"], "not_available", "{unexpected}");
    }

    let r1 = &procs[1];
    let sends = ops(&comm(r1, "MPI_COMM_WORLD")["sends"]);
    // The eager tag-99 send left inline; only the rendezvous one is left.
    assert_eq!(sends, [pending(0, 0, Some(5), 400_000)]);
    assert_eq!(
        ops(&comm(r1, "mqs-dup")["receives"]),
        [pending(0, 0, Some(11), 32)]
    );
    assert_eq!(
        ops(&comm(r1, "mqs-wait")["receives"]),
        [pending(-1, -1, Some(1000), 4)]
    );
    drop(job);
    Ok(())
}

#[test]
fn queues_on_open_mpi_with_debug_info() -> Result<(), String> {
    check_queues(Mpi::OpenMpiG)
}

#[test]
fn queues_on_open_mpi_release_build() -> Result<(), String> {
    check_queues(Mpi::OpenMpiRelease)
}

#[test]
fn ring_shows_who_waits_for_whom() -> Result<(), String> {
    let job = launch(Mpi::OpenMpiG, "ring", 3, &[])?;
    let procs = dump_job(&job)?;
    for (r, p) in procs.iter().enumerate() {
        let left = ((r + 2) % 3) as i64;
        assert_eq!(
            ops(&comm(p, "MPI_COMM_WORLD")["receives"]),
            [pending(left, left, Some(42), 4)]
        );
        assert_eq!(ops(&comm(p, "MPI_COMM_WORLD")["sends"]), []);
    }
    Ok(())
}

#[test]
fn intercommunicator_peers_are_in_the_remote_group() -> Result<(), String> {
    let job = launch(Mpi::OpenMpiG, "intercomm", 4, &[])?;
    let procs = dump_job(&job)?;
    for (r, p) in procs.iter().enumerate() {
        let inter = comm(p, "mqs-inter");
        let local: Vec<i64> = if r % 2 == 0 { vec![0, 2] } else { vec![1, 3] };
        assert_eq!(inter["group"], serde_json::json!(local));
        let recvs = ops(&inter["receives"]);
        let sends = ops(&inter["sends"]);
        match r {
            0 | 2 => assert_eq!(recvs, [pending(0, 1, Some(21), 16)]),
            1 => assert_eq!(sends, [pending(0, 0, Some(22), 400_000)]),
            _ => assert!(recvs.is_empty() && sends.is_empty()),
        }
        let unexpected = ops(&inter["unexpected"]);
        if r == 0 {
            assert_eq!(unexpected, [pending(0, 1, Some(22), 400_000)]);
        } else {
            assert!(unexpected.is_empty());
        }
    }
    Ok(())
}
