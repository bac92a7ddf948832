//! Finding a job's processes when the pids given are not one healthy
//! starter: several `--pid`s at once (two jobs, hand-picked ranks), and a
//! starter whose MPIR_proctable has every defect real launchers shipped
//! (`tests/support/mpi2dd_starter.c mpir`: `localhost`, this host's own
//! name, pid 0, a duplicate pid, a rank that exited, another node, a
//! relative executable path).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use mqs_tests::{Job, Mpi};
use serde_json::Value;
use support::*;

/// (pid, global rank) of every process dumped, in order.
fn dumped(dump: &Value) -> Vec<(u64, i64)> {
    dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["global_rank"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// (rank, message) of every failure.
fn failures(dump: &Value) -> Vec<(u64, String)> {
    dump["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rank"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pids(job: &Job) -> Vec<u64> {
    job.rank_pids()
        .into_iter()
        .map(|(_, p)| u64::from(p))
        .collect()
}

#[test]
fn two_jobs_are_stopped_together_and_numbered_one_after_the_other() {
    let a = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("job a");
    let b = Job::launch(Mpi::Mpich, "queues", 2, &[]).expect("job b");
    let (pa, pb) = (pids(&a), pids(&b));
    // Both starters: every rank of both jobs, a's first.
    let out = run(&[
        "--pid",
        &a.launcher_pid().to_string(),
        "--pid",
        &b.launcher_pid().to_string(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dump: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        dumped(&dump),
        [(pa[0], 0), (pa[1], 1), (pb[0], 2), (pb[1], 3)]
    );
    // Hand-picked ranks: rank 1 of a keeps its world rank; b's rank 0 comes
    // after it; a's rank 1 named twice (as itself and through a's starter)
    // is dumped once.
    let out = run(&[
        "--pid",
        &pa[1].to_string(),
        "--pid",
        &pb[0].to_string(),
        "--pid",
        &a.launcher_pid().to_string(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dump: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(dumped(&dump), [(pa[1], 1), (pb[0], 2), (pa[0], 3)]);
    for pid in pa.iter().chain(&pb) {
        assert_running_untraced(*pid as u32);
    }
}

#[test]
fn a_starter_with_a_defective_table_still_gives_its_good_ranks() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("queues job");
    let ranks = pids(&job);
    let exe = support_program("mpi2dd_starter", &[], false);
    let mut starter = Command::new(exe)
        .arg("mpir")
        .arg(ranks[0].to_string())
        .arg(ranks[1].to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fake starter");
    let mut line = String::new();
    BufReader::new(starter.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: u32 = line
        .trim()
        .strip_prefix("MPIR pid=")
        .unwrap()
        .parse()
        .unwrap();
    let out = run(&["--pid", &pid.to_string(), "--json"]);
    let dump: Value = serde_json::from_slice(&out.stdout).expect("a dump despite the defects");
    assert_eq!(dumped(&dump), [(ranks[0], 0), (ranks[1], 1)]);
    let reasons = failures(&dump);
    let reason = |rank: u64| {
        reasons
            .iter()
            .find(|(r, _)| *r == rank)
            .map(|(_, m)| m.clone())
            .unwrap_or_else(|| panic!("no failure for rank {rank}: {reasons:?}"))
    };
    assert!(reason(2).contains("not started"), "{}", reason(2));
    assert!(
        reason(3).contains("pid") && reason(3).contains("rank 0"),
        "{}",
        reason(3)
    );
    assert!(reason(4).contains("has exited"), "{}", reason(4));
    assert!(
        reason(5).contains("node-elsewhere.example"),
        "{}",
        reason(5)
    );
    assert_eq!(reasons.len(), 4);
    // Not every rank could be dumped: the exit code says so.
    assert_ne!(out.status.code(), Some(0));
    let _ = starter.kill();
    let _ = starter.wait();
    for pid in &ranks {
        assert_running_untraced(*pid as u32);
    }
}
