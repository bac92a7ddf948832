//! The binaries the end-to-end tests, the DLL's tests and the benches run
//! (mqs-dump, our DLL in both builds and beside a test binary, the
//! embedding example), found in the target directory and checked to be
//! newer than every source file they are built from: a test that ran an
//! old binary would test something else than the checkout. The one place
//! that finds them: a unit test below fails on any test or bench source
//! with a lookup of its own.

use std::path::PathBuf;
use std::time::SystemTime;

use crate::mpi::{target_dir, workspace_root};

/// The newest modification time of the files under `dirs` (relative to the
/// workspace root).
fn newest_source(dirs: &[&str]) -> Option<(SystemTime, PathBuf)> {
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| workspace_root().join(d)).collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        // Unit tests (a `tests` module or folder, `*_tests.rs`) are not
        // built into the binaries: editing them leaves these as they are.
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "tests" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
            continue;
        }
        if let Ok(modified) = meta.modified() {
            if newest.as_ref().is_none_or(|(t, _)| modified > *t) {
                newest = Some((modified, path));
            }
        }
    }
    newest
}

/// `path`, after checking that it exists and is newer than its sources;
/// `build` is the command that makes it, for the message.
fn fresh(path: PathBuf, sources: &[&str], build: &str) -> PathBuf {
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: run `{build}` (scripts/test does)",
                path.display()
            )
        });
    if let Some((changed, source)) = newest_source(sources) {
        assert!(
            built >= changed,
            "{} is older than {}: run `{build}` (scripts/test does) so that the tests run \
             what the checkout holds",
            path.display(),
            source.display()
        );
    }
    path
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// The host's sources: what mqs-dump and the examples are built from.
const HOST_SOURCES: &[&str] = &[
    "host/mqs-core/src",
    "host/mqs-core/examples",
    "host/mqs-stacks/src",
    "host/mqs-acquire/src",
    "host/mqs-analysis/src",
    "host/mqs-cvars/src",
    "host/mqs-dump/src",
    "mqs-abi/src",
    "mqs-abi/build.rs",
    "mqs-abi/build",
    "include",
];
/// The DLL's.
const DLL_SOURCES: &[&str] = &[
    "dll/src",
    "mqs-abi/src",
    "mqs-abi/build.rs",
    "mqs-abi/build",
    "include",
];

/// The file name of our DLL.
const DLL_FILE: &str = "libmqs_dll.so";

/// `--release` when this is a release build (benches), for the messages.
fn release_flag() -> &'static str {
    if cfg!(debug_assertions) {
        ""
    } else {
        " --release"
    }
}

/// Our DLL as cargo built it for the running test binary: a cdylib is
/// built with the rlib for its crate's own tests, with the same features
/// and profile, next to the test binary (the copy in `target/<profile>` is
/// only refreshed by `cargo build`). Checked to be newer than the DLL's
/// sources; `build` is the command that makes it (`cargo test -p mqs-dll`).
pub fn dll_beside_test_binary(build: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let lib = exe
        .parent()
        .map(|deps| deps.join(DLL_FILE))
        .unwrap_or_default();
    fresh(lib, DLL_SOURCES, build)
}

/// mqs-dump of this build (of the release build for benches).
pub fn mqs_dump_binary() -> PathBuf {
    fresh(
        target_dir().join(profile()).join("mqs-dump"),
        HOST_SOURCES,
        &format!("cargo build{} -p mqs-dump", release_flag()),
    )
}

/// An example of the embedding core (`host/mqs-core/examples`).
pub fn core_example(name: &str) -> PathBuf {
    fresh(
        target_dir().join(profile()).join("examples").join(name),
        HOST_SOURCES,
        &format!("cargo build{} -p mqs-core --examples", release_flag()),
    )
}

