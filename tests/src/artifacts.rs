//! The binaries the end-to-end tests run (mqs-dump, our DLL in both
//! builds, the embedding example), found in the target directory and
//! checked to be newer than every source file they are built from: a test
//! that ran an old binary would test something else than the checkout.

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
    "core/src",
    "core/examples",
    "stacks/src",
    "acquire/src",
    "analysis/src",
    "cvars/src",
    "mqs-dump/src",
    "mqs-abi/src",
    "mqs-abi/build.rs",
    "include",
];
/// The DLL's.
const DLL_SOURCES: &[&str] = &["dll/src", "mqs-abi/src", "mqs-abi/build.rs", "include"];

/// Our DLL at `path` (built with `build`), checked to be newer than the
/// DLL's sources: for a cdylib that cargo builds somewhere of its own, such
/// as next to the DLL's own test binaries.
pub fn fresh_dll(path: PathBuf, build: &str) -> PathBuf {
    fresh(path, DLL_SOURCES, build)
}

/// mqs-dump of this build.
pub fn mqs_dump_binary() -> PathBuf {
    fresh(
        target_dir().join(profile()).join("mqs-dump"),
        HOST_SOURCES,
        "cargo build -p mqs-dump",
    )
}

/// An example of the embedding core (`core/examples`).
pub fn core_example(name: &str) -> PathBuf {
    fresh(
        target_dir().join(profile()).join("examples").join(name),
        HOST_SOURCES,
        "cargo build -p mqs-core --examples",
    )
}

/// Our DLL: the MPI-1 build (`target/<profile>`) or the MPI-2 one
/// (`target/mpi2/<profile>`, as scripts/test builds it).
pub fn our_dll(mpi2: bool) -> PathBuf {
    if mpi2 {
        fresh(
            target_dir()
                .join("mpi2")
                .join(profile())
                .join("libmqs_dll.so"),
            DLL_SOURCES,
            "CARGO_TARGET_DIR=target/mpi2 cargo build -p mqs-dll --features mpi2",
        )
    } else {
        fresh(
            target_dir().join(profile()).join("libmqs_dll.so"),
            DLL_SOURCES,
            "cargo build -p mqs-dll",
        )
    }
}
