//! Each fixture starts, reaches READY on every rank under every MPI, and is
//! torn down without leaving a process behind.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mqs_tests::{
    process_alive, process_cmdline, processes_with_env, Error, Job, LaunchOptions, Mpi, NotReady,
    JOB_ENV,
};

/// Launch `fixture` with `nprocs` ranks, check what the job reports about
/// itself, shut it down and check that nothing of it is left.
fn check_fixture(mpi: Mpi, fixture: &str, nprocs: u32) {
    let job = Job::launch(mpi, fixture, nprocs, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.size(), nprocs);
    assert_eq!(job.mpi(), mpi);

    let ranks = job.rank_pids();
    let listed: Vec<u32> = ranks.iter().map(|r| r.0).collect();
    assert_eq!(listed, (0..nprocs).collect::<Vec<_>>(), "ranks in order");
    let distinct: HashSet<u32> = ranks.iter().map(|r| r.1).collect();
    assert_eq!(distinct.len(), ranks.len(), "distinct pids: {ranks:?}");

    let (stdout, _) = job.output();
    for &(rank, pid) in &ranks {
        let line = format!("READY rank={rank} pid={pid} size={nprocs}");
        assert!(stdout.lines().any(|l| l == line), "{line:?} in {stdout:?}");

        assert!(process_alive(pid), "rank {rank} (pid {pid}) alive");
        let argv = process_cmdline(pid).unwrap_or_default();
        let program = argv.first().map(|a| Path::new(a).file_name());
        assert_eq!(
            program,
            Some(Some(fixture.as_ref())),
            "rank {rank} runs the fixture: {argv:?}"
        );
        assert_eq!(job.rank_pid(rank), Some(pid));
    }

    // Every rank carries the job id, so teardown can find even orphans.
    let id = job.id().to_string();
    let tagged: Vec<u32> = processes_with_env(JOB_ENV, &id)
        .iter()
        .map(|r| r.pid)
        .collect();
    for &(rank, pid) in &ranks {
        assert!(tagged.contains(&pid), "rank {rank} has {JOB_ENV}={id}");
    }

    let recorded = job.recorded_pids();
    assert!(recorded.contains(&job.launcher_pid()));
    for &(_, pid) in &ranks {
        assert!(recorded.contains(&pid), "rank pid {pid} recorded");
    }

    let pids = job.shutdown().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pids, recorded);
    let left: Vec<u32> = pids.into_iter().filter(|p| process_alive(*p)).collect();
    assert!(left.is_empty(), "still alive after shutdown: {left:?}");
    assert_no_process_of(&id);
}

/// No process anywhere carries the job's id any more.
fn assert_no_process_of(id: &str) {
    let left = processes_with_env(JOB_ENV, id);
    assert!(left.is_empty(), "processes of job {id} left: {left:?}");
}

/// A test that panics while it holds a job must still take the job down.
fn check_teardown_on_panic(mpi: Mpi) {
    let seen = Mutex::new((Vec::new(), String::new()));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let job = Job::launch(mpi, "ring", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
        *seen.lock().unwrap() = (job.recorded_pids(), job.id().to_string());
        panic!("deliberate panic with a live job");
    }));
    let message = outcome.expect_err("the closure panics");
    let text = message
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| message.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert_eq!(text, "deliberate panic with a live job");

    let (pids, id) = seen.into_inner().unwrap();
    assert!(pids.len() >= 4, "launcher and 3 ranks recorded: {pids:?}");
    let left: Vec<u32> = pids.into_iter().filter(|p| process_alive(*p)).collect();
    assert!(left.is_empty(), "still alive after the panic: {left:?}");
    assert_no_process_of(&id);
}

