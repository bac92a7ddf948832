//! What the parent and the helper subprocess say to each other: one
//! request as JSON on the helper's stdin, answers as JSON lines on its
//! stdout (the library's own printing goes to stderr). A `Step` line comes
//! before each part of the work that may crash, so a crash can be placed.

use serde::{Deserialize, Serialize};

use crate::model::{DatatypeName, Family, Listing, Scope};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub library: String,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// Every control variable and its value.
    List,
    /// Validate each `(name, value)` with MPI_T_cvar_write.
    Set { assignments: Vec<(String, String)> },
    /// The conformance rules from `first_rule` (an index into
    /// `check::RULES`) on, skipping that rule's first `skip_steps` steps.
    Check {
        first_rule: usize,
        skip_steps: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// About to do `what` (a check's rule id, `rule#step` for a step of a
    /// rule that may crash, or a stage of the listing); `detail` says
    /// what the step does.
    Step {
        what: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The library is loaded and of this family.
    Loaded {
        family: Family,
    },
    Finding {
        finding: Finding,
    },
    Listing {
        listing: Listing,
    },
    Settings {
        results: Vec<SetResult>,
    },
    /// The checks ran to the end.
    Checked {
        rules: usize,
    },
    /// The library cannot be used.
    Failed {
        kind: FailureKind,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Not loadable, no MPI symbols, or an MPI ABI we do not know.
    NotMpi,
    /// An MPI library without a usable MPI_T.
    NoMpiT,
}

/// One deviation from the standard, with the variables it was seen on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule's id (`check::RULES`).
    pub rule: String,
    pub message: String,
    /// How many times it was seen (variables, enumerations, calls).
    pub count: usize,
    /// The first few places: `cvar 12 (name)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)?;
        match (self.count, self.examples.as_slice()) {
            (_, []) => Ok(()),
            (1, [one]) => write!(f, " [{one}]"),
            (n, examples) => {
                write!(f, " [{n} times; e.g. {}", examples.join(", "))?;
                f.write_str("]")
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetVerdict {
    /// MPI_T_cvar_write took it.
    Accepted,
    /// Valid, but the library takes it only when a job starts (MPI_T may
    /// not change it now).
    StartupOnly,
    /// Bound to an object: the type was checked, the write was not.
    NotChecked,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetResult {
    pub name: String,
    pub value: String,
    pub verdict: SetVerdict,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<DatatypeName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Shell lines that apply it to a job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply: Vec<String>,
}
