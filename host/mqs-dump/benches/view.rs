//! Benchmark (not a test): what the front end does with a whole job once
//! it has it, at scale. A synthetic job's spec (as the `collect` bench's
//! scale runs write it, `target/mqs-scratch/scale-bench/*.json`) is made
//! into one dump per rank, as a flat collection gives it, and each step of
//! the job view is timed: the job's operations (`Job::new`), the wait-for
//! analysis (`Analysis::new`), the view's text. First, what the leaves of
//! a collector tree do with the same ranks: each host's dumps into states
//! as its collector merges them for the job view (`states_s`, all hosts
//! one after the other, and the states they make), and reading the
//! job's JSON back (`json_s`: what the front end and a tree's parents do
//! with what collectors send).
//!
//! `cargo bench -p mqs-dump --bench view -- --spec FILE [--rounds R]`

use std::time::Instant;

use mqs_acquire::collect::states::States;
use mqs_analysis::view::{self, ViewOptions};
use mqs_analysis::{Analysis, Job};
use mqs_core::model::{JobDump, SCHEMA_VERSION};
use mqs_tests::scale::SyntheticJob;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench view: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = None;
    let mut rounds = 3usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--spec" => spec = Some(it.next().ok_or("--spec needs FILE")?),
            "--rounds" => rounds = it.next().ok_or("--rounds needs R")?.parse()?,
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let spec = spec.ok_or("--spec FILE is needed (a scale run's spec)")?;
    let job = SyntheticJob::load(std::path::Path::new(&spec))?;
    let processes: Vec<_> = job.members().iter().map(|m| job.process(m)).collect();
    for round in 0..rounds {
        let (mut took, mut states) = (std::time::Duration::ZERO, 0);
        for host in processes.chunks(job.per_host) {
            let host = host.to_vec();
            let t = Instant::now();
            // As a leaf for the job view: ranks compared on what it reads.
            let mut leaf = States::with_detail(false).by_number(true);
            leaf.find_hubs(&host);
            for p in host {
                leaf.add("", p);
            }
            took += t.elapsed();
            states += leaf.list.len();
        }
        println!(
            "round={round} states_s={:.3} states={states}",
            took.as_secs_f64()
        );
    }
    let dump = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: None,
        processes,
        failures: Vec::new(),
    };
    let json = serde_json::to_vec(&dump)?;
    for round in 0..rounds {
        let t = Instant::now();
        let back: JobDump = serde_json::from_slice(&json)?;
        println!(
            "round={round} json_s={:.3} json_mb={:.0}",
            t.elapsed().as_secs_f64(),
            json.len() as f64 / 1e6
        );
        drop(back);
    }
    println!(
        "view ranks={} pattern={}",
        dump.processes.len(),
        job.pattern.name()
    );
    for round in 0..rounds {
        let t = Instant::now();
        let j = Job::new(&dump);
        let job_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let a = Analysis::new(&j);
        let analysis_s = t.elapsed().as_secs_f64();
        drop(a);
        drop(j);
        let t = Instant::now();
        let text = view::job_view(&dump, &ViewOptions::default());
        let view_s = t.elapsed().as_secs_f64();
        println!(
            "round={round} job_s={job_s:.3} analysis_s={analysis_s:.3} view_s={view_s:.3} \
             view_lines={}",
            text.lines().count()
        );
    }
    Ok(())
}
