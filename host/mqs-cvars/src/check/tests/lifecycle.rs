//! `not-initialized`, `init` and `nesting`.

use super::{check, faulty, finding};
use crate::check::tests::fake::Fault;

#[test]
fn calls_before_initialising_must_be_refused() {
    let out = check(faulty(&[Fault::NumBeforeInit]));
    assert_eq!(
        out.findings(),
        [
            finding(
                "not-initialized",
                "MPI_T_cvar_get_num before MPI_T_init_thread returned MPI_SUCCESS, not \
                 MPI_T_ERR_NOT_INITIALIZED",
                1,
                &[]
            ),
            // Finalized to the end, it is uninitialised again.
            finding(
                "nesting",
                "MPI_T_cvar_get_num after the last MPI_T_finalize returned MPI_SUCCESS, not \
                 MPI_T_ERR_NOT_INITIALIZED",
                1,
                &[]
            ),
        ]
    );
}

#[test]
fn finalizing_before_initialising_must_be_refused() {
    let out = check(faulty(&[Fault::FinalizeBeforeInit]));
    assert_eq!(
        out.findings(),
        [
            finding(
                "not-initialized",
                "MPI_T_finalize before MPI_T_init_thread returned MPI_SUCCESS, not \
                 MPI_T_ERR_NOT_INITIALIZED",
                1,
                &[]
            ),
            finding(
                "nesting",
                "one MPI_T_finalize more than MPI_T_init_thread returned MPI_SUCCESS, not \
                 MPI_T_ERR_NOT_INITIALIZED",
                1,
                &[]
            ),
        ]
    );
}

#[test]
fn a_library_that_will_not_initialise_ends_the_checks() {
    let out = check(faulty(&[Fault::InitFails]));
    assert_eq!(
        out.findings(),
        [finding(
            "init",
            "MPI_T_init_thread returned MPI_T_ERR_CANNOT_INIT, not MPI_SUCCESS",
            1,
            &[]
        )]
    );
    assert_eq!(out.steps(), ["not-initialized", "init"]);
    assert!(out.checked(), "the run still ends: {:?}", out.events);
}

#[test]
fn provided_must_be_a_thread_level() {
    assert_eq!(
        check(faulty(&[Fault::ProvidedBogus])).findings(),
        [finding(
            "init",
            "MPI_T_init_thread set provided to a value that is no thread level",
            1,
            &["provided 7"]
        )]
    );
}

#[test]
fn initialisations_and_finalizations_must_nest() {
    assert_eq!(
        check(faulty(&[Fault::NoNesting])).findings(),
        [
            finding(
                "nesting",
                "MPI_T_cvar_get_num after one MPI_T_finalize of two initialisations returned \
                 MPI_T_ERR_NOT_INITIALIZED, not MPI_SUCCESS",
                1,
                &[]
            ),
            finding(
                "nesting",
                "the second of two MPI_T_finalize returned MPI_T_ERR_NOT_INITIALIZED, not \
                 MPI_SUCCESS",
                1,
                &[]
            ),
        ]
    );
}

#[test]
fn initialising_again_must_work() {
    let out = check(faulty(&[Fault::ReinitFails]));
    assert_eq!(
        out.findings(),
        [finding(
            "nesting",
            "MPI_T_init_thread after the last MPI_T_finalize returned MPI_T_ERR_CANNOT_INIT, \
             not MPI_SUCCESS",
            1,
            &[]
        )]
    );
    // Nothing is asked of a library that did not initialise.
    assert!(!out.steps().contains(&"nesting#8".to_owned()));
}

#[test]
fn initialising_again_must_keep_the_indices() {
    assert_eq!(
        check(faulty(&[Fault::ReinitReverses])).findings(),
        [finding(
            "nesting",
            "initialised again, a variable has another index",
            6,
            &[
                "cvar 0: eager_limit before, backoff now",
                "cvar 1: protocol before, comm_hint now",
                "cvar 2: device before, version now",
            ]
        )]
    );
}
