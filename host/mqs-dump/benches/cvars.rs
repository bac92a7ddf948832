//! Benchmark (not a test): list every control variable of Open MPI 4.1.4
//! (`mqs-dump cvars --mpi PREFIX --verbosity 9`, about a thousand, goal:
//! under 1 s) next to Open MPI's own `ompi_info --all --parsable`, which
//! lists its MCA variables the same way (by registering every component).
//! Each round runs each command once, alternating which goes first; the
//! figures are wall times of whole processes, as a user sees them.
//!
//! `cargo bench -p mqs-dump --bench cvars [-- --rounds R]` (default 10).
//! Needs the Open MPI 4.1.4 -g build (scripts/setup-mpis); MPICH 4.0.2's
//! listing is measured too when it is built.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::Mpi;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench cvars: {e}");
        std::process::exit(1);
    }
}

fn rounds() -> Result<usize, Box<dyn std::error::Error>> {
    let mut rounds = 10;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--rounds" {
            rounds = it.next().ok_or("--rounds needs R")?.parse()?;
        }
    }
    Ok(rounds.max(1))
}

/// Runs `cmd` to the end with its output discarded (but counted), and
/// returns the wall time and the bytes it printed.
fn time(program: &Path, args: &[&str]) -> Result<(Duration, usize), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()?;
    let elapsed = start.elapsed();
    if !out.status.success() {
        return Err(format!("{} {args:?} failed: {}", program.display(), out.status).into());
    }
    Ok((elapsed, out.stdout.len()))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// min, median, max in ms.
fn summary(times: &mut [Duration]) -> (f64, f64, f64) {
    times.sort();
    (
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
    )
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let rounds = rounds()?;
    let mqs_dump = mqs_tests::mqs_dump_binary();
    let ompi = Mpi::OpenMpiG.prefix()?;
    let prefix = ompi.display().to_string();
    let ompi_info = ompi.join("bin/ompi_info");

    // How many variables each lists.
    let out = Command::new(&mqs_dump)
        .args(["cvars", "--mpi", &prefix, "--verbosity", "9", "--json"])
        .output()?;
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let ours_count = listing["variables"].as_array().map_or(0, Vec::len);
    let out = Command::new(&ompi_info)
        .args(["--all", "--parsable"])
        .output()?;
    let theirs_count = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.splitn(7, ':').collect();
            f.len() == 7 && f[0] == "mca" && f[3] == "param" && f[5] == "value"
        })
        .count();
    println!(
        "Open MPI 4.1.4 ({}): mqs-dump lists {ours_count} control variables, ompi_info {theirs_count} \
         MCA variables; {rounds} rounds",
        Mpi::OpenMpiG.name()
    );

    let ours_text = ["cvars", "--mpi", &prefix, "--verbosity", "9"];
    let ours_json = ["cvars", "--mpi", &prefix, "--verbosity", "9", "--json"];
    let theirs = ["--all", "--parsable"];
    let (mut t_text, mut t_json, mut t_info) = (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = (0, 0, 0);
    for round in 0..rounds {
        let mut ours = || -> Result<(), Box<dyn std::error::Error>> {
            let (t, b) = time(&mqs_dump, &ours_text)?;
            t_text.push(t);
            bytes.0 = b;
            let (t, b) = time(&mqs_dump, &ours_json)?;
            t_json.push(t);
            bytes.1 = b;
            Ok(())
        };
        if round % 2 == 0 {
            ours()?;
            let (t, b) = time(&ompi_info, &theirs)?;
            t_info.push(t);
            bytes.2 = b;
        } else {
            let (t, b) = time(&ompi_info, &theirs)?;
            t_info.push(t);
            bytes.2 = b;
            ours()?;
        }
    }
    let first = (ms(t_text[0]), ms(t_info[0]));
    let (text_min, text_med, text_max) = summary(&mut t_text);
    let (json_min, json_med, json_max) = summary(&mut t_json);
    let (info_min, info_med, info_max) = summary(&mut t_info);
    println!("                                          min      median   max   (ms)  output");
    println!(
        "mqs-dump cvars --verbosity 9            {text_min:8.1} {text_med:8.1} {text_max:8.1}  {} bytes",
        bytes.0
    );
    println!(
        "mqs-dump cvars --verbosity 9 --json     {json_min:8.1} {json_med:8.1} {json_max:8.1}  {} bytes",
        bytes.1
    );
    println!(
        "ompi_info --all --parsable              {info_min:8.1} {info_med:8.1} {info_max:8.1}  {} bytes",
        bytes.2
    );
    println!(
        "ratio mqs-dump / ompi_info (medians): text {:.2}, json {:.2}",
        text_med / info_med,
        json_med / info_med
    );
    println!(
        "first round (coldest caches): mqs-dump {:.1} ms, ompi_info {:.1} ms",
        first.0, first.1
    );
    println!(
        "goal (under 1 s for every listing): {}",
        if text_max < 1000.0 && json_max < 1000.0 {
            "met"
        } else {
            "NOT met"
        }
    );

    match Mpi::Mpich.prefix() {
        Ok(mpich) => {
            let prefix = mpich.display().to_string();
            let args = ["cvars", "--mpi", &prefix, "--verbosity", "9"];
            let mut times = Vec::new();
            for _ in 0..rounds {
                times.push(time(&mqs_dump, &args)?.0);
            }
            let (min, med, max) = summary(&mut times);
            println!(
                "MPICH 4.0.2: mqs-dump cvars --verbosity 9: {min:.1} / {med:.1} / {max:.1} ms (min / median / max)"
            );
        }
        Err(e) => println!("MPICH 4.0.2 not measured: {e}"),
    }
    Ok(())
}
