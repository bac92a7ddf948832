//! Records the snapshots the replay, fuzz and MPI-2 tests run on: each
//! fixture of [`RECORDINGS`] as a real Open MPI 4.1.4 or MPICH 4.0.2 ch3
//! job, hung in its documented state, dumped through its launcher
//! (`mpirun`, hydra's `mpiexec`: the ranks from its MPIR table) by the real
//! host with this build's DLL and saved (`mqs-dump --save`'s format), next
//! to what that dump printed. `scripts/record-snapshots` runs it for both builds of the
//! DLL; it is never part of the suite (it rewrites `dll/tests/data`).

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::session::{build_name, our_dll_path, Plan, RECORDINGS};
use mqs_acquire::inspect::{dump, Options};
use mqs_tests::{Job, LaunchOptions};
use serde_json::{json, Value};

/// A dump without what changes between two dumps of a still process.
fn settled_part(d: &Value) -> Value {
    let mut procs = d["processes"].as_array().cloned().unwrap_or_default();
    for p in &mut procs {
        if let Some(o) = p.as_object_mut() {
            o.remove("stats");
        }
    }
    Value::Array(procs)
}

fn dump_json(pid: i32, options: &Options) -> Value {
    let d = dump(pid, options, &mut |_, _| {}).unwrap_or_else(|e| panic!("dump: {e}"));
    serde_json::to_value(&d).expect("dump as JSON")
}

fn record(plan: &Plan, data: &Path) {
    let mpi = plan.mpi;
    let mut options = LaunchOptions {
        env: plan
            .env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        ..LaunchOptions::default()
    };
    if plan.fixture == "spawn" {
        // Open MPI 4.1's shared-memory transport does not reach another
        // job's processes: spawned jobs talk over TCP on loopback.
        options.env.extend([
            ("OMPI_MCA_btl".into(), "self,vader,tcp".into()),
            ("OMPI_MCA_btl_tcp_if_include".into(), "lo".into()),
        ]);
    }
    let mut job = Job::launch_with(mpi, plan.fixture, plan.ranks, plan.args, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", plan.name));
    let processes = plan.ranks as usize * if plan.fixture == "spawn" { 2 } else { 1 };
    let pid = i32::try_from(job.launcher_pid()).expect("pid");
    let mut options = Options {
        dll: mqs_acquire::inspect::DllChoice::Given(our_dll_path()),
        ..Options::default()
    };
    // Settled: two dumps in a row alike (ranks post their last receive just
    // after READY; spawned children come later), every process there.
    let mut last = Value::Null;
    for _ in 0..120 {
        std::thread::sleep(Duration::from_millis(500));
        let next = dump_json(pid, &options);
        let n = next["processes"].as_array().map_or(0, Vec::len);
        if n == processes && settled_part(&next) == settled_part(&last) {
            break;
        }
        last = next;
    }
    job.refresh_pids();
    let snap = data.join(format!("{}.{}.snap", plan.name, build_name()));
    options.save = Some(snap.clone());
    let saved = dump_json(pid, &options);
    assert_eq!(
        settled_part(&saved),
        settled_part(&last),
        "{}: the state changed while recording",
        plan.name
    );
    drop(job);
    let processes: Vec<Value> = saved["processes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            json!({
                "global_rank": p["global_rank"],
                "communicators": p["communicators"],
                "new_processes": p["new_processes"],
                "spawn_breakpoint": p["spawn_breakpoint"],
                "unreadable": p["unreadable"],
            })
        })
        .collect();
    let about = json!({
        "fixture": format!("tests/fixtures/{}.c", plan.fixture),
        "mpi": format!("{mpi:?}"),
        "args": plan.args,
        "ranks": plan.ranks,
        "recorded_by": "scripts/record-snapshots (dll/tests/record.rs)",
        "processes": processes,
    });
    let about_path = data.join(format!("{}.{}.json", plan.name, build_name()));
    std::fs::write(
        &about_path,
        serde_json::to_string_pretty(&about).expect("json") + "\n",
    )
    .expect("write about");
    gzip(&snap);
}

/// `path` to `path.gz`, then `path` removed.
fn gzip(path: &Path) {
    let bytes = std::fs::read(path).expect("read snapshot");
    let gz = PathBuf::from(format!("{}.gz", path.display()));
    let mut out = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("create"),
        flate2::Compression::best(),
    );
    out.write_all(&bytes).expect("gzip");
    out.finish().expect("gzip");
    std::fs::remove_file(path).expect("remove");
}

#[test]
#[ignore = "records dll/tests/data: run by scripts/record-snapshots, never by the suite"]
fn record_snapshots() {
    let data = common::data("");
    let only = std::env::var("MQS_RECORD").ok();
    for plan in RECORDINGS {
        if plan.mpi2_only && !cfg!(feature = "mpi2") {
            continue;
        }
        if only.as_deref().is_some_and(|o| o != plan.name) {
            continue;
        }
        eprintln!("recording {}", plan.name);
        record(plan, &data);
    }
}
