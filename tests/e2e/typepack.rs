//! `mqs-dump typepack`: the names the DLLs ask for, packs extracted from
//! real DWARF and checked against it, the proof that a rebuild loads the
//! same bytes, and the committed packs against Debian's stock library.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mqs_tests::{workspace_root, Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

const BAD_INPUT: i32 = 13;

fn scratch(tag: &str) -> PathBuf {
    let dir =
        mqs_tests::target_dir().join(format!("mqs-scratch/typepack-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Our DLL of this build, refused if older than its sources.
fn our_dll() -> String {
    mqs_tests::our_dll(false).display().to_string()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "mqs-dump {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Both DLLs' lookups on every rank of `job`, saved as snapshots in
/// `dir` (named after `tag`), once each rank waits in its blocking receive.
fn record_lookups(job: &Job, dir: &Path, tag: &str) -> Vec<String> {
    let mut snapshots = Vec::new();
    for (rank, pid) in job.rank_pids() {
        // Wait for the blocking receive, so every queue has something.
        let _ = dump_json(pid, &[]);
        for (name, dll) in [("theirs", None), ("ours", Some(our_dll()))] {
            let file = dir
                .join(format!("{tag}-{name}-{rank}.mqs"))
                .display()
                .to_string();
            let pid = pid.to_string();
            let mut args = vec!["--pid", pid.as_str(), "--save", file.as_str()];
            if let Some(d) = &dll {
                args.extend(["--dll", d.as_str()]);
            }
            ok(&args);
            snapshots.push(file);
        }
    }
    snapshots
}

/// `mqs-dump typepack queries` over the snapshots.
fn recorded_queries(snapshots: &[String]) -> Value {
    let mut args = vec!["typepack", "queries"];
    for s in snapshots {
        args.extend(["--snapshot", s.as_str()]);
    }
    serde_json::from_str(&ok(&args)).unwrap()
}

/// The committed query lists named, as one.
fn query_lists(files: &[&str]) -> Value {
    let mut all = serde_json::json!({"symbols": [], "functions": [], "types": []});
    for file in files {
        let list: Value = serde_json::from_slice(
            &std::fs::read(
                workspace_root()
                    .join("host/mqs-acquire/data/queries")
                    .join(file),
            )
            .unwrap(),
        )
        .unwrap();
        for kind in ["symbols", "functions", "types"] {
            let names = list[kind].as_array().cloned().unwrap_or_default();
            all[kind].as_array_mut().unwrap().extend(names);
        }
    }
    all
}

/// The names `recorded` has that `list` lacks, as "kind name".
fn missing_names(recorded: &Value, list: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    for kind in ["symbols", "functions", "types"] {
        let have: Vec<&Value> = list[kind].as_array().unwrap().iter().collect();
        missing.extend(
            recorded[kind]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| !have.contains(n))
                .map(|n| format!("{kind} {n}")),
        );
    }
    missing
}

#[test]
fn the_query_list_holds_every_name_both_dlls_look_up() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch");
    let dir = scratch("queries");
    let snapshots = record_lookups(&job, &dir, "ob1");
    job.shutdown().expect("shutdown");
    let recorded = recorded_queries(&snapshots);
    let missing = missing_names(&recorded, &query_lists(&["openmpi-4.1.json"]));
    assert!(
        missing.is_empty(),
        "the DLLs now look up {missing:?}, which host/mqs-acquire/data/queries/openmpi-4.1.json lacks: add \
         them and make the packs again (scripts/typepack-debian12-openmpi)"
    );
    // Both DLLs' core names are there (the recording is not empty).
    let types = recorded["types"].as_array().unwrap();
    for t in ["ompi_communicator_t", "mca_pml_ob1_comm_t"] {
        assert!(types.iter().any(|x| x == t), "{t} not recorded: {types:?}");
    }
}

/// The same under pml ucx (the `queues` and `mprobe` jobs on the
/// `openmpi-4.1.4-ucx` build): Open MPI's names are in openmpi-4.1.json,
/// UCX's in ucx-1.13.json, which the packs of Debian's libucx0 are made
/// from (scripts/typepack-debian12-ucx).
#[test]
fn the_query_lists_hold_every_name_the_dlls_look_up_under_pml_ucx() {
    let dir = scratch("queries-ucx");
    let mut snapshots = Vec::new();
    for fixture in ["queues", "mprobe"] {
        let options = LaunchOptions::pml_ucx();
        let job = Job::launch_with(Mpi::OpenMpiUcx, fixture, 2, &[], &options).expect("launch");
        snapshots.extend(record_lookups(&job, &dir, fixture));
        job.shutdown().expect("shutdown");
    }
    let recorded = recorded_queries(&snapshots);
    let missing = missing_names(
        &recorded,
        &query_lists(&["openmpi-4.1.json", "ucx-1.13.json"]),
    );
    assert!(
        missing.is_empty(),
        "under pml ucx the DLLs now look up {missing:?}, which host/mqs-acquire/data/queries/openmpi-4.1.json \
         and ucx-1.13.json lack: add them (UCX's names to ucx-1.13.json) and make the packs \
         again (scripts/typepack-debian12-openmpi, scripts/typepack-debian12-ucx)"
    );
    // UCX's own names are in UCX's list, not Open MPI's.
    let ucx = query_lists(&["ucx-1.13.json"]);
    let types = recorded["types"].as_array().unwrap();
    for t in types.iter().filter_map(Value::as_str) {
        if t.starts_with("ucp_") || t.starts_with("ucs_") {
            assert!(
                ucx["types"].as_array().unwrap().iter().any(|x| x == t),
                "{t} belongs in ucx-1.13.json"
            );
        }
    }
    for t in ["ucp_worker_t", "ucp_request_t", "mca_pml_ucx_module_t"] {
        assert!(types.iter().any(|x| x == t), "{t} not recorded: {types:?}");
    }
}

#[test]
fn packs_extracted_from_dwarf_check_against_it_and_an_altered_one_does_not() {
    let prefix = Mpi::OpenMpiG.prefix().expect("Open MPI -g");
    let dir = scratch("extract");
    for (lib, needle) in [
        (prefix.join("lib/libmpi.so.40.30.4"), "ompi_communicator_t"),
        (
            prefix.join("lib/openmpi/mca_pml_ob1.so"),
            "mca_pml_ob1_comm_t",
        ),
    ] {
        let out = dir.join("pack.json");
        let lib_s = lib.display().to_string();
        let out_s = out.display().to_string();
        ok(&["typepack", "extract", "--lib", &lib_s, "--out", &out_s]);
        let mut pack: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(pack["format"], "mqs-typepack");
        assert!(pack["types"][needle]["size"].as_u64().unwrap() > 0);
        assert_eq!(
            pack["checks"]["typedefs_sizeof"],
            serde_json::json!([2, 4, 8, 8, 8, 1, 8])
        );
        let text = ok(&["typepack", "check", "--lib", &lib_s, "--typepack", &out_s]);
        assert!(text.contains("agree with its DWARF"), "{text}");

        // One offset moved: check names it.
        let field = pack["types"][needle]["fields"][1][0]
            .as_str()
            .unwrap()
            .to_owned();
        let off = pack["types"][needle]["fields"][1][1].as_u64().unwrap();
        pack["types"][needle]["fields"][1][1] = Value::from(off + 8);
        std::fs::write(&out, serde_json::to_vec(&pack).unwrap()).unwrap();
        let bad = run(&["typepack", "check", "--lib", &lib_s, "--typepack", &out_s]);
        assert_error(
            &bad,
            BAD_INPUT,
            &[&format!("{needle}.{field}"), "does not describe"],
        );
    }
}

/// A stripped copy of `lib` with another build-id in its note.
fn with_other_build_id(lib: &Path, out: &Path) {
    let mut note = Vec::new();
    note.extend_from_slice(&4u32.to_le_bytes());
    note.extend_from_slice(&20u32.to_le_bytes());
    note.extend_from_slice(&3u32.to_le_bytes());
    note.extend_from_slice(b"GNU\0");
    note.extend_from_slice(&[0x5a; 20]);
    let note_file = out.with_extension("note");
    std::fs::write(&note_file, note).unwrap();
    let status = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(format!(
            "--update-section=.note.gnu.build-id={}",
            note_file.display()
        ))
        .arg(lib)
        .arg(out)
        .status()
        .expect("objcopy (binutils)");
    assert!(status.success());
}

#[test]
fn a_rebuild_counts_only_if_it_loads_the_same_bytes() {
    let g = Mpi::OpenMpiG
        .prefix()
        .expect("Open MPI -g")
        .join("lib/libmpi.so.40.30.4");
    let release = Mpi::OpenMpiRelease
        .prefix()
        .expect("Open MPI release")
        .join("lib/libmpi.so.40.30.4");
    let dir = scratch("identity");
    // "Stock": the -g library with another build-id; its "rebuild" is the
    // -g library itself, whose DWARF then describes it.
    let stock = dir.join("libmpi.so.40.30.4");
    with_other_build_id(&g, &stock);
    let out = dir.join("pack.json").display().to_string();
    let text = ok(&[
        "typepack",
        "extract",
        "--lib",
        &stock.display().to_string(),
        "--built-lib",
        &g.display().to_string(),
        "--out",
        &out,
    ]);
    assert!(text.contains("only the build-id note differs"), "{text}");
    let pack: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(
        pack["build_id"],
        "5a".repeat(20),
        "keyed by the stock build-id"
    );
    let rebuilt = &pack["provenance"]["rebuilt"];
    assert!(rebuilt["identical_sections"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == ".text"));
    assert!(rebuilt["bytes_compared"].as_u64().unwrap() > 1_000_000);
    let check = ok(&[
        "typepack",
        "check",
        "--lib",
        &stock.display().to_string(),
        "--typepack",
        &out,
    ]);
    assert!(check.contains("not compared (no DWARF"), "{check}");

    // Another build of the same source does not load the same bytes.
    let bad = run(&[
        "typepack",
        "extract",
        "--lib",
        &release.display().to_string(),
        "--built-lib",
        &g.display().to_string(),
        "--out",
        &out,
    ]);
    assert_error(&bad, BAD_INPUT, &["does not load the same bytes"]);
}

#[test]
fn the_committed_packs_fit_debians_stock_libraries() {
    let libdir = Mpi::DebianOpenMpi.stock_libdir().expect("stock");
    Mpi::DebianOpenMpi
        .prefix()
        .expect("Debian's Open MPI installed");
    let packs = workspace_root().join("typepacks").display().to_string();
    for lib in [
        libdir.join("libmpi.so.40.30.4"),
        libdir.join("openmpi/lib/openmpi3/mca_pml_ob1.so"),
    ] {
        let text = ok(&[
            "typepack",
            "check",
            "--lib",
            &lib.display().to_string(),
            "--typepack",
            &packs,
        ]);
        assert!(text.contains("the rebuild loads the same bytes"), "{text}");
    }
}

/// What our DLL looks up in MPICH 4.0 over UCX, read as an MPICH without
/// debugger support (`MQS_MPICH_COMMS=pool`: communicators from the
/// object pools, ch4's queues from `MPIDI_global`) and with it, on the
/// `queues` and `mprobe` jobs of the `-g` ch4:ucx build: every name is in
/// mpich-4.0.json (MPICH's) or ucx-1.13.json (UCX's), which the pack of
/// Debian's libmpich12 is made from (scripts/typepack-debian12-mpich).
#[test]
fn the_query_lists_hold_every_name_our_dll_looks_up_in_mpich() {
    let dir = scratch("queries-mpich");
    let dll = our_dll();
    let mut snapshots = Vec::new();
    for fixture in ["queues", "mprobe"] {
        let job = Job::launch(Mpi::MpichUcx, fixture, 2, &[]).expect("launch");
        for (rank, pid) in job.rank_pids() {
            let _ = dump_json(pid, &["--dll", &dll]);
            for mode in ["pool", "list"] {
                let file = dir
                    .join(format!("{fixture}-{mode}-{rank}.mqs"))
                    .display()
                    .to_string();
                let pid = pid.to_string();
                let out = run_env(
                    &["--pid", &pid, "--save", &file, "--dll", &dll],
                    &[("MQS_MPICH_COMMS", mode)],
                );
                assert!(out.status.success(), "{}", stderr(&out));
                snapshots.push(file);
            }
        }
        job.shutdown().expect("shutdown");
    }
    let recorded = recorded_queries(&snapshots);
    let missing = missing_names(
        &recorded,
        &query_lists(&["mpich-4.0.json", "ucx-1.13.json"]),
    );
    assert!(
        missing.is_empty(),
        "on MPICH our DLL now looks up {missing:?}, which host/mqs-acquire/data/queries/mpich-4.0.json and \
         ucx-1.13.json lack: add them and make the pack again (scripts/typepack-debian12-mpich)"
    );
    let types = recorded["types"].as_array().unwrap();
    for t in [
        "MPIR_Comm",
        "MPIR_Object_alloc_t",
        "MPIDI_per_vci_t",
        "ucp_worker_t",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} not recorded: {types:?}");
    }
    let symbols = recorded["symbols"].as_array().unwrap();
    for s in ["MPIR_Comm_builtin", "MPIR_Comm_mem", "MPIDI_global"] {
        assert!(
            symbols.iter().any(|x| x == s),
            "{s} not recorded: {symbols:?}"
        );
    }
}
