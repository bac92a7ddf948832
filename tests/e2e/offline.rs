//! Post-mortem and offline dumps agree with the live one: a hung `queues`
//! job is dumped live, then from gdb's `gcore` files of every rank, from the
//! kernel's core files of the same ranks (killed with SIGABRT while hung),
//! and from a snapshot saved with `--save` and replayed with `--snapshot`,
//! through Open MPI's DLL and through ours. Everything but the counters
//! must be equal, and the cores' stacks stand where the live ones did.
//! Also: a core of a process that is not MPI, and a snapshot
//! that lacks a page the DLL needs.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// Open MPI's own DLL, from the -g build.
fn their_dll() -> PathBuf {
    Mpi::OpenMpiG
        .prefix()
        .expect("Open MPI -g build")
        .join("lib/openmpi/libompi_dbg_msgq.so")
}

/// Our DLL, as `cargo build -p mqs-dll` leaves it (checked fresh).
fn our_dll() -> PathBuf {
    mqs_tests::our_dll(false)
}

/// A fresh directory for this test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("mqs-offline-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The processes of a dump without what differs between runs by nature:
/// counters, and the DLL's chatter.
fn comparable(dump: &Value) -> Value {
    let mut processes = dump["processes"].clone();
    for p in processes.as_array_mut().expect("processes") {
        let p = p.as_object_mut().expect("process");
        p.remove("stats");
        p.remove("dll_output");
    }
    processes
}

/// Where each process stands, as far as it does not change while a rank
/// spins in MPI's progress loop: its threads' ids, and its main thread's
/// frames from the outermost one down to the MPI call (`MPI_Recv` for the
/// `queues` fixture), each as function, file and line.
fn standing(dump: &Value) -> Vec<(Vec<u64>, Vec<Value>)> {
    let processes = dump["processes"].as_array().expect("processes");
    processes
        .iter()
        .map(|p| {
            let stacks = &p["stacks"];
            assert_eq!(stacks["status"], "ok", "stacks not read: {stacks}");
            let threads = stacks["list"].as_array().expect("threads");
            let mut tids: Vec<u64> = threads.iter().map(|t| t["tid"].as_u64().unwrap()).collect();
            tids.sort_unstable();
            let frames = threads[0]["frames"].as_array().expect("frames");
            let mut outer = Vec::new();
            for f in frames.iter().rev() {
                outer.push(serde_json::json!([f["function"], f["file"], f["line"]]));
                if f["function"]
                    .as_str()
                    .is_some_and(|n| n.contains("MPI_Recv"))
                {
                    break;
                }
            }
            let names: Vec<&str> = outer.iter().filter_map(|f| f[0].as_str()).collect();
            assert!(
                names.contains(&"main") && names.last().is_some_and(|n| n.contains("MPI_Recv")),
                "the main thread's stack does not run from main into MPI_Recv: {names:?}"
            );
            (tids, outer)
        })
        .collect()
}

fn json_of(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "mqs-dump {args:?} failed ({}): {}",
        out.status,
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Every rank's gcore, written into `dir` as core.PID.
fn gcore(job: &Job, dir: &Path) {
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

/// The kernel's cores of every rank: each rank may dump core of any size,
/// then all get SIGABRT at once. With the default core pattern "core" each
/// lands in its rank's working directory, `workdir/rank<R>/core`.
fn kernel_cores(job: &Job, workdir: &Path) -> Vec<PathBuf> {
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    assert!(
        !pattern.trim().starts_with('|') && !pattern.trim().starts_with('/'),
        "this test needs the kernel to write core files into the working directory \
         (core_pattern is '{}'; set it to 'core' with sysctl kernel.core_pattern=core)",
        pattern.trim()
    );
    let name = pattern.trim().replace("%p", "PID");
    let ranks = job.rank_pids();
    for &(_, pid) in &ranks {
        let out = Command::new("prlimit")
            .arg(format!("--pid={pid}"))
            .arg("--core=unlimited")
            .output()
            .expect("run prlimit");
        assert!(out.status.success(), "prlimit: {out:?}");
    }
    for &(_, pid) in &ranks {
        // SAFETY: kill(2) with a pid of our job's rank, alive (just seen).
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGABRT) }, 0);
    }
    // A core is complete once the process is gone.
    let deadline = Instant::now() + Duration::from_secs(120);
    for &(_, pid) in &ranks {
        while mqs_tests::process_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "rank {pid} did not die of SIGABRT"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    ranks
        .iter()
        .map(|&(rank, pid)| {
            let core = workdir
                .join(format!("rank{rank}"))
                .join(name.replace("PID", &pid.to_string()));
            assert!(core.exists(), "no kernel core at {}", core.display());
            core
        })
        .collect()
}

