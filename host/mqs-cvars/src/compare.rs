//! Live values next to the library's defaults: per variable, the ranks
//! that agree are merged, and a value that is not the default says so and
//! where it came from.

use serde::{Deserialize, Serialize};

use crate::live::{ProcessValues, Source};
use crate::model::{describe_value, Family, Filter, Listing, Value, SCHEMA_VERSION};

/// A process of the job, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub pid: i32,
    /// MPI_COMM_WORLD rank, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i32>,
}

/// A process whose values could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberFailure {
    pub pid: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i32>,
    pub message: String,
    pub exit_code: i32,
}

/// The values of a job (or one process) against the library's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveReport {
    pub schema_version: u32,
    /// The starter given with --pid, if it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<i32>,
    pub library: String,
    pub family: Family,
    pub processes: Vec<Member>,
    pub variables: Vec<LiveVariable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<MemberFailure>,
}

/// One variable across the processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveVariable {
    pub name: String,
    /// The library's default (from its listing in a clean environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// One entry per distinct (value, source), with the ranks that have it.
    pub groups: Vec<ValueGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueGroup {
    /// The processes with this value: their ranks (or pids when the rank
    /// is unknown).
    pub members: Vec<Member>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The enumeration item the value names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// The value is not the library's default.
    pub differs: bool,
}

impl ValueGroup {
    pub fn value_text(&self) -> Option<String> {
        self.value
            .as_ref()
            .map(|v| describe_value(v, self.value_name.as_deref()))
    }
}

/// Merges the processes' values with the listing. Variables the listing
/// has come in its order, then those only the processes have (Open MPI
/// components that register variables only in a job).
pub fn merge(
    listing: &Listing,
    processes: &[(Member, ProcessValues)],
    filter: &Filter,
    only_changed: bool,
) -> Vec<LiveVariable> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for v in &listing.variables {
        if filter.matches(&v.name, &v.description, v.verbosity) && seen.insert(v.name.clone()) {
            names.push(v.name.clone());
        }
    }
    let unknown_level = crate::model::Verbosity::Unknown(0);
    for (_, values) in processes {
        for live in &values.values {
            if listing.find(&live.name).is_none()
                && filter.matches(&live.name, "", unknown_level)
                && seen.insert(live.name.clone())
            {
                names.push(live.name.clone());
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let variable = listing.find(&name);
        let default = variable.and_then(|v| v.value.clone());
        let mut groups: Vec<ValueGroup> = Vec::new();
        for (member, values) in processes {
            // A name may repeat in Open MPI's registry (a deregistered
            // record and its re-registration): the valid one counts.
            let live = values
                .values
                .iter()
                .filter(|l| l.name == name)
                .max_by_key(|l| l.value.is_some());
            let (value, no_value, source) = match live {
                Some(l) => (l.value.clone(), l.no_value.clone(), l.source.clone()),
                None => (
                    None,
                    Some(match listing.family {
                        Family::OpenMpi => "not registered in the process".to_owned(),
                        Family::Mpich => "not in the process".to_owned(),
                    }),
                    None,
                ),
            };
            let differs = match (&value, &default) {
                (Some(v), Some(d)) => v != d,
                _ => false,
            };
            // A changed value that neither the environment explains (MPICH
            // keeps no source) nor the registry (Open MPI's still says
            // default) was changed while running.
            let source = match (source, differs) {
                (None | Some(Source::Default), true) => Some(Source::Changed),
                (s, _) => s,
            };
            if let Some(g) = groups
                .iter_mut()
                .find(|g| g.value == value && g.no_value == no_value && g.source == source)
            {
                g.members.push(member.clone());
                continue;
            }
            let value_name = variable
                .and_then(|v| v.enumeration.as_ref())
                .zip(value.as_ref())
                .and_then(|(e, v)| e.name_of(v));
            groups.push(ValueGroup {
                members: vec![member.clone()],
                value,
                value_name,
                no_value,
                source,
                differs,
            });
        }
        if only_changed && !groups.iter().any(|g| g.differs) {
            continue;
        }
        out.push(LiveVariable {
            name,
            default,
            groups,
        });
    }
    out
}

/// The report for `listing` and the processes read.
pub fn report(
    listing: &Listing,
    launcher: Option<i32>,
    processes: Vec<(Member, ProcessValues)>,
    failures: Vec<MemberFailure>,
    filter: &Filter,
    only_changed: bool,
) -> LiveReport {
    let variables = merge(listing, &processes, filter, only_changed);
    LiveReport {
        schema_version: SCHEMA_VERSION,
        launcher,
        library: listing.library.clone(),
        family: listing.family,
        processes: processes.into_iter().map(|(m, _)| m).collect(),
        variables,
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveValue;
    use crate::model::{Bind, DatatypeName, Number, Scope, Variable, Verbosity};

    fn listing() -> Listing {
        let var = |name: &str, value: i64| Variable {
            index: 0,
            name: name.into(),
            description: String::new(),
            datatype: DatatypeName::Known(crate::Datatype::Int),
            verbosity: Verbosity::UserBasic,
            scope: Scope::Local,
            bind: Bind::NoObject,
            enumeration: None,
            count: Some(1),
            value: Some(Value::Numbers(vec![Number::Signed(value)])),
            value_name: None,
            no_value: None,
        };
        Listing {
            schema_version: 1,
            library: "libmpi.so".into(),
            family: Family::Mpich,
            mpi_version: None,
            num_cvars: 2,
            variables: vec![var("A", 1), var("B", 2)],
            errors: vec![],
            environment_cleared: vec![],
        }
    }

    fn process(pid: i32, rank: i32, a: i64, env: bool) -> (Member, ProcessValues) {
        let int = |v| Some(Value::Numbers(vec![Number::Signed(v)]));
        (
            Member {
                pid,
                rank: Some(rank),
            },
            ProcessValues {
                pid,
                values: vec![
                    LiveValue {
                        name: "A".into(),
                        value: int(a),
                        no_value: None,
                        source: env.then(|| Source::Environment {
                            variable: format!("MPIR_CVAR_A={a}"),
                        }),
                    },
                    LiveValue {
                        name: "B".into(),
                        value: int(2),
                        no_value: None,
                        source: None,
                    },
                ],
            },
        )
    }

    #[test]
    fn agreeing_ranks_merge_and_changes_say_where_from() {
        let procs = vec![
            process(10, 0, 7, true),
            process(11, 1, 7, true),
            process(12, 2, 9, false),
        ];
        let vars = merge(&listing(), &procs, &Filter::default(), false);
        assert_eq!(vars.len(), 2);
        let a = &vars[0];
        assert_eq!(a.groups.len(), 2);
        assert_eq!(a.groups[0].members.len(), 2);
        assert!(a.groups[0].differs);
        assert_eq!(
            a.groups[0].source,
            Some(Source::Environment {
                variable: "MPIR_CVAR_A=7".into()
            })
        );
        // Changed, and no environment variable explains it.
        assert_eq!(a.groups[1].source, Some(Source::Changed));
        let b = &vars[1];
        assert_eq!(b.groups.len(), 1);
        assert!(!b.groups[0].differs);
        let changed = merge(&listing(), &procs, &Filter::default(), true);
        assert_eq!(changed.len(), 1);
    }
}
