//! The symbol index on a real `-g` Open MPI (built by scripts/setup-mpis
//! into the mqs cache; the test fails without it): how long the
//! type indexes take, and the layouts the Open MPI DLL reads, checked
//! against gdb's reading of the same DWARF (gdb is installed by
//! scripts/setup-mpis).
//!
//! Timings are printed: `cargo test --release -p mqs-core --test
//! symbols_openmpi -- --nocapture`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mqs_core::symbols::{ObjectSymbols, SymbolIndex};

fn open_mpi() -> Option<PathBuf> {
    // Fails (never skips) with the command that builds it when missing.
    match mqs_tests::Mpi::OpenMpiG.prefix() {
        Ok(prefix) => Some(prefix.join("lib")),
        Err(e) => panic!("{e}"),
    }
}

const OBJECTS: [&str; 3] = [
    "libmpi.so.40",
    "libopen-pal.so.40",
    "openmpi/mca_pml_ob1.so",
];

/// (object that defines it, type, fields) as the Open MPI DLL asks for them.
const LAYOUTS: &[(&str, &str, &[&str])] = &[
    (
        "openmpi/mca_pml_ob1.so",
        "mca_pml_ob1_comm_t",
        &[
            "recv_sequence",
            "matching_lock",
            "wild_receives",
            "proc_lock",
            "procs",
            "num_procs",
            "last_probed",
        ],
    ),
    (
        "openmpi/mca_pml_ob1.so",
        "mca_pml_ob1_comm_proc_t",
        &[
            "expected_sequence",
            "ompi_proc",
            "frags_cant_match",
            "specific_receives",
            "unexpected_frags",
        ],
    ),
    (
        "libmpi.so.40",
        "ompi_communicator_t",
        &[
            "c_name",
            "c_contextid",
            "c_my_rank",
            "c_flags",
            "c_local_group",
            "c_remote_group",
            "c_pml_comm",
            "c_f_to_c_index",
        ],
    ),
    (
        "libmpi.so.40",
        "ompi_group_t",
        &["grp_proc_count", "grp_my_rank", "grp_flags"],
    ),
    (
        "libmpi.so.40",
        "mca_pml_base_request_t",
        &[
            "req_ompi",
            "req_type",
            "req_addr",
            "req_count",
            "req_peer",
            "req_tag",
            "req_comm",
            "req_datatype",
            "req_sequence",
        ],
    ),
    (
        "libmpi.so.40",
        "ompi_request_t",
        &["req_type", "req_status", "req_complete", "req_state"],
    ),
    (
        "libmpi.so.40",
        "opal_list_t",
        &["opal_list_sentinel", "opal_list_length"],
    ),
    (
        "libopen-pal.so.40",
        "opal_list_item_t",
        &["opal_list_next", "opal_list_prev"],
    ),
    (
        "libmpi.so.40",
        "opal_pointer_array_t",
        &["lowest_free", "number_free", "size", "addr"],
    ),
];

#[test]
fn index_open_mpi() {
    let Some(lib) = open_mpi() else { return };
    for name in OBJECTS {
        let started = Instant::now();
        let object = ObjectSymbols::open(&lib.join(name), Vec::new()).unwrap();
        let opened = started.elapsed();
        let stats = object.index_types();
        println!(
            "{name}: symbols in {:.1} ms, type index ({} names) in {:.1} ms",
            opened.as_secs_f64() * 1e3,
            stats.names,
            stats.elapsed.as_secs_f64() * 1e3
        );
        assert!(stats.names > 100);
    }

    // A process's view, cold: the first query indexes every object it
    // passes (libmpi and libopen-pal do not define the ob1 type).
    let objects = OBJECTS.iter().map(|name| (lib.join(name), 0)).collect();
    let index = SymbolIndex::new(objects, Vec::new()).unwrap();
    for ty in ["mca_pml_ob1_comm_t", "ompi_communicator_t"] {
        let started = Instant::now();
        let info = index
            .find_type(ty)
            .unwrap_or_else(|| panic!("{ty} not found"));
        let elapsed = started.elapsed();
        println!(
            "cold find_type({ty}): {:.1} ms, size {:?}, {} fields",
            elapsed.as_secs_f64() * 1e3,
            info.size,
            info.fields.len()
        );
    }
    let started = Instant::now();
    for (_, ty, fields) in LAYOUTS {
        let info = index
            .find_type(ty)
            .unwrap_or_else(|| panic!("{ty} not found"));
        for field in *fields {
            assert!(
                info.field_offset(field).is_some(),
                "{ty}.{field} missing: {info:?}"
            );
        }
    }
    println!(
        "{} more types and their fields: {:.1} ms",
        LAYOUTS.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    for symbol in [
        "ompi_mpi_comm_world",
        "ompi_mpi_communicators",
        "mca_pml_ob1",
        "MPIR_dll_name",
    ] {
        println!(
            "{symbol}: {:?}",
            index.find_symbol(symbol).map(|a| format!("{a:#x}"))
        );
    }
    assert!(index.find_symbol("ompi_mpi_comm_world").is_some());
    assert!(index.find_symbol("mca_pml_ob1").is_some());
    assert!(index.find_function("MPI_Send").is_some());

    check_against_gdb(&lib, &index);
}

/// gdb's `sizeof` and `&((T *)0)->field` for every layout, per object.
fn check_against_gdb(lib: &Path, index: &SymbolIndex) {
    assert!(
        Command::new("gdb").arg("--version").output().is_ok(),
        "gdb is needed for the cross-check: run scripts/setup-mpis"
    );
    let mut checked = 0;
    for (object, ty, fields) in LAYOUTS {
        let mut exprs = vec![format!("sizeof({ty})")];
        exprs.extend(
            fields
                .iter()
                .map(|f| format!("(unsigned long)&(({ty} *)0)->{f}")),
        );
        let mut cmd = Command::new("gdb");
        cmd.args(["-batch", "-nx"]);
        for expr in &exprs {
            cmd.arg("-ex").arg(format!("print {expr}"));
        }
        let out = cmd.arg(lib.join(object)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let values: Vec<u64> = text
            .lines()
            .filter_map(|line| {
                line.split_once(" = ")
                    .and_then(|(_, v)| v.trim().parse().ok())
            })
            .collect();
        assert_eq!(values.len(), exprs.len(), "gdb on {object}: {text}");
        let info = index.find_type(ty).unwrap();
        assert_eq!(info.size, Some(values[0]), "sizeof({ty})");
        for (field, expected) in fields.iter().zip(&values[1..]) {
            assert_eq!(info.field_offset(field), Some(*expected), "{ty}.{field}");
            checked += 1;
        }
    }
    println!("{checked} offsets agree with gdb");
}
