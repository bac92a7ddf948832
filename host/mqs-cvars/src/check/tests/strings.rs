//! `string-return`: the convention for returning strings, on every kind
//! of string MPI_T returns.

use super::{check, faulty, finding};
use crate::check::tests::fake::{Fault, StringFault, Text};

fn broken(fault: StringFault, text: Text) -> Vec<crate::protocol::Finding> {
    check(faulty(&[Fault::String(fault, text)])).findings()
}

const RULE: &str = "string-return";

#[test]
fn a_null_buffer_gives_the_length_with_the_nul() {
    assert_eq!(
        broken(StringFault::LengthWithoutNul, Text::CvarName),
        [finding(
            RULE,
            "cvar name: a NULL buffer does not give the string's length plus one",
            6,
            &[
                "cvar 0 (eager_limit): length 11, want 12",
                "cvar 1 (protocol): length 8, want 9",
                "cvar 2 (device): length 6, want 7",
            ]
        )]
    );
    assert_eq!(
        broken(StringFault::LengthWithoutNul, Text::ItemName),
        [finding(
            RULE,
            "enumeration item name: a NULL buffer does not give the string's length plus one",
            3,
            &[
                "cvar 1 (protocol), enumeration protocols item 0: length 5, want 6",
                "cvar 1 (protocol), enumeration protocols item 1: length 10, want 11",
                "cvar 1 (protocol), enumeration protocols item 2: length 4, want 5",
            ]
        )]
    );
    assert_eq!(
        broken(StringFault::LengthWithoutNul, Text::EnumName),
        [finding(
            RULE,
            "enumeration name: a NULL buffer does not give the string's length plus one",
            1,
            &["cvar 1 (protocol), enumeration protocols: length 9, want 10"]
        )]
    );
}

#[test]
fn an_empty_string_has_length_one() {
    let expected = finding(
        RULE,
        "cvar description: an empty string (no description) comes back with length 0; the \
         standard wants 1 (the NUL)",
        1,
        &["cvar 3 (version): length 0, want 1"],
    );
    assert_eq!(
        broken(StringFault::EmptyLengthZero, Text::Description),
        std::slice::from_ref(&expected)
    );
    // Lengths without the NUL everywhere: the empty one is told apart.
    let both = broken(StringFault::LengthWithoutNul, Text::Description);
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(
        both[0].message,
        "cvar description: a NULL buffer does not give the string's length plus one"
    );
    assert_eq!(both[0].count, 5);
    assert_eq!(both[1], expected);
}

#[test]
fn a_length_of_zero_leaves_the_buffer_alone() {
    assert_eq!(
        broken(StringFault::ZeroLengthWrites, Text::CvarName),
        [finding(
            RULE,
            "cvar name: a length of 0 still writes into the buffer",
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
fn a_short_buffer_gets_the_string_cut_with_a_nul() {
    assert_eq!(
        broken(StringFault::CutWithoutNul, Text::CvarName),
        [finding(
            RULE,
            "cvar name: a short buffer does not get the string cut to length-1 characters and \
             a NUL",
            12,
            &[
                "cvar 0 (eager_limit): buffer 11: \"eager_limit\"",
                "cvar 0 (eager_limit): buffer 1: \"e\"",
                "cvar 1 (protocol): buffer 8: \"protocol\"",
            ]
        )]
    );
}

#[test]
fn nothing_is_written_past_the_length() {
    assert_eq!(
        broken(StringFault::NulPastEnd, Text::CvarName),
        [
            finding(
                RULE,
                "cvar name: a short buffer does not get the string cut to length-1 characters \
                 and a NUL",
                12,
                &[
                    "cvar 0 (eager_limit): buffer 11: \"eager_limit\"",
                    "cvar 0 (eager_limit): buffer 1: \"e\"",
                    "cvar 1 (protocol): buffer 8: \"protocol\"",
                ]
            ),
            finding(
                RULE,
                "cvar name: the library writes past the length it was given",
                12,
                &[
                    "cvar 0 (eager_limit): buffer 11",
                    "cvar 0 (eager_limit): buffer 1",
                    "cvar 1 (protocol): buffer 8",
                ]
            ),
        ]
    );
}

#[test]
fn a_cut_string_gives_the_full_length() {
    assert_eq!(
        broken(StringFault::CutGivesBufferLength, Text::CvarName),
        [finding(
            RULE,
            "cvar name: a cut string gives the buffer's length, not the full string's length \
             plus one",
            12,
            &[
                "cvar 0 (eager_limit): length 11, want 12",
                "cvar 0 (eager_limit): length 1, want 12",
                "cvar 1 (protocol): length 8, want 9",
            ]
        )]
    );
}

#[test]
fn a_null_length_returns_nothing() {
    assert_eq!(
        broken(StringFault::NullLengthWrites, Text::CvarName),
        [finding(
            RULE,
            "cvar name: a NULL length still writes into the buffer",
            6,
            &[
                "cvar 0 (eager_limit)",
                "cvar 1 (protocol)",
                "cvar 2 (device)"
            ]
        )]
    );
}
