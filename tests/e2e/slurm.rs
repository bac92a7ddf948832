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
//! the starter and by job id; a batch job's `mpirun` on a node, by job id;
//! launch mode through srun. And the errors of `--slurm`, each
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

/// The name of the collectors' step (host/mqs-acquire/src/slurm.rs).
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

    // The collectors in a tree (fan-out 1: one node's collector reports
    // through the other's), both ways: the same job.
    let (out, _) = timed(&["--pid", &srun, "--json", "--fanout", "1"]);
    let dump = succeeded(out, "mqs-dump --pid <srun> --fanout 1");
    assert_every_rank(
        &dump,
        expected,
        &direct,
        per_node,
        "--pid <srun> --fanout 1",
    );
    assert_left_running(&slurm, &job, &jobid);
    let (out, _) = dump_slurm(&slurm, &["--slurm", &jobid, "--json", "--fanout", "1"]);
    let dump = succeeded(out, "mqs-dump --slurm JOBID --fanout 1");
    assert_every_rank(
        &dump,
        expected,
        &direct,
        per_node,
        "--slurm JOBID --fanout 1",
    );
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

/// A ring across both nodes: `--deadlock` with stacks finds the cycle of
/// all four ranks through srun and by job id (exit 12).
#[test]
fn a_ring_across_the_nodes_is_a_deadlock_both_ways() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let job = slurm
        .srun_job(Mpi::OpenMpiG, "ring", 2, &[])
        .expect("a ring under srun");
    let jobid = the_job(&slurm);
    let srun = job.launcher_pid().to_string();
    for args in [
        ["--pid", srun.as_str(), "--stacks", "--deadlock"],
        ["--slurm", jobid.as_str(), "--stacks", "--deadlock"],
    ] {
        let (out, _) = dump_slurm(&slurm, &args);
        assert_eq!(out.status.code(), Some(12), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.contains("deadlocked: ranks 0-3 in 1 cycle"),
            "{args:?}: {text}"
        );
        assert_left_running(&slurm, &job, &jobid);
    }
    job.shutdown().expect("teardown");
}

