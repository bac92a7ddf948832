//! Generates the ABI types from `include/mpi_interface.h` with bindgen, once
//! per interface level (MPI-1: compatibility 2, MPI-2: `FOR_MPI2`, level 3),
//! and compiles a C layout probe over the same header for the layout tests.

use std::env;
use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = manifest.join("../include");
    let header = include.join("mpi_interface.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=probe/layout_probe.c");

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
        bindings
            .write_to_file(out.join(format!("{level}.rs")))
            .expect("write bindings");
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
