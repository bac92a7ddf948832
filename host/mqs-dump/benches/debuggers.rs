//! Benchmark (not a test): one `mpi queues` inside gdb (the extension of
//! debuggers/gdb) on rank 0 of a `queues` job with N pending receives and
//! unexpected messages, through Open MPI's own DLL and through ours: the
//! command's wall time inside gdb (text listing, then JSON), with the DLL in
//! its helper process (the default) and loaded into gdb (`--in-process`),
//! and the callbacks each DLL makes, by kind (from the JSON's stats).
//!
//! `cargo build --release -p mqs-dll && cargo bench -p mqs-dump --bench
//! debuggers [-- N] [--pid PID]`: N defaults to 10000; `--pid` measures
//! rank 0 of a `queues` job already running. Needs gdb and the test Open MPI
//! (scripts/setup-mpis). Figures are printed, never asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench debuggers: {e}");
        std::process::exit(1);
    }
}

type Error = Box<dyn std::error::Error>;

fn run() -> Result<(), Error> {
    let mut n = 10_000usize;
    let mut pid = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pid" => pid = Some(args.next().ok_or("--pid needs PID")?.parse::<u32>()?),
            // cargo bench passes --bench to harness-less benches.
            "--bench" => {}
            other => n = other.parse()?,
        }
    }
    let mpi = Mpi::OpenMpiG;
    let mut job = None;
    let pid = match pid {
        Some(pid) => pid,
        None => {
            println!(
                "setting up: {} job with {n} pending receives on rank 0",
                mpi.name()
            );
            let setup = Instant::now();
            let options = LaunchOptions {
                timeout: std::time::Duration::from_secs(1800),
                ..LaunchOptions::default()
            };
            let j = Job::launch_with(mpi, "queues", 2, &[&n.to_string()], &options)?;
            println!("job ready in {:.1} s", setup.elapsed().as_secs_f64());
            let pid = j.rank_pid(0).ok_or("no rank 0")?;
            job = Some(j);
            pid
        }
    };
    let theirs = mpi.prefix()?.join("lib/openmpi/libompi_dbg_msgq.so");
    let ours = mqs_tests::our_dll(false);
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join("bench-debuggers");
    std::fs::create_dir_all(&dir)?;
    println!(
        "one `mpi queues` in gdb on pid {pid}, seconds (text listing, then --json); \
         callbacks from the JSON's stats"
    );
    for (who, dll) in [("Open MPI's", &theirs), ("ours", &ours)] {
        for in_process in [false, true] {
            let figures = in_gdb(pid, dll, in_process, &dir)?;
            let mode = if in_process { "in gdb" } else { "helper" };
            println!(
                "  {who:<10} {mode:<6}  text {:>7.2} s  json {:>7.2} s  operations {:>6}  \
                 callbacks {:>8}  fetches {:>8}",
                figures.text, figures.json, figures.operations, figures.total, figures.fetches
            );
            if !in_process {
                println!("      by kind: {}", figures.kinds);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(job) = job {
        job.shutdown()?;
    }
    Ok(())
}

struct Figures {
    text: f64,
    json: f64,
    operations: usize,
    total: u64,
    fetches: u64,
    kinds: String,
}

/// One gdb session on `pid`: the command timed in gdb's own Python.
fn in_gdb(pid: u32, dll: &Path, in_process: bool, dir: &Path) -> Result<Figures, Error> {
    let extension: PathBuf = mqs_tests::workspace_root().join("debuggers/gdb/mqs.py");
    let flags = format!(
        "--dll {}{}",
        dll.display(),
        if in_process { " --in-process" } else { "" }
    );
    let timed = |name: &str, command: &str| {
        [
            "python import time; t0 = time.monotonic()".to_string(),
            command.to_string(),
            format!("python print('@@@{name} %f' % (time.monotonic() - t0))"),
        ]
    };
    let mut commands = vec![format!("source {}", extension.display())];
    commands.extend(timed("text", &format!("mpi queues {flags}")));
    commands.push("echo @@@json-start\\n".into());
    commands.extend(timed("json", &format!("mpi queues {flags} --json")));
    let out_path = dir.join("gdb.out");
    let out = std::fs::File::create(&out_path)?;
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-q", "-batch", "-p", &pid.to_string()]);
    for c in &commands {
        cmd.arg("-ex").arg(c);
    }
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()?;
    let text = std::fs::read_to_string(&out_path)?;
    if !status.success() {
        return Err(format!("gdb failed ({status}):\n{text}").into());
    }
    let seconds = |name: &str| -> Result<f64, Error> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("@@@{name} ")))
            .ok_or_else(|| format!("no timing for {name}:\n{text}"))?;
        Ok(line.trim().parse()?)
    };
    let json_text = text
        .split_once("@@@json-start\n")
        .and_then(|(_, rest)| rest.split_once("\n@@@json "))
        .map(|(json, _)| json)
        .ok_or("no JSON")?;
    let json: Value = serde_json::from_str(json_text)?;
    let process = &json["processes"][0];
    let callbacks = process["stats"]["callbacks"]
        .as_object()
        .ok_or("no callbacks in the stats")?;
    let total = callbacks.values().filter_map(Value::as_u64).sum();
    let kinds = callbacks
        .iter()
        .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let operations = process["communicators"]["list"]
        .as_array()
        .map(|comms| {
            comms
                .iter()
                .flat_map(|c| ["sends", "receives", "unexpected"].map(|q| &c[q]["operations"]))
                .filter_map(Value::as_array)
                .map(Vec::len)
                .sum()
        })
        .unwrap_or(0);
    Ok(Figures {
        text: seconds("text")?,
        json: seconds("json")?,
        operations,
        total,
        fetches: process["stats"]["fetches"].as_u64().unwrap_or(0),
        kinds,
    })
}
