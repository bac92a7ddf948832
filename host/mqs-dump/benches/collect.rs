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
//! And a Slurm job: the same ring started by `srun --mpi=pmix` on the
//! two-node Slurm of the tests (half the ranks on each node), dumped with
//! `--pid <srun>` and with `--slurm JOBID`, both through one collector per
//! node started as an overlapping step of the job.
//!
//! `cargo bench -p mqs-dump --bench collect [-- --rounds R] [--sizes 8,16]
//! [--no-nodes] [--no-slurm] [--slurm-only]`: R rounds per figure (default
//! 3, the median is shown).
//!
//! `-- --scale [--scale-sizes 1000,10000]` runs only the scale harness
//! instead: a synthetic job (`mqs_tests::scale`) made from the two ranks
//! of the committed `queues` snapshot, replayed once, in 10 states, 100
//! ranks per synthetic collector, all on this machine and read by the
//! harness's front end (this bench run again as it, and as each
//! collector) through the real protocol and merge, once flat and once in
//! a tree of collectors (fan-out
//! `--scale-fanout K`, default mqs-dump's). Besides those 10 states
//! (pattern `states`), jobs shaped as real ones (`--scale-patterns
//! states,ring,halo,grid,outliers,hub`, default all): a ring, a 3-D halo
//! exchange with 6 neighbours, the same on a communicator that knows its
//! Cartesian grid, a ring with 5 outlier ranks, and a ring whose ranks
//! also wait on rank 0, every rank with its
//! own addresses, counters, thread ids and peers (`mqs_tests::scale::Pattern`).
//! One line per run: `scale ranks=N pattern=P mode=flat|tree fanout=K
//! seconds=S frontend_rss_mb=M frontend_bytes=B view_lines=L` (seconds
//! from the front end's start to its job view, its peak RSS, the bytes
//! collectors sent it, the view's length), for a tree one line per
//! level (`... level=L collectors=C bytes_received=B merge_ms=M`: level 0
//! the front end, 1 the roots; the slowest merge of the level), then the
//! tree's ratios to flat. Sizes
//! default to 1,000 and 10,000 ranks (`--scale-sizes 100000` for more);
//! a run that takes longer than `--scale-limit SECS` (default 600) or
//! needs more than `--scale-memory GB` (default 8) of address space is
//! ended, and what it measured until then is printed with the reason.
//! Each scale run starts 10 s after the last one ended. Needs the Open MPI 4.1.4 -g build
//! (scripts/setup-mpis), Slurm and munge (the same) and root (for the
//! nodes' namespaces and /etc/hosts). The machine's load is printed with
//! the figures: the ranks of a hung job poll, and on a small machine they
//! and everything else running compete with the dump.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi, Nodes, Slurm};

fn main() {
    // The scale harness runs this bench again as its front end and its
    // collectors.
    if let Some(code) = mqs_tests::scale::role() {
        std::process::exit(code);
    }
    if let Err(e) = run() {
        eprintln!("bench collect: {e}");
        std::process::exit(1);
    }
}

