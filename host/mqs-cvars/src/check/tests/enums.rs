//! `enumerations` and `enum-item-range`.

use super::{check, faulty, finding};
use crate::check::tests::fake::{Fault, Lib};

#[test]
fn an_enumeration_belongs_to_an_int_variable() {
    let mut lib = Lib::default();
    lib.vars[5].enumeration = Some(0);
    assert_eq!(
        check(lib).findings(),
        [finding(
            "enumerations",
            "an enumeration on a variable of datatype MPI_DOUBLE, not MPI_INT",
            1,
            &["cvar 5 (backoff)"]
        )]
    );
}

#[test]
fn an_enumeration_has_items() {
    let mut lib = Lib::default();
    lib.enums[0].items.clear();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "enumerations",
            "an enumeration without items",
            1,
            &["cvar 1 (protocol): protocols has 0"]
        )]
    );
}

#[test]
fn items_have_unique_names() {
    let mut lib = Lib::default();
    lib.enums[0].items[1].1.clear();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "enumerations",
            "an enumeration item with an empty name",
            1,
            &["cvar 1 (protocol): protocols item 1"]
        )]
    );
    let mut lib = Lib::default();
    lib.enums[0].items[2].1 = "eager".into();
    assert_eq!(
        check(lib).findings(),
        [finding(
            "enumerations",
            "two items of an enumeration have the same name",
            1,
            &["cvar 1 (protocol): protocols item 2 (eager)"]
        )]
    );
}

#[test]
fn an_enumeration_and_its_items_answer() {
    assert_eq!(
        check(faulty(&[Fault::EnumInfoFails])).findings(),
        [finding(
            "enumerations",
            "MPI_T_enum_get_info returned MPI_T_ERR_INVALID_HANDLE, not MPI_SUCCESS",
            1,
            &["cvar 1 (protocol)"]
        )]
    );
    assert_eq!(
        check(faulty(&[Fault::ItemFails(1)])).findings(),
        [finding(
            "enumerations",
            "MPI_T_enum_get_item for an item within 0..num-1 returned MPI_T_ERR_INVALID_ITEM, \
             not MPI_SUCCESS",
            1,
            &["cvar 1 (protocol): protocols item 1"]
        )]
    );
}

#[test]
fn items_outside_the_range_are_refused() {
    assert_eq!(
        check(faulty(&[Fault::ItemPastEndAccepted])).findings(),
        [finding(
            "enum-item-range",
            "MPI_T_enum_get_item for item num returned MPI_SUCCESS, not MPI_T_ERR_INVALID_ITEM",
            1,
            &["cvar 1 (protocol): protocols"]
        )]
    );
    assert_eq!(
        check(faulty(&[Fault::ItemMinusOneAccepted])).findings(),
        [finding(
            "enum-item-range",
            "MPI_T_enum_get_item for item -1 returned MPI_SUCCESS, not MPI_T_ERR_INVALID_ITEM",
            1,
            &["cvar 1 (protocol): protocols"]
        )]
    );
}

#[test]
fn without_enumerations_the_item_range_has_no_steps() {
    let mut lib = Lib::default();
    lib.vars[1].enumeration = None;
    let out = check(lib);
    assert_eq!(out.findings(), []);
    assert!(!out
        .steps()
        .iter()
        .any(|s| s.starts_with("enum-item-range#")));
}