#[test]
fn cores_and_snapshots_equal_the_live_dump() {
    let work = TempDir::new("cores");
    let workdir = work.0.join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    let options = LaunchOptions {
        env: vec![("MQS_FIXTURE_CHDIR".into(), workdir.clone().into())],
        ..LaunchOptions::default()
    };
    let job = Job::launch_with(Mpi::OpenMpiG, "queues", 2, &[], &options).expect("queues job");
    let mpirun = job.launcher_pid().to_string();
    let dlls = [their_dll(), our_dll()];

    // Live, and saved while live, with each DLL.
    let mut live = Vec::new();
    for (i, dll) in dlls.iter().enumerate() {
        let snap = work.0.join(format!("job{i}.mqs"));
        let dump = json_of(&[
            "--pid",
            &mpirun,
            "--dll",
            s(dll),
            "--json",
            "--save",
            s(&snap),
        ]);
        assert_eq!(dump["processes"].as_array().unwrap().len(), 2);
        // The job is released after saving.
        for (_, pid) in job.rank_pids() {
            assert_running_untraced(pid);
        }
        let replay = json_of(&["--snapshot", s(&snap), "--dll", s(dll), "--json"]);
        assert_eq!(
            comparable(&replay),
            comparable(&dump),
            "snapshot replay differs from the dump that saved it ({})",
            dll.display()
        );
        assert_eq!(replay["launcher"], dump["launcher"]);
        live.push(comparable(&dump));
    }
    // Our DLL lists what theirs cannot: the comparison is not of two empty
    // dumps.
    let ours = live[1].to_string();
    assert!(
        ours.contains("\"desired_tag\":99"),
        "unexpected tag 99 missing"
    );
    // The stacks, read live, to compare with the cores' (our DLL; the
    // stacks do not depend on the DLL).
    let live_stacks = standing(&json_of(&[
        "--pid",
        &mpirun,
        "--dll",
        s(&dlls[1]),
        "--json",
        "--stacks",
    ]));

    let gcores = work.0.join("gcore");
    std::fs::create_dir_all(&gcores).unwrap();
    gcore(&job, &gcores);
    let kernel = kernel_cores(&job, &workdir);
    drop(job);

    // A core leaves shared mappings out, the shared-memory BTL's segments
    // among them (a kernel core may have them back from their files, if
    // those are still there): where our DLL cannot read them, it says
    // messages in transit are not listed, and lists the rest as live; the
    // host names the reads that failed (`unreadable`).
    let transport_left_out = |dump: &mut Value| {
        let (_, said) = as_if_transport_read(dump, "vader");
        for reason in &said {
            assert!(reason.contains("unreadable"), "{reason}");
        }
        if !said.is_empty() {
            for p in dump["processes"].as_array_mut().into_iter().flatten() {
                if let Some(p) = p.as_object_mut() {
                    p.remove("unreadable");
                }
            }
        }
    };
    // A core keeps no OS state from before the dump (gcore's own tracing
    // is all a core could say): the live dumps' is left out to compare.
    let live: Vec<Value> = live
        .iter()
        .map(|dump| {
            let mut dump = dump.clone();
            for p in dump.as_array_mut().into_iter().flatten() {
                if let Some(p) = p.as_object_mut() {
                    assert!(p.remove("os_state").is_some(), "a live dump has its state");
                }
            }
            dump
        })
        .collect();
    for (dll, expected) in dlls.iter().zip(&live) {
        let mut from_gcore = json_of(&["--core", s(&gcores), "--dll", s(dll), "--json"]);
        transport_left_out(&mut from_gcore);
        assert_eq!(
            &comparable(&from_gcore),
            expected,
            "gcore dump differs from the live one ({})",
            dll.display()
        );
        // Kernel cores, named in reverse order: ranks come from the MPI
        // state, not from the order of the files.
        let mut from_kernel = json_of(&[
            "--core",
            s(&kernel[1]),
            "--core",
            s(&kernel[0]),
            "--dll",
            s(dll),
            "--json",
        ]);
        transport_left_out(&mut from_kernel);
        assert_eq!(
            &comparable(&from_kernel),
            expected,
            "kernel core dump differs from the live one ({})",
            dll.display()
        );
    }
    // Stacks from the cores: the same threads, and each main thread in the
    // same place as when it was read live.
    let gcore_stacks = json_of(&["--core", s(&gcores), "--json", "--stacks"]);
    assert_eq!(
        standing(&gcore_stacks),
        live_stacks,
        "gcore stacks differ from the live ones"
    );
    let kernel_stacks = json_of(&[
        "--core",
        s(&kernel[0]),
        "--core",
        s(&kernel[1]),
        "--json",
        "--stacks",
    ]);
    assert_eq!(
        standing(&kernel_stacks),
        live_stacks,
        "kernel core stacks differ from the live ones"
    );
}

