//! The job at a glance, against real hung jobs: the wait-for analysis
//! (`--deadlock`, `--confirm`), the merged job view with stacks, the DOT
//! graph through Graphviz, `mqs-dump watch`, and call stacks of live ranks
//! (also of the Open MPI release build, which has no DWARF in its
//! components).
//!
//! Fixtures: `split_ring` (an 8-cycle through a reversed communicator plus
//! an ANY_SOURCE receive), `chain` (0 -> 1 -> 2 -> 3, rank 3 polling until
//! SIGUSR1), `barrier_mismatch` (ranks 0-2 in MPI_Barrier, rank 3 in
//! MPI_Recv from 0; with `split`, ranks 0-1 in MPI_Barrier on "trio" and
//! rank 2 in MPI_Barrier on MPI_COMM_WORLD), `queues` with 4 ranks (each
//! rank's line in the job view, from the fixture's contents), `ring` with
//! 3 ranks, of which only 2 are named (cannot tell). Their
//! receives are posted after READY, so each test waits (bounded) until the
//! dump shows the state the contract promises.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mqs_abi::OpStatus;
use mqs_analysis::RankSet;
use mqs_tests::{contents, Family, Job, Mpi};
use serde_json::Value;
use support::*;

/// How long a job may take to reach the state its contract describes after
/// READY (a loaded 2-core machine runs 8 oversubscribed ranks).
const SETTLE: Duration = Duration::from_secs(90);

