//! `mqs-dump launch -- mpirun ...` (MPIR launch mode) with the real
//! launchers: Open MPI 4.1.4's mpirun and MPICH 4.0.2's hydra mpiexec.
//!
//! - a hung ring, dumped --dump-after 3 s: every rank's exact queue;
//! - a job that finishes: its output passes through, a dump in the middle
//!   does not stop it, mqs-dump exits 0;
//! - a job one rank aborts, with --dump-on-abort: the abort is reported and
//!   the queues of the other ranks are shown before the job is torn down,
//!   and mqs-dump exits with the job's status;
//! - ranks on other hosts (two nodes of this machine, each in its own PID
//!   namespace): read by collectors the traced starter starts there;
//! - mqs-dump killed with SIGKILL mid-run: the job still runs to completion,
//!   untraced, with no breakpoint byte left in its starter.

mod support;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{launcher_command, Mpi, Nodes, JOB_ENV};
use serde_json::Value;
use support::*;

/// One run of `mqs-dump launch`, its output in files; everything it
/// started is killed when dropped (by pid, through the job tag).
struct Launched {
    child: Child,
    tag: String,
    dir: PathBuf,
}

impl Launched {
    fn start(mpi: Mpi, fixture: &str, ranks: u32, args: &[&str], options: &[&str]) -> Launched {
        Launched::start_env(mpi, fixture, ranks, args, options, &[])
    }

