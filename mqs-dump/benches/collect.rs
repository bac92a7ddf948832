//! Benchmark (not a test): whole-job dump time of a hung `ring` job of 8,
//! 16, 32 and 64 ranks (oversubscribed on this machine), read directly and
//! through collectors, as `mqs-dump --pid <mpirun> --json` takes it from
//! start to exit; and the cost per rank. The goal: 64 ranks in under
//! 2 s, growing no faster than linearly.
//!
//! Three ways for each size:
//! - direct: mqs-dump attaches every rank itself;
//! - collect: `--collect` on the same one-node job, one collector started
//!   by mpirun (the MPIR tool-daemon launch) reads them all;
//! - 2 nodes: the job on two nodes of this machine (their own PID and UTS
//!   namespaces, as the `collect` tests run them), one collector per node
//!   started by mpirun, the two working side by side.
//!
//! `cargo bench -p mqs-dump --bench collect [-- --rounds R] [--sizes 8,16]
//! [--no-nodes]`: R rounds per figure (default 3, the median is shown).
//! Needs the Open MPI 4.1.4 -g build (scripts/setup-mpis) and root (for the
//! nodes' namespaces and /etc/hosts). The machine's load is printed with
//! the figures: the ranks of a hung job poll, and on a small machine they
//! and everything else running compete with the dump.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi, Nodes};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench collect: {e}");
        std::process::exit(1);
    }
}

struct Args {
    rounds: usize,
    sizes: Vec<u32>,
    nodes: bool,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        rounds: 3,
        sizes: vec![8, 16, 32, 64],
        nodes: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => args.rounds = it.next().ok_or("--rounds needs R")?.parse()?,
            "--sizes" => {
                args.sizes = it
                    .next()
                    .ok_or("--sizes needs N,N...")?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--no-nodes" => args.nodes = false,
            // cargo bench passes --bench.
            _ => {}
        }
    }
    args.rounds = args.rounds.max(1);
    Ok(args)
}

/// One figure: the median of the rounds, in seconds.
type Seconds = f64;

struct Row {
    ranks: u32,
    direct: Seconds,
    collect: Seconds,
    nodes: Option<Seconds>,
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let mqs_dump = mqs_tests::mqs_dump_binary();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "whole-job dump of a hung ring, {} rounds each (median), {cores} cores",
        args.rounds
    );
    let nodes = if args.nodes {
        Some(Nodes::start(&["nodea", "nodeb"])?)
    } else {
        None
    };
    let mut rows = Vec::new();
    for &ranks in &args.sizes {
        let options = LaunchOptions {
            timeout: Duration::from_secs(600),
            ..LaunchOptions::default()
        };
        let job = Job::launch_with(Mpi::OpenMpiG, "ring", ranks, &[], &options)?;
        let mpirun = job.launcher_pid();
        let mut direct = Vec::new();
        let mut collect = Vec::new();
        for round in 0..args.rounds {
            // Alternate which goes first, so neither always finds warm caches.
            let order: [bool; 2] = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for collected in order {
                let time = dump(&mqs_dump, mpirun, ranks, collected)?;
                if collected {
                    collect.push(time);
                } else {
                    direct.push(time);
                }
            }
        }
        println!(
            "{ranks:>3} ranks, one node: load average {}",
            load_average()
        );
        job.shutdown()?;

        let on_nodes = match &nodes {
            Some(nodes) => {
                let options = LaunchOptions {
                    timeout: Duration::from_secs(600),
                    env: nodes.openmpi_env(ranks / 2)?,
                    node_local_pids: true,
                };
                let job = Job::launch_with(Mpi::OpenMpiG, "ring", ranks, &[], &options)?;
                let mut times = Vec::new();
                for _ in 0..args.rounds {
                    // Every rank is on another host: collectors by themselves.
                    times.push(dump(&mqs_dump, job.launcher_pid(), ranks, false)?);
                }
                println!(
                    "{ranks:>3} ranks, two nodes: load average {}",
                    load_average()
                );
                job.shutdown()?;
                Some(median(times))
            }
            None => None,
        };
        rows.push(Row {
            ranks,
            direct: median(direct),
            collect: median(collect),
            nodes: on_nodes,
        });
    }

    println!();
    println!(
        "{:>5} | {:>9} {:>10} | {:>9} {:>10} {:>6} | {:>9} {:>10}",
        "ranks", "direct s", "ms/rank", "collect s", "ms/rank", "ratio", "2 nodes s", "ms/rank"
    );
    for row in &rows {
        let per = |s: Seconds| s * 1e3 / f64::from(row.ranks);
        let nodes = row
            .nodes
            .map(|s| format!("{s:>9.2} {:>10.1}", per(s)))
            .unwrap_or_else(|| format!("{:>9} {:>10}", "-", "-"));
        println!(
            "{:>5} | {:>9.2} {:>10.1} | {:>9.2} {:>10.1} {:>6.2} | {nodes}",
            row.ranks,
            row.direct,
            per(row.direct),
            row.collect,
            per(row.collect),
            row.collect / row.direct,
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let growth = |a: Seconds, b: Seconds| b / a;
        let size = f64::from(last.ranks) / f64::from(first.ranks);
        println!(
            "\n{}x the ranks from {} to {}: direct took {:.2}x the time, collect {:.2}x{} \
             (linear would be {size:.0}x)",
            size,
            first.ranks,
            last.ranks,
            growth(first.direct, last.direct),
            growth(first.collect, last.collect),
            match (first.nodes, last.nodes) {
                (Some(a), Some(b)) => format!(", 2 nodes {:.2}x", growth(a, b)),
                _ => String::new(),
            }
        );
        println!(
            "goal: {} ranks in under 2 s: direct {:.2} s, collect {:.2} s{}",
            last.ranks,
            last.direct,
            last.collect,
            last.nodes
                .map(|s| format!(", 2 nodes {s:.2} s"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// Times one `mqs-dump --pid <mpirun> --json [--collect]`, checking that it
/// dumped every rank.
fn dump(
    mqs_dump: &Path,
    mpirun: u32,
    ranks: u32,
    collect: bool,
) -> Result<Seconds, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(mqs_dump);
    cmd.args(["--pid", &mpirun.to_string(), "--json"])
        .stdin(Stdio::null());
    if collect {
        cmd.arg("--collect");
    }
    let start = Instant::now();
    let out = cmd.output()?;
    let took = start.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "mqs-dump failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let job: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let dumped = job["processes"].as_array().map_or(0, Vec::len);
    if dumped != ranks as usize {
        return Err(format!("{dumped} of {ranks} ranks dumped").into());
    }
    Ok(took)
}

fn median(mut times: Vec<Seconds>) -> Seconds {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
