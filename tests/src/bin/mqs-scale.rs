//! The scale harness as a program of its own, for `e2e/scale.rs` (the
//! collect bench runs itself instead): see `mqs_tests::scale`.

fn main() {
    match mqs_tests::scale::role() {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!(
                "mqs-scale: run as {} or {} (see mqs_tests::scale)",
                mqs_tests::scale::FRONT_ROLE,
                mqs_tests::scale::COLLECTOR_ROLE
            );
            std::process::exit(2);
        }
    }
}