/// Runs mqs-dump until `done` accepts its output, or fails after SETTLE
/// with the last output.
fn until(args: &[&str], done: impl Fn(&Output) -> bool) -> Output {
    let start = Instant::now();
    loop {
        let out = run(args);
        if done(&out) {
            return out;
        }
        assert!(
            start.elapsed() < SETTLE,
            "mqs-dump {args:?} never reached the expected state in {SETTLE:?}; last exit {}, \
             stdout:\n{}\nstderr:\n{}",
            out.status,
            stdout(&out),
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn ring_cycle_words(n: i64) -> Vec<String> {
    (0..n)
        .map(|r| {
            format!(
                "rank {r} waits for rank {} (recv tag 10 on \"ring\")",
                (r + 1) % n
            )
        })
        .collect()
}

fn check_ring_deadlock(mpi: Mpi) {
    let job = Job::launch(mpi, "split_ring", 8, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let expected = ring_cycle_words(8);
    let out = until(&["--pid", &pid, "--dll", "mpi", "--deadlock"], |out| {
        let text = stdout(out);
        expected.iter().all(|w| text.contains(w))
    });
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    assert!(
        text.starts_with("deadlock: rank 0 waits for rank 1"),
        "{text}"
    );
    // Rank 0's ANY_SOURCE receive is a wait only where its MPI_Recv's
    // arguments are gone from the frame (Open MPI at -O2): the rank is
    // then in one of its two receives, either of which may be the one.
    // Where the stack names the ring's receive (MPICH), the other is
    // listed but no wait.
    let or_wait = text.contains(
        "rank 0 also waits on an OR-wait (recv from ANY_SOURCE tag 11 on MPI_COMM_WORLD): any \
         of ranks 1-7 could match it",
    );
    assert_eq!(or_wait, mpi.family() == Family::OpenMpi, "{text}");
    assert!(text.contains("deadlocked: ranks 0-7 in 1 cycle"), "{text}");
    assert!(
        text.contains("\nconfirmed: the same cycle 1.0 s later"),
        "a deadlock in a live job is looked at twice: {text}"
    );

    // The same from two snapshots a second apart.
    let out = run(&[
        "--pid",
        &pid,
        "--dll",
        "mpi",
        "--deadlock",
        "--confirm",
        "1",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    for w in &expected {
        assert!(text.contains(w), "{w} missing from {text}");
    }

    // The job view: short, one branch of stacks with every rank in MPI_Recv.
    let out = until(&["--pid", &pid, "--dll", "mpi", "--stacks"], |out| {
        stdout(out).contains("ranks 0-7: main > MPI_Recv")
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines = text.lines().count();
    assert!(lines <= 25, "{lines} lines:\n{text}");
    assert!(
        text.contains("\"ring\" (8 ranks: world ranks 7-0 in its order):"),
        "{text}"
    );
    // MPICH's own DLL gives lengths in elements, not bytes (docs/mpis.md).
    let bytes = if mpi.family() == Family::Mpich { 1 } else { 4 };
    assert!(
        text.contains(&format!(
            "rank 0: recv from ANY_SOURCE tag 11, {bytes} bytes"
        )),
        "{text}"
    );
    // Each rank receives from the one before it in "ring": one line, its
    // peers relative to each rank's own "ring" rank.
    assert!(
        text.contains(&format!(
            "ranks 0-7: recv from \"ring\" rank r-1 (mod 8, r = its \"ring\" rank) tag 10, \
             {bytes} bytes"
        )),
        "{text}"
    );
    let stack_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("stacks"))
        .skip(1)
        .collect();
    assert_eq!(
        stack_lines
            .iter()
            .filter(|l| !l.starts_with("    "))
            .count(),
        1,
        "one branch at the top: {text}"
    );

    // --all shows the MPI's own threads and the empty communicators too.
    let out = run(&["--pid", &pid, "--dll", "mpi", "--stacks", "--all"]);
    let all = stdout(&out);
    assert!(all.lines().count() > lines, "{all}");
    assert!(all.contains("MPI_COMM_SELF"), "{all}");

    // Filters.
    let out = run(&[
        "--pid", &pid, "--dll", "mpi", "--rank", "2-3", "--comm", "ring",
    ]);
    let text = stdout(&out);
    assert!(text.contains("rank 2: recv from rank 3"), "{text}");
    assert!(!text.contains("rank 4:"), "{text}");
    assert!(!text.contains("MPI_COMM_WORLD ("), "{text}");
    let out = run(&["--pid", &pid, "--dll", "mpi", "--queue", "sends"]);
    assert!(!stdout(&out).contains("recv from"), "{}", stdout(&out));

    // DOT that Graphviz accepts, with the cycle in red.
    let out = run(&["--pid", &pid, "--dll", "mpi", "--format", "dot"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dot = stdout(&out);
    assert_eq!(dot.matches("color=red, penwidth").count(), 8, "{dot}");
    let svg = graphviz_svg(&dot);
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("rank 7"), "{svg}");
}

/// `dot -Tsvg` of `dot`, which must succeed.
fn graphviz_svg(dot: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Graphviz's dot must be installed (scripts/setup-mpis installs graphviz)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "dot rejected the graph: {}\n{dot}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ring_deadlock_openmpi_g() {
    check_ring_deadlock(Mpi::OpenMpiG);
}

#[test]
fn ring_deadlock_mpich() {
    check_ring_deadlock(Mpi::Mpich);
}

fn release(pid: u32) {
    // SAFETY: kill takes integers; the pid is a rank of our running job.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) };
    assert_eq!(rc, 0, "SIGUSR1 to {pid}");
}

fn check_chain(mpi: Mpi) {
    let job = Job::launch(mpi, "chain", 4, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    // ch4's receives are known from the stacks only.
    let from = if mpi == Mpi::MpichCh4 {
        ", from its stack: MPI_Recv"
    } else {
        ""
    };
    let steps: Vec<String> = (0..3)
        .map(|r| {
            format!(
                "rank {r} waits for rank {} (recv tag 20 on MPI_COMM_WORLD{from})",
                r + 1
            )
        })
        .collect();
    let out = until(&["--pid", &pid, "--deadlock"], |out| {
        let text = stdout(out);
        steps.iter().all(|s| text.contains(s))
    });
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(text.contains("the chain waits for rank 3"), "{text}");
    assert!(
        text.contains("rank 3 is in MPI_Iprobe, which returns by itself"),
        "{text}"
    );
    assert!(text.contains("no deadlock"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("deadlock:")), "{text}");

    release(job.rank_pid(3).unwrap());
    let status = job.wait_for_exit(SETTLE).expect("the chain completes");
    assert!(status.success(), "{status}");
}

#[test]
fn chain_is_no_deadlock_openmpi_g() {
    check_chain(Mpi::OpenMpiG);
}

#[test]
fn chain_is_no_deadlock_openmpi_5_g() {
    check_chain(Mpi::OpenMpi5G);
}

#[test]
fn chain_is_no_deadlock_openmpi_release() {
    check_chain(Mpi::OpenMpiRelease);
}

/// ch4's receives are not in its queues: the stacks tell the chain, and
/// that rank 3 polls (MPI_Iprobe) rather than waits.
#[test]
fn chain_is_no_deadlock_mpich_ch4() {
    check_chain(Mpi::MpichCh4);
}

#[test]
fn chain_is_no_deadlock_mpich() {
    check_chain(Mpi::Mpich);
}

#[test]
fn barrier_mismatch_names_the_missing_rank_openmpi_g() {
    check_barrier_mismatch(Mpi::OpenMpiG);
}

#[test]
fn barrier_mismatch_names_the_missing_rank_mpich() {
    check_barrier_mismatch(Mpi::Mpich);
}

fn check_barrier_mismatch(mpi: Mpi) {
    let job = Job::launch(mpi, "barrier_mismatch", 4, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let out = until(&["--pid", &pid, "--deadlock"], |out| {
        let text = stdout(out);
        text.contains("ranks 0-2 are in MPI_Barrier") && text.contains("recv tag 30")
    });
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    assert!(
        text.contains(
            "missing: rank 3 (in MPI_Recv, waiting for rank 0 (recv tag 30 on MPI_COMM_WORLD))"
        ),
        "{text}"
    );
    assert!(
        text.contains("rank 3 waits for rank 0 (recv tag 30 on MPI_COMM_WORLD)"),
        "{text}"
    );
    assert!(
        text.contains("waits for rank 3 (MPI_Barrier, which rank 3 has not entered)"),
        "{text}"
    );
    // The merged call tree: ranks in different calls never share a branch
    // (deeper down, where each rank polls is timing).
    let out = run(&["--pid", &pid, "--stacks"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let tree: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("stacks ("))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(tree.first(), Some(&"  ranks 0-3: main"), "{text}");
    let calls: Vec<(&str, &str)> = tree
        .iter()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| {
            let (ranks, path) = l.split_once(": ")?;
            Some((ranks, path.split(" > ").next()?))
        })
        .collect();
    assert_eq!(
        calls,
        [("ranks 0-2", "MPI_Barrier"), ("rank 3", "MPI_Recv")],
        "{text}"
    );
    drop(job);
}

#[test]
fn collectives_on_two_communicators_openmpi_g() {
    check_split_barrier(Mpi::OpenMpiG);
}

#[test]
fn collectives_on_two_communicators_mpich() {
    check_split_barrier(Mpi::Mpich);
}

/// Ranks 0-1 in MPI_Barrier on "trio", rank 2 in MPI_Barrier on the
/// world: the communicator of each barrier comes from the frames' `comm`
/// arguments (debug builds), so the two collectives are told apart and
/// each names the other's ranks as missing.
fn check_split_barrier(mpi: Mpi) {
    let job = Job::launch(mpi, "barrier_mismatch", 4, &["split"]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let out = until(&["--pid", &pid, "--deadlock"], |out| {
        let text = stdout(out);
        text.contains("ranks 0-1 are in MPI_Barrier") && text.contains("recv tag 30")
    });
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("collective:"))
        .collect();
    assert_eq!(
        lines,
        [
            "collective: ranks 0-1 are in MPI_Barrier (\"trio\"); missing: rank 2 (in a \
             different collective, MPI_Barrier on MPI_COMM_WORLD)",
            "collective: rank 2 is in MPI_Barrier (MPI_COMM_WORLD); missing: rank 0 (in a \
             different collective, MPI_Barrier on \"trio\"), rank 1 (in a different collective, \
             MPI_Barrier on \"trio\"), rank 3 (in MPI_Recv, waiting for rank 0 (recv tag 30 on \
             MPI_COMM_WORLD))",
        ],
        "{text}"
    );
    // The frame's argument is the id the DLL lists for "trio" in that rank.
    let rank0 = dump_json(job.rank_pid(0).unwrap(), &["--stacks"]);
    let process = &rank0["processes"][0];
    let trio = process["communicators"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "trio")
        .expect("rank 0 lists \"trio\"");
    let pid0 = process["pid"].as_i64().unwrap();
    let main = process["stacks"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"].as_i64() == Some(pid0))
        .expect("the main thread");
    let outermost_comm = main["frames"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|f| f.get("comm"))
        .unwrap_or_else(|| panic!("no frame of rank 0 names its communicator: {main}"));
    let named = [&outermost_comm["unique_id"], &outermost_comm["address"]];
    assert!(
        named.contains(&&trio["unique_id"]),
        "rank 0's barrier names {outermost_comm}, \"trio\" is {trio}"
    );
    drop(job);
}

#[test]
fn collectives_without_argument_debug_info_assume_the_world_openmpi_release() {
    let job = Job::launch(Mpi::OpenMpiRelease, "barrier_mismatch", 4, &["split"])
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let out = until(&["--pid", &pid, "--deadlock"], |out| {
        let text = stdout(out);
        text.contains("ranks 0-2 are in MPI_Barrier") && text.contains("recv tag 30")
    });
    let text = stdout(&out);
    assert!(
        text.contains(
            "collective: ranks 0-2 are in MPI_Barrier (communicator unknown (no debug info for \
             the call's arguments), MPI_COMM_WORLD assumed)"
        ),
        "{text}"
    );
    drop(job);
}

/// The main thread's function names, outermost first, from --json.
fn main_path(process: &Value) -> Vec<String> {
    let threads = process["stacks"]["list"].as_array().expect("stacks listed");
    let pid = process["pid"].as_i64().unwrap();
    let main = threads
        .iter()
        .find(|t| t["tid"].as_i64() == Some(pid))
        .expect("the main thread");
    let mut names: Vec<String> = main["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("??").to_string())
        .collect();
    names.reverse();
    names
}

fn check_live_stack(mpi: Mpi, below_recv: &str) {
    let job = Job::launch(mpi, "split_ring", 2, &[]).unwrap_or_else(|e| panic!("{e}"));
    let rank = job.rank_pid(1).unwrap().to_string();
    let start = Instant::now();
    let path = loop {
        let v = dump_json(rank.parse().unwrap(), &["--stacks"]);
        let path = main_path(&v["processes"][0]);
        if path.iter().any(|f| f == "MPI_Recv") || start.elapsed() > SETTLE {
            break path;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let from_main: Vec<&str> = path
        .iter()
        .skip_while(|f| *f != "main")
        .map(String::as_str)
        .collect();
    assert!(
        from_main.starts_with(&["main", "MPI_Recv", below_recv]),
        "{path:?}"
    );
    assert!(path.starts_with(&["_start".to_string()]), "{path:?}");
    assert_running_untraced(rank.parse().unwrap());
    drop(job);
}

#[test]
fn live_stack_names_in_order_openmpi_g() {
    check_live_stack(Mpi::OpenMpiG, "mca_pml_ob1_recv");
}

#[test]
fn live_stack_names_in_order_openmpi_release() {
    check_live_stack(Mpi::OpenMpiRelease, "mca_pml_ob1_recv");
}

#[test]
fn live_stack_names_in_order_mpich() {
    // MPICH 4.0.2's MPI_Recv calls its file-static internal_Recv.
    check_live_stack(Mpi::Mpich, "internal_Recv");
}

/// Starts `mqs-dump watch` on the job; its output is read at the end.
fn start_watch(pid: u32, every: &str) -> std::process::Child {
    Command::new(mqs_dump())
        .args(["watch", "--pid", &pid.to_string(), "--every", every])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mqs-dump watch")
}

/// Waits for `child` at most `limit`, killing it past that.
fn wait_child(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "mqs-dump watch still running after {limit:?}: {}\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn watch_reports_the_ring_within_three_periods() {
    let job = Job::launch(Mpi::OpenMpiG, "split_ring", 8, &[]).unwrap_or_else(|e| panic!("{e}"));
    // Let every rank post its receive before the first snapshot.
    until(
        &["--pid", &job.launcher_pid().to_string(), "--deadlock"],
        |o| o.status.code() == Some(12),
    );
    let out = wait_child(start_watch(job.launcher_pid(), "2"), SETTLE * 2);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    let snapshot: u32 = text
        .strip_prefix("mqs-dump watch: snapshot ")
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no snapshot number in {text}"));
    assert!(snapshot <= 3, "reported at snapshot {snapshot}: {text}");
    for w in ring_cycle_words(8) {
        assert!(text.contains(&w), "{w} missing from {text}");
    }
    assert!(text.contains("ranks 0-7: main > MPI_Recv"), "{text}");
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
}

#[test]
fn watch_says_nothing_about_a_chain_that_completes() {
    let job = Job::launch(Mpi::OpenMpiG, "chain", 4, &[]).unwrap_or_else(|e| panic!("{e}"));
    let watch = start_watch(job.launcher_pid(), "1");
    std::thread::sleep(Duration::from_secs(5));
    release(job.rank_pid(3).unwrap());
    let status = job.wait_for_exit(SETTLE).expect("the chain completes");
    assert!(status.success(), "{status}");
    let out = wait_child(watch, SETTLE);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(text.is_empty(), "watch reported: {text}");
    assert!(stderr(&out).contains("the job ended"), "{}", stderr(&out));
}

/// Every rank's gcore, written into `dir` as core.PID.
fn gcore(job: &Job, dir: &std::path::Path) {
    for (_, pid) in job.rank_pids() {
        let out = Command::new("gcore")
            .arg("-o")
            .arg(dir.join("core"))
            .arg(pid.to_string())
            .output()
            .expect("run gcore (gdb)");
        assert!(
            out.status.success(),
            "gcore {pid}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn core_files_give_stacks_and_the_deadlock() {
    let job = Job::launch(Mpi::OpenMpiG, "split_ring", 4, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    until(&["--pid", &pid, "--deadlock"], |o| {
        o.status.code() == Some(12)
    });
    let dir = std::env::temp_dir().join(format!("mqs-analysis-cores-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    gcore(&job, &dir);
    drop(job);
    let dir_arg = dir.to_str().unwrap();

    let out = run(&["--core", dir_arg, "--deadlock"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    for w in ring_cycle_words(4) {
        assert!(text.contains(&w), "{w} missing from {text}");
    }
    // The registers come from the cores: the same stacks as live.
    let out = run(&["--core", dir_arg, "--stacks"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("ranks 0-3: main > MPI_Recv > mca_pml_ob1_recv"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// How the job view words one operation of the fixture's contents on
/// `comm`: `recv from rank 0 ("mqs-split" rank 3) tag 22, 32 bytes`.
fn view_words(comm: &contents::Comm, op: &contents::Op) -> String {
    let label = if comm.name.starts_with("MPI_COMM_") {
        comm.name.clone()
    } else {
        format!("\"{}\"", comm.name)
    };
    let identity = comm.group.iter().enumerate().all(|(i, g)| *g == i as i64);
    let peer = match op.peer {
        -1 => "ANY_SOURCE".to_string(),
        local if local == op.global && identity => format!("rank {local}"),
        local => format!("rank {} ({label} rank {local})", op.global),
    };
    let what = if op.send {
        "send to"
    } else if op.unexpected.is_some() {
        "unexpected from"
    } else {
        "recv from"
    };
    let tag = op.tag.map_or("any tag".to_string(), |t| format!("tag {t}"));
    let status = match op.status {
        OpStatus::Pending => String::new(),
        other => format!(" ({})", other.name()),
    };
    format!("{what} {peer} {tag}, {} bytes{status}", op.length())
}

/// The lines the job view must show for `procs`, by communicator label:
/// each rank's operations of one queue on one line, ranks merged only where
/// those lines are equal. A queue whose order is timing may show its
/// operations in any order: each line is given with its alternatives.
fn view_lines(procs: &[contents::Process]) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut blocks: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let names: Vec<&str> = procs[0].comms.iter().map(|c| c.name.as_str()).collect();
    for name in names {
        let label = if name.starts_with("MPI_COMM_") {
            name.to_string()
        } else {
            format!("\"{name}\"")
        };
        for class in 0..3 {
            // The text (each order it may take) -> the ranks that show it.
            let mut texts: Vec<(Vec<String>, RankSet)> = Vec::new();
            for p in procs {
                let Some(comm) = p.comm(name) else { continue };
                let (_, queue) = comm.queues()[class];
                let ops = queue.ops();
                if ops.is_empty() {
                    continue;
                }
                let listed: Vec<&contents::Op> = ops.iter().collect();
                let orders = match queue {
                    contents::Queue::AnyOrder(_) => orders(&listed),
                    _ => vec![listed],
                };
                let text: Vec<String> = orders
                    .iter()
                    .map(|o| {
                        o.iter()
                            .map(|op| view_words(comm, op))
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .collect();
                match texts.iter_mut().find(|(t, _)| *t == text) {
                    Some((_, ranks)) => {
                        ranks.insert(p.rank);
                    }
                    None => texts.push((text, std::iter::once(p.rank).collect())),
                }
            }
            for (text, ranks) in texts {
                let line = |t: &String| format!("{}: {t}", ranks.labelled());
                blocks
                    .entry(label.clone())
                    .or_default()
                    .push(text.iter().map(line).collect());
            }
        }
    }
    blocks
}

/// Every order of `items`.
fn orders<'a, T>(items: &[&'a T]) -> Vec<Vec<&'a T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut order in orders(&rest) {
            order.insert(0, first);
            all.push(order);
        }
    }
    all
}

/// The lines of each communicator's block of a job view, by its label
/// (`"mqs-split"`), and the lines before the first block.
fn view_blocks(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut blocks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(l) = line.strip_prefix("  ") {
            if let Some(label) = &current {
                blocks.entry(label.clone()).or_default().push(l.to_string());
            }
        } else {
            current = line
                .strip_suffix(':')
                .and_then(|h| h.split_once(" ("))
                .map(|(label, _)| label.to_string());
        }
    }
    blocks
}

/// What in `text` differs from the lines `expected` says.
fn view_problems(text: &str, expected: &BTreeMap<String, Vec<Vec<String>>>) -> Vec<String> {
    let got = view_blocks(text);
    let mut problems = Vec::new();
    for label in got.keys().chain(expected.keys()).collect::<BTreeSet<_>>() {
        let mut lines = got.get(label).cloned().unwrap_or_default();
        for alternatives in expected.get(label).into_iter().flatten() {
            match lines.iter().position(|l| alternatives.contains(l)) {
                Some(at) => {
                    lines.remove(at);
                }
                None => problems.push(format!("{label}: no line {:?}", alternatives[0])),
            }
        }
        problems.extend(
            lines
                .iter()
                .map(|l| format!("{label}: unexpected line {l:?}")),
        );
    }
    problems
}

/// The `queues` fixture with 4 ranks under Open MPI (-g, our DLL): each
/// rank's operations on a line of its own in the job view, ranks merged
/// only where their lines are equal (all four in "mqs-wait"), never where
/// they differ in one field (ranks 2 and 3 in "mqs-split" differ only in
/// their tags).
#[test]
fn queues_job_view_gives_each_rank_its_own_line_openmpi_g() {
    let size = 4;
    let job = Job::launch(Mpi::OpenMpiG, "queues", size, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let dll = mqs_tests::our_dll(false).display().to_string();
    let procs = contents::queues_of(i64::from(size), 0, true);
    let expected = view_lines(&procs);
    let start = Instant::now();
    let text = loop {
        let out = run(&["--pid", &pid, "--dll", &dll]);
        let text = stdout(&out);
        let problems = view_problems(&text, &expected);
        if out.status.success() && problems.is_empty() {
            break text;
        }
        // The blocking receives come after READY, the unexpected messages
        // when they arrive.
        assert!(
            start.elapsed() < SETTLE,
            "the job view never showed each rank's line: {problems:#?}\n{text}\n{}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for rank in [2, 3] {
        let line = format!(
            "  rank {rank}: recv from rank 0 (\"mqs-split\" rank 3) tag {}, 32 bytes\n",
            20 + rank
        );
        assert!(text.contains(&line), "{line} missing from:\n{text}");
    }
    assert!(
        text.contains("  ranks 0-3: recv from ANY_SOURCE tag 1000, 4 bytes\n"),
        "{text}"
    );
    // The lines come from the fixture's contents: the DLL reads just those.
    let json = dump_json(job.launcher_pid(), &["--dll", &dll]);
    let processes = json["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), procs.len(), "{json}");
    for (process, expected) in processes.iter().zip(&procs) {
        contents::check_ours(expected, &process["communicators"]).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// MPICH ch4 in its default configuration matches receives in the OFI
/// netmod, where no DLL sees them: the ring's receive queues cannot be
/// read. Replayed from a snapshot (which records no stacks), nothing else
/// tells what the ranks wait for: `--deadlock` says it cannot tell, names
/// the ranks and why, and exits 17, never "no deadlock" (0).
#[test]
fn a_ring_whose_queues_cannot_be_read_is_cannot_tell_mpich_ch4() {
    let job = Job::launch(Mpi::MpichCh4, "split_ring", 8, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let dir = std::env::temp_dir().join(format!("mqs-analysis-ch4-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let snapshot = dir.join("ring.mqs");
    let snapshot = snapshot.to_str().unwrap();
    // Once every rank is in its MPI_Recv, the job stays as it is.
    let out = until(&["--pid", &pid, "--stacks", "--save", snapshot], |out| {
        stdout(out).contains("ranks 0-7: main > MPI_Recv")
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["--snapshot", snapshot, "--deadlock"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
    assert!(!text.contains("no deadlock"), "{text}");
    assert!(text.contains("cannot tell: ranks 0-7 not judged"), "{text}");
    assert!(
        text.contains("not judged: ranks 0-7 (receives not available: "),
        "{text}"
    );
    // The job view says so too.
    let out = run(&["--snapshot", snapshot]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("who waits for whom: cannot tell for ranks 0-7"),
        "{}",
        stdout(&out)
    );
    drop(job);
    let _ = std::fs::remove_dir_all(&dir);
}

/// MPICH ch4 in its default configuration matches receives in the OFI
/// netmod, where no DLL sees them; the 8-cycle of the ring is found from
/// the blocking calls in the ranks' stacks (their `source`, `tag` and
/// `comm` arguments, the peer translated through "ring"'s group), with our
/// DLL and with MPICH's own, which lists the receive queues as empty: the
/// stack and the queue disagree, and the output says so.
#[test]
fn ring_deadlock_from_the_stacks_mpich_ch4() {
    let job = Job::launch(Mpi::MpichCh4, "split_ring", 8, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let edges: Vec<String> = (0..8)
        .map(|r| {
            format!(
                "rank {r} waits for rank {} (recv tag 10 on \"ring\", from its stack: MPI_Recv)",
                (r + 1) % 8
            )
        })
        .collect();
    for dll in ["ours", "mpi"] {
        let out = until(&["--pid", &pid, "--deadlock", "--dll", dll], |out| {
            out.status.code() == Some(12)
        });
        let text = stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(12),
            "{dll}: {text}\n{}",
            stderr(&out)
        );
        for e in &edges {
            assert!(text.contains(e), "{dll}: {e} missing from {text}");
        }
        assert!(
            text.contains("deadlocked: ranks 0-7 in 1 cycle"),
            "{dll}: {text}"
        );
        let disagree = text.contains(
            "stack and queues disagree: rank 0 is in MPI_Recv from rank 1 tag 10 on \"ring\", \
             which its receive queue does not list",
        );
        // Ours says it cannot list ch4's receives; MPICH's lists none.
        assert_eq!(disagree, dll == "mpi", "{dll}: {text}");
    }
    // The graph marks the waits only the stacks name.
    let out = until(&["--pid", &pid, "--format", "dot"], |out| {
        stdout(out).matches("(stack)\"").count() == 8
    });
    let dot = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(dot.matches("(stack)\"").count(), 8, "{dot}");
    // Red, for the cycle's edges, in place of blue.
    assert_eq!(dot.matches(", color=red, penwidth").count(), 8, "{dot}");
    assert_eq!(dot.matches("color=blue").count(), 0, "{dot}");
}

/// Rank 0 waits in MPI_Waitall on two receives; rank 1's arrived, rank 2's
/// never will (rank 2 waits for rank 0). Rank 0 is shown waiting for rank
/// 2, the cycle 0 <-> 2 found.
fn check_waitall(mpi: Mpi) {
    let job = Job::launch(mpi, "waitall", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let out = until(&["--pid", &pid, "--deadlock"], |out| {
        out.status.code() == Some(12)
    });
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("rank 0 waits for rank 2 (recv tag 41 on MPI_COMM_WORLD)"),
        "{text}"
    );
    assert!(
        text.contains("rank 2 waits for rank 0 (recv tag 42 on MPI_COMM_WORLD)"),
        "{text}"
    );
    assert!(!text.contains("waits for rank 1 (recv"), "{text}");
}

#[test]
fn waitall_waits_for_the_peer_that_never_sends_openmpi_g() {
    check_waitall(Mpi::OpenMpiG);
}

#[test]
fn waitall_waits_for_the_peer_that_never_sends_mpich() {
    check_waitall(Mpi::Mpich);
}

/// The ring's 8-cycle from `--deadlock` alone, with `dll` (`ours`, `mpi`):
/// each edge names "ring" and its source.
fn check_ring_cycle(mpi: Mpi, dll: &str) {
    let job = Job::launch(mpi, "split_ring", 8, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let expected = ring_cycle_words(8);
    let out = until(&["--pid", &pid, "--deadlock", "--dll", dll], |out| {
        out.status.code() == Some(12)
    });
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(12),
        "{mpi} {dll}: {text}\n{}",
        stderr(&out)
    );
    for w in &expected {
        assert!(text.contains(w), "{mpi} {dll}: {w} missing from {text}");
    }
    assert!(text.contains("deadlocked: ranks 0-7 in 1 cycle"), "{text}");
    assert!(!text.contains("disagree"), "{mpi} {dll}: {text}");
}

#[test]
fn ring_deadlock_openmpi_5_g_with_both_dlls() {
    check_ring_cycle(Mpi::OpenMpi5G, "ours");
    check_ring_cycle(Mpi::OpenMpi5G, "mpi");
}

#[test]
fn ring_deadlock_openmpi_release_with_both_dlls() {
    check_ring_cycle(Mpi::OpenMpiRelease, "ours");
    check_ring_cycle(Mpi::OpenMpiRelease, "mpi");
}

#[test]
fn ring_deadlock_mpich_ch3_with_ours() {
    check_ring_cycle(Mpi::Mpich, "ours");
}

/// Ranks left out of the processes named are never taken as free: with 2
/// ranks of a 3-rank `ring` named (MPICH ch3), the chain ends at rank 2,
/// which nobody read, and the answer is "cannot tell" (exit 17), never "no
/// deadlock"; with all three named, the cycle (exit 12).
#[test]
fn a_ring_read_in_part_is_cannot_tell() {
    let job = Job::launch(Mpi::Mpich, "ring", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pids: Vec<String> = job.rank_pids().iter().map(|(_, p)| p.to_string()).collect();
    let args = |n: usize| -> Vec<&str> {
        pids[..n]
            .iter()
            .flat_map(|p| ["--pid", p.as_str()])
            .chain(["--deadlock"])
            .collect()
    };
    let out = until(&args(3), |o| o.status.code() == Some(12));
    assert!(
        stdout(&out).contains("deadlocked: ranks 0-2 in 1 cycle"),
        "{}",
        stdout(&out)
    );
    let out = run(&args(2));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("not judged: rank 2 (not dumped: not among the processes read"),
        "{text}"
    );
    assert!(
        text.contains("cannot tell: rank 2 not judged; no cycle of waits among the 2 ranks"),
        "{text}"
    );
    assert!(!text.contains("no deadlock"), "{text}");
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
}

/// The view of `cart.c` with 6 ranks: a 3x2 grid (periodic in dimension 0)
/// on MPI_COMM_WORLD reversed, every rank waiting in MPI_Waitall for the
/// neighbours above it that never send. Grid rank g is world rank 5-g;
/// grid ranks 1, 3 and 5 (world 4, 2, 0) are the top row, without a
/// neighbour above in dimension 1 ("top" below).
const CART_HEADER: &str = "\"cart\" (6 ranks: world ranks 5-0 in its order";

/// The "cart" block of a job view: each line's ranks, and its operations
/// in any order (the order a DLL lists them in is its own: matching order
/// where it reads ob1's queues, allocation order where it cannot).
fn cart_block(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    text.lines()
        .skip_while(|l| !l.starts_with(CART_HEADER))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim_start().split_once(": "))
        .map(|(ranks, ops)| {
            (
                ranks.to_owned(),
                ops.split("; ").map(str::to_owned).collect(),
            )
        })
        .collect()
}

/// Our DLL reads the grid: peers are named by their offset on it, one line
/// per row, and JSON carries it; the deadlock.
fn check_cartesian(mpi: Mpi) {
    let job = Job::launch(mpi, "cart", 6, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let recv = |offset: [i64; 2], tag: i64, complete: bool| {
        let status = if complete { " (complete)" } else { "" };
        format!(
            "recv from {} tag {tag}, 4 bytes{status}",
            mqs_abi::offset_words(&offset)
        )
    };
    // Open MPI keeps the receives from below, complete, until MPI_Waitall
    // returns.
    let kept = mpi.family() == Family::OpenMpi;
    let mut top = vec![recv([1, 0], 11, false)];
    let mut bottom = vec![recv([1, 0], 11, false), recv([0, 1], 13, false)];
    if kept {
        top.extend([recv([-1, 0], 10, true), recv([0, -1], 12, true)]);
        bottom.push(recv([-1, 0], 10, true));
    }
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("ranks 0,2,4".to_owned(), top.into_iter().collect()),
        ("ranks 1,3,5".to_owned(), bottom.into_iter().collect()),
    ]
    .into();
    // The receives from below complete as the ranks progress.
    let out = until(&["--pid", &pid, "--dll", "ours"], |out| {
        cart_block(&stdout(out)) == expected
    });
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    let header = format!("{CART_HEADER}; a 3x2 grid, periodic in dimension 0):");
    assert!(text.contains(&header), "{header:?} in:\n{text}");
    let receives = if kept { 18 } else { 9 };
    assert!(
        text.contains(&format!("0 sends, {receives} receives, 0 unexpected")),
        "{text}"
    );

    // JSON: the grid on "cart" alone.
    let json = dump_json(job.launcher_pid(), &["--dll", "ours"]);
    let processes = json["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 6);
    for process in processes {
        for comm in process["communicators"]["list"].as_array().expect("list") {
            let cartesian = &comm["cartesian"];
            if comm["name"] == "cart" {
                assert_eq!(
                    *cartesian,
                    serde_json::json!({"dims": [3, 2], "periods": [true, false]}),
                    "{comm}"
                );
            } else {
                assert!(cartesian.is_null(), "{comm}");
            }
        }
    }

    // Along dimension 0 every rank waits for the next: two cycles of 3.
    let out = run(&["--pid", &pid, "--dll", "ours", "--deadlock"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    assert!(text.contains("deadlocked: ranks 0-5"), "{text}");
}

#[test]
fn a_cartesian_grid_by_offsets_openmpi_g() {
    check_cartesian(Mpi::OpenMpiG);
}

#[test]
fn a_cartesian_grid_by_offsets_openmpi_5_release() {
    check_cartesian(Mpi::OpenMpi5Release);
}

/// Open MPI's own DLL has no grid to give: the view falls back to ranks
/// relative to each rank's own grid rank (the DLL's statuses are its own,
/// and vary).
#[test]
fn a_cartesian_grid_by_relative_ranks_through_open_mpi_s_dll() {
    let job = Job::launch(Mpi::OpenMpiG, "cart", 6, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pid = job.launcher_pid().to_string();
    let up = "recv from \"cart\" rank r+2 (mod 6, r = its \"cart\" rank) tag 11, 4 bytes";
    let out = until(&["--pid", &pid, "--dll", "mpi"], |out| {
        stdout(out).contains(up)
    });
    let text = stdout(&out);
    assert!(text.contains(&format!("{CART_HEADER}):")), "{text}");
    assert!(!text.contains(" grid"), "{text}");
    let json = dump_json(job.launcher_pid(), &["--dll", "mpi"]);
    for process in json["processes"].as_array().expect("processes") {
        for comm in process["communicators"]["list"].as_array().expect("list") {
            assert!(comm["cartesian"].is_null(), "{comm}");
        }
    }
}

/// Debian's own Open MPI, stripped: the grid's types come from its type
/// pack, as every other type does.
#[test]
fn a_cartesian_grid_by_offsets_stock_open_mpi() {
    check_cartesian(Mpi::DebianOpenMpi);
}

/// MPICH keeps the grid in an attribute of the communicator; our DLL asks
/// for its types once the process has made a topology.
#[test]
fn a_cartesian_grid_by_offsets_mpich() {
    check_cartesian(Mpi::Mpich);
}
