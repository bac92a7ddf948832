//! The MPI-2 debugger interface (MPI2DD) against real ranks: no MPI ships
//! it, so `tests/support/mpi2dd_starter.c` publishes it for the processes of
//! a real Open MPI job (the `spawn` fixture: two world ranks that spawned
//! two more): a metadirectory (A) naming a second metadirectory (B, which
//! names A back: a loop) and a directory (D, not the ranks' parent) whose
//! proctable holds the world and the spawned world with its spawn
//! descriptor. `mqs-dump --pid` of any of the three finds every process,
//! the spawned ones under their parent; broken magic and version are
//! refused. In launch mode the same fixture is a starter whose
//! MPI2DD_breakpoint events (start, abort) drive `mqs-dump launch`.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// The spawn job: (world pids, spawned pids), each in rank order.
fn spawn_job() -> (Job, Vec<u32>, Vec<u32>) {
    let options = LaunchOptions {
        env: vec![
            ("OMPI_MCA_btl".into(), "self,vader,tcp".into()),
            ("OMPI_MCA_btl_tcp_if_include".into(), "lo".into()),
        ],
        ..LaunchOptions::default()
    };
    let mut job = Job::launch_with(Mpi::OpenMpiG, "spawn", 2, &[], &options).expect("launch");
    let deadline = Instant::now() + Duration::from_secs(60);
    let kids = loop {
        let (out, err) = job.output();
        let mut kids: Vec<(u32, u32)> = out
            .lines()
            .filter_map(|l| {
                let mut f = l.strip_prefix("SPAWNED ")?.split_whitespace();
                let rank = f.next()?.strip_prefix("rank=")?.parse().ok()?;
                let pid = f.next()?.strip_prefix("pid=")?.parse().ok()?;
                Some((rank, pid))
            })
            .collect();
        if kids.len() == 2 {
            kids.sort_unstable();
            break kids.into_iter().map(|(_, p)| p).collect();
        }
        assert!(Instant::now() < deadline, "no spawned ranks:\n{out}\n{err}");
        std::thread::sleep(Duration::from_millis(100));
    };
    job.refresh_pids();
    let world = job.rank_pids().into_iter().map(|(_, p)| p).collect();
    (job, world, kids)
}

/// The fixture's three processes, killed (the group) when dropped.
struct Tables {
    child: Child,
    a: u32,
    b: u32,
    d: u32,
}

