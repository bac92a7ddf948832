//! `handles`, `read-only-write` and `null-handle`.

use super::{check, faulty, finding};
use crate::check::tests::fake::{Fault, Lib};

#[test]
fn an_unbound_variable_gets_a_handle() {
    let cases = [
        (
            Fault::AllocFails(0),
            "MPI_T_cvar_handle_alloc of an unbound variable returned MPI_T_ERR_OUT_OF_HANDLES, \
             not MPI_SUCCESS",
            "cvar 0 (eager_limit)",
        ),
        (
            Fault::AllocNullHandle(0),
            "MPI_T_cvar_handle_alloc succeeds with MPI_T_CVAR_HANDLE_NULL",
            "cvar 0 (eager_limit)",
        ),
        (
            Fault::AllocHugeCount(0),
            "MPI_T_cvar_handle_alloc gives an unbelievable count",
            "cvar 0 (eager_limit): 2097152",
        ),
    ];
    for (fault, message, place) in cases {
        assert_eq!(
            check(faulty(&[fault])).findings(),
            [finding("handles", message, 1, &[place])],
            "{fault:?}"
        );
    }
}

#[test]
fn a_read_stays_within_count_elements() {
    assert_eq!(
        check(faulty(&[Fault::ReadOverruns(0)])).findings(),
        [finding(
            "handles",
            "MPI_T_cvar_read writes past count elements",
            1,
            &["cvar 0 (eager_limit): count 1 of MPI_INT"]
        )]
    );
    assert_eq!(
        check(faulty(&[Fault::ReadFails(0)])).findings(),
        [finding(
            "handles",
            "MPI_T_cvar_read returned MPI_T_ERR_INVALID_HANDLE, not MPI_SUCCESS",
            1,
            &["cvar 0 (eager_limit), MPI_INT"]
        )]
    );
}

#[test]
fn a_char_value_ends_within_its_count() {
    let mut lib = Lib::default();
    lib.vars[2].value = b"ch3:nemesis:tcp!".to_vec();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "handles",
            "an MPI_CHAR value without a NUL within count characters",
            1,
            &["cvar 2 (device): count 16"]
        )]
    );
}

#[test]
fn a_constant_reads_the_same_twice() {
    assert_eq!(
        check(faulty(&[Fault::ReadsChange(3)])).findings(),
        [finding(
            "handles",
            "a constant variable reads differently twice",
            1,
            &["cvar 3 (version)"]
        )]
    );
    // Only constants are read twice: a local variable may change.
    assert_eq!(check(faulty(&[Fault::ReadsChange(0)])).findings(), []);
}

#[test]
fn a_handle_is_freed_to_null() {
    assert_eq!(
        check(faulty(&[Fault::FreeFails(0)])).findings(),
        [finding(
            "handles",
            "MPI_T_cvar_handle_free returned MPI_T_ERR_INVALID_HANDLE, not MPI_SUCCESS",
            1,
            &["cvar 0 (eager_limit)"]
        )]
    );
    assert_eq!(
        check(faulty(&[Fault::FreeKeepsHandle(0)])).findings(),
        [finding(
            "handles",
            "MPI_T_cvar_handle_free does not set the handle to MPI_T_CVAR_HANDLE_NULL",
            1,
            &["cvar 0 (eager_limit)"]
        )]
    );
}

#[test]
fn a_read_only_variable_refuses_writes() {
    assert_eq!(
        check(faulty(&[Fault::ReadOnlyWritable])).findings(),
        [finding(
            "read-only-write",
            "MPI_T_cvar_write to a read-only variable returned MPI_SUCCESS, not \
             MPI_T_ERR_CVAR_SET_NEVER",
            2,
            &[
                "cvar 2 (device), scope readonly",
                "cvar 3 (version), scope constant"
            ]
        )]
    );
}

#[test]
fn null_handles_are_refused() {
    assert_eq!(
        check(faulty(&[Fault::NullHandleAccepted])).findings(),
        [
            finding(
                "null-handle",
                "MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL returned MPI_SUCCESS, not \
                 MPI_T_ERR_INVALID_HANDLE",
                1,
                &[]
            ),
            finding(
                "null-handle",
                "MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL returned MPI_SUCCESS, not \
                 MPI_T_ERR_INVALID_HANDLE",
                1,
                &[]
            ),
            finding(
                "null-handle",
                "MPI_T_enum_get_info of MPI_T_ENUM_NULL returned MPI_SUCCESS, not \
                 MPI_T_ERR_INVALID_HANDLE",
                1,
                &[]
            ),
        ]
    );
}
