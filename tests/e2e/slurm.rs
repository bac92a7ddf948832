//! The test Slurm itself (`Slurm`: a munged, a slurmctld and two slurmds
//! on this machine, each node its own PID, UTS and mount namespace): it
//! runs steps on both nodes, and takes everything down whatever happens to
//! its test.

mod support;

use mqs_tests::{Mpi, Slurm, JOB_ENV};

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
