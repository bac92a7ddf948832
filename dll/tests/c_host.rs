//! Our DLL loaded by a C program with dlopen, exactly as a C debugger does
//! (the workspace's `tests/c/dlopen_host.c`): every entry point resolves, the setup sequence
//! runs with C callbacks, and the error paths hold (missing types give a
//! has_queues message with exactly one `%s`). Runs against the cdylib of
//! the current build: MPI-1 by default, MPI-2 with `--features mpi2`.

use std::path::PathBuf;
use std::process::Command;

/// The cdylib cargo built for this very test run, next to the test binary.
fn cdylib() -> PathBuf {
    mqs_tests::dll_beside_test_binary(if cfg!(feature = "mpi2") {
        "cargo test -p mqs-dll --features mpi2"
    } else {
        "cargo test -p mqs-dll"
    })
}

#[test]
fn a_c_debugger_can_load_and_set_up_the_dll() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let level = if cfg!(feature = "mpi2") { "1" } else { "0" };
    let host = out_dir.join(format!(
        "dlopen_host_mpi{}",
        if level == "1" { 2 } else { 1 }
    ));
    let status = Command::new("cc")
        .args(["-std=c11", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-DFOR_MPI2={level}"))
        .arg(format!("-I{}", root.join("../include").display()))
        .arg(root.join("../tests/c/dlopen_host.c"))
        .arg("-ldl")
        .arg("-o")
        .arg(&host)
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling dlopen_host.c failed");
    let out = Command::new(&host)
        .arg(cdylib())
        .output()
        .expect("run dlopen_host");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dlopen_host failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" passed, 0 failed"), "{text}");
    assert!(
        text.contains("entry point mqs_get_comm_group resolves"),
        "{text}"
    );
}
