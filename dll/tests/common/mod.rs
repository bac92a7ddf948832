//! Shared by the integration tests: a fake debugger driving the DLL through
//! its C entry points, and recorded process snapshots.
#![allow(dead_code)]

pub mod host;
pub mod mutate;
pub mod session;
pub mod snapshot;
pub mod strict;

use std::path::PathBuf;

/// `dll/tests/data/<name>`.
pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}