impl Tables {
    fn start(world: &[u32], kids: &[u32], variant: Option<&str>) -> Tables {
        let exe = support_program("mpi2dd_starter", &[], false);
        let list = |p: &[u32]| {
            p.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut cmd = Command::new(exe);
        cmd.arg("tables").arg(list(world)).arg(list(kids));
        if let Some(v) = variant {
            cmd.arg(v);
        }
        use std::os::unix::process::CommandExt;
        let mut child = cmd
            .process_group(0)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("start mpi2dd_starter");
        let mut pids = [0u32; 3];
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for (i, role) in ["A", "B", "D"].iter().enumerate() {
            let line = lines.next().expect("a role line").expect("read");
            let rest = line
                .strip_prefix(&format!("MPI2DD role={role} pid="))
                .unwrap_or_else(|| panic!("unexpected line {line}"));
            pids[i] = rest.parse().unwrap();
        }
        Tables {
            child,
            a: pids[0],
            b: pids[1],
            d: pids[2],
        }
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the process group we made for the fixture.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A process as found: pid, global rank, spawned job and rank, parent.
type Found = (u64, i64, Option<(String, u64)>, Option<(String, i64)>);

/// Every process of a dump.
fn processes(dump: &Value) -> Vec<Found> {
    dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let spawned = &p["spawned"];
            (
                p["pid"].as_u64().unwrap(),
                p["global_rank"].as_i64().unwrap(),
                spawned["job"]
                    .as_str()
                    .map(|j| (j.to_string(), spawned["rank"].as_u64().unwrap())),
                spawned["parent"]["job"]
                    .as_str()
                    .map(|j| (j.to_string(), spawned["parent"]["rank"].as_i64().unwrap())),
            )
        })
        .collect()
}

#[test]
fn every_process_is_found_from_any_directory() {
    let (job, world, kids) = spawn_job();
    let tables = Tables::start(&world, &kids, None);
    let parent = Some(("world-1".to_string(), 0));
    let expected = vec![
        (u64::from(world[0]), 0, None, None),
        (u64::from(world[1]), 1, None, None),
        (
            u64::from(kids[0]),
            2,
            Some(("kids-1".into(), 0)),
            parent.clone(),
        ),
        (u64::from(kids[1]), 3, Some(("kids-1".into(), 1)), parent),
    ];
    for pid in [tables.a, tables.b, tables.d] {
        let dump = dump_json(pid, &[]);
        assert_eq!(processes(&dump), expected, "through pid {pid}");
        assert_eq!(dump["launcher"]["pid"].as_u64(), Some(u64::from(pid)));
        // Every process was dumped through its MPI's DLL: MPI_COMM_WORLD and
        // the intercommunicator of the spawn are listed.
        for p in dump["processes"].as_array().unwrap() {
            let names: Vec<&str> = p["communicators"]["list"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            assert!(
                names.contains(&"MPI_COMM_WORLD") && names.contains(&"mqs-spawn"),
                "{names:?}"
            );
        }
    }
    let text = stdout(&run(&["--pid", &tables.a.to_string(), "--per-rank"]));
    assert!(
        text.contains("spawned: rank 1 of job kids-1, by rank 0 of world-1"),
        "{text}"
    );
    drop(job);
}

#[test]
fn broken_magic_and_version_are_refused() {
    let (job, world, kids) = spawn_job();
    for (variant, needle) in [("bad-magic", "magic"), ("bad-version", "version 2")] {
        let tables = Tables::start(&world, &kids, Some(variant));
        let out = run(&["--pid", &tables.a.to_string()]);
        assert_error(&out, 5, &["MPI2DD_info", needle]);
        assert_running_untraced(tables.a);
    }
    drop(job);
}

/// `mqs-dump launch` of the fixture as a starter of a 2-rank queues job.
fn launch_fixture(abort: bool, options: &[&str]) -> (std::process::Output, String) {
    let starter = support_program("mpi2dd_starter", &[], false);
    let queues = mqs_tests::build_fixture(Mpi::OpenMpiG, "queues").unwrap();
    let job = mqs_tests::launcher_command(Mpi::OpenMpiG, &queues, 2, &[] as &[&str]).unwrap();
    let dumps = std::env::temp_dir().join(format!("mqs-mpi2dd-{}-{abort}", std::process::id()));
    let _ = std::fs::remove_file(&dumps);
    let mut cmd = Command::new(mqs_dump());
    cmd.arg("launch")
        .args(options)
        .arg("--json")
        .arg("--output")
        .arg(&dumps)
        .arg("--")
        .arg(starter)
        .arg("launch");
    if abort {
        cmd.arg("abort");
    }
    cmd.arg("--").arg(job.get_program()).args(job.get_args());
    for (k, v) in job.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .expect("run mqs-dump launch");
    let text = std::fs::read_to_string(&dumps).unwrap_or_default();
    let _ = std::fs::remove_file(&dumps);
    (out, text)
}

#[test]
fn launch_mode_follows_mpi2dd_events() {
    // The abort event: its string, the dump of the ranks, the starter's
    // exit status (7).
    let (out, dumps) = launch_fixture(true, &["--dump-on-abort"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(
        err.contains("the job is aborting: fixture abort: rank 1 was lost"),
        "{err}"
    );
    let dump: Value = serde_json::from_str(dumps.lines().next().expect("one dump")).unwrap();
    assert_eq!(dump["processes"].as_array().unwrap().len(), 2, "{dump}");
    // Rank 0's known posted receive (fixtures/queues.c): tag 7 on mqs-dup.
    let rank0 = dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["global_rank"] == 0)
        .expect("rank 0");
    let dup = rank0["communicators"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mqs-dup")
        .expect("mqs-dup");
    assert!(
        dup["receives"]["operations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["desired_tag"] == 7),
        "{dup}"
    );
}
