//! mqs-dump against real hung jobs of the `queues` fixture, through the
//! DLL each MPI ships (found via MPIR_dll_name): the exact communicators and
//! queues, in text and JSON, for one rank and for a whole job via the
//! starter's MPIR_proctable; and the job left running afterwards.
//!
//! The values are what each MPI's own DLL reports, known defects included
//! (docs/mpis.md): Open MPI's reads -1 as a 32-bit unsigned (ANY_SOURCE is
//! 4294967295, MPI_COMM_NULL's rank 4294967294) and has no unexpected queue;
//! MPICH's gives lengths in elements (not bytes), length 0 for unexpected
//! messages (the count a fresh request object holds; a recycled one keeps
//! its previous use's), no global ranks, and lists internal communicators
//! unnamed.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use mqs_tests::{Family, Job, Mpi};
use serde_json::Value;
use support::*;

/// Open MPI's DLL: -1 read as unsigned 32-bit.
const OMPI_MINUS_1: i64 = 4_294_967_295;
const OMPI_MINUS_2: i64 = 4_294_967_294;
const ANY: Option<i64> = None;

/// (peer local rank, tag or ANY, length, status)
type Op = (i64, Option<i64>, i64, &'static str);

#[derive(Debug)]
enum Q {
    NotAvailable,
    Ops(&'static [Op]),
}

const NONE: Q = Q::Ops(&[]);

#[derive(Debug)]
struct Comm {
    name: &'static str,
    size: i64,
    local_rank: i64,
    /// Global ranks of the members, when the DLL tells them.
    group: Option<&'static [i64]>,
    sends: Q,
    receives: Q,
    unexpected: Q,
}

/// What Open MPI's DLL reports for rank `rank` of `queues` (both builds).
fn open_mpi_expected(rank: u32) -> Vec<Comm> {
    let na = || Q::NotAvailable;
    let c = |name, size, local_rank, group, sends, receives| Comm {
        name,
        size,
        local_rank,
        group,
        sends,
        receives,
        unexpected: na(),
    };
    if rank == 0 {
        vec![
            c(
                "MPI_COMM_WORLD",
                2,
                0,
                Some(&[0, 1]),
                NONE,
                Q::Ops(&[(OMPI_MINUS_1, Some(8), 32, "pending")]),
            ),
            c("MPI_COMM_SELF", 1, 0, Some(&[0]), NONE, NONE),
            c("MPI_COMM_NULL", 0, OMPI_MINUS_2, None, NONE, NONE),
            c(
                "mqs-dup",
                2,
                0,
                Some(&[0, 1]),
                NONE,
                Q::Ops(&[(1, Some(7), 16, "pending")]),
            ),
            c(
                "mqs-split",
                2,
                1,
                Some(&[1, 0]),
                NONE,
                Q::Ops(&[(0, ANY, 8, "pending")]),
            ),
            c(
                "mqs-wait",
                2,
                0,
                Some(&[0, 1]),
                NONE,
                Q::Ops(&[(OMPI_MINUS_1, Some(1000), 4, "pending")]),
            ),
        ]
    } else {
        vec![
            c(
                "MPI_COMM_WORLD",
                2,
                1,
                Some(&[0, 1]),
                Q::Ops(&[(0, Some(5), 400_000, "pending")]),
                NONE,
            ),
            c("MPI_COMM_SELF", 1, 0, Some(&[1]), NONE, NONE),
            c("MPI_COMM_NULL", 0, OMPI_MINUS_2, None, NONE, NONE),
            c(
                "mqs-dup",
                2,
                1,
                Some(&[0, 1]),
                NONE,
                Q::Ops(&[(0, Some(11), 32, "pending")]),
            ),
            c("mqs-split", 2, 0, Some(&[1, 0]), NONE, NONE),
            c(
                "mqs-wait",
                2,
                1,
                Some(&[0, 1]),
                NONE,
                Q::Ops(&[(OMPI_MINUS_1, Some(1000), 4, "pending")]),
            ),
        ]
    }
}

/// What MPICH's DLL reports for the named communicators of `queues`;
/// lengths are in elements (MPI_INT) as that DLL gives them.
fn mpich_expected(rank: u32) -> Vec<Comm> {
    let c = |name, size, local_rank, sends, receives, unexpected| Comm {
        name,
        size,
        local_rank,
        group: None,
        sends,
        receives,
        unexpected,
    };
    if rank == 0 {
        vec![
            c(
                "MPI_COMM_WORLD",
                2,
                0,
                NONE,
                Q::Ops(&[(-1, Some(8), 8, "pending")]),
                Q::Ops(&[(1, Some(99), 0, "complete"), (1, Some(5), 0, "pending")]),
            ),
            c("MPI_COMM_SELF", 1, 0, NONE, NONE, NONE),
            c("MPI_ICOMM_WORLD", 2, 0, NONE, NONE, NONE),
            c(
                "mqs-dup",
                2,
                0,
                NONE,
                Q::Ops(&[(1, Some(7), 4, "pending")]),
                NONE,
            ),
            c(
                "mqs-split",
                2,
                1,
                NONE,
                Q::Ops(&[(0, ANY, 2, "pending")]),
                NONE,
            ),
            c(
                "mqs-wait",
                2,
                0,
                NONE,
                Q::Ops(&[(-1, Some(1000), 1, "pending")]),
                NONE,
            ),
        ]
    } else {
        vec![
            c(
                "MPI_COMM_WORLD",
                2,
                1,
                Q::Ops(&[
                    (0, Some(5), 100_000, "pending"),
                    (0, Some(99), 16, "complete"),
                ]),
                NONE,
                NONE,
            ),
            c("MPI_COMM_SELF", 1, 0, NONE, NONE, NONE),
            c("MPI_ICOMM_WORLD", 2, 1, NONE, NONE, NONE),
            c(
                "mqs-dup",
                2,
                1,
                NONE,
                Q::Ops(&[(0, Some(11), 8, "pending")]),
                NONE,
            ),
            c("mqs-split", 2, 0, NONE, NONE, NONE),
            c(
                "mqs-wait",
                2,
                1,
                NONE,
                Q::Ops(&[(-1, Some(1000), 1, "pending")]),
                NONE,
            ),
        ]
    }
}

/// MPICH's DLL names the communicators it made for itself like this.
const MPICH_INTERNAL: &str = "--unnamed--";

fn ops_of(queue: &Value) -> Result<Vec<Op>, String> {
    match queue["status"].as_str() {
        Some("ok") => {}
        other => return Err(format!("status {other:?}")),
    }
    assert!(queue["truncated"].is_null(), "truncated queue: {queue}");
    Ok(queue["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .map(|op| {
            let status: &'static str = match op["status"].as_str().expect("status") {
                "pending" => "pending",
                "matched" => "matched",
                "complete" => "complete",
                other => panic!("unexpected status {other}"),
            };
            (
                op["desired_local_rank"].as_i64().expect("rank"),
                op["desired_tag"].as_i64(),
                op["desired_length"].as_i64().expect("length"),
                status,
            )
        })
        .collect())
}

