//! `num`, `index-range`, `names` and `get-index`.

use super::{check, faulty, finding};
use crate::check::tests::fake::{Fault, Lib};

#[test]
fn the_number_of_variables_must_not_shrink() {
    assert_eq!(
        check(faulty(&[Fault::NumShrinks])).findings(),
        [finding(
            "num",
            "the number of control variables shrank between calls",
            1,
            &["counts 6, 5, 4"]
        )]
    );
}

#[test]
fn the_number_of_variables_must_not_be_negative() {
    assert_eq!(
        check(faulty(&[Fault::NumNegative])).of("num"),
        [finding(
            "num",
            "MPI_T_cvar_get_num gave a negative number",
            1,
            &["-1"]
        )]
    );
}

#[test]
fn indices_outside_the_range_must_be_refused() {
    assert_eq!(
        check(faulty(&[Fault::InfoAcceptsBadIndex])).findings(),
        [finding(
            "index-range",
            "MPI_T_cvar_get_info for an index outside 0..num-1 returned MPI_SUCCESS, not \
             MPI_T_ERR_INVALID_INDEX",
            3,
            &["index -1", "index 6", "index 1006"]
        )]
    );
    assert_eq!(
        check(faulty(&[Fault::AllocAcceptsBadIndex])).findings(),
        [finding(
            "index-range",
            "MPI_T_cvar_handle_alloc for an index outside 0..num-1 returned MPI_SUCCESS, not \
             MPI_T_ERR_INVALID_INDEX",
            2,
            &["index -1", "index 6"]
        )]
    );
}

#[test]
fn every_index_in_the_range_must_answer() {
    assert_eq!(
        check(faulty(&[Fault::InfoFails(5)])).findings(),
        [finding(
            "index-range",
            "MPI_T_cvar_get_info fails for an index within 0..num-1 (MPI_T_ERR_INVALID_INDEX)",
            1,
            &["index 5"]
        )]
    );
}

#[test]
fn names_must_not_be_empty() {
    let mut lib = Lib::default();
    lib.vars[1].name.clear();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "names",
            "a variable's name is empty",
            1,
            &["cvar 1"]
        )]
    );
}

#[test]
fn names_must_be_unique() {
    let mut lib = Lib::default();
    lib.vars[3].name = "eager_limit".into();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "names",
            "two variables have the same name",
            1,
            &["cvars 0 and 3 (eager_limit)"]
        )]
    );
}

#[test]
fn a_name_must_find_its_own_index() {
    assert_eq!(
        check(faulty(&[Fault::IndexOfNext])).findings(),
        [finding(
            "get-index",
            "MPI_T_cvar_get_index gives another index than the variable's",
            6,
            &[
                "cvar 0 (eager_limit): got 1",
                "cvar 1 (protocol): got 2",
                "cvar 2 (device): got 3",
            ]
        )]
    );
}

#[test]
fn a_name_no_variable_has_must_be_refused() {
    assert_eq!(
        check(faulty(&[Fault::IndexOfUnknownName])).findings(),
        [finding(
            "get-index",
            "MPI_T_cvar_get_index of a name no variable has returned MPI_SUCCESS, not \
             MPI_T_ERR_INVALID_NAME",
            1,
            &["mqs_check_no_such_control_variable"]
        )]
    );
}
