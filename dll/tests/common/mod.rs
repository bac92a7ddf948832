//! Shared by the integration tests: the real host's session over recorded
//! processes (`session`) and their fuzzing in it (`fuzzing`), their
//! in-process view for C-level tests (`snapshot`) and its corruption
//! (`mutate`), the raw entry points for the calling contract (`raw`) and
//! the strict C host (`strict`).
#![allow(dead_code)]

pub mod aim;
pub mod fuzzing;
pub mod mutate;
pub mod raw;
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