fn check_queue(what: &str, actual: &Value, expected: &Q) {
    match expected {
        Q::NotAvailable => {
            assert_eq!(actual["status"], "not_available", "{what}: {actual}");
            assert!(actual["reason"].as_str().is_some_and(|r| !r.is_empty()));
        }
        Q::Ops(ops) => {
            let got = ops_of(actual).unwrap_or_else(|e| panic!("{what}: {e}: {actual}"));
            assert_eq!(got, ops.to_vec(), "{what}");
        }
    }
}

/// Checks one process's JSON against the expected communicators. With
/// `internal` set, communicators of that name are the MPI's own and may
/// appear in any number, with empty queues.
fn check_process(process: &Value, expected: &[Comm], internal: Option<&str>) {
    let comms = process["communicators"]["list"]
        .as_array()
        .unwrap_or_else(|| panic!("no communicator list: {process}"));
    let mut named = Vec::new();
    for comm in comms {
        let name = comm["name"].as_str().expect("name");
        if Some(name) == internal {
            for q in ["sends", "receives", "unexpected"] {
                assert_eq!(
                    ops_of(&comm[q]).map(|o| o.len()),
                    Ok(0),
                    "{name} {q}: {comm}"
                );
            }
            continue;
        }
        named.push(comm);
    }
    let names: Vec<&str> = named.iter().map(|c| c["name"].as_str().unwrap()).collect();
    let want: Vec<&str> = expected.iter().map(|c| c.name).collect();
    let mut sorted_names = names.clone();
    sorted_names.sort();
    let mut sorted_want = want.clone();
    sorted_want.sort();
    assert_eq!(
        sorted_names, sorted_want,
        "communicators of pid {}",
        process["pid"]
    );
    for e in expected {
        let comm = named
            .iter()
            .find(|c| c["name"] == e.name)
            .expect("found above");
        let what = format!("pid {} {}", process["pid"], e.name);
        assert_eq!(comm["size"], e.size, "{what} size");
        assert_eq!(comm["local_rank"], e.local_rank, "{what} local rank");
        match e.group {
            Some(group) => assert_eq!(comm["group"], serde_json::json!(group), "{what} group"),
            None if comm["size"] == 0 || internal.is_some() => {
                assert!(comm["group"].is_null(), "{what} group")
            }
            None => {}
        }
        check_queue(&format!("{what} sends"), &comm["sends"], &e.sends);
        check_queue(&format!("{what} receives"), &comm["receives"], &e.receives);
        check_queue(
            &format!("{what} unexpected"),
            &comm["unexpected"],
            &e.unexpected,
        );
    }
}

