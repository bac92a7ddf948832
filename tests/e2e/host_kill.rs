//! `kill -9` of mqs-dump in the middle of a dump, at several points, must
//! leave the MPI job able to run to completion: the kernel detaches a dead
//! tracer's tracees and they resume. The `finish` fixture passes a token
//! around a ring and ends by itself; a rank left stopped would stall it.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{Job, Mpi};
use support::*;

/// The job's own time limit, only reached if the test loses track of it.
const JOB_SECONDS: &str = "240";

/// Where in the dump mqs-dump is killed.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// Right after it starts (usually before it attaches).
    AtStart,
    /// As soon as it has stopped rank `.0` (traced by it).
    WhileStopping(u32),
    /// This long after it has stopped rank 0 (indexing symbols, in the DLL).
    AfterStop(Duration),
}

/// Waits until `pid` is traced by `tracer`, or the tracer exits.
fn wait_traced_by(pid: u32, tracer: &mut std::process::Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if tracer_of(pid) == Some(tracer.id()) {
            return true;
        }
        if matches!(tracer.try_wait(), Ok(Some(_))) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

#[test]
fn killing_mqs_dump_mid_dump_leaves_the_job_able_to_finish() {
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join("host-kill");
    std::fs::create_dir_all(&dir).unwrap();
    let stop_file = dir.join(format!("stop-{}", std::process::id()));
    let _ = std::fs::remove_file(&stop_file);
    let job = Job::launch(
        Mpi::OpenMpiG,
        "finish",
        2,
        &[stop_file.to_str().unwrap(), JOB_SECONDS],
    )
    .expect("launch finish");
    let ranks = job.rank_pids();
    let points = [
        Point::AtStart,
        Point::WhileStopping(0),
        Point::WhileStopping(1),
        Point::AfterStop(Duration::from_millis(20)),
        Point::AfterStop(Duration::from_millis(150)),
        Point::AfterStop(Duration::from_millis(400)),
    ];
    let mut killed_while_traced = 0;
    for point in points {
        // Through the launcher, so that one run visits every rank.
        let mut dump = Command::new(mqs_dump())
            .args(["--pid", &job.launcher_pid().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mqs-dump");
        let reached = match point {
            Point::AtStart => true,
            Point::WhileStopping(rank) => wait_traced_by(ranks[rank as usize].1, &mut dump),
            Point::AfterStop(delay) => {
                let traced = wait_traced_by(ranks[0].1, &mut dump);
                std::thread::sleep(delay);
                traced
            }
        };
        let traced_now = ranks
            .iter()
            .any(|&(_, pid)| tracer_of(pid) == Some(dump.id()));
        // SIGKILL: no handler of ours runs; only the kernel cleans up.
        let _ = dump.kill();
        let _ = dump.wait();
        if traced_now {
            killed_while_traced += 1;
        }
        assert!(
            reached || matches!(point, Point::AfterStop(_)),
            "{point:?} not reached"
        );
        for &(_, pid) in &ranks {
            assert_running_untraced(pid);
        }
    }
    assert!(
        killed_while_traced >= 2,
        "only {killed_while_traced} kills happened while a rank was stopped"
    );
    // Now let it finish: it must, with every rank still able to progress.
    std::fs::write(&stop_file, b"stop").unwrap();
    let status = job
        .wait_for_exit(Duration::from_secs(60))
        .expect("the job finishes on its own");
    assert!(status.success(), "the job ended with {status}");
    let _ = std::fs::remove_file(&stop_file);
}

/// The thread states of a process: (tid, state letter).
fn thread_states(pid: u32) -> Vec<(u32, char)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .chars()
                .next()?;
            Some((tid, state))
        })
        .collect()
}

/// Deterministic: a test DLL blocks inside mqs_update_communicator_list
/// until told, so mqs-dump is killed (SIGKILL) exactly while it is inside
/// the DLL with every rank of the job stopped; then every process, the
/// launcher included, runs on and the job finishes.
#[test]
fn killed_inside_the_dll_while_the_job_is_stopped() {
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join(format!("host-kill-dll-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stop_file = dir.join("stop");
    let job = Job::launch(
        Mpi::OpenMpiG,
        "finish",
        2,
        &[stop_file.to_str().unwrap(), JOB_SECONDS],
    )
    .expect("launch finish");
    let ranks = job.rank_pids();
    let blocking = support_program("test_dll", &["-DBLOCK_IN_DLL"], true);
    let mut dump = Command::new(mqs_dump())
        .args(["--pid", &job.launcher_pid().to_string(), "--dll"])
        .arg(&blocking)
        .env("MQS_TEST_BLOCK_DIR", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mqs-dump");
    let inside = dir.join("inside");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !inside.exists() {
        assert!(
            dump.try_wait().unwrap().is_none(),
            "mqs-dump ended before it was inside the DLL"
        );
        assert!(
            Instant::now() < deadline,
            "mqs-dump never got inside the DLL"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The moment of the kill: mqs-dump runs, inside the DLL, and every rank
    // is held by it in a ptrace stop.
    assert!(dump.try_wait().unwrap().is_none(), "mqs-dump still runs");
    for &(_, pid) in &ranks {
        assert_eq!(
            tracer_of(pid),
            Some(dump.id()),
            "rank {pid} is traced by mqs-dump"
        );
        let states = thread_states(pid);
        assert!(
            !states.is_empty() && states.iter().all(|&(_, s)| s == 't'),
            "every thread of rank {pid} is in a ptrace stop: {states:?}"
        );
    }
    let _ = dump.kill();
    let _ = dump.wait();
    for &(_, pid) in &ranks {
        assert_running_untraced(pid);
    }
    assert_running_untraced(job.launcher_pid());
    std::fs::write(&stop_file, b"stop").unwrap();
    let status = job
        .wait_for_exit(Duration::from_secs(60))
        .expect("the job finishes on its own");
    assert!(status.success(), "the job ended with {status}");
    let _ = std::fs::remove_dir_all(&dir);
}