/// A launcher that exits before READY is an error carrying the job's output,
/// and nothing of the job is left.
fn check_early_exit(mpi: Mpi) {
    let err = Job::launch(mpi, "queues", 2, &["not-a-number"]).expect_err("the fixture aborts");
    let Error::NotReady(details) = &err else {
        panic!("unexpected error: {err}");
    };
    let NotReady {
        reason,
        stderr,
        pids,
        ..
    } = &**details;
    assert!(reason.contains("exited early"), "{err}");
    assert!(stderr.contains("bad N 'not-a-number'"), "{err}");
    let left: Vec<u32> = pids.iter().copied().filter(|p| process_alive(*p)).collect();
    assert!(left.is_empty(), "still alive: {left:?}");
    assert_no_process_of(&details.job_id);
}

/// A job that misses the READY deadline is an error, and the teardown it
/// gets in the middle of starting up leaves nothing behind.
fn check_ready_timeout(mpi: Mpi) {
    let opts = LaunchOptions {
        timeout: Duration::from_millis(1),
        ..LaunchOptions::default()
    };
    let err = Job::launch_with(mpi, "ring", 3, &[], &opts).expect_err("1 ms is too short");
    let Error::NotReady(details) = &err else {
        panic!("unexpected error: {err}");
    };
    assert!(details.reason.contains("timed out"), "{err}");
    assert!(!details.pids.is_empty(), "the launcher was recorded: {err}");
    let left: Vec<u32> = details
        .pids
        .iter()
        .copied()
        .filter(|p| process_alive(*p))
        .collect();
    assert!(left.is_empty(), "still alive: {left:?}");
    assert_no_process_of(&details.job_id);
}

/// Set to an MPI's name, makes `hold_job_helper` launch a job and wait to be
/// killed.
const HOLD_ENV: &str = "MQS_TESTS_HOLD_JOB";

/// Run by `check_dies_with_test_process` in a child test process: launch a
/// job, say its id and sleep until killed.
#[test]
#[ignore = "helper: run by the dies_with_test_process tests"]
fn hold_job_helper() {
    let Ok(name) = std::env::var(HOLD_ENV) else {
        return;
    };
    let mpi = Mpi::all()
        .into_iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("{HOLD_ENV}={name}: no such MPI"));
    // The job must stay on this thread: the launcher's death signal is tied
    // to the thread that started it.
    let job = Job::launch(mpi, "ring", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    println!("HOLDING {}", job.id());
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// When the test process dies without unwinding (SIGKILL), its job must go
/// too: the launcher gets SIGTERM from the kernel and takes the ranks down.
fn check_dies_with_test_process(mpi: Mpi) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["hold_job_helper", "--exact", "--ignored", "--nocapture"])
        .env(HOLD_ENV, mpi.name())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let id = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("HOLDING ").map(str::to_string));
    child.kill().unwrap();
    child.wait().unwrap();
    let id = id.expect("the helper launched a job");

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = processes_with_env(JOB_ENV, &id);
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            // Do not leave them running for the next test.
            for r in &left {
                r.kill();
            }
            panic!("job {id} outlived its test process: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

macro_rules! per_mpi {
    ($($name:ident => $body:expr;)*) => {
        $(
            mod $name {
                use super::*;
                #[test]
                fn openmpi_g() {
                    ($body)(Mpi::OpenMpiG)
                }
                #[test]
                fn openmpi_release() {
                    ($body)(Mpi::OpenMpiRelease)
                }
                #[test]
                fn mpich() {
                    ($body)(Mpi::Mpich)
                }
            }
        )*
    };
}

per_mpi! {
    queues => |mpi| check_fixture(mpi, "queues", 2);
    intercomm => |mpi| check_fixture(mpi, "intercomm", 4);
    ring => |mpi| check_fixture(mpi, "ring", 3);
    split_ring => |mpi| check_fixture(mpi, "split_ring", 4);
    chain => |mpi| check_fixture(mpi, "chain", 4);
    barrier_mismatch => |mpi| check_fixture(mpi, "barrier_mismatch", 4);
    progress => |mpi| check_fixture(mpi, "progress", 2);
    teardown_on_panic => check_teardown_on_panic;
    early_exit => check_early_exit;
    ready_timeout => check_ready_timeout;
    dies_with_test_process => check_dies_with_test_process;
}
