//! The library's dynamic symbol table: its four entry points and nothing
//! else. gdb and lldb load it into their own processes, where any other
//! name it exported could clash with theirs or another library's.
//!
//! Read from the cdylib cargo builds beside this test (`cargo test -p
//! mqs-debugger` builds it).

use std::collections::BTreeSet;
use std::path::PathBuf;

use object::{Object, ObjectSymbol, SymbolKind};

fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/exports-HASH -> target/<profile>/
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    dir.join("libmqs_debugger.so")
}

#[test]
fn the_library_exports_its_entry_points_and_nothing_else() {
    let path = library();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let exported: Vec<(String, SymbolKind)> = file
        .dynamic_symbols()
        .filter(|s| !s.is_undefined() && !s.is_local())
        .map(|s| (s.name().unwrap_or("(not UTF-8)").to_string(), s.kind()))
        .collect();
    let names: BTreeSet<&str> = exported.iter().map(|(n, _)| n.as_str()).collect();
    let wanted: BTreeSet<&str> = [
        "mqs_debugger_plan",
        "mqs_debugger_dump",
        "mqs_debugger_render",
        "mqs_debugger_free",
    ]
    .into();
    assert_eq!(names, wanted, "{}", path.display());
    assert!(exported.iter().all(|(_, kind)| *kind == SymbolKind::Text));
}
