//! Every error mqs-dump reports: a distinct exit code, one line that says
//! what to do, and the target left running, not stopped, not traced.
//!
//! The MPI cases use real jobs; the DLL cases use `tests/support/fake_mpi.c`
//! (a process that names a DLL in MPIR_dll_name) and `test_dll.c` (a DLL
//! built to be incompatible, or to kill its target mid-dump).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use mqs_tests::{Job, LaunchOptions, Mpi};
use support::*;

const NO_SUCH_PROCESS: i32 = 3;
const PERMISSION_DENIED: i32 = 4;
const NOT_MPI: i32 = 5;
const NO_DEBUG_INFO: i32 = 6;
const DLL_MISSING: i32 = 7;
const DLL_NOT_LOADABLE: i32 = 8;
const DLL_INCOMPATIBLE: i32 = 9;
const DLL_UNTRUSTED: i32 = 10;
const PROCESS_GONE: i32 = 11;
const DLL_HUNG: i32 = 15;

/// The dump through `test_dll.c` succeeded and shows its one communicator.
fn assert_test_dll_dumped(out: &std::process::Output) {
    assert!(out.status.success(), "{}", stderr(out));
    assert!(
        stdout(out).contains("Communicator test: size 1"),
        "{}",
        stdout(out)
    );
}

fn fake_mpi() -> PathBuf {
    support_program("fake_mpi", &[], false)
}

