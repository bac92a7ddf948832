//! The DLL's dynamic symbol table: exactly the entry points of
//! `mpi_interface.h` at this build's level (`mqs_abi::ENTRY_POINTS`,
//! MPI-2's too with `--features mpi2`), each a function, and nothing else:
//! no Rust symbol, no test helper. A debugger dlopens this file into its
//! own process, where any other name it exports can clash with the
//! debugger's or another library's.
//!
//! Read from the cdylib cargo built for this test run (with the test fakes
//! of the `testing` feature compiled in: even then nothing more is
//! exported) and, for the MPI-1 interface, from the DLL `cargo build -p
//! mqs-dll` makes, which holds no test code at all.

use std::collections::BTreeSet;
use std::path::Path;

use object::{Object, ObjectSymbol, SymbolKind};

/// The command that builds the cdylib beside this test binary.
const BUILD: &str = if cfg!(feature = "mpi2") {
    "cargo test -p mqs-dll --features mpi2"
} else {
    "cargo test -p mqs-dll"
};

/// The entry points a DLL of this build's level exports: every one of
/// its interface, optional ones included (this DLL has them all).
fn entry_points(mpi2: bool) -> BTreeSet<&'static str> {
    mqs_abi::ENTRY_POINTS
        .iter()
        .filter(|e| mpi2 || !e.need.mpi2_only())
        .map(|e| e.name)
        .collect()
}

/// Every symbol `path` defines in its dynamic symbol table that another
/// object can bind to, with its kind.
fn exported(path: &Path) -> Vec<(String, SymbolKind)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.dynamic_symbols()
        .filter(|s| !s.is_undefined() && !s.is_local())
        .map(|s| {
            let name = s.name().unwrap_or("(not UTF-8)").to_string();
            (name, s.kind())
        })
        .collect()
}

/// Checks that `path` exports the entry points of its level and nothing
/// else.
fn exports_exactly_the_entry_points(path: &Path, mpi2: bool) {
    let symbols = exported(path);
    let names: BTreeSet<&str> = symbols.iter().map(|(n, _)| n.as_str()).collect();
    let wanted = entry_points(mpi2);
    let extra: Vec<&str> = names.difference(&wanted).copied().collect();
    let missing: Vec<&str> = wanted.difference(&names).copied().collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{} exports {} symbols; not entry points: {extra:?}; entry points missing: {missing:?}",
        path.display(),
        symbols.len()
    );
    assert_eq!(names.len(), symbols.len(), "a symbol exported twice");
    for (name, kind) in &symbols {
        assert_eq!(*kind, SymbolKind::Text, "{name} is not a function");
    }
}

#[test]
fn the_dll_exports_its_entry_points_and_nothing_else() {
    let mpi2 = cfg!(feature = "mpi2");
    let wanted = entry_points(mpi2);
    assert_eq!(wanted.len(), if mpi2 { 25 } else { 19 });
    exports_exactly_the_entry_points(&mqs_tests::dll_beside_test_binary(BUILD), mpi2);
}

/// The DLL a debugger is given: built without the `testing` feature, its
/// exports the same, and its debug information names no file of the test
/// fakes (a build with them compiled in names `testing.rs`, even where the
/// linker dropped their code).
#[cfg(not(feature = "mpi2"))]
#[test]
fn the_dll_cargo_builds_exports_the_same_and_holds_no_test_code() {
    let path = mqs_tests::our_dll(false);
    exports_exactly_the_entry_points(&path, false);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fakes = b"testing.rs";
    assert!(
        !bytes.windows(fakes.len()).any(|w| w == fakes),
        "{} was built with the test fakes (src/testing.rs): built along with tests \
         (--all-targets, --tests), cargo turns on the features of their dev-dependencies; \
         `cargo build -p mqs-dll` builds the DLL alone",
        path.display()
    );
}
