//! Generates, from `include/mpi_interface.h` itself, one function-pointer
//! type per DLL entry point (`<name>_export_t`, via `__typeof__`), so that
//! `exports.rs` can check at compile time that every export has exactly the
//! header's signature. The MPI-2 entry points are included with the `mpi2`
//! feature, which also builds the header with FOR_MPI2.

use std::env;
use std::fmt::Write as _;
use std::path::PathBuf;

const MPI1: &[&str] = &[
    "mqs_setup_basic_callbacks",
    "mqs_version_string",
    "mqs_version_compatibility",
    "mqs_dll_taddr_width",
    "mqs_dll_error_string",
    "mqs_setup_image",
    "mqs_image_has_queues",
    "mqs_destroy_image_info",
    "mqs_setup_process",
    "mqs_destroy_process_info",
    "mqs_process_has_queues",
    "mqs_update_communicator_list",
    "mqs_setup_communicator_iterator",
    "mqs_get_communicator",
    "mqs_get_comm_group",
    "mqs_next_communicator",
    "mqs_setup_operation_iterator",
    "mqs_next_operation",
];

const MPI2: &[&str] = &[
    "mqs_setup_job",
    "mqs_destroy_job_info",
    "mqs_setup_new_process_iterator",
    "mqs_next_new_process",
    "mqs_set_process_identity",
    "mqs_spawn_breakpoint_name",
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let include = manifest.join("../include");
    let header = include.join("mpi_interface.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");

    let mpi2 = env::var_os("CARGO_FEATURE_MPI2").is_some();
    let mut names: Vec<&str> = MPI1.to_vec();
    if mpi2 {
        names.extend_from_slice(MPI2);
    }
    let mut wrapper = String::from("#include \"mpi_interface.h\"\n");
    for name in &names {
        let _ = writeln!(wrapper, "typedef __typeof__({name}) *{name}_export_t;");
    }
    let bindings = bindgen::Builder::default()
        .header_contents("mqs_export_sigs.h", &wrapper)
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(if mpi2 { "-DFOR_MPI2=1" } else { "-DFOR_MPI2=0" })
        .allowlist_type(".*_export_t")
        // Only the typedefs: the types they mention come from mqs-abi.
        .allowlist_recursively(false)
        .layout_tests(false)
        .generate();
    match bindings {
        Ok(b) => {
            if let Err(e) = b.write_to_file(out.join("export_sigs.rs")) {
                println!("cargo:warning=cannot write export signatures: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            println!("cargo:warning=bindgen failed on {}: {e}", header.display());
            std::process::exit(1);
        }
    }
}