/// A scratch directory under the target dir, fresh for each test.
fn scratch(name: &str) -> PathBuf {
    let dir = mqs_tests::target_dir().join("mqs-scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn no_such_process() {
    // Pids above pid_max never exist.
    let out = run(&["--pid", "2147483000"]);
    assert_error(&out, NO_SUCH_PROCESS, &["no process with pid 2147483000"]);
}

#[test]
fn usage_errors_exit_2() {
    let out = run(&["--pid"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["--help"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("Exit codes:"));
}

#[test]
fn not_an_mpi_process() {
    let plain = support_program("fake_mpi", &["-DNO_MPIR"], false);
    let target = Spawned::start(&plain, &[]);
    let out = run(&["--pid", &target.pid().to_string()]);
    assert_error(
        &out,
        NOT_MPI,
        &["is not an MPI process", "MPIR_dll_name", "--dll"],
    );
    assert_running_untraced(target.pid());

    // An MPI process that names no DLL at all.
    let target = Spawned::start(&fake_mpi(), &[]);
    let out = run(&["--pid", &target.pid().to_string()]);
    assert_error(&out, NOT_MPI, &["MPIR_dll_name is empty"]);
    assert_running_untraced(target.pid());
}

#[test]
fn dll_named_by_the_target_is_missing() {
    let target = Spawned::start(&fake_mpi(), &["/nonexistent/libmissing_msgq.so"]);
    let out = run(&["--pid", &target.pid().to_string()]);
    // Our DLL cannot read it either: no DLL shows its queues, and the
    // error says both and how to name the DLL if it is elsewhere.
    assert_error(
        &out,
        NO_DEBUG_INFO,
        &[
            "/nonexistent/libmissing_msgq.so, does not exist",
            "mqs's own DLL cannot read it",
            "--dll <path>",
        ],
    );
    assert_running_untraced(target.pid());

    // --dll naming nothing.
    let out = run(&[
        "--pid",
        &target.pid().to_string(),
        "--dll",
        "/nonexistent/other.so",
    ]);
    assert_error(
        &out,
        DLL_MISSING,
        &["/nonexistent/other.so", "no such file"],
    );
    assert_running_untraced(target.pid());
}

#[test]
fn dll_that_is_not_a_library() {
    let dir = scratch("not-loadable");
    let bogus = dir.join("libbogus.so");
    std::fs::write(&bogus, "not an ELF file, just text\n".repeat(20)).unwrap();
    std::fs::set_permissions(&bogus, std::fs::Permissions::from_mode(0o644)).unwrap();
    let target = Spawned::start(&fake_mpi(), &[bogus.to_str().unwrap()]);
    let out = run(&["--pid", &target.pid().to_string()]);
    assert_error(
        &out,
        DLL_NOT_LOADABLE,
        &["not loadable", "invalid ELF header"],
    );
    assert_running_untraced(target.pid());

    // A real library that is not a message-queue DLL.
    let out = run(&[
        "--pid",
        &target.pid().to_string(),
        "--dll",
        "/lib/x86_64-linux-gnu/libz.so.1",
    ]);
    assert_error(
        &out,
        DLL_NOT_LOADABLE,
        &["missing entry points", "mqs_setup_basic_callbacks"],
    );
    assert_running_untraced(target.pid());
}

#[test]
fn incompatible_dlls_are_refused() {
    let target = Spawned::start(&fake_mpi(), &[]);
    let pid = target.pid().to_string();
    let level5 = support_program("test_dll", &["-DCOMPATIBILITY=5"], true);
    let out = run(&["--pid", &pid, "--dll", level5.to_str().unwrap()]);
    assert_error(&out, DLL_INCOMPATIBLE, &["interface compatibility 5"]);
    assert_running_untraced(target.pid());

    let narrow = support_program("test_dll", &["-DTADDR_WIDTH=4"], true);
    let out = run(&["--pid", &pid, "--dll", narrow.to_str().unwrap()]);
    assert_error(&out, DLL_INCOMPATIBLE, &["4 bytes wide"]);
    assert_running_untraced(target.pid());

    // The same DLL at level 2 works: the refusals were about the level.
    let good = support_program("test_dll", &[], true);
    let out = run(&["--pid", &pid, "--dll", good.to_str().unwrap()]);
    assert_test_dll_dumped(&out);
    assert_running_untraced(target.pid());
}

#[test]
fn untrusted_dlls_need_trust_dll() {
    let dir = scratch("untrusted");
    let dll = dir.join("libworld_writable.so");
    std::fs::copy(support_program("test_dll", &[], true), &dll).unwrap();
    std::fs::set_permissions(&dll, std::fs::Permissions::from_mode(0o666)).unwrap();
    let target = Spawned::start(&fake_mpi(), &[dll.to_str().unwrap()]);
    let pid = target.pid().to_string();
    let out = run(&["--pid", &pid]);
    assert_error(
        &out,
        DLL_UNTRUSTED,
        &["writable by everyone", "--trust-dll"],
    );
    assert_running_untraced(target.pid());

    let out = run(&["--pid", &pid, "--trust-dll"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_running_untraced(target.pid());

    // Owned by someone who is neither root nor us.
    std::fs::set_permissions(&dll, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&dll, Some(65534), None).unwrap();
    let out = run(&["--pid", &pid]);
    assert_error(&out, DLL_UNTRUSTED, &["owned by uid 65534", "--trust-dll"]);
    assert_running_untraced(target.pid());
}

#[test]
fn permission_denied_for_another_user() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch");
    let pid = job.rank_pid(0).unwrap();
    // mqs-dump as uid 65534 (nobody) against a rank that root owns.
    let out = Command::new(world_executable(&mqs_dump()))
        .args(["--pid", &pid.to_string()])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run mqs-dump as nobody");
    assert_error(
        &out,
        PERMISSION_DENIED,
        &["permission denied", "uid 0", "root"],
    );
    assert_running_untraced(pid);
    job.shutdown().unwrap();
}

#[test]
fn permission_denied_without_cap_sys_ptrace() {
    // Root without CAP_SYS_PTRACE (as in a default container) may not trace
    // another user's process.
    // The target runs as nobody, so it must be able to run the program.
    let exe = world_executable(&fake_mpi());
    let target = Spawned::start_as(&exe, &[], 65534);
    let out = Command::new("setpriv")
        .args(["--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--"])
        .arg(mqs_dump())
        .args(["--pid", &target.pid().to_string()])
        .output()
        .expect("run mqs-dump under setpriv");
    assert_error(
        &out,
        PERMISSION_DENIED,
        &["CAP_SYS_PTRACE", "--cap-add=SYS_PTRACE"],
    );
    assert_running_untraced(target.pid());
}

/// A process that another debugger traces and lets run can be neither
/// stopped by us (a task has one tracer) nor read consistently: the error
/// names the tracer and the ways out. (One the debugger holds stopped is
/// read as it holds it: tests/e2e/debuggers.rs.)
#[test]
fn permission_denied_when_traced_and_running() {
    let target = Spawned::start(&fake_mpi(), &[]);
    let pid = target.pid();
    // Another debugger that attaches and lets the target run on. It says
    // when it holds the target stopped: only a running state seen after
    // that is its `continue` (right after the attach the target still runs
    // until the attach's stop lands, and gdb then holds it a while).
    let mut tracer = Command::new("gdb")
        .args([
            "-q",
            "-nx",
            "-batch",
            "-p",
            &pid.to_string(),
            "-ex",
            "echo MQS-ATTACHED\\n",
            "-ex",
            "continue",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gdb");
    let gdb_out = tracer.stdout.take().expect("gdb's stdout");
    let (attached_tx, attached) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(gdb_out).lines() {
            match line {
                Ok(l) if l.contains("MQS-ATTACHED") => {
                    let _ = attached_tx.send(());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    attached
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("gdb did not attach");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s.rsplit_once(") ")?.1.chars().next()? != 't'))
            .unwrap_or(false)
    };
    while tracer_of(pid).is_none() || !running() {
        assert!(
            std::time::Instant::now() < deadline,
            "gdb did not attach and continue"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let tracer_pid = tracer_of(pid).unwrap();
    let out = run(&["--pid", &pid.to_string()]);
    let _ = tracer.kill();
    let _ = tracer.wait();
    assert_error(
        &out,
        PERMISSION_DENIED,
        &[
            "already traced by pid",
            &tracer_pid.to_string(),
            "stop it in that debugger",
            "--no-stop",
        ],
    );
    assert_running_untraced(pid);
}

#[test]
fn mpi_without_debug_info() {
    // A release Open MPI whose libmpi lost its debug info (as a stripped
    // distribution package has): the DLL cannot find the types it needs.
    let prefix = Mpi::OpenMpiRelease.prefix().expect("Open MPI release");
    let dir = scratch("stripped-libmpi");
    let status = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(prefix.join("lib/libmpi.so.40"))
        .arg(dir.join("libmpi.so.40"))
        .status()
        .expect("objcopy");
    assert!(status.success());
    // Preloaded: mpirun puts its own lib directory first on
    // LD_LIBRARY_PATH, so that would not reach the ranks.
    let options = LaunchOptions {
        env: vec![(
            "LD_PRELOAD".into(),
            dir.join("libmpi.so.40").into_os_string(),
        )],
        ..LaunchOptions::default()
    };
    let job = Job::launch_with(Mpi::OpenMpiRelease, "queues", 2, &[], &options).expect("launch");
    let pid = job.rank_pid(0).unwrap();
    // The rank really runs the stripped library.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(maps.contains(dir.join("libmpi.so.40").to_str().unwrap()));
    let out = run(&["--pid", &pid.to_string()]);
    assert_error(
        &out,
        NO_DEBUG_INFO,
        &[
            "not found in the MPI's symbols and debug info:",
            "type 'opal_list_item_t'",
            // Which library, its build-id, and the three fixes.
            "stripped-libmpi/libmpi.so.40 (build-id ",
            "has no debug information here",
            "-dbgsym",
            "--typepack",
            "DEBUGINFOD_URLS",
        ],
    );
    assert_running_untraced(pid);
    job.shutdown().unwrap();
}

#[test]
fn process_exits_during_the_dump() {
    let mut target = Spawned::start(&fake_mpi(), &[]);
    let pid = target.pid().to_string();
    let killer = support_program("test_dll", &["-DKILL_TARGET"], true);
    let out = run_env(
        &["--pid", &pid, "--dll", killer.to_str().unwrap()],
        &[("MQS_TEST_KILL_PID", &pid)],
    );
    assert_error(&out, PROCESS_GONE, &[&format!("process {pid} exited")]);
    assert!(target.exited(), "the test DLL killed it");
}

/// A DLL that never returns (here: one that waits for a file nobody
/// makes): past --dll-timeout mqs-dump names the call, ends, and the
/// target runs on, untraced.
#[test]
fn a_stuck_dll_ends_mqs_dump_and_the_target_runs_on() {
    let target = Spawned::start(&fake_mpi(), &[]);
    let pid = target.pid().to_string();
    let blocking = support_program("test_dll", &["-DBLOCK_IN_DLL"], true);
    let dir = scratch("stuck-dll");
    let started = std::time::Instant::now();
    let out = run_env(
        &[
            "--pid",
            &pid,
            "--dll",
            blocking.to_str().unwrap(),
            "--dll-timeout",
            "2",
        ],
        &[("MQS_TEST_BLOCK_DIR", dir.to_str().unwrap())],
    );
    assert_error(
        &out,
        DLL_HUNG,
        &[
            "did not return from mqs_update_communicator_list within 2 s",
            "--dll-timeout",
        ],
    );
    // It waited for the limit, not for the DLL's own 120 s.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(dir.join("inside").exists(), "the DLL was entered");
    assert_running_untraced(target.pid());
}

#[test]
fn remote_and_failed_ranks_do_not_hide_the_rest() {
    // Exit code for a job whose every rank failed is the ranks' error.
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch");
    let launcher = job.launcher_pid().to_string();
    let out = run(&["--pid", &launcher, "--dll", "/nonexistent/x.so"]);
    assert_error(&out, DLL_MISSING, &["/nonexistent/x.so"]);
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    assert_running_untraced(job.launcher_pid());
    job.shutdown().unwrap();
}

#[test]
fn a_thread_that_never_stops_times_out_and_is_released() {
    let exe = support_program("stuck_in_kernel", &[], false);
    let target = Spawned::start(&exe, &[]);
    let pid = target.pid().to_string();
    let out = run(&["--pid", &pid]);
    assert_error(
        &out,
        1,
        &[
            &format!("thread {pid} of pid {pid} did not stop within 10 s"),
            "state D (uninterruptible sleep",
            "--no-stop",
        ],
    );
    assert_eq!(tracer_of(target.pid()), None);
    // What the message suggests works: read without stopping.
    let out = run(&["--pid", &pid, "--no-stop"]);
    assert_error(&out, NOT_MPI, &["is not an MPI process"]);
    assert_eq!(tracer_of(target.pid()), None);
}

#[test]
fn a_program_deleted_while_it_runs_is_still_read() {
    // Rebuilding a program while its job runs leaves the maps saying
    // "(deleted)": the path names another file, or none. The mapped one is
    // read through /proc/PID/map_files instead of giving up on its symbols.
    let dir = scratch("deleted-binary");
    let exe = dir.join("fake_mpi");
    std::fs::copy(fake_mpi(), &exe).unwrap();
    let dll = support_program("test_dll", &[], true);
    let target = Spawned::start(&exe, &[dll.to_str().unwrap()]);
    std::fs::remove_file(&exe).unwrap();
    let out = run(&["--pid", &target.pid().to_string()]);
    assert_test_dll_dumped(&out);
    assert_running_untraced(target.pid());
}