fn expected_for(mpi: Mpi, rank: u32) -> (Vec<Comm>, Option<&'static str>, &'static str) {
    match mpi {
        Mpi::OpenMpiG
        | Mpi::OpenMpiRelease
        | Mpi::OpenMpi5G
        | Mpi::OpenMpi5Release
        | Mpi::OpenMpiUcx
        | Mpi::OpenMpi5Ucx => (
            open_mpi_expected(rank),
            None,
            "lib/openmpi/libompi_dbg_msgq.so",
        ),
        Mpi::Mpich => (
            mpich_expected(rank),
            Some(MPICH_INTERNAL),
            "lib/libtvmpich.so",
        ),
        Mpi::DebianOpenMpi | Mpi::DebianMpich => panic!("{mpi}: see tests/e2e/stock.rs"),
        Mpi::Debian13OpenMpi | Mpi::Debian13Mpich => panic!("{mpi}: see tests/e2e/debian13.rs"),
        Mpi::MpichCh4 => panic!("{mpi}: see tests/e2e/mpich_dll.rs"),
        Mpi::MpichUcx => panic!("{mpi}: see tests/e2e/ucx.rs"),
    }
}

/// `mqs-dump --pid PID --json`, repeated until every process it lists has
/// posted its blocking receive (tag 1000 on mqs-wait), which the fixture
/// does just after printing READY: on a busy machine a dump can come first.
fn settled_dump(pid: u32, extra: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let json = dump_json(pid, extra);
        let posted = |p: &Value| {
            p["communicators"]["list"]
                .as_array()
                .and_then(|l| l.iter().find(|c| c["name"] == "mqs-wait"))
                .and_then(|c| c["receives"]["operations"].as_array())
                .is_some_and(|ops| ops.iter().any(|op| op["desired_tag"] == 1000))
        };
        let settled = json["processes"]
            .as_array()
            .is_some_and(|ps| !ps.is_empty() && ps.iter().all(posted));
        if settled || Instant::now() > deadline {
            return json;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Dumps each rank of a `queues` job by pid, in JSON and in text.
fn ranks_by_pid(mpi: Mpi) {
    let job = Job::launch(mpi, "queues", 2, &[]).expect("launch queues");
    let prefix = mpi.prefix().expect("prefix");
    for (rank, pid) in job.rank_pids() {
        let json = settled_dump(pid, &["--dll", "mpi"]);
        assert_eq!(json["schema_version"], 1);
        assert!(json["launcher"].is_null());
        let process = &json["processes"][0];
        assert_eq!(process["pid"], pid);
        assert_eq!(
            process["global_rank"], rank,
            "rank from the launcher's environment"
        );
        assert_eq!(process["dll"]["compatibility"], 2);
        let (expected, internal, dll) = expected_for(mpi, rank);
        // The DLL is the one the MPI names (MPICH's is a symlink to a
        // versioned file).
        let dll_path = std::fs::canonicalize(prefix.join(dll)).expect("the MPI's DLL");
        assert_eq!(process["dll"]["path"], dll_path.display().to_string());
        check_process(process, &expected, internal);
        assert!(process["stats"]["fetches"].as_u64().unwrap() > 0);
        assert_running_untraced(pid);

        // The text listing says the same for a person.
        let out = run(&["--pid", &pid.to_string(), "--dll", "mpi"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.starts_with(&format!("Process {pid} (rank {rank}): ")),
            "{text}"
        );
        for comm in &expected {
            let line = format!(
                "Communicator {}: size {}, local rank {},",
                comm.name, comm.size, comm.local_rank
            );
            assert!(text.contains(&line), "'{line}' missing from:\n{text}");
        }
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

/// Dumps the whole job through the starter (mpirun/mpiexec): its MPIR
/// process table, or for Open MPI 5 its PMIx one.
fn whole_job(mpi: Mpi) {
    let job = Job::launch(mpi, "queues", 2, &[]).expect("launch queues");
    let launcher = job.launcher_pid();
    let json = settled_dump(launcher, &["--dll", "mpi"]);
    assert_eq!(json["launcher"]["pid"], launcher);
    assert_eq!(json["failures"], serde_json::json!([]));
    let processes = json["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 2);
    for (rank, pid) in job.rank_pids() {
        let process = &processes[rank as usize];
        assert_eq!(process["pid"], pid, "MPIR_proctable order is rank order");
        assert_eq!(process["global_rank"], rank);
        let (expected, internal, _) = expected_for(mpi, rank);
        check_process(process, &expected, internal);
        assert_running_untraced(pid);
    }
    assert_running_untraced(launcher);
    job.shutdown().expect("shutdown");
}

#[test]
fn open_mpi_g_ranks() {
    ranks_by_pid(Mpi::OpenMpiG);
}

#[test]
fn open_mpi_release_ranks() {
    ranks_by_pid(Mpi::OpenMpiRelease);
}

/// Open MPI 5.0.7: the DLL its libmpi names, and the same values (its
/// defects included) as 4.1.4's.
#[test]
fn open_mpi_5_g_ranks() {
    ranks_by_pid(Mpi::OpenMpi5G);
}

#[test]
fn mpich_ranks() {
    ranks_by_pid(Mpi::Mpich);
}

#[test]
fn open_mpi_g_whole_job_through_mpirun() {
    whole_job(Mpi::OpenMpiG);
}

#[test]
fn mpich_whole_job_through_mpiexec() {
    whole_job(Mpi::Mpich);
}

/// Open MPI 5's launcher has no MPIR: the job comes from its PMIx server
/// (the tool interface's process table), with the MPI's own DLL.
#[test]
fn open_mpi_5_whole_jobs_through_prterun() {
    whole_job(Mpi::OpenMpi5G);
    whole_job(Mpi::OpenMpi5Release);
}

/// A PMIx launcher that does not answer (stopped here) is given up on
/// after the time limit, and answers again once it runs; a process that
/// only maps libpmix is refused with exit code 16 and the fix.
#[test]
fn a_pmix_launcher_that_does_not_answer_or_is_none_is_a_clear_error() {
    use mqs_acquire::pmix;
    let mpi = Mpi::OpenMpi5G;
    let lib = mpi.prefix().expect("prefix").join("lib/libpmix.so");
    let job = Job::launch(mpi, "queues", 2, &[]).expect("launch queues");
    let launcher = job.launcher_pid();
    let signal = |sig| {
        // SAFETY: a signal to the launcher this test started.
        assert_eq!(unsafe { libc::kill(launcher as i32, sig) }, 0);
    };
    signal(libc::SIGSTOP);
    let stopped = pmix::proc_table(launcher as i32, &lib, Duration::from_secs(2));
    signal(libc::SIGCONT);
    let err = stopped.expect_err("a stopped launcher cannot answer");
    assert!(
        err.to_string().contains("did not answer within 2 s"),
        "{err}"
    );
    assert_eq!(err.exit_code(), 16);
    let table = pmix::proc_table(launcher as i32, &lib, pmix::TIMEOUT).expect("process table");
    let pids: Vec<(u32, u32)> = table
        .iter()
        .map(|p| (p.rank as u32, p.pid as u32))
        .collect();
    assert_eq!(pids, job.rank_pids());
    assert!(
        table
            .iter()
            .all(|p| Path::new(&p.executable) == job.executable()),
        "{table:?}"
    );
    assert_running_untraced(launcher);
    job.shutdown().expect("shutdown");

    // Not a launcher, though it maps the library.
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .env("LD_PRELOAD", &lib)
        .spawn()
        .expect("sleep");
    let maps = format!("/proc/{}/maps", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains("libpmix")) {
        assert!(Instant::now() < deadline, "libpmix never mapped");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(&["--pid", &child.id().to_string()]);
    let _ = child.kill();
    let _ = child.wait();
    assert_error(
        &out,
        16,
        &[
            "did not answer as a PMIx launcher",
            "PMIx_tool_init",
            "give the pid of",
        ],
    );
}

#[test]
fn no_stop_mode_reads_the_same_and_never_traces() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch queues");
    let pid = job.rank_pid(0).expect("rank 0");
    let json = settled_dump(pid, &["--no-stop", "--dll", "mpi"]);
    check_process(&json["processes"][0], &open_mpi_expected(0), None);
    assert_running_untraced(pid);
    job.shutdown().expect("shutdown");
}

/// With no `--dll`, every test MPI's job is read through mqs's own DLL (the
/// one beside mqs-dump) and the output says so; `--dll mpi` reads it
/// through the DLL the MPI names, with no word of a choice (it was asked
/// for).
#[test]
fn the_default_dll_is_ours_and_dll_mpi_is_the_one_the_mpi_names() {
    let ours = std::fs::canonicalize(mqs_tests::our_dll(false)).expect("our DLL");
    for mpi in [
        Mpi::OpenMpiG,
        Mpi::OpenMpiRelease,
        Mpi::OpenMpi5G,
        Mpi::OpenMpi5Release,
        Mpi::Mpich,
        Mpi::MpichCh4,
    ] {
        let job = Job::launch(mpi, "queues", 2, &[]).expect("launch queues");
        let pid = job.launcher_pid();
        let json = dump_json(pid, &[]);
        let processes = json["processes"].as_array().expect("processes");
        assert_eq!(processes.len(), 2, "{mpi}: {json}");
        for process in processes {
            let dll = &process["dll"];
            assert_eq!(dll["path"], ours.display().to_string(), "{mpi}: {dll}");
            assert!(
                dll["chosen"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("mqs's own (the default")),
                "{mpi}: {dll}"
            );
            assert!(dll["backend"].is_string(), "{mpi}: ours says its backend");
        }
        // The job view says it once; one rank's listing, under the process.
        let text = stdout(&run(&["--pid", &pid.to_string()]));
        assert!(
            text.lines()
                .any(|l| l.starts_with("DLL: mqs's own (the default")),
            "{mpi}: {text}"
        );
        let rank = job.rank_pid(0).expect("rank 0").to_string();
        let text = stdout(&run(&["--pid", &rank]));
        assert!(
            text.contains("\n  DLL chosen: mqs's own (the default"),
            "{mpi}: {text}"
        );

        let named = match mpi.family() {
            Family::OpenMpi => "lib/openmpi/libompi_dbg_msgq.so",
            Family::Mpich => "lib/libtvmpich.so",
        };
        let named = std::fs::canonicalize(mpi.prefix().expect("prefix").join(named))
            .expect("the MPI's DLL");
        let json = dump_json(pid, &["--dll", "mpi"]);
        for process in json["processes"].as_array().expect("processes") {
            let dll = &process["dll"];
            assert_eq!(dll["path"], named.display().to_string(), "{mpi}: {dll}");
            assert!(dll.get("chosen").is_none(), "{mpi}: {dll}");
        }
        let text = stdout(&run(&["--pid", &pid.to_string(), "--dll", "mpi"]));
        assert!(!text.contains("DLL: "), "{mpi}: {text}");
        let text = stdout(&run(&["--pid", &rank, "--dll", "mpi"]));
        assert!(!text.contains("DLL chosen"), "{mpi}: {text}");
    }
}
