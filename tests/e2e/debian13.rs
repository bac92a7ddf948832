//! Debian 13's stock MPIs, run as in a container and read from this machine.
//!
//! The jobs run in the Debian 13 root `scripts/setup-mpis` makes, in a mount
//! namespace whose root it is (tests/src/debian13.rs): their ranks map
//! Debian 13's libraries at paths this machine has no file at (or another
//! file: its own libc), and mqs-dump, run here, reads every one of them
//! through the ranks' own root.
//!
//! - Open MPI 5.0.7-1 (stripped; its components are in libmpi and
//!   libopen-pal): a hung `queues` job (compiled with the root's
//!   `mpicc.openmpi`) shows, through the committed type packs of those two
//!   (`scripts/typepack-debian13-openmpi`: a close rebuild's types) and with
//!   both our DLL and Open MPI's own (from the root), the same queue
//!   contents as our `-g` build of the same version; a pack one field off
//!   is refused before any DLL reads through it; without the pack the
//!   error names the library and its build-id (exit 6), and `--stacks` still
//!   shows each rank in `MPI_Recv`. Its `prterun`, whose PMIx library cannot
//!   be loaded here, is read by its ranks below it. A ring deadlock through
//!   the pack is found (exit 12).
//! - MPICH 4.2.1 (`4.3.0+really4.2.1-1`, ch4:ucx, no debugger support, and
//!   no source to make a pack from): one line that says so and what a user
//!   can do (exit 6); with `--stacks --deadlock` each rank's stack in
//!   `MPI_Recv` and "cannot tell" (exit 17).

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use mqs_tests::{debian13, Job, Mpi};
use serde_json::Value;
use support::stock::*;
use support::*;

const NO_DEBUG_INFO: i32 = 6;
const DEADLOCK: i32 = 12;
const CANNOT_TELL: i32 = 17;
/// The build-id of Debian 13's libmpi.so.40.40.7 (libopenmpi40 5.0.7-1, amd64).
const LIBMPI_ID: &str = "9bb967beb0f42559207f369b0071ddc01520e21a";

/// The file `pid` maps whose name ends in `name`, as the kernel names it:
/// a path in the root, where this machine has no such file, or another one.
fn mapped_elsewhere(pid: u32, name: &str) -> String {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("pid {pid} maps no {name}:\n{maps}"));
    let path = line.split_whitespace().last().unwrap().to_owned();
    let inode: u64 = line.split_whitespace().nth(4).unwrap().parse().unwrap();
    let root = debian13::root().unwrap();
    assert!(
        debian13::host_path(&root, &path).is_file(),
        "{path} is not a file of the root"
    );
    let here = std::fs::metadata(&path);
    assert!(
        here.as_ref().map_or(true, |m| m.ino() != inode),
        "{path} is this machine's own file: the test would not show that the root is read"
    );
    path
}