struct Args {
    rounds: usize,
    sizes: Vec<u32>,
    nodes: bool,
    /// The mpirun ways (one node, two nodes).
    mpirun: bool,
    slurm: bool,
    /// Only the scale harness, at these sizes.
    scale: Option<Vec<usize>>,
    /// How long one scale run may take.
    scale_limit: Duration,
    /// The tree's fan-out in the scale harness.
    scale_fanout: usize,
    /// The synthetic jobs' shapes.
    scale_patterns: Vec<mqs_tests::scale::Pattern>,
    /// How much address space the front end of a scale run may take, in
    /// bytes: this machine is shared.
    scale_memory: u64,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        rounds: 3,
        sizes: vec![8, 16, 32, 64],
        nodes: true,
        mpirun: true,
        slurm: true,
        scale: None,
        scale_limit: Duration::from_secs(600),
        scale_memory: 8 << 30,
        scale_fanout: mqs_acquire::collect::DEFAULT_FANOUT,
        scale_patterns: ["states", "ring", "halo", "grid", "outliers", "hub"]
            .iter()
            .filter_map(|p| mqs_tests::scale::Pattern::parse(p))
            .collect(),
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
            "--no-slurm" => args.slurm = false,
            "--slurm-only" => args.mpirun = false,
            "--scale" => {
                args.scale.get_or_insert_with(|| vec![1_000, 10_000]);
            }
            "--scale-sizes" => {
                args.scale = Some(
                    it.next()
                        .ok_or("--scale-sizes needs N,N...")?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?,
                )
            }
            "--scale-memory" => {
                let gb: u64 = it.next().ok_or("--scale-memory needs GB")?.parse()?;
                args.scale_memory = gb << 30;
            }
            "--scale-fanout" => {
                args.scale_fanout = it
                    .next()
                    .ok_or("--scale-fanout needs K")?
                    .parse::<usize>()?
                    .max(1);
            }
            "--scale-patterns" => {
                args.scale_patterns = it
                    .next()
                    .ok_or("--scale-patterns needs P,P...")?
                    .split(',')
                    .map(|p| {
                        mqs_tests::scale::Pattern::parse(p).ok_or(format!(
                            "--scale-patterns: no pattern {p} (states, ring, halo, grid, outliers, hub)"
                        ))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--scale-limit" => {
                args.scale_limit =
                    Duration::from_secs(it.next().ok_or("--scale-limit needs SECS")?.parse()?)
            }
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
    if let Some(sizes) = &args.scale {
        return scale(
            &mqs_dump,
            sizes,
            &args.scale_patterns,
            (args.scale_limit, args.scale_memory),
            args.scale_fanout,
        );
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "whole-job dump of a hung ring, {} rounds each (median), {cores} cores",
        args.rounds
    );
    if args.mpirun {
        mpirun_ways(&args, &mqs_dump)?;
    }
    if args.slurm {
        slurm_ways(&args, &mqs_dump)?;
    }
    Ok(())
}

/// A ring started by srun on the test Slurm, through `--pid <srun>` and
/// `--slurm JOBID`.
fn slurm_ways(args: &Args, mqs_dump: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let slurm = Slurm::start()?;
    let conf = slurm.conf().to_path_buf();
    let exe = mqs_tests::build_fixture(Mpi::OpenMpiG, "ring")?;
    let mut rows = Vec::new();
    for &ranks in &args.sizes {
        let per_node = (ranks / 2).max(1);
        let cmd = slurm.srun_command(Mpi::OpenMpiG, &exe, per_node, &[]);
        let options = LaunchOptions {
            timeout: Duration::from_secs(600),
            node_local_pids: true,
            ..LaunchOptions::default()
        };
        let job = Job::launch_command(
            Mpi::OpenMpiG,
            "ring",
            exe.clone(),
            per_node * 2,
            cmd,
            &Job::new_id("ring"),
            &options,
        )?;
        let jobid = slurm.jobs()?.first().cloned().ok_or("no Slurm job")?;
        let srun = job.launcher_pid().to_string();
        let (mut by_pid, mut by_id) = (Vec::new(), Vec::new());
        for round in 0..args.rounds {
            for slurm_first in [round % 2 == 0, round % 2 != 0] {
                if slurm_first {
                    by_id.push(timed_dump(
                        mqs_dump,
                        &["--slurm", &jobid],
                        &conf,
                        per_node * 2,
                    )?);
                } else {
                    by_pid.push(timed_dump(
                        mqs_dump,
                        &["--pid", &srun],
                        &conf,
                        per_node * 2,
                    )?);
                }
            }
        }
        println!(
            "{:>3} ranks, Slurm job {jobid}: load average {}",
            per_node * 2,
            load_average()
        );
        job.shutdown()?;
        rows.push((per_node * 2, median(by_pid), median(by_id)));
    }
    println!();
    println!(
        "{:>5} | {:>12} {:>10} | {:>12} {:>10}",
        "ranks", "--pid srun s", "ms/rank", "--slurm s", "ms/rank"
    );
    for &(ranks, by_pid, by_id) in &rows {
        let per = |s: Seconds| s * 1e3 / f64::from(ranks);
        println!(
            "{ranks:>5} | {by_pid:>12.2} {:>10.1} | {by_id:>12.2} {:>10.1}",
            per(by_pid),
            per(by_id)
        );
    }
    if let Some(&(ranks, by_pid, by_id)) = rows.last() {
        println!(
            "goal: a {ranks}-rank Slurm job in under 2 s: --pid <srun> {by_pid:.2} s, \
             --slurm {by_id:.2} s"
        );
    }
    Ok(())
}

/// Times one `mqs-dump ARGS --json` against the test Slurm (`conf`),
/// checking that it dumped `ranks` ranks.
fn timed_dump(
    mqs_dump: &Path,
    args: &[&str],
    conf: &Path,
    ranks: u32,
) -> Result<Seconds, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(mqs_dump);
    cmd.args(args).arg("--json").env("SLURM_CONF", conf);
    finish_timed(cmd, ranks)
}

/// One node, and two nodes of `Nodes`, through mpirun.
fn mpirun_ways(args: &Args, mqs_dump: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mqs_dump = mqs_dump.to_path_buf();
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
    cmd.args(["--pid", &mpirun.to_string(), "--json"]);
    if collect {
        cmd.arg("--collect");
    }
    finish_timed(cmd, ranks)
}

/// Runs `cmd` (an mqs-dump --json); how long it took, once it is known to
/// have dumped `ranks` ranks.
fn finish_timed(mut cmd: Command, ranks: u32) -> Result<Seconds, Box<dyn std::error::Error>> {
    cmd.stdin(Stdio::null());
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

/// Ranks each synthetic collector serves.
const RANKS_PER_COLLECTOR: usize = 100;
/// Distinct states of the synthetic ranks.
const STATES: usize = 10;
/// The pause before each scale run.
const SETTLE: Duration = Duration::from_secs(10);

/// The scale harness, flat and tree: one line per size, pattern and mode,
/// then the tree's ratios (see the top of the file).
fn scale(
    mqs_dump: &Path,
    sizes: &[usize],
    patterns: &[mqs_tests::scale::Pattern],
    (limit, memory): (Duration, u64),
    fanout: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    use mqs_tests::scale::{Pattern, SyntheticJob};
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join("scale-bench");
    std::fs::create_dir_all(&dir)?;
    let templates = recorded_ranks(mqs_dump, &dir)?;
    eprintln!(
        "scale: {} recorded ranks as templates, {STATES} states, {RANKS_PER_COLLECTOR} ranks \
         per collector; load average {}",
        templates.len(),
        load_average()
    );
    for &ranks in sizes {
        for &pattern in patterns {
            let job = match pattern {
                Pattern::States => {
                    SyntheticJob::new(templates.clone(), ranks, STATES, RANKS_PER_COLLECTOR)?
                }
                _ => SyntheticJob::with_pattern(
                    templates.clone(),
                    ranks,
                    RANKS_PER_COLLECTOR,
                    pattern,
                )?,
            };
            let spec = dir.join(format!("job-{ranks}-{}.json", pattern.name()));
            job.save(&spec)?;
            let mut figures: Vec<[f64; 3]> = Vec::new();
            for (mode, k) in [("flat", 0), ("tree", fanout)] {
                // The previous run's thousand collectors end, and its
                // memory is given back, before this one starts: on 2 cores
                // that cleanup would count against the next run.
                std::thread::sleep(SETTLE);
                let run = ScaleRun {
                    spec: &spec,
                    ranks,
                    pattern: pattern.name(),
                    mode,
                    fanout: k,
                    limit,
                    memory,
                };
                if let Some(f) = run.measure()? {
                    figures.push(f);
                }
            }
            if let [flat, tree] = figures[..] {
                println!(
                    "scale ranks={ranks} pattern={} tree/flat: seconds {:.2}, frontend_rss_mb \
                     {:.2}, frontend_bytes {:.4}",
                    pattern.name(),
                    tree[0] / flat[0],
                    tree[1] / flat[1],
                    tree[2] / flat[2]
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One run of the scale harness's front end.
struct ScaleRun<'a> {
    spec: &'a Path,
    ranks: usize,
    pattern: &'static str,
    mode: &'static str,
    fanout: usize,
    limit: Duration,
    memory: u64,
}

impl ScaleRun<'_> {
    /// Runs it and prints its line; its seconds, peak RSS and bytes, if
    /// it made a job view.
    fn measure(&self) -> Result<Option<[f64; 3]>, Box<dyn std::error::Error>> {
        use mqs_tests::scale::FRONT_ROLE;
        use std::os::unix::process::CommandExt;
        let ScaleRun {
            spec,
            ranks,
            pattern,
            mode,
            fanout,
            limit,
            memory,
        } = *self;
        // This bench, run again as the harness's front end.
        let mut front = Command::new(std::env::current_exe()?);
        front
            .args([FRONT_ROLE, "--spec"])
            .arg(spec)
            .args(["--fanout", &fanout.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let cap = libc::rlimit {
            rlim_cur: memory,
            rlim_max: memory,
        };
        // SAFETY: between fork and exec only setrlimit runs, which is
        // async-signal-safe, on a copy of a plain struct.
        unsafe {
            front.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &cap) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let mut front = front.spawn()?;
        // Read as it comes, so that a full pipe never holds it up.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_string(&mut text);
                }
                text
            })
        };
        let out = drain(
            front
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err = drain(
            front
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let start = Instant::now();
        let status = loop {
            if let Some(status) = front.try_wait()? {
                break Some(status);
            }
            if start.elapsed() > limit {
                // Our own child, by its handle; its collectors end when
                // their connections close.
                let _ = front.kill();
                let _ = front.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let said = out.join().unwrap_or_default();
        let errors = err.join().unwrap_or_default();
        let field = |name: &str| -> Option<String> {
            said.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
        };
        let complete = field("processes") == Some(ranks.to_string())
            && field("failures").as_deref() == Some("0");
        let merged = match field("merged_seconds") {
            Some(at) => format!(
                "merged {} ranks after {at} s at {} MB peak, {} bytes received",
                field("processes").unwrap_or_default(),
                field("merged_rss_mb").unwrap_or_default(),
                field("frontend_bytes").unwrap_or_default()
            ),
            None => "not merged".into(),
        };
        let Some(status) = status else {
            println!(
                "scale ranks={ranks} pattern={pattern} mode={mode} fanout={fanout}: stopped after {:.0} s \
                 (--scale-limit) without a job view; {merged}",
                limit.as_secs_f64()
            );
            return Ok(None);
        };
        match (
            status.success(),
            field("seconds"),
            field("frontend_rss_mb"),
            field("frontend_bytes"),
        ) {
            (true, Some(seconds), Some(rss), Some(bytes)) if complete => {
                let lines = field("view_lines").unwrap_or_default();
                println!(
                    "scale ranks={ranks} pattern={pattern} mode={mode} fanout={fanout} seconds={seconds} \
                     frontend_rss_mb={rss} frontend_bytes={bytes} view_lines={lines}"
                );
                // Each level of a tree, then where the time went.
                for level in errors.lines().filter(|l| l.starts_with("level=")) {
                    println!("scale ranks={ranks} pattern={pattern} mode={mode} fanout={fanout} {level}");
                }
                eprintln!("  {merged}; the rest is the job view");
                let number = |t: &str| t.parse::<f64>().unwrap_or(f64::NAN);
                return Ok(Some([number(&seconds), number(&rss), number(&bytes)]));
            }
            _ => println!(
                "scale ranks={ranks} pattern={pattern} mode={mode} fanout={fanout}: failed ({status}; {} GB of address \
                 space allowed, --scale-memory) without a job view; {merged}; it said: {}",
                memory >> 30,
                errors.split_whitespace().collect::<Vec<_>>().join(" ")
            ),
        }
        Ok(None)
    }
}

/// The ranks of the committed `queues` snapshot (Open MPI 4.1.4, 2 ranks,
/// queues on several communicators), replayed once by mqs-dump with our
/// DLL.
fn recorded_ranks(
    mqs_dump: &Path,
    dir: &Path,
) -> Result<Vec<mqs_core::model::ProcessDump>, Box<dyn std::error::Error>> {
    let gz =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../dll/tests/data/queues.mpi1.snap.gz");
    let unpacked = Command::new("gzip").arg("-dc").arg(&gz).output()?;
    if !unpacked.status.success() {
        return Err(format!("cannot unpack {}", gz.display()).into());
    }
    let snapshot = dir.join("queues.snap");
    std::fs::write(&snapshot, &unpacked.stdout)?;
    // Our DLL, named: the committed recordings no longer name a path
    // that exists here (scripts/scrub-snapshots).
    let out = Command::new(mqs_dump)
        .arg("--snapshot")
        .arg(&snapshot)
        .arg("--dll")
        .arg(mqs_tests::our_dll(false))
        .arg("--json")
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "cannot replay {}: {}",
            gz.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let job: mqs_core::model::JobDump = serde_json::from_slice(&out.stdout)?;
    Ok(job.processes)
}
