//! `mqs-dump __synthetic-front`: the scale harness's front end (see
//! `mqs_acquire::collect::synthetic`). It reads a synthetic job through one
//! collector per host, makes the job view, and prints two lines: once the
//! job is merged, `merged_seconds=T merged_rss_mb=R frontend_bytes=B
//! processes=P failures=F` (seconds from its start, its peak RSS so far,
//! the bytes collectors sent it); once the job view is made, `seconds=S
//! frontend_rss_mb=M` (the same, to the job view). In a tree, one line
//! per level on stderr: `level=L collectors=C bytes_received=B
//! merge_ms=M`. Not for users: the collect bench runs it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use mqs_acquire::collect::{self, CollectOptions};
use mqs_analysis::view::{self, ViewOptions};

#[derive(Debug, Args)]
pub struct SyntheticFrontArgs {
    /// The synthetic job's spec file.
    #[arg(long)]
    pub spec: PathBuf,
    /// The collectors' step timeout, in milliseconds.
    #[arg(long, default_value_t = 120_000)]
    pub timeout_ms: u64,
    /// Then print the merged job (JSON, one line) and the job view.
    #[arg(long)]
    pub print_job: bool,
    /// The collectors' tree's fan-out; 0: flat.
    #[arg(long, default_value_t = 0)]
    pub fanout: usize,
    /// Print when each step of the collection ended (stderr).
    #[arg(long)]
    pub verbose: bool,
}

pub fn run(args: &SyntheticFrontArgs) -> ExitCode {
    let began = Instant::now();
    mqs_core::dll::set_verbose(args.verbose);
    let collect = CollectOptions {
        all_hosts: true,
        timeout: Duration::from_millis(args.timeout_ms.max(1)),
        callback: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
        fanout: (args.fanout > 0).then_some(args.fanout),
        // As mqs-dump's job view: ranks in equal states stay one dump per
        // run of ranks.
        compact: true,
        ..CollectOptions::default()
    };
    let collect::SyntheticRead {
        mut job,
        bytes,
        levels,
        expanding,
    } = match collect::dump_synthetic(&args.spec, &collect) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("mqs-dump: {e}");
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1));
        }
    };
    // Each line is written (and flushed) as soon as it is known, so that
    // a view that never ends still leaves the first; a reader gone away
    // is an error, not a panic.
    let mut out = std::io::stdout().lock();
    let merged = writeln!(
        out,
        "merged_seconds={:.3} merged_rss_mb={:.1} frontend_bytes={bytes} processes={} \
         failures={}",
        began.elapsed().as_secs_f64(),
        peak_rss_mb(),
        job.rank_count(),
        job.failures.len()
    )
    .and_then(|()| out.flush());
    // In a tree, each level's figures (stderr, so that stdout keeps its
    // three parts): level 0 is the front end (what it received, and its
    // time expanding the states), level 1 the roots.
    if !levels.is_empty() {
        eprintln!(
            "level=0 collectors=1 bytes_received={bytes} merge_ms={:.1}",
            expanding.as_secs_f64() * 1e3
        );
        for (i, level) in levels.iter().enumerate() {
            eprintln!(
                "level={} collectors={} bytes_received={} merge_ms={:.1}",
                i + 1,
                level.collectors,
                level.bytes_received,
                level.merge_ms
            );
        }
    }
    let text = view::job_view(&job, &ViewOptions::default());
    let mut written = merged.and_then(|()| {
        writeln!(
            out,
            "seconds={:.3} frontend_rss_mb={:.1}",
            began.elapsed().as_secs_f64(),
            peak_rss_mb()
        )
    });
    if args.print_job {
        job.expand();
        written = written.and_then(|()| {
            serde_json::to_writer(&mut out, &job)
                .map_err(std::io::Error::other)
                .and_then(|()| writeln!(out))
                .and_then(|()| out.write_all(text.as_bytes()))
        });
    }
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mqs-dump: cannot write the figures: {e}");
            ExitCode::from(1)
        }
    }
}

/// This process's peak resident set so far, in MiB (0 if unknown).
fn peak_rss_mb() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the buffer it is given,
    // which is that size and lives across the call.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } == 0;
    if !ok {
        return 0.0;
    }
    // SAFETY: getrusage succeeded, so it filled the struct (and zeroed
    // memory is a valid rusage anyway).
    let usage = unsafe { usage.assume_init() };
    // ru_maxrss is in KiB on Linux.
    usage.ru_maxrss as f64 / 1024.0
}