/// Runs mqs-dump with `args` until `done` holds for its output (the job
/// settles into its blocking calls just after READY), at most 90 s.
fn until(
    args: &[&str],
    env: &[(String, String)],
    done: impl Fn(&str) -> bool,
) -> std::process::Output {
    let started = Instant::now();
    loop {
        let out = run_with(args, env);
        if done(&stdout(&out)) || started.elapsed() > Duration::from_secs(90) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn debian13_open_mpi_in_its_root_is_read_through_its_pack_like_the_g_build() {
    let reference = Job::launch(Mpi::OpenMpi5G, "queues", 2, &[]).expect("launch on 5.0.7 -g");
    let empty = scratch("d13-cache-g");
    let expected = dumps(&reference, &isolated(&empty, &empty, None), None);
    reference.shutdown().expect("shutdown");

    let job = Job::launch(Mpi::Debian13OpenMpi, "queues", 2, &[]).expect("launch in the root");
    let rank0 = job.rank_pid(0).unwrap();
    let libmpi = mapped_elsewhere(rank0, "libmpi.so.40");
    mapped_elsewhere(rank0, "libc.so.6");
    let cache = scratch("d13-cache");
    let data = data_with_packs("d13-packs", |_| {});
    let env = isolated(&data, &cache, None);
    let got = dumps(&job, &env, None);
    for ((rank, their_g, our_g, read_g), (_, their, ours, unread)) in expected.iter().zip(&got) {
        assert_eq!(ours, our_g, "rank {rank}: our DLL, Debian 13 vs -g");
        assert_eq!(
            their, their_g,
            "rank {rank}: Open MPI's DLL, Debian 13 vs -g"
        );
        assert_eq!((*read_g, *unread), (0, 0), "rank {rank}: sm read on both");
        assert!(
            ours.iter().any(|l| l.starts_with("\"mqs-wait\"")),
            "rank {rank}: {ours:#?}"
        );
    }

    // The launcher: prterun's PMIx library is Debian 13's, which does not
    // load here; its ranks are found below it.
    let launcher = job.launcher_pid().to_string();
    let out = run_with(&["--pid", &launcher, "--json"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pids: Vec<u64> = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = job.rank_pids().iter().map(|&(_, p)| u64::from(p)).collect();
    assert_eq!(pids, want);

    // No pack: the library as the rank maps it, read through its root, its
    // build-id; with --stacks, each rank's stack instead of a failure.
    let none = isolated(&scratch("d13-none"), &cache, None);
    let pid = rank0.to_string();
    let out = run_with(&["--pid", &pid], &none);
    assert_error(&out, NO_DEBUG_INFO, &[&libmpi, LIBMPI_ID, "type pack"]);
    let out = until(&["--pid", &launcher, "--stacks"], &none, |t| {
        t.contains("MPI_Recv")
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("ranks 0-1: main > MPI_Recv"), "{text}");
    // How they were found, and what that leaves out.
    assert!(
        text.contains("\nlauncher: it did not answer as a PMIx launcher (")
            && text.contains("ranks on other hosts are not read"),
        "{text}"
    );
    assert!(
        text.contains("communicators not available on ranks 0-1"),
        "{text}"
    );
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

#[test]
fn debian13_open_mpi_ring_deadlock_is_found_through_its_pack() {
    let data = data_with_packs("d13-ring", |_| {});
    let env = isolated(&data, &data.join("cache"), None);
    let job = Job::launch(Mpi::Debian13OpenMpi, "ring", 3, &[]).expect("launch in the root");
    let launcher = job.launcher_pid().to_string();
    let out = until(&["--pid", &launcher, "--deadlock"], &env, |t| {
        t.starts_with("deadlocked")
    });
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(DEADLOCK),
        "{text}\n{}",
        stderr(&out)
    );
    assert!(text.contains("ranks 0-2 in 1 cycle"), "{text}");
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

#[test]
fn debian13_mpich_in_its_root_says_what_it_lacks_and_shows_stacks() {
    let data = scratch("d13-mpich");
    let env = isolated(&data, &data.join("cache"), None);
    let job = Job::launch(Mpi::Debian13Mpich, "ring", 3, &[]).expect("launch in the root");
    let rank0 = job.rank_pid(0).unwrap();
    let libmpich = mapped_elsewhere(rank0, "libmpich.so.12");
    let name = Path::new(&libmpich).file_name().unwrap().to_str().unwrap();
    let launcher = job.launcher_pid().to_string();
    let out = run_with(&["--pid", &launcher], &env);
    assert_error(
        &out,
        NO_DEBUG_INFO,
        &[
            name,
            "MPICH 4.2.1",
            "--enable-debuginfo",
            "--stacks still shows",
        ],
    );
    let out = until(&["--pid", &launcher, "--stacks", "--deadlock"], &env, |t| {
        t.contains("cannot tell: ranks 0-2 not judged")
    });
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(CANNOT_TELL),
        "{text}\n{}",
        stderr(&out)
    );
    let why = text
        .lines()
        .find(|l| l.starts_with("not judged: ranks 0-2 ("))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(why.contains("MPI_Recv") && why.contains(name), "{why}");
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

/// The packs of a close rebuild carry types alone, so every process is
/// checked against them first: one field off, and the pack is refused
/// before any DLL reads through it.
#[test]
fn debian13_a_pack_one_field_off_is_refused() {
    let job = Job::launch(Mpi::Debian13OpenMpi, "queues", 2, &[]).expect("launch in the root");
    let pid = job.rank_pid(1).unwrap().to_string();
    let cache = scratch("d13-altered");
    for (ty, field, by, needle) in [
        ("ompi_communicator_t", "c_name", 8, "MPI_COMM_WORLD"),
        ("ompi_group_t", "grp_proc_count", 4, "grp_proc_count"),
    ] {
        let data = data_with_packs(&format!("d13-{field}"), |p| shift_field(p, ty, field, by));
        let env = isolated(&data, &cache, None);
        for dll in [None, Some("mpi".to_owned())] {
            let mut args = vec!["--pid", pid.as_str()];
            if let Some(d) = &dll {
                args.extend(["--dll", d.as_str()]);
            }
            let out = run_with(&args, &env);
            assert_error(&out, NO_DEBUG_INFO, &["refused", needle]);
        }
    }
    assert_running_untraced(job.rank_pid(1).unwrap());
    job.shutdown().expect("shutdown");
}

/// A program of the root whose debug file is in the root's own
/// /usr/lib/debug (as a container's -dbgsym package puts it): its frames
/// get their source lines from there, read from this machine.
#[test]
fn debug_files_in_the_ranks_root_are_found() {
    let mpi = Mpi::Debian13Mpich;
    let root = debian13::root().unwrap();
    let built = mqs_tests::build_fixture(mpi, "ring").unwrap();
    // A stripped copy, its debug file under the root's .build-id tree.
    let stripped = built.with_file_name("ring-stripped");
    let host = |p: &Path| debian13::host_path(&root, p);
    std::fs::copy(host(&built), host(&stripped)).unwrap();
    let notes = std::process::Command::new("readelf")
        .arg("-n")
        .arg(host(&stripped))
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&notes.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .expect("a build-id");
    let debug = host(Path::new(&format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    )));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    for args in [
        vec!["--only-keep-debug".into(), host(&stripped), debug.clone()],
        vec!["--strip-debug".into(), host(&stripped)],
    ] {
        let ok = std::process::Command::new("objcopy")
            .args(&args)
            .status()
            .unwrap();
        assert!(ok.success(), "objcopy {args:?}");
    }
    assert!(!Path::new("/usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]))
        .exists());
    let cmd = mqs_tests::launcher_command(mpi, &stripped, 3, &[] as &[&str]).unwrap();
    let job = Job::launch_command(
        mpi,
        "ring",
        stripped.clone(),
        3,
        cmd,
        &Job::new_id("ring-stripped"),
        &mqs_tests::LaunchOptions::default(),
    )
    .expect("launch in the root");
    let pid = job.rank_pid(0).unwrap().to_string();
    let data = scratch("d13-debug");
    let env = isolated(&data, &data.join("cache"), None);
    let main_frame = |json: &Value| {
        json["processes"][0]["stacks"]["list"][0]["frames"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["function"] == "main").cloned())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let frame = loop {
        let out = run_with(&["--pid", &pid, "--stacks", "--json", "--offline"], &env);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        match main_frame(&json) {
            Some(f) if f["line"].is_u64() => break f,
            other => assert!(
                Instant::now() < deadline,
                "no source line for main: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        frame["file"].as_str().is_some_and(|f| f.ends_with(".c")),
        "{frame}"
    );
    // Without it, no line.
    std::fs::remove_file(&debug).unwrap();
    let out = run_with(&["--pid", &pid, "--stacks", "--json", "--offline"], &env);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let frame = main_frame(&json).expect("main");
    assert!(frame["line"].is_null(), "{frame}");
    assert_running_untraced(job.rank_pid(0).unwrap());
    job.shutdown().expect("shutdown");
    let _ = std::fs::remove_file(host(&stripped));
}
