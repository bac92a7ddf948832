//! The rules against a stand-in library (`fake`) that follows the standard
//! by default and breaks one rule in one place when told to: every rule
//! passes the conforming library, and each way of breaking it is reported
//! in the rule's words, with its count and places. Tests by rule group,
//! beside the groups: `lifecycle`, `indices`, `info`, `strings`, `enums`,
//! `handles`; the driver's own behaviour (steps, restarts) here.

mod enums;
mod fake;
mod handles;
mod indices;
mod info;
mod lifecycle;
mod strings;

use super::{run, Ctx, RULES};
use crate::library::Info;
use crate::protocol::{Event, FailureKind, Finding};
use fake::{Fault, Lib};

/// What a run of the checks sent.
#[derive(Debug)]
struct Outcome {
    events: Vec<Event>,
}

impl Outcome {
    fn findings(&self) -> Vec<Finding> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Finding { finding } => Some(finding.clone()),
                _ => None,
            })
            .collect()
    }

    /// The findings of one rule.
    fn of(&self, rule: &str) -> Vec<Finding> {
        self.findings()
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    /// What each step announced: `rule` or `rule#n`.
    fn steps(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Step { what, .. } => Some(what.clone()),
                _ => None,
            })
            .collect()
    }

    fn checked(&self) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, Event::Checked { rules } if *rules == RULES.len()))
    }
}

/// The checks from rule `first_rule` on, against `lib`.
fn check_from(lib: Lib, first_rule: usize, skip_steps: usize) -> Outcome {
    let mpi = fake::install(lib);
    let mut events = Vec::new();
    run(&mpi, first_rule, skip_steps, &mut |e| events.push(e));
    Outcome { events }
}

/// Every rule against `lib`, as `--check` runs them.
fn check(lib: Lib) -> Outcome {
    check_from(lib, 0, 0)
}

/// The conforming library with `faults`.
fn faulty(faults: &[Fault]) -> Lib {
    let mut lib = Lib::default();
    lib.faults = faults.to_vec();
    lib
}

fn rule_index(id: &str) -> usize {
    RULES.iter().position(|r| r.id == id).expect("a rule")
}

/// Rule `id` alone on an initialised `lib`, the first answers of
/// MPI_T_cvar_get_info (what the rules before it would have cached) made
/// by `first` from the library's own.
fn check_rule_after(
    lib: Lib,
    id: &str,
    first: impl FnOnce(&mut Vec<Result<Info, i32>>),
) -> Vec<Finding> {
    let mpi = fake::install(lib);
    assert_eq!(mpi.init().0, 0);
    let mut infos: Vec<Result<Info, i32>> = (0..mpi.num().unwrap()).map(|i| mpi.info(i)).collect();
    first(&mut infos);
    let mut events = Vec::new();
    let mut emit = |e| events.push(e);
    let rule = &RULES[rule_index(id)];
    let mut ctx = Ctx::new(&mpi, &mut emit);
    ctx.infos = Some(infos);
    ctx.rule = rule.id;
    (rule.run)(&mut ctx);
    ctx.flush();
    drop(ctx);
    Outcome { events }.findings()
}

fn finding(rule: &str, message: &str, count: usize, examples: &[&str]) -> Finding {
    Finding {
        rule: rule.into(),
        message: message.into(),
        count,
        examples: examples.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn a_conforming_library_passes_every_rule_in_order() {
    let out = check(Lib::default());
    assert_eq!(out.findings(), Vec::<Finding>::new());
    let rules: Vec<String> = out
        .steps()
        .into_iter()
        .filter(|s| !s.contains('#'))
        .collect();
    let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(rules, ids);
    assert!(out.checked(), "{:?}", out.events);
}

#[test]
fn steps_that_may_crash_are_announced_with_what_they_call() {
    let out = check(Lib::default());
    let steps: Vec<(String, String)> = out
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Step {
                what,
                detail: Some(detail),
            } => Some((what.clone(), detail.clone())),
            _ => None,
        })
        .collect();
    let whats: Vec<&str> = steps.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        whats,
        [
            "enum-item-range#1",
            "enum-item-range#2",
            "null-handle#1",
            "null-handle#2",
            "null-handle#3",
            "nesting#1",
            "nesting#2",
            "nesting#3",
            "nesting#4",
            "nesting#5",
            "nesting#6",
            "nesting#7",
            "nesting#8",
            "nesting#9",
        ]
    );
    assert_eq!(
        steps[2].1, "MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL",
        "{steps:?}"
    );
    assert_eq!(steps[5].1, "a second MPI_T_init_thread", "{steps:?}");
}

#[test]
fn a_restart_initialises_and_skips_the_steps_done() {
    let first = rule_index("null-handle");
    let out = check_from(faulty(&[Fault::NullHandleAccepted]), first, 2);
    let steps = out.steps();
    assert_eq!(steps[..2], ["null-handle", "null-handle#3"], "{steps:?}");
    assert_eq!(
        out.of("null-handle"),
        [finding(
            "null-handle",
            "MPI_T_enum_get_info of MPI_T_ENUM_NULL returned MPI_SUCCESS, not \
             MPI_T_ERR_INVALID_HANDLE",
            1,
            &[]
        )]
    );
    // The rules after it run whole.
    assert!(steps.contains(&"nesting#9".to_owned()), "{steps:?}");
    assert!(out.checked());
}

#[test]
fn a_restart_in_nesting_does_not_resume_it() {
    let out = check_from(faulty(&[Fault::NoNesting]), rule_index("nesting"), 3);
    assert_eq!(out.steps(), ["nesting"]);
    assert_eq!(out.findings(), []);
    assert!(out.checked());
}

#[test]
fn a_restart_that_cannot_initialise_says_so() {
    let out = check_from(faulty(&[Fault::InitFails]), rule_index("names"), 0);
    assert_eq!(
        out.events,
        [Event::Failed {
            kind: FailureKind::NoMpiT,
            message: "MPI_T_init_thread returned MPI_T_ERR_CANNOT_INIT".into(),
        }]
    );
}

#[test]
fn a_finding_counts_every_place_and_lists_the_first_few() {
    let mpi = fake::install(Lib::default());
    let mut events = Vec::new();
    let mut emit = |e| events.push(e);
    let mut ctx = Ctx::new(&mpi, &mut emit);
    ctx.rule = "names";
    for place in ["a", "", "b", "c", "d"] {
        ctx.note("same", place);
    }
    ctx.note("other", "x");
    ctx.flush();
    drop(ctx);
    assert_eq!(
        Outcome { events }.findings(),
        [
            finding("names", "other", 1, &["x"]),
            finding("names", "same", 5, &["a", "b", "c"]),
        ]
    );
}