    /// [`Launched::start`] with more environment for the job.
    fn start_env(
        mpi: Mpi,
        fixture: &str,
        ranks: u32,
        args: &[&str],
        options: &[&str],
        env: &[(OsString, OsString)],
    ) -> Launched {
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("launch-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(format!("mqs-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = mqs_tests::build_fixture(mpi, fixture).expect("fixture");
        // The launcher command the test crate uses, run under mqs-dump.
        let job = launcher_command(mpi, &exe, ranks, args).expect("launcher");
        let mut cmd = Command::new(mqs_dump());
        cmd.arg("launch");
        // These tests pin what the DLL each MPI names reports, unless a
        // test names another.
        if !options.contains(&"--dll") {
            cmd.args(["--dll", "mpi"]);
        }
        cmd.args(options).arg("--output").arg(dir.join("dumps"));
        cmd.arg("--").arg(job.get_program()).args(job.get_args());
        for (k, v) in job.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        let child = cmd
            .envs(env.iter().cloned())
            .env(JOB_ENV, &tag)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .expect("start mqs-dump launch");
        Launched { child, tag, dir }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Waits for mqs-dump's exit; its code.
    fn wait(&mut self, limit: Duration) -> i32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "mqs-dump launch did not end within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                self.file("stdout"),
                self.file("stderr")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until stdout has `count` lines starting with `prefix`.
    fn await_lines(&self, prefix: &str, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self
            .file("stdout")
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
            < count
        {
            assert!(
                Instant::now() < deadline,
                "no {count} '{prefix}' lines within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                self.file("stdout"),
                self.file("stderr")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The dumps written so far (--json, one per line).
    fn dumps(&self) -> Vec<Value> {
        self.file("dumps")
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("a JSON dump per line"))
            .collect()
    }

    /// Processes of this run still alive (mqs-dump's own included).
    fn alive(&self) -> Vec<u32> {
        mqs_tests::processes_with_env(JOB_ENV, &self.tag)
            .into_iter()
            .filter(|r| r.alive())
            .map(|r| r.pid)
            .collect()
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The tracer lets go of the job when mqs-dump dies; end the job.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = mqs_tests::processes_with_env(JOB_ENV, &self.tag);
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for p in left {
                p.kill();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A posted receive: (peer, tag, length).
type Receive = (i64, i64, i64);
/// A rank's posted receives on MPI_COMM_WORLD.
type RankReceives = (i64, Vec<Receive>);

/// Every rank's posted receives, by global rank.
fn receives(dump: &Value) -> Vec<RankReceives> {
    let mut out: Vec<RankReceives> = dump["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| {
            let world = p["communicators"]["list"]
                .as_array()
                .expect("communicators")
                .iter()
                .find(|c| c["name"] == "MPI_COMM_WORLD")
                .expect("MPI_COMM_WORLD");
            let ops = world["receives"]["operations"]
                .as_array()
                .expect("receives listed")
                .iter()
                .map(|o| {
                    (
                        o["desired_local_rank"].as_i64().unwrap(),
                        o["desired_tag"].as_i64().unwrap_or(-1),
                        o["desired_length"].as_i64().unwrap(),
                    )
                })
                .collect();
            (p["global_rank"].as_i64().unwrap(), ops)
        })
        .collect();
    out.sort();
    out
}

fn ring_is_dumped_after_3_seconds(mpi: Mpi) {
    let mut run = Launched::start(mpi, "ring", 4, &[], &["--dump-after", "3", "--json"]);
    run.await_lines("READY", 4, Duration::from_secs(120));
    let deadline = Instant::now() + Duration::from_secs(60);
    while run.dumps().is_empty() {
        assert!(Instant::now() < deadline, "no dump: {}", run.file("stderr"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let dump = &run.dumps()[0];
    assert_eq!(dump["failures"].as_array().unwrap().len(), 0, "{dump}");
    // Rank r waits for r - 1 (fixtures/ring.c), MPI's own length units.
    let length = if mpi.family() == mqs_tests::Family::Mpich {
        1
    } else {
        4
    };
    let expected: Vec<RankReceives> = (0..4)
        .map(|r| (r, vec![((r + 3) % 4, 42, length)]))
        .collect();
    assert_eq!(receives(dump), expected);
    // The ring never ends: its ranks are still there, running and not
    // traced (only the starter is, by mqs-dump's tracer).
    assert!(run.child.try_wait().unwrap().is_none());
    for p in dump["processes"].as_array().unwrap() {
        assert_running_untraced(p["pid"].as_u64().unwrap() as u32);
    }
}

/// A ring on two nodes of this machine (their own PID and UTS namespaces,
/// as `tests/e2e/collect.rs` makes them): the starter's table lists
/// node-local pids that only a collector inside each node can read. In
/// launch mode mqs-dump has the traced mpirun start the collectors (its
/// tool-daemon launch, through its attach FIFO) and merges their dumps:
/// every rank's exact queue, each on its own host.
#[test]
fn open_mpi_ranks_on_other_hosts_are_read_by_collectors() {
    let nodes = Nodes::start(&["nodea", "nodeb"]).expect("nodes");
    let env = nodes.openmpi_env(2).expect("node settings");
    let run = Launched::start_env(
        Mpi::OpenMpiG,
        "ring",
        4,
        &[],
        &["--dump-after", "3", "--json"],
        &env,
    );
    run.await_lines("READY", 4, Duration::from_secs(120));
    let deadline = Instant::now() + Duration::from_secs(120);
    while run.dumps().is_empty() {
        assert!(Instant::now() < deadline, "no dump: {}", run.file("stderr"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let dump = &run.dumps()[0];
    assert_eq!(dump["failures"], serde_json::json!([]), "{dump}");
    let expected: Vec<RankReceives> = (0..4).map(|r| (r, vec![((r + 3) % 4, 42, 4)])).collect();
    assert_eq!(receives(dump), expected, "{}", run.file("stderr"));
    let mut hosts: Vec<(i64, String)> = dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["global_rank"].as_i64().unwrap(),
                p["host"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    hosts.sort();
    let on = |r: i64, h: &str| (r, h.to_string());
    assert_eq!(
        hosts,
        [
            on(0, "nodea"),
            on(1, "nodea"),
            on(2, "nodeb"),
            on(3, "nodeb")
        ]
    );
    drop(run);
}

#[test]
fn open_mpi_ring_is_dumped_after_3_seconds() {
    ring_is_dumped_after_3_seconds(Mpi::OpenMpiG);
}

#[test]
fn mpich_ring_is_dumped_after_3_seconds() {
    ring_is_dumped_after_3_seconds(Mpi::Mpich);
}

fn a_finishing_job_runs_through(mpi: Mpi) {
    // One stop file per test: the tests of both MPIs run at once.
    let stop = std::env::temp_dir().join(format!(
        "mqs-launch-stop-{}-{}",
        std::process::id(),
        mpi.name()
    ));
    let _ = std::fs::remove_file(&stop);
    // The job ends when the stop file appears, made once the dump is
    // written (a fixed run time lost the race on a loaded machine: the
    // job ended before its dump).
    let mut run = Launched::start(
        mpi,
        "finish",
        3,
        &[stop.to_str().unwrap(), "170"],
        &["--dump-after", "1", "--json"],
    );
    let deadline = Instant::now() + Duration::from_secs(150);
    while run.dumps().is_empty() {
        assert!(Instant::now() < deadline, "no dump: {}", run.file("stderr"));
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(&stop, "stop").expect("the stop file");
    let code = run.wait(Duration::from_secs(180));
    let _ = std::fs::remove_file(&stop);
    assert_eq!(code, 0, "stderr:\n{}", run.file("stderr"));
    let out = run.file("stdout");
    for rank in 0..3 {
        assert!(out.contains(&format!("READY rank={rank} ")), "{out}");
        assert!(out.contains(&format!("DONE rank={rank}")), "{out}");
    }
    // The dump in the middle saw all three ranks and let them go on.
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "{}", run.file("stderr"));
    assert_eq!(dumps[0]["processes"].as_array().unwrap().len(), 3);
    assert!(run.alive().is_empty(), "left behind: {:?}", run.alive());
}

#[test]
fn open_mpi_finishing_job_runs_through() {
    a_finishing_job_runs_through(Mpi::OpenMpiG);
}

#[test]
fn mpich_finishing_job_runs_through() {
    a_finishing_job_runs_through(Mpi::Mpich);
}

fn abort_is_reported_with_the_queues(mpi: Mpi) {
    let mut run = Launched::start(mpi, "abort", 4, &["2"], &["--dump-on-abort", "--json"]);
    let code = run.wait(Duration::from_secs(180));
    let err = run.file("stderr");
    assert_eq!(code, 3, "the job's status; stderr:\n{err}");
    assert!(
        err.contains("the job is aborting: rank 3 (pid ")
            && err.contains("called MPI_Abort with error code 3"),
        "{err}"
    );
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "{err}");
    let length = if mpi.family() == mqs_tests::Family::Mpich {
        1
    } else {
        4
    };
    let mut expected: Vec<RankReceives> = (0..3).map(|r| (r, vec![(3, 77, length)])).collect();
    expected.push((3, vec![]));
    assert_eq!(receives(&dumps[0]), expected);
}

#[test]
fn open_mpi_abort_is_reported_with_the_queues() {
    abort_is_reported_with_the_queues(Mpi::OpenMpiG);
}

#[test]
fn mpich_abort_is_reported_with_the_queues() {
    abort_is_reported_with_the_queues(Mpi::Mpich);
}

/// The starter's code at MPIR_Breakpoint, as its file has it.
fn starter_code_is_pristine(pid: u32) -> Result<(), String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| e.to_string())?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?;
    // UCX's memory hooks (libucm, loaded by an Open MPI built with UCX even
    // under ob1) patch the C library's mmap family in place, by design:
    // there the C library is left out; every other mapping still counts.
    let ucx_hooks = maps.contains("/libucm.so");
    // Every executable mapping of a file reads as the file's own bytes.
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
            continue;
        }
        if ucx_hooks && f[5].contains("/libc.so") {
            continue;
        }
        let (start, end) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        let offset = u64::from_str_radix(f[2], 16).unwrap();
        let Ok(file) = std::fs::File::open(f[5]) else {
            continue;
        };
        use std::os::unix::fs::FileExt;
        let len = (end - start) as usize;
        let mut ours = vec![0u8; len];
        let mut theirs = vec![0u8; len];
        let n = file.read_at(&mut theirs, offset).unwrap_or(0);
        mem.read_exact_at(&mut ours[..n], start)
            .map_err(|e| e.to_string())?;
        if ours[..n] != theirs[..n] {
            return Err(format!("{} differs from its file in pid {pid}", f[5]));
        }
    }
    Ok(())
}

fn killing_mqs_dump_leaves_the_job_running(mpi: Mpi, watch_ranks: bool) {
    let stop = std::env::temp_dir().join(format!(
        "mqs-launch-kill-{}-{watch_ranks}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&stop);
    let options: &[&str] = if watch_ranks {
        &["--dump-on-abort"]
    } else {
        &[]
    };
    let mut run = Launched::start(mpi, "finish", 3, &[stop.to_str().unwrap(), "300"], options);
    run.await_lines("READY", 3, Duration::from_secs(120));
    let front = run.child.id();
    // SAFETY: kill(2) of the mqs-dump we started, still our unreaped child.
    assert_eq!(unsafe { libc::kill(front as i32, libc::SIGKILL) }, 0);
    let _ = run.child.wait();
    // The tracer restores and detaches, then exits.
    let deadline = Instant::now() + Duration::from_secs(20);
    let job: Vec<u32> = loop {
        let left: Vec<u32> = run
            .alive()
            .into_iter()
            .filter(|&p| {
                !mqs_tests::process_cmdline(p)
                    .is_some_and(|c| c.iter().any(|a| a == "__trace-starter"))
            })
            .collect();
        let tracer_gone = run.alive().len() == left.len();
        if tracer_gone || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!job.is_empty(), "the job is gone: {}", run.file("stderr"));
    for &pid in &job {
        assert_running_untraced(pid);
        starter_code_is_pristine(pid).unwrap();
    }
    // Let it finish; it must, by itself.
    std::fs::write(&stop, b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run.alive().is_empty() {
        assert!(Instant::now() < deadline, "the job did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = run.file("stdout");
    for rank in 0..3 {
        assert!(out.contains(&format!("DONE rank={rank}")), "{out}");
    }
    let _ = std::fs::remove_file(&stop);
}

#[test]
fn open_mpi_job_survives_sigkill_of_mqs_dump() {
    killing_mqs_dump_leaves_the_job_running(Mpi::OpenMpiG, false);
    killing_mqs_dump_leaves_the_job_running(Mpi::OpenMpiG, true);
}

#[test]
fn mpich_job_survives_sigkill_of_mqs_dump() {
    killing_mqs_dump_leaves_the_job_running(Mpi::Mpich, false);
    killing_mqs_dump_leaves_the_job_running(Mpi::Mpich, true);
}

#[test]
fn launch_errors() {
    // Nothing to run, a program that does not exist, a program that is not
    // an MPI starter.
    let out = run(&["launch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["launch", "--", "/nonexistent/mpirun"]);
    assert_error(&out, 1, &["/nonexistent/mpirun", "no such program"]);
    // A program that never maps MPIR symbols runs as it would anyway, and
    // mqs-dump says so.
    let out = run(&["launch", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not an MPI starter"),
        "{}",
        stderr(&out)
    );
    let out = run(&["launch", "--", "/bin/false"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// `launch --watch`: the ring's deadlock is reported within three snapshot
/// periods, with exit 12; the job is left as it is (untraced).
fn watch_reports_the_ring(mpi: Mpi) {
    let mut run = Launched::start(mpi, "ring", 4, &[], &["--watch", "1"]);
    let started = Instant::now();
    let code = run.wait(Duration::from_secs(180));
    let err = run.file("stderr");
    assert_eq!(code, 12, "stderr:\n{err}");
    assert!(err.contains("two snapshots in a row agree"), "{err}");
    let report = run.file("dumps");
    assert!(report.contains("deadlock"), "{report}");
    // Spawn plus three periods, with room for a slow machine.
    assert!(started.elapsed() < Duration::from_secs(120));
    let ranks: Vec<u32> = run
        .alive()
        .into_iter()
        .filter(|&p| {
            mqs_tests::process_cmdline(p)
                .is_some_and(|c| c.first().is_some_and(|a| a.ends_with("/ring")))
        })
        .collect();
    assert_eq!(ranks.len(), 4, "the ranks are still there");
    for pid in ranks {
        assert_running_untraced(pid);
    }
}

#[test]
fn open_mpi_watch_reports_the_ring() {
    watch_reports_the_ring(Mpi::OpenMpiG);
}

#[test]
fn mpich_watch_reports_the_ring() {
    watch_reports_the_ring(Mpi::Mpich);
}

/// The chain fixture: dumped while rank i waits for i+1, then released
/// (SIGUSR1 to the last rank): the job ends cleanly and so does mqs-dump.
fn chain_is_dumped_then_completes(mpi: Mpi) {
    let mut run = Launched::start(mpi, "chain", 4, &[], &["--dump-after", "2", "--json"]);
    run.await_lines("READY", 4, Duration::from_secs(120));
    let deadline = Instant::now() + Duration::from_secs(60);
    // The blocking receives are posted just after READY: the first dump
    // must show them all (a later one would not come).
    while run.dumps().is_empty() {
        assert!(Instant::now() < deadline, "no dump: {}", run.file("stderr"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let length = if mpi.family() == mqs_tests::Family::Mpich {
        1
    } else {
        4
    };
    let mut expected: Vec<RankReceives> = (0..3).map(|r| (r, vec![(r + 1, 20, length)])).collect();
    expected.push((3, vec![]));
    assert_eq!(receives(&run.dumps()[0]), expected);
    let last: u32 = run
        .file("stdout")
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("READY rank=3 pid=")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .expect("rank 3's READY line");
    // SAFETY: kill(2) of the job's last rank, alive (it waits for this).
    assert_eq!(unsafe { libc::kill(last as i32, libc::SIGUSR1) }, 0);
    let code = run.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "stderr:\n{}", run.file("stderr"));
    assert!(run.alive().is_empty(), "left behind: {:?}", run.alive());
}

#[test]
fn open_mpi_chain_is_dumped_then_completes() {
    chain_is_dumped_then_completes(Mpi::OpenMpiG);
}

#[test]
fn mpich_chain_is_dumped_then_completes() {
    chain_is_dumped_then_completes(Mpi::Mpich);
}
