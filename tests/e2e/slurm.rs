//! Slurm jobs, on a real two-node Slurm of this machine (`Slurm`: a
//! slurmctld and two slurmds, each node its own PID, UTS and mount
//! namespace, so the pids srun's table lists mean something only inside
//! their node, as on a cluster).
//!
//! A hung job of the queues fixture started by `srun` directly (Open MPI
//! 4.1.4 through PMIx, MPICH ch3 through Slurm's PMI-2 plugin), read by
//! `mqs-dump --pid <srun>` (collectors started as an overlapping step of the
//! job) and by `mqs-dump --slurm JOBID` (collectors that find the ranks on
//! their node): every rank equals a direct dump made inside its node and the
//! fixture's exact contents; the tool step has ended afterwards and the job
//! runs on, and completes when released. The same for `mpirun` (Open MPI
//! 4.1.4 and 5.0.7) and hydra's `mpiexec` (MPICH) inside `salloc`, through
//! the starter and by job id. And the errors of `--slurm`, each
//! with its exit code.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use mqs_tests::contents::{self, Process};
use mqs_tests::{Job, Mpi, Slurm, JOB_ENV};
use serde_json::Value;
use support::*;

/// The name of the collectors' step (acquire/src/slurm.rs).
const TOOL_STEP: &str = "mqs-dump-collectors";

/// mqs-dump run against the cluster (`SLURM_CONF` names it).
fn dump_slurm(slurm: &Slurm, args: &[&str]) -> (std::process::Output, Duration) {
    let conf = slurm.conf().to_str().expect("a UTF-8 path").to_string();
    let start = Instant::now();
    let out = run_env(args, &[("SLURM_CONF", &conf)]);
    (out, start.elapsed())
}

/// The id of the one Slurm job running.
fn the_job(slurm: &Slurm) -> String {
    let jobs = slurm.jobs().expect("squeue");
    assert_eq!(jobs.len(), 1, "one job expected: {jobs:?}");
    jobs[0].clone()
}

/// The node of each rank: `per_node` ranks on each node, nodea first.
fn node_of(rank: i64, per_node: i64) -> String {
    mqs_tests::SLURM_NODES[usize::try_from(rank / per_node).expect("a rank")].to_string()
}

/// Direct dumps of each rank, made inside its node by its node-local pid.
fn direct_in_nodes(slurm: &Slurm, job: &Job, per_node: i64) -> BTreeMap<i64, Value> {
    job.rank_pids()
        .into_iter()
        .map(|(rank, pid)| {
            let node = node_of(i64::from(rank), per_node);
            let out = slurm
                .command_in(&node, mqs_dump())
                .expect("nsenter")
                .args(["--pid", &pid.to_string(), "--json"])
                .stdin(Stdio::null())
                .output()
                .expect("run mqs-dump in a node");
            let dump = succeeded(out, &format!("a direct dump of rank {rank} in {node}"));
            (i64::from(rank), dump["processes"][0].clone())
        })
        .collect()
}

