//! Generates the ABI types from `include/mpi_interface.h` with bindgen, once
//! per interface level (MPI-1: compatibility 2, MPI-2: `FOR_MPI2`, level 3),
//! and compiles a C layout probe over the same header for the layout tests.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// The entry-point list, shared with the crate (declared once).
#[allow(dead_code)]
mod list {
    include!("src/entry_points.rs");
}
use list::{Need, ENTRY_POINTS};

fn main() {
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = manifest.join("../include");
    let header = include.join("mpi_interface.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=probe/layout_probe.c");
    println!("cargo:rerun-if-changed=src/entry_points.rs");

    for (level, define) in [("mpi1", "-DFOR_MPI2=0"), ("mpi2", "-DFOR_MPI2=1")] {
        let bindings = bindgen::Builder::default()
            .header(header.to_string_lossy())
            .clang_arg(define)
            // Only the interface itself, not what <stdio.h> drags in.
            .allowlist_file(".*mpi_interface\\.h")
            .allowlist_var("FILENAME_MAX")
            // The DLL entry points are loaded dynamically by hosts and defined by
            // the DLL; only their types are wanted here.
            .blocklist_function("mqs_.*")
            .default_enum_style(bindgen::EnumVariation::Consts)
            .prepend_enum_name(false)
            .derive_default(true)
            .derive_debug(true)
            // Layouts are checked against the C compiler by tests/layout.rs.
            .layout_tests(false)
            .generate()
            .unwrap_or_else(|e| panic!("bindgen failed on {} ({define}): {e}", header.display()));
        std::fs::write(out.join(format!("{level}.rs")), bindings.to_string())
            .expect("write bindings");
    }

    for (level, mpi2) in [("mpi1", false), ("mpi2", true)] {
        let code = entry_points(&include, level, mpi2);
        std::fs::write(out.join(format!("entry_{level}.rs")), code).expect("write entry points");
    }

    // The layout probe: the C compiler's own sizeof/offsetof for every struct
    // and field, at both levels, linked into the layout tests only.
    for (name, mpi2) in [("mqs_abi_probe_mpi1", "0"), ("mqs_abi_probe_mpi2", "1")] {
        cc::Build::new()
            .file(manifest.join("probe/layout_probe.c"))
            .include(&include)
            .define("FOR_MPI2", mpi2)
            .define("PROBE_NAME", name)
            .warnings_into_errors(true)
            .cargo_metadata(false)
            .compile(name);
        println!(
            "cargo:rustc-link-arg-tests={}",
            out.join(format!("lib{name}.a")).display()
        );
    }
}

/// The entry points of one level: their function types, taken from the
/// header's own declarations (`__typeof__`), a table struct with a
/// resolver for hosts, and a macro that checks a DLL's exports.
fn entry_points(include: &Path, level: &str, mpi2: bool) -> String {
    let all: Vec<_> = ENTRY_POINTS
        .iter()
        .filter(|e| mpi2 || !e.need.mpi2_only())
        .collect();
    let mut header = String::from("#include \"mpi_interface.h\"\n");
    for e in &all {
        let _ = writeln!(header, "typedef __typeof__({0}) *{0}_entry_t;", e.name);
    }
    let mut code = bindgen::Builder::default()
        .header_contents("mqs_entry_points.h", &header)
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(if mpi2 { "-DFOR_MPI2=1" } else { "-DFOR_MPI2=0" })
        .allowlist_type(".*_entry_t")
        // Only the typedefs: the types they mention are the level's own.
        .allowlist_recursively(false)
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on the entry points ({level}): {e}"))
        .to_string();

    for e in &all {
        let _ = writeln!(
            code,
            "/// The type of `{0}`.\npub type {0}_fn = <{0}_entry_t as crate::ffi::FnOf>::Fn;",
            e.name
        );
    }
    // A table per group: the common entry points, then the MPI-2 ones.
    let groups: &[(&str, bool)] = if mpi2 {
        &[("EntryPoints", false), ("Mpi2EntryPoints", true)]
    } else {
        &[("EntryPoints", false)]
    };
    for &(table, of_mpi2) in groups {
        let members: Vec<_> = all
            .iter()
            .filter(|e| e.need.mpi2_only() == of_mpi2)
            .collect();
        let _ = writeln!(
            code,
            "/// Entry points of a DLL, resolved by name; optional ones may be None.\n\
             #[derive(Debug, Clone, Copy)]\npub struct {table} {{"
        );
        for e in &members {
            let ty = if e.need.required() {
                format!("{}_fn", e.name)
            } else {
                format!("Option<{}_fn>", e.name)
            };
            let _ = writeln!(code, "    pub {}: {ty},", e.name);
        }
        let _ = writeln!(
            code,
            "}}\n\nimpl {table} {{\n\
             /// Resolves each entry point with `lookup` (a `dlsym`); fails with the\n\
             /// names of the required ones that are missing.\n\
             ///\n/// # Safety\n\
             /// `lookup` must give the address of a function with the header's\n\
             /// signature for that name, or None.\n\
             pub unsafe fn resolve(\n\
             mut lookup: impl FnMut(&'static std::ffi::CStr) -> Option<std::ptr::NonNull<std::ffi::c_void>>,\n\
             ) -> Result<Self, Vec<&'static str>> {{"
        );
        for e in &members {
            let _ = writeln!(
                code,
                "    let {0} = lookup(c\"{0}\").map(|p| {{\n\
                 // SAFETY: the caller promises a function of this signature.\n\
                 unsafe {{ std::mem::transmute::<*mut std::ffi::c_void, {0}_fn>(p.as_ptr()) }}\n\
                 }});",
                e.name
            );
        }
        let required: Vec<_> = members.iter().filter(|e| e.need.required()).collect();
        let _ = writeln!(code, "    let missing: Vec<&'static str> = [");
        for e in &required {
            let _ = writeln!(code, "        (\"{0}\", {0}.is_some()),", e.name);
        }
        let _ = writeln!(
            code,
            "    ].into_iter().filter(|&(_, found)| !found).map(|(name, _)| name).collect();"
        );
        if !required.is_empty() {
            let names: Vec<&str> = required.iter().map(|e| e.name).collect();
            let _ = writeln!(
                code,
                "    let ({}) = ({}) else {{ return Err(missing) }};",
                names
                    .iter()
                    .map(|n| format!("Some({n})"))
                    .collect::<Vec<_>>()
                    .join(", "),
                names.join(", ")
            );
        } else {
            let _ = writeln!(code, "    let _ = missing;");
        }
        let fields: Vec<&str> = members.iter().map(|e| e.name).collect();
        let _ = writeln!(code, "    Ok(Self {{ {} }})\n}}\n}}", fields.join(", "));
    }
    // The check a DLL makes of its exports, in the module that defines them.
    let _ = writeln!(
        code,
        "/// Checks at compile time that the module it is invoked in defines\n\
         /// every entry point of this level with exactly the header's type.\n\
         #[macro_export]\nmacro_rules! check_exports_{level} {{\n() => {{ const _: () = {{"
    );
    for e in &all {
        let _ = writeln!(
            code,
            "    let _: $crate::ffi::{level}::entry::{0}_fn = {0};",
            e.name
        );
    }
    let _ = writeln!(code, "}}; }};\n}}");
    let _ = Need::Required;
    code
}
