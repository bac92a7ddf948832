//! `--check`: a library's MPI_T control-variable interface against the
//! standard's rules (MPI-3.1 chapter 14.3; MPI-4.0 15.3 says the same).
//! Runs in the helper subprocess; each rule announces itself first, and
//! rules whose checks may crash a library announce each step, so that the
//! parent can report the crash as a finding and start a new helper after
//! it.
//!
//! A finding is one kind of deviation, with how often it was seen and the
//! first few places: a library that gets a rule wrong for every variable
//! gives one line, not a thousand.
//!
//! This module holds the rules' list, the driver and the report; the
//! checks live by what they look at: `lifecycle` (initialising and
//! finalizing), `indices` (how many variables, their indices and names),
//! `info` (what MPI_T_cvar_get_info answers), `strings` (the convention
//! for returning strings), `enums` (enumerations and their items),
//! `handles` (allocating, reading, writing and freeing handles); `context`
//! is what they share.

mod context;
mod enums;
mod handles;
mod indices;
mod info;
mod lifecycle;
mod strings;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::abi::MPI_SUCCESS;
use crate::library::MpiT;
use crate::model::Family;
use crate::protocol::{Event, FailureKind, Finding};
use context::Ctx;

/// One rule of the standard and the checks of it.
#[derive(Debug)]
pub struct Rule {
    pub id: &'static str,
    /// What the standard says, briefly.
    pub rule: &'static str,
    run: fn(&mut Ctx<'_>),
}

/// Every rule, in the order they run: `not-initialized` must come before
/// `init`, and `nesting` (which finalizes) last.
pub static RULES: &[Rule] = &[
    Rule {
        id: "not-initialized",
        rule: "before MPI_T_init_thread, MPI_T routines return MPI_T_ERR_NOT_INITIALIZED",
        run: lifecycle::not_initialized,
    },
    Rule {
        id: "init",
        rule: "MPI_T_init_thread returns MPI_SUCCESS and a thread level in provided",
        run: lifecycle::init,
    },
    Rule {
        id: "num",
        rule: "MPI_T_cvar_get_num returns the number of variables, which never shrinks",
        run: indices::num,
    },
    Rule {
        id: "index-range",
        rule: "indices run 0..num-1; others give MPI_T_ERR_INVALID_INDEX",
        run: indices::index_range,
    },
    Rule {
        id: "names",
        rule: "every variable has a name of at least one character, unique among them",
        run: indices::names,
    },
    Rule {
        id: "null-out",
        rule: "MPI_T_cvar_get_info ignores OUT parameters passed as NULL",
        run: info::null_out,
    },
    Rule {
        id: "string-return",
        rule: "strings follow the convention for returning strings (NULL buffer, \
               length 0, exact and short buffers, NULL length)",
        run: strings::string_return,
    },
    Rule {
        id: "get-index",
        rule: "MPI_T_cvar_get_index finds every name at its index, and gives \
               MPI_T_ERR_INVALID_NAME for others",
        run: indices::get_index,
    },
    Rule {
        id: "constants",
        rule: "verbosity, scope and binding are MPI_T constants; the datatype is one \
               MPI_T allows",
        run: info::constants,
    },
    Rule {
        id: "enumerations",
        rule: "enumerations belong to MPI_INT variables and have items 0..num-1 \
               with unique names",
        run: enums::enumerations,
    },
    Rule {
        id: "enum-item-range",
        rule: "MPI_T_enum_get_item outside 0..num-1 gives MPI_T_ERR_INVALID_ITEM",
        run: enums::enum_item_range,
    },
    Rule {
        id: "handles",
        rule: "unbound variables get a handle with a count, read without writing past \
               count elements, and free to MPI_T_CVAR_HANDLE_NULL",
        run: handles::handles,
    },
    Rule {
        id: "read-only-write",
        rule: "writing a variable of scope constant or readonly gives \
               MPI_T_ERR_CVAR_SET_NEVER",
        run: handles::read_only_write,
    },
    Rule {
        id: "null-handle",
        rule: "null handles give MPI_T_ERR_INVALID_HANDLE",
        run: handles::null_handle,
    },
    Rule {
        id: "stable",
        rule: "MPI_T_cvar_get_info answers the same for a variable every time",
        run: info::stable,
    },
    Rule {
        id: "nesting",
        rule: "MPI_T_init_thread and MPI_T_finalize nest; one finalize too many is an \
               error; initialising again keeps the indices",
        run: lifecycle::nesting,
    },
];

/// The result of `--check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    pub library: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// The rules checked, in order.
    pub rules: Vec<RuleStatement>,
    pub findings: Vec<Finding>,
}

/// A rule as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStatement {
    pub id: String,
    /// What the standard says, briefly.
    pub rule: String,
}

impl CheckReport {
    pub fn conformant(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Runs the rules from `first_rule` on, skipping that rule's first
/// `skip_steps` steps (the parent restarts after a crash that way), and
/// sends what it finds.
pub fn run(mpi: &MpiT, first_rule: usize, skip_steps: usize, emit: &mut dyn FnMut(Event)) {
    let init_rule = RULES.iter().position(|r| r.id == "init").unwrap_or(1);
    let mut ctx = Ctx::new(mpi, emit);
    if first_rule > init_rule {
        let (rc, _) = mpi.init();
        if rc != MPI_SUCCESS {
            (ctx.emit)(Event::Failed {
                kind: FailureKind::NoMpiT,
                message: format!("MPI_T_init_thread returned {}", mpi.code_name(rc)),
            });
            return;
        }
    }
    for (i, rule) in RULES.iter().enumerate().skip(first_rule) {
        if ctx.fatal {
            break;
        }
        ctx.rule = rule.id;
        ctx.step = 0;
        ctx.skip_steps = if i == first_rule { skip_steps } else { 0 };
        (ctx.emit)(Event::Step {
            what: rule.id.into(),
            detail: None,
        });
        (rule.run)(&mut ctx);
        ctx.flush();
    }
    (ctx.emit)(Event::Checked { rules: RULES.len() });
}