/// Every rank of `dump` on its node, without failures, with exactly the
/// fixture's queues, and equal to the direct dumps.
fn assert_every_rank(
    dump: &Value,
    expected: &[Process],
    direct: &BTreeMap<i64, Value>,
    per_node: i64,
    what: &str,
) {
    assert_eq!(dump["failures"], serde_json::json!([]), "{what}: {dump}");
    let hosts = hosts_of(dump);
    let wanted: BTreeMap<i64, String> = (0..expected.len() as i64)
        .map(|r| (r, node_of(r, per_node)))
        .collect();
    assert_eq!(hosts, wanted, "{what}: each rank on its node");
    let ranks = by_rank(dump);
    for process in expected {
        contents::check_ours(process, &ranks[&process.rank]["communicators"])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert_same_ranks(dump, direct, what);
}

/// What a dump leaves: no tool step, no collector, every rank running
/// untraced, the job still running.
fn assert_left_running(slurm: &Slurm, job: &Job, jobid: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let steps = slurm.steps().expect("squeue -s");
        let collectors: Vec<u32> = slurm
            .node_processes()
            .into_iter()
            .filter(|(_, pid, _)| {
                mqs_tests::process_cmdline(*pid)
                    .is_some_and(|c| c.iter().any(|a| a == "__collector"))
            })
            .map(|(_, pid, _)| pid)
            .collect();
        if collectors.is_empty() && steps.iter().all(|(_, name)| name != TOOL_STEP) {
            assert_eq!(
                steps.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
                [format!("{jobid}.0")],
                "the job's own step, running on"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the tool step is still there: steps {steps:?}, collectors {collectors:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        mqs_tests::process_alive(job.launcher_pid()),
        "srun has ended"
    );
    let per_node = i64::from(job.size()) / mqs_tests::SLURM_NODES.len() as i64;
    for (rank, local) in job.rank_pids() {
        let node = node_of(i64::from(rank), per_node);
        let pid = slurm
            .global_pid(&node, local)
            .expect("the node's processes")
            .unwrap_or_else(|| panic!("rank {rank} (pid {local} in {node}) is gone"));
        assert_running_untraced(pid);
    }
}

/// A hung queues job of `mpi` with 2 ranks on each node, read through srun
/// and through `--slurm`.
fn srun_job_read_whole(mpi: Mpi, expected: &[Process]) {
    let per_node = 2;
    let slurm = Slurm::start().expect("a two-node Slurm");
    let job = slurm
        .srun_job(mpi, "queues", per_node as u32, &[])
        .expect("a queues job under srun");
    let jobid = the_job(&slurm);
    let direct = direct_in_nodes(&slurm, &job, per_node);

    // Through srun's table, with no SLURM_CONF of our own: the collectors'
    // step goes to the cluster srun names.
    let srun = job.launcher_pid().to_string();
    let (out, by_pid) = timed(&["--pid", &srun, "--json"]);
    let dump = succeeded(out, "mqs-dump --pid <srun>");
    assert_every_rank(&dump, expected, &direct, per_node, "--pid <srun>");
    assert_left_running(&slurm, &job, &jobid);

    // srun's forked helper (its table is empty) leads to its parent.
    let helper = mqs_tests::descendants(job.launcher_pid())
        .into_iter()
        .find(|p| {
            mqs_tests::process_cmdline(p.pid)
                .and_then(|c| c.first().cloned())
                .is_some_and(|a| Path::new(&a).file_name().is_some_and(|n| n == "srun"))
        })
        .expect("srun's helper");
    let out = run(&["--pid", &helper.pid.to_string(), "--json"]);
    let through_helper = succeeded(out, "mqs-dump --pid <srun's helper>");
    assert_same_ranks(&through_helper, &direct, "--pid <srun's helper>");
    assert_left_running(&slurm, &job, &jobid);

    // By job id: collectors find the ranks on their nodes themselves.
    let (out, by_id) = dump_slurm(&slurm, &["--slurm", &jobid, "--json"]);
    let dump = succeeded(out, "mqs-dump --slurm JOBID");
    assert_every_rank(&dump, expected, &direct, per_node, "--slurm JOBID");
    assert_left_running(&slurm, &job, &jobid);
    let (out, _) = dump_slurm(&slurm, &["--slurm", &format!("{jobid}.0"), "--json"]);
    let dump = succeeded(out, "mqs-dump --slurm JOBID.0");
    assert_every_rank(&dump, expected, &direct, per_node, "--slurm JOBID.0");
    assert_left_running(&slurm, &job, &jobid);
    eprintln!(
        "{} ranks of {}: --pid <srun> {by_pid:?}, --slurm {by_id:?}",
        expected.len(),
        mpi.name()
    );
    job.shutdown().expect("teardown");
}

#[test]
fn open_mpi_under_srun_pmix_every_rank_through_srun_and_by_job_id() {
    srun_job_read_whole(Mpi::OpenMpiG, &contents::queues_on_nodes(4, 2, 0));
}

#[test]
fn mpich_under_srun_pmi2_every_rank_through_srun_and_by_job_id() {
    srun_job_read_whole(
        Mpi::Mpich,
        &contents::over_network(contents::mpich_queues(4, 0)),
    );
}

/// A hung queues job of `mpi` started by the MPI's own starter inside
/// `salloc` (2 ranks on each node), read through the starter and through
/// `--slurm`.
fn salloc_job_read_whole(mpi: Mpi, expected: &[Process]) {
    let per_node = 2;
    let slurm = Slurm::start().expect("a two-node Slurm");
    let job = slurm
        .salloc_job(mpi, "queues", per_node as u32, &[])
        .expect("a queues job under salloc");
    let starter = Slurm::starter_of(&job).expect("the starter salloc runs");
    let jobid = the_job(&slurm);
    let direct = direct_in_nodes(&slurm, &job, per_node);

    let (out, by_pid) = timed(&["--pid", &starter.to_string(), "--json"]);
    let dump = succeeded(out, "mqs-dump --pid <starter>");
    assert_every_rank(&dump, expected, &direct, per_node, "--pid <starter>");
    assert_left_running(&slurm, &job, &jobid);

    let (out, by_id) = dump_slurm(&slurm, &["--slurm", &jobid, "--json"]);
    let dump = succeeded(out, "mqs-dump --slurm JOBID");
    assert_every_rank(&dump, expected, &direct, per_node, "--slurm JOBID");
    assert_left_running(&slurm, &job, &jobid);
    eprintln!(
        "{} ranks of {} in salloc: --pid <starter> {by_pid:?}, --slurm {by_id:?}",
        expected.len(),
        mpi.name()
    );
    job.shutdown().expect("teardown");
}

#[test]
fn open_mpi_mpirun_in_salloc_every_rank_through_mpirun_and_by_job_id() {
    salloc_job_read_whole(Mpi::OpenMpiG, &contents::queues_on_nodes(4, 2, 0));
}

#[test]
fn open_mpi_5_mpirun_in_salloc_every_rank_through_prterun_and_by_job_id() {
    salloc_job_read_whole(Mpi::OpenMpi5G, &contents::queues_on_nodes(4, 2, 0));
}

#[test]
fn mpich_mpiexec_in_salloc_every_rank_through_mpiexec_and_by_job_id() {
    salloc_job_read_whole(
        Mpi::Mpich,
        &contents::over_network(contents::mpich_queues(4, 0)),
    );
}

/// A job dumped both ways runs on: released, it completes, and srun exits
/// with its status.
#[test]
fn a_job_dumped_through_slurm_runs_on_and_completes() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let stop = slurm.dir().join("stop");
    let job = slurm
        .srun_job(Mpi::OpenMpiG, "finish", 1, &[stop.to_str().unwrap(), "300"])
        .expect("a finish job under srun");
    let jobid = the_job(&slurm);
    let srun = job.launcher_pid().to_string();
    for (out, what) in [
        (timed(&["--pid", &srun, "--json"]).0, "--pid <srun>"),
        (
            dump_slurm(&slurm, &["--slurm", &jobid, "--json"]).0,
            "--slurm",
        ),
    ] {
        let dump = succeeded(out, what);
        assert_eq!(dump["failures"], serde_json::json!([]), "{what}: {dump}");
        assert_eq!(
            hosts_of(&dump).into_values().collect::<Vec<_>>(),
            mqs_tests::SLURM_NODES,
            "{what}"
        );
        assert_left_running(&slurm, &job, &jobid);
    }
    std::fs::write(&stop, "").expect("the stop file");
    let deadline = Instant::now() + Duration::from_secs(60);
    while job.output().0.matches("DONE rank=").count() < 2 {
        assert!(
            Instant::now() < deadline,
            "the job did not complete: {:?}",
            job.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = job
        .wait_for_exit(Duration::from_secs(60))
        .expect("srun ends");
    assert!(status.success(), "{status}");
}

/// `--slurm` with a job that cannot be read: one line naming the fix, and
/// an exit code of its own for each case.
#[test]
fn slurm_jobs_that_cannot_be_read_are_one_line_errors_with_their_own_codes() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let (out, _) = dump_slurm(&slurm, &["--slurm", "4242"]);
    assert_error(&out, 18, &["Slurm job 4242 does not exist", "squeue"]);
    let (out, _) = dump_slurm(&slurm, &["--slurm", "4242.0"]);
    assert_error(&out, 18, &["Slurm job 4242 does not exist"]);

    // A job that has ended: Slurm still knows it (MinJobAge), as completed.
    let out = slurm
        .run("srun", &["-N1", "sh", "-c", "echo $SLURM_JOB_ID"])
        .expect("a short job");
    assert!(out.status.success(), "{out:?}");
    let ended = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (out, _) = dump_slurm(&slurm, &["--slurm", &ended]);
    assert_error(
        &out,
        19,
        &[&format!("Slurm job {ended} has ended"), "running"],
    );

    // A step the running job does not have.
    let job = slurm
        .srun_job(Mpi::OpenMpiG, "queues", 1, &[])
        .expect("a queues job under srun");
    let jobid = the_job(&slurm);
    let (out, _) = dump_slurm(&slurm, &["--slurm", &format!("{jobid}.7")]);
    assert_error(&out, 18, &[&format!("no step {jobid}.7"), "squeue -s"]);
    job.shutdown().expect("teardown");

    assert_error(&run(&["--slurm", "12x"]), 2, &["--slurm \"12x\""]);
}

#[test]
fn slurm_without_srun_on_path_says_where_to_run_it() {
    let empty = std::env::temp_dir().join(format!("mqs-no-slurm-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("an empty dir");
    let out = run_env(
        &["--slurm", "12"],
        &[("PATH", empty.to_str().expect("a UTF-8 path"))],
    );
    let _ = std::fs::remove_dir(&empty);
    assert_error(
        &out,
        25,
        &["no srun on PATH", "add their directory to PATH"],
    );
}

/// The cluster itself: it runs steps on both nodes, in their own
/// namespaces; a test that panics with the cluster up and a job running
/// still leaves no daemon, step or rank behind, nor its directory.
#[test]
fn the_cluster_runs_steps_and_leaves_nothing_behind_when_its_test_panics() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let slurm = Slurm::start().expect("a two-node Slurm");
        let out = slurm
            .run(
                "srun",
                &[
                    "-N2",
                    "--ntasks-per-node=1",
                    "--distribution=block",
                    "hostname",
                ],
            )
            .expect("srun hostname");
        let stop = slurm.dir().join("stop");
        let job = slurm
            .srun_job(Mpi::OpenMpiG, "finish", 1, &[stop.to_str().unwrap(), "300"])
            .expect("a finish job under srun");
        let namespaces: Vec<std::path::PathBuf> = slurm
            .daemons()
            .iter()
            .filter_map(|d| std::fs::read_link(format!("/proc/{}/ns/pid", d.pid)).ok())
            .collect();
        let _ = tx.send((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            slurm.daemons(),
            slurm.node_processes().len(),
            namespaces,
            slurm.dir().to_path_buf(),
            job.id().to_string(),
        ));
        panic!("a test that fails with its cluster up and a job running (on purpose)");
    })
    .join();
    assert!(outcome.is_err(), "the test thread panicked");
    let (hostnames, daemons, inside, namespaces, dir, job) = rx.recv().expect("what it saw");
    let mut names: Vec<&str> = hostnames.lines().collect();
    names.sort_unstable();
    assert_eq!(names, ["nodea", "nodeb"], "the steps' hostnames");
    // slurmd's, slurmstepd's and the ranks at least.
    assert!(inside >= 6, "{inside} processes in the nodes");
    for daemon in &daemons {
        assert!(!daemon.alive(), "daemon {daemon:?} still runs");
    }
    let ours = std::fs::read_link("/proc/self/ns/pid").expect("our namespace");
    let left: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                .is_ok_and(|ns| ns != ours && namespaces.contains(&ns))
        })
        .collect();
    let described: Vec<String> = left
        .iter()
        .map(|&pid| format!("{pid} {:?}", mqs_tests::process_cmdline(pid)))
        .collect();
    assert!(
        left.is_empty(),
        "processes left in the nodes: {described:?}"
    );
    assert_eq!(
        mqs_tests::processes_with_env(JOB_ENV, &job),
        [],
        "the job's processes"
    );
    assert!(!dir.exists(), "{} is left", dir.display());
}