#[test]
fn a_core_of_a_process_without_mpi_is_not_mpi() {
    let work = TempDir::new("notmpi");
    let mut sleeper = Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("start sleep");
    let out = Command::new("gcore")
        .arg("-o")
        .arg(work.0.join("core"))
        .arg(sleeper.id().to_string())
        .output()
        .expect("run gcore");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(out.status.success(), "gcore: {out:?}");
    let core = work.0.join(format!("core.{}", sleeper.id()));
    assert_error(&run(&["--core", s(&core)]), 5, &["not an MPI process"]);
    // Not a core at all.
    assert_error(&run(&["--core", s(&mqs_dump())]), 13, &["not a core file"]);
    assert_error(
        &run(&["--snapshot", s(&mqs_dump())]),
        13,
        &["not an mqs snapshot"],
    );
}

#[test]
fn a_snapshot_without_a_page_names_the_address() {
    use mqs_acquire::inspect::{dump_loaded_snapshot, Options};
    use mqs_acquire::snapshot::Snapshot;

    let work = TempDir::new("page");
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("queues job");
    let rank0 = job.rank_pid(0).unwrap().to_string();
    let snap = work.0.join("rank0.mqs");
    let ours = our_dll();
    let dump = json_of(&[
        "--pid",
        &rank0,
        "--dll",
        s(&ours),
        "--json",
        "--save",
        s(&snap),
    ]);
    drop(job);
    // The page of rank 0's first posted receive on mqs-dup (tag 7): our DLL
    // names each request's address in its extra text.
    let comms = dump["processes"][0]["communicators"]["list"]
        .as_array()
        .unwrap();
    let dup = comms.iter().find(|c| c["name"] == "mqs-dup").unwrap();
    let receive = &dup["receives"]["operations"][0];
    assert_eq!(receive["desired_tag"], 7);
    let request = receive["extra_text"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|l| {
            let l = l.as_str()?;
            let hex = l.split("0x").nth(1)?;
            let hex: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
            u64::from_str_radix(&hex, 16).ok()
        })
        .expect("a request address in the extra text");
    let page = request / 4096 * 4096;

    let options = Options {
        dll: mqs_acquire::inspect::DllChoice::Given(ours.clone()),
        ..Options::default()
    };
    let mut snapshot = Snapshot::load(&snap, &[]).expect("load snapshot");
    assert!(
        snapshot.processes[0]
            .target
            .pages
            .remove(&(page / 4096))
            .is_some(),
        "the snapshot holds the page of the request it lists"
    );
    let replay = dump_loaded_snapshot(snapshot, &options).expect("replay");
    assert_eq!(replay.processes.len(), 1, "{replay:?}");
    let process = &replay.processes[0];
    let missing = format!("{page:#x}");
    assert!(
        process.unreadable.iter().any(|u| u.contains(&missing)),
        "the missing page {missing} is not named: {:?}",
        process.unreadable
    );
    // And the text output says so too.
    // The queue that needed the page is an error, not a shorter list.
    let mqs_core::model::Section::Ok { value } = &process.communicators else {
        panic!("no communicators: {:?}", process.communicators);
    };
    let dup = value.list.iter().find(|c| c.name == "mqs-dup").unwrap();
    assert!(
        matches!(dup.receives, mqs_core::model::Section::Error { .. }),
        "{:?}",
        dup.receives
    );
    let text = mqs_analysis::render::text(&replay);
    assert!(text.contains("could not read"), "{text}");
    assert!(text.contains(&missing), "{text}");
}