/// A batch job: its script runs `mpirun` on the first node, inside it, so
/// no pid of it means anything here; `--slurm JOBID` reads every rank on
/// both nodes, equal to direct dumps and to the queues fixture.
#[test]
fn a_batch_jobs_mpirun_on_a_node_is_read_by_job_id() {
    let per_node = 2;
    let slurm = Slurm::start().expect("a two-node Slurm");
    let exe = mqs_tests::build_fixture(Mpi::OpenMpiG, "queues").expect("fixture");
    let mpirun = Mpi::OpenMpiG.launcher().expect("mpirun");
    let output = slurm.dir().join("batch.out");
    let tag = Job::new_id("batch");
    let mut cmd = slurm.command("sbatch");
    cmd.arg("--parsable")
        .arg(format!("--nodes={}", mqs_tests::SLURM_NODES.len()))
        .arg(format!("--ntasks-per-node={per_node}"))
        .arg(format!("--output={}", output.display()))
        .arg(format!(
            "--wrap=exec {} -np {} {}",
            mpirun.display(),
            per_node * 2,
            exe.display()
        ))
        .envs([
            ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
            ("OMPI_MCA_pml", "ob1"),
            ("OMPI_MCA_btl", "self,vader,tcp"),
            ("OMPI_MCA_mpi_yield_when_idle", "1"),
            ("OMPI_MCA_hwloc_base_binding_policy", "none"),
            ("OMPI_MCA_btl_base_warn_component_unused", "0"),
            ("OMPI_MPIR_DO_NOT_WARN", "1"),
        ])
        .env(JOB_ENV, &tag)
        .stdin(Stdio::null());
    let out = cmd.output().expect("sbatch");
    assert!(out.status.success(), "sbatch: {}", stderr(&out));
    let jobid = stdout(&out).trim().to_string();

    // Each rank's READY line, in the job's output file (node-local pids).
    let deadline = Instant::now() + Duration::from_secs(90);
    let pids: BTreeMap<i64, u32> = loop {
        let text = std::fs::read_to_string(&output).unwrap_or_default();
        let ready: BTreeMap<i64, u32> = text
            .lines()
            .filter_map(|l| {
                let mut rank = None;
                let mut pid = None;
                for word in l.strip_prefix("READY ")?.split_whitespace() {
                    match word.split_once('=')? {
                        ("rank", v) => rank = v.parse().ok(),
                        ("pid", v) => pid = v.parse().ok(),
                        _ => {}
                    }
                }
                Some((rank?, pid?))
            })
            .collect();
        if ready.len() == (per_node * 2) as usize {
            break ready;
        }
        assert!(
            Instant::now() < deadline,
            "the batch job did not get ready: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let direct: BTreeMap<i64, Value> = pids
        .iter()
        .map(|(&rank, pid)| {
            let node = node_of(rank, per_node);
            let out = slurm
                .command_in(&node, mqs_dump())
                .expect("nsenter")
                .args(["--pid", &pid.to_string(), "--json"])
                .stdin(Stdio::null())
                .output()
                .expect("run mqs-dump in a node");
            let dump = succeeded(out, &format!("a direct dump of rank {rank} in {node}"));
            (rank, dump["processes"][0].clone())
        })
        .collect();
    let expected = contents::queues_on_nodes(per_node * 2, per_node, 0);
    let (out, took) = dump_slurm(&slurm, &["--slurm", &jobid, "--json"]);
    let dump = succeeded(out, "mqs-dump --slurm <batch job>");
    assert_every_rank(&dump, &expected, &direct, per_node, "--slurm <batch job>");
    eprintln!("a batch job's 4 ranks by job id: {took:?}");
    let steps = slurm.steps().expect("squeue -s");
    assert!(
        steps.iter().all(|(_, name)| name != TOOL_STEP),
        "the tool step is still there: {steps:?}"
    );
    assert_eq!(slurm.jobs().expect("squeue"), std::slice::from_ref(&jobid));
    let out = slurm.run("scancel", &[&jobid]).expect("scancel");
    assert!(out.status.success(), "{out:?}");
}

/// A job dumped both ways runs on: released, it completes, and srun exits
/// with its status.
fn a_job_dumped_through_slurm_runs_on_and_completes(mpi: Mpi) {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let stop = slurm.dir().join("stop");
    let job = slurm
        .srun_job(mpi, "finish", 1, &[stop.to_str().unwrap(), "300"])
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

#[test]
fn open_mpi_job_dumped_through_slurm_runs_on_and_completes() {
    a_job_dumped_through_slurm_runs_on_and_completes(Mpi::OpenMpiG);
}

#[test]
fn mpich_job_dumped_through_slurm_runs_on_and_completes() {
    a_job_dumped_through_slurm_runs_on_and_completes(Mpi::Mpich);
}

/// `--slurm` with a job that cannot be read: one line naming the fix, and
/// an exit code of its own for each case.
#[test]
fn slurm_jobs_that_cannot_be_read_are_one_line_errors_with_their_own_codes() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    // The test clusters number their jobs from 1000 on.
    let (out, _) = dump_slurm(&slurm, &["--slurm", "999"]);
    assert_error(&out, 18, &["Slurm job 999 does not exist", "squeue"]);
    let (out, _) = dump_slurm(&slurm, &["--slurm", "999.0"]);
    assert_error(&out, 18, &["Slurm job 999 does not exist"]);

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

/// `mqs-dump launch ... -- srun ...` on the cluster, its output in files;
/// what it started is killed when dropped (by pid, through the job tag).
struct Launched {
    child: std::process::Child,
    tag: String,
    dir: std::path::PathBuf,
}

impl Launched {
    fn start(slurm: &Slurm, mpi: Mpi, fixture: &str, args: &[&str], options: &[&str]) -> Self {
        let tag = mqs_tests::Job::new_id("launch");
        let dir = slurm.dir().join(&tag);
        std::fs::create_dir_all(&dir).expect("a dir");
        let exe = mqs_tests::build_fixture(mpi, fixture).expect("fixture");
        let srun = slurm.srun_command(mpi, &exe, 2, args);
        let mut cmd = slurm.command(mqs_dump());
        cmd.arg("launch")
            .args(options)
            .arg("--output")
            .arg(dir.join("dumps"))
            .arg("--")
            .arg(srun.get_program())
            .args(srun.get_args())
            .current_dir(exe.parent().expect("a dir"));
        for (k, v) in srun.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        let child = cmd
            .env(JOB_ENV, &tag)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("stdout")).expect("stdout"))
            .stderr(std::fs::File::create(dir.join("stderr")).expect("stderr"))
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
                "mqs-dump launch did not end within {limit:?}\nstdout:\n{}\nstderr:\n{}\n\
                 dumps:\n{}",
                self.file("stdout"),
                self.file("stderr"),
                self.file("dumps").chars().take(3000).collect::<String>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    }
}

/// `launch --dump-after` through srun: srun traced from its start (its
/// MPIR breakpoint; Slurm wakes the tasks it holds for the debugger), the
/// dump of every rank on both nodes, then the job runs to its end and
/// mqs-dump exits with its status.
#[test]
fn launch_through_srun_dumps_every_rank_and_exits_with_the_jobs_status() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let mut run = Launched::start(
        &slurm,
        Mpi::OpenMpiG,
        "finish",
        &["/nonexistent", "20"],
        &["--dump-after", "5", "--json"],
    );
    let code = run.wait(Duration::from_secs(120));
    let (out, err) = (run.file("stdout"), run.file("stderr"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.matches("DONE rank=").count(), 4, "{out}");
    let dumps: Vec<Value> = run
        .file("dumps")
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON dump per line"))
        .collect();
    assert_eq!(dumps.len(), 1, "{err}");
    assert_eq!(dumps[0]["failures"], serde_json::json!([]), "{}", dumps[0]);
    let hosts: Vec<String> = hosts_of(&dumps[0]).into_values().collect();
    assert_eq!(hosts, ["nodea", "nodea", "nodeb", "nodeb"], "{}", dumps[0]);
}

/// `launch --watch` through srun: the ring's deadlock across both nodes,
/// exit 12.
#[test]
fn launch_watch_through_srun_finds_the_ring_across_both_nodes() {
    let slurm = Slurm::start().expect("a two-node Slurm");
    let mut run = Launched::start(&slurm, Mpi::OpenMpiG, "ring", &[], &["--watch", "1"]);
    let started = Instant::now();
    let code = run.wait(Duration::from_secs(180));
    eprintln!("launch --watch through srun: {:?}", started.elapsed());
    let err = run.file("stderr");
    assert_eq!(code, 12, "stderr:\n{err}\nstdout:\n{}", run.file("stdout"));
    assert!(err.contains("two snapshots in a row agree"), "{err}");
    let report = run.file("dumps");
    assert!(
        report.contains("deadlocked: ranks 0-3 in 1 cycle"),
        "{report}"
    );
    // The job is left as it was found, for the user to see: its step runs.
    assert_eq!(slurm.jobs().expect("squeue").len(), 1, "{report}");
}