/// Our DLL: the MPI-1 build (`target/<profile>`) or the MPI-2 one
/// (`target/mpi2/<profile>`, as scripts/test builds it).
pub fn our_dll(mpi2: bool) -> PathBuf {
    if mpi2 {
        fresh(
            target_dir().join("mpi2").join(profile()).join(DLL_FILE),
            DLL_SOURCES,
            &format!(
                "CARGO_TARGET_DIR=target/mpi2 cargo build{} -p mqs-dll --features mpi2",
                release_flag()
            ),
        )
    } else {
        fresh(
            target_dir().join(profile()).join(DLL_FILE),
            DLL_SOURCES,
            &format!("cargo build{} -p mqs-dll", release_flag()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a lookup of our binaries of a source's own looks like: their file
    /// names as paths, where cargo puts them, and choosing that directory by
    /// the build's profile.
    const OWN_LOOKUPS: &[&str] = &[
        "libmqs_dll",
        "debug_assertions",
        "CARGO_BIN_EXE_mqs-dump",
        "join(\"mqs-dump\")",
        "/mqs-dump\"",
        "join(\"debug\")",
        "join(\"release\")",
        "\"debug/",
        "\"release/",
        "target/debug",
        "target/release",
    ];

    /// The sign of a lookup of its own on `line`, if there is one.
    fn own_lookup(line: &str) -> Option<&'static str> {
        OWN_LOOKUPS.iter().copied().find(|p| line.contains(p))
    }

    /// Every Rust source of the workspace's tests and benches: each member's
    /// `tests/` and `benches/`, and the whole of this crate but this file.
    fn test_sources() -> Vec<PathBuf> {
        let root = workspace_root();
        let manifest =
            std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
        let members = manifest
            .split_once("members = [")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| list)
            .expect("the workspace lists its members");
        let mut dirs: Vec<PathBuf> = Vec::new();
        for member in members.split(',').map(|m| m.trim().trim_matches('"')) {
            if member == "tests" {
                dirs.push(root.join(member));
            } else if !member.is_empty() {
                dirs.extend(["tests", "benches"].map(|d| root.join(member).join(d)));
            }
        }
        let this = root.join("tests/src/artifacts.rs");
        let mut files = Vec::new();
        while let Some(path) = dirs.pop() {
            if path.is_dir() {
                if let Ok(entries) = std::fs::read_dir(&path) {
                    dirs.extend(entries.flatten().map(|e| e.path()));
                }
            } else if path.extension().is_some_and(|e| e == "rs") && path != this {
                files.push(path);
            }
        }
        files
    }

    /// Tests and benches find mqs-dump and our DLL through this module
    /// only, so that none runs a stale build.
    #[test]
    fn no_test_or_bench_finds_our_binaries_on_its_own() {
        let files = test_sources();
        for known in [
            "tests/e2e/stock.rs",
            "dll/tests/c_host.rs",
            "host/mqs-dump/benches/dump.rs",
        ] {
            assert!(
                files.iter().any(|f| f.ends_with(known)),
                "{known} is not among the sources checked: {files:?}"
            );
        }
        let mut found = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).expect("a test source");
            for (n, line) in text.lines().enumerate() {
                if let Some(sign) = own_lookup(line) {
                    found.push(format!(
                        "{}:{}: {sign}: {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
        assert!(
            found.is_empty(),
            "these find mqs-dump or our DLL on their own; use mqs_tests::our_dll, \
             mqs_dump_binary, dll_beside_test_binary or core_example (tests/src/artifacts.rs), \
             which refuse a build older than its sources:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_lookup_check_knows_a_lookup_from_a_use() {
        for line in [
            r#"        .join("libmqs_dll.so");"#,
            r#"    let ours = mqs_tests::target_dir().join("release/libmqs_dll.so");"#,
            r#"    let exe = mqs_tests::target_dir().join("release/mqs-dump");"#,
            r#"    let mqs_dump = env!("CARGO_BIN_EXE_mqs-dump");"#,
            r#"    let exe = root.join("target/debug/mqs-dump");"#,
            r#"        .join(if cfg!(debug_assertions) { "debug" } else { "release" })"#,
        ] {
            assert!(own_lookup(line).is_some(), "not seen: {line}");
        }
        for line in [
            r#"    let mut cmd = Command::new(mqs_dump());"#,
            r#"    let dll = mqs_tests::our_dll(false).display().to_string();"#,
            r#"        .strip_prefix("mqs-dump watch: snapshot ")"#,
            r#"    use mqs_dll::exports;"#,
            r#"    let dir = mqs_tests::target_dir().join("mqs-scratch").join(name);"#,
        ] {
            assert_eq!(own_lookup(line), None, "{line}");
        }
    }
}
