//! The names message-queue DLLs look up: what a pack must answer. The
//! built-in list is the union of what Open MPI 4.1's and 5.0's own DLLs and
//! ours ask for, recorded by running both against live jobs of the `-g`
//! builds, under ob1 (and pml ucx for 4.1) (`mqs-dump --save`, then
//! `mqs-dump typepack queries --snapshot ...`), and of the UCX names ours
//! asks for there;
//! `tests/e2e/typepack.rs` records them again and fails when a DLL asks for
//! a name the lists lack.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;
use mqs_core::{Error, Result};

/// Names looked up through `find_symbol`, `find_function`, `find_type`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queries {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub symbols: BTreeSet<String>,
    #[serde(default)]
    pub functions: BTreeSet<String>,
    #[serde(default)]
    pub types: BTreeSet<String>,
}

/// The committed list for Open MPI 4.1 (`host/mqs-acquire/data/queries/openmpi-4.1.json`).
const OPENMPI_41: &str = include_str!("../../data/queries/openmpi-4.1.json");
/// The committed list for Open MPI 5.0 (`host/mqs-acquire/data/queries/openmpi-5.0.json`).
const OPENMPI_50: &str = include_str!("../../data/queries/openmpi-5.0.json");
/// The committed list for UCX 1.13 (`host/mqs-acquire/data/queries/ucx-1.13.json`).
const UCX_113: &str = include_str!("../../data/queries/ucx-1.13.json");

impl Queries {
    /// The built-in list: Open MPI 4.1's and 5.0's names and UCX 1.13's.
    pub fn builtin() -> Self {
        let mut q: Self = serde_json::from_str(OPENMPI_41).unwrap_or_default();
        for more in [OPENMPI_50, UCX_113] {
            q.merge(&serde_json::from_str(more).unwrap_or_default());
        }
        q
    }

    /// A list from a file: a query list in JSON, or a snapshot (`--save`),
    /// whose recorded lookups are taken.
    pub fn load(path: &Path) -> Result<Self> {
        let head = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        if head.starts_with(b"MQSSNAP\0") {
            return Self::from_snapshots(&[path]);
        }
        serde_json::from_slice(&head).map_err(|e| Error::BadInput {
            path: path.to_owned(),
            detail: format!("not a query list (JSON with symbols, functions, types): {e}"),
        })
    }

    /// Every name any process of the snapshots looked up.
    pub fn from_snapshots(paths: &[&Path]) -> Result<Self> {
        let mut q = Self::default();
        for path in paths {
            let snapshot = Snapshot::load(path, &[])?;
            for entry in &snapshot.processes {
                let log = entry.symbols.log();
                q.symbols.extend(log.symbols.keys().cloned());
                q.functions.extend(log.functions.keys().cloned());
                q.types.extend(log.types.keys().cloned());
            }
        }
        Ok(q)
    }

    pub fn merge(&mut self, other: &Self) {
        self.symbols.extend(other.symbols.iter().cloned());
        self.functions.extend(other.functions.iter().cloned());
        self.types.extend(other.types.iter().cloned());
    }

    /// Names in `self` that `list` lacks, one string each.
    pub fn missing_from(&self, list: &Self) -> Vec<String> {
        let mut out = Vec::new();
        for (kind, mine, theirs) in [
            ("symbol", &self.symbols, &list.symbols),
            ("function", &self.functions, &list.functions),
            ("type", &self.types, &list.types),
        ] {
            out.extend(mine.difference(theirs).map(|n| format!("{kind} {n}")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_list_parses_and_names_the_core_types() {
        let q = Queries::builtin();
        for t in [
            "ompi_communicator_t",
            "ompi_group_t",
            "opal_list_t",
            "mca_pml_ob1_comm_t",
        ] {
            assert!(q.types.contains(t), "{t} missing from the built-in list");
        }
        assert!(q.symbols.contains("MPIR_debug_typedefs_sizeof"));
        for t in ["ucp_worker_t", "ucs_queue_head_t", "mca_pml_ucx_module_t"] {
            assert!(q.types.contains(t), "{t} missing from the built-in list");
        }
        assert!(q.functions.contains("ucp_get_version"));
    }
}
