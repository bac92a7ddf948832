//! `null-out`, `constants` and `stable`.

use super::{check, check_rule_after, faulty, finding};
use crate::check::tests::fake::{self, Fault, Lib};
use crate::library::Info;
use crate::model::{Bind, Datatype, Scope, Verbosity};

/// One change to a library or an answer, for tables of cases.
type Change<T> = fn(&mut T);

#[test]
fn every_out_parameter_may_be_null() {
    assert_eq!(
        check(faulty(&[Fault::AllNullFails])).findings(),
        [finding(
            "null-out",
            "MPI_T_cvar_get_info with every OUT parameter NULL returned MPI_T_ERR_INVALID, not \
             MPI_SUCCESS",
            6,
            &[
                "cvar 0 (eager_limit)",
                "cvar 1 (protocol)",
                "cvar 2 (device)"
            ]
        )]
    );
}

#[test]
fn a_null_out_parameter_must_not_change_the_others() {
    assert_eq!(
        check(faulty(&[Fault::NullDatatypeMovesScope])).findings(),
        [finding(
            "null-out",
            "MPI_T_cvar_get_info with datatype NULL answers a different scope",
            6,
            &[
                "cvar 0 (eager_limit)",
                "cvar 1 (protocol)",
                "cvar 2 (device)"
            ]
        )]
    );
}

#[test]
fn constants_must_be_mpi_t_constants() {
    let cases: [(Change<Lib>, &str, &str); 5] = [
        (
            |lib| lib.vars[0].verbosity = 5,
            "a verbosity that is none of MPI_T_VERBOSITY_*",
            "cvar 0 (eager_limit): 5",
        ),
        (
            |lib| lib.vars[0].scope = 7,
            "a scope that is none of MPI_T_SCOPE_*",
            "cvar 0 (eager_limit): 7",
        ),
        (
            |lib| lib.vars[5].bind = 3,
            "a binding that is none of MPI_T_BIND_*",
            "cvar 5 (backoff): 3",
        ),
        (
            |lib| lib.vars[0].datatype = fake::datatype(Datatype::Long),
            "datatype MPI_LONG, which MPI_T does not allow (only MPI_INT, MPI_UNSIGNED, \
             MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_COUNT, MPI_CHAR, MPI_DOUBLE)",
            "cvar 0 (eager_limit)",
        ),
        (
            |lib| lib.vars[0].datatype = 0x1234,
            "a datatype handle that is no MPI datatype",
            "cvar 0 (eager_limit): 0x1234",
        ),
    ];
    for (change, message, place) in cases {
        let mut lib = Lib::default();
        change(&mut lib);
        assert_eq!(
            check(lib).findings(),
            [finding("constants", message, 1, &[place])],
            "{message}"
        );
    }
}

/// Variable 0 as the default library describes it.
fn eager_limit() -> Info {
    Info {
        name: "eager_limit".into(),
        description: "Eager up to this size".into(),
        verbosity: fake::verbosity(Verbosity::UserBasic),
        datatype: u64::from(fake::datatype(Datatype::Int) as u32),
        enumtype: 0,
        bind: fake::bind(Bind::NoObject),
        scope: fake::scope(Scope::Local),
    }
}

#[test]
fn a_variable_must_be_described_the_same_every_time() {
    let same = check_rule_after(Lib::default(), "stable", |infos| {
        assert_eq!(infos[0], Ok(eager_limit()));
    });
    assert_eq!(same, []);
    let cases: [(&str, Change<Info>); 7] = [
        ("name", |i| i.name = "eager".into()),
        ("description", |i| i.description.clear()),
        ("verbosity", |i| {
            i.verbosity = fake::verbosity(Verbosity::TunerAll)
        }),
        ("datatype", |i| {
            i.datatype = u64::from(fake::datatype(Datatype::Unsigned) as u32)
        }),
        ("enumeration", |i| i.enumtype = 256),
        ("binding", |i| i.bind = fake::bind(Bind::Comm)),
        ("scope", |i| i.scope = fake::scope(Scope::Readonly)),
    ];
    for (field, change) in cases {
        let mut before = eager_limit();
        change(&mut before);
        let place = format!("cvar 0 ({})", before.name);
        let found = check_rule_after(Lib::default(), "stable", |infos| {
            infos[0] = Ok(before);
        });
        let message = format!("MPI_T_cvar_get_info answers a different {field} later");
        assert_eq!(found, [finding("stable", &message, 1, &[&place])]);
    }
}

#[test]
fn a_variable_described_once_must_stay_described() {
    let found = check_rule_after(faulty(&[Fault::InfoFails(0)]), "stable", |infos| {
        infos[0] = Ok(eager_limit());
    });
    assert_eq!(
        found,
        [finding(
            "stable",
            "MPI_T_cvar_get_info fails later for a variable it described \
             (MPI_T_ERR_INVALID_INDEX)",
            1,
            &["cvar 0 (eager_limit)"]
        )]
    );
}
