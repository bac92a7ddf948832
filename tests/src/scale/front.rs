//! The harness's front end: a synthetic job read through one collector per
//! host, all started on this machine, with the real protocol and merge;
//! then the job view, and figures on stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mqs_acquire::collect::start::Template;
use mqs_acquire::collect::states::Level;
use mqs_acquire::collect::{CollectOptions, Front, COLLECTOR_COMMAND};
use mqs_acquire::inspect::{Elsewhere, Options};
use mqs_analysis::view::{self, ViewOptions};
use mqs_core::exit_code;
use mqs_core::model::{JobDump, SCHEMA_VERSION};

use super::{value, SyntheticJob, COLLECTOR_ROLE};
use crate::{Error, Result};

/// What the front end role is given.
struct FrontArgs {
    /// The synthetic job's spec file.
    spec: PathBuf,
    /// The collectors' step.
    timeout: Duration,
    /// The collectors' tree's fan-out; 0: flat.
    fanout: usize,
    /// Then print the merged job (JSON, one line) and the job view.
    print_job: bool,
    /// Print when each step of the collection ended (stderr).
    verbose: bool,
    /// Collectors send per-rank detail (addresses, counters, thread ids),
    /// as for `--json`; without it ranks are compared on what the job view
    /// reads, as for mqs-dump's job view.
    detail: bool,
}

impl FrontArgs {
    fn parse(args: &[String]) -> Result<Self> {
        let number = |name: &str, default: u64| -> Result<u64> {
            value(args, name).map_or(Ok(default), |v| {
                v.parse()
                    .map_err(|e| Error::Scale(format!("{name} {v}: {e}")))
            })
        };
        let known = ["--spec", "--timeout-ms", "--fanout"];
        let mut words = args.iter();
        while let Some(word) = words.next() {
            if known.contains(&word.as_str()) {
                words.next();
            } else if !["--print-job", "--verbose", "--detail"].contains(&word.as_str()) {
                return Err(Error::Scale(format!("unknown argument {word}")));
            }
        }
        Ok(Self {
            spec: value(args, "--spec")
                .map(PathBuf::from)
                .ok_or_else(|| Error::Scale("--spec FILE is needed".into()))?,
            timeout: Duration::from_millis(number("--timeout-ms", 120_000)?.max(1)),
            fanout: usize::try_from(number("--fanout", 0)?).unwrap_or(usize::MAX),
            print_job: args.iter().any(|a| a == "--print-job"),
            verbose: args.iter().any(|a| a == "--verbose"),
            detail: args.iter().any(|a| a == "--detail"),
        })
    }
}

/// What the front end read: the job, the bytes collectors sent it, and in
/// a tree what each level did (the roots first) and how long expanding
/// their states took.
struct Read {
    job: JobDump,
    bytes: u64,
    levels: Vec<Level>,
    expanding: Duration,
}

/// Reads the synthetic job and prints two lines: once the job is merged,
/// `merged_seconds=T merged_rss_mb=R frontend_bytes=B processes=P
/// failures=F` (seconds from its start, its peak RSS so far, the bytes
/// collectors sent it); once the job view is made, `seconds=S
/// frontend_rss_mb=M view_lines=L` (the same, to the job view, and the
/// view's length). In a tree, one line per
/// level on stderr: `level=L collectors=C bytes_received=B merge_ms=M`.
/// With `--print-job`, then the merged job and the view. Its exit code.
pub(super) fn run(args: &[String]) -> i32 {
    let began = Instant::now();
    let read = FrontArgs::parse(args).and_then(|args| {
        mqs_core::dll::set_verbose(args.verbose);
        read(&args).map(|read| (args, read))
    });
    let (args, read) = match read {
        Ok(done) => done,
        Err(e) => {
            eprintln!("mqs-scale: {e}");
            return exit_code::COLLECT;
        }
    };
    match report(&args, read, began) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mqs-scale: cannot write the figures: {e}");
            1
        }
    }
}

/// The job in `args.spec`, read through collectors this program starts
/// on this machine, one per synthetic host.
fn read(args: &FrontArgs) -> Result<Read> {
    let job = SyntheticJob::load(&args.spec)?;
    let program = std::env::current_exe().map_err(|e| Error::io("finding this program", e))?;
    let collect = CollectOptions {
        all_hosts: true,
        collector: Some(program.to_string_lossy().into_owned()),
        launcher: Some(launcher(&program, &args.spec)?),
        timeout: args.timeout,
        callback: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
        fanout: (args.fanout > 0).then_some(args.fanout),
        // As mqs-dump's job view: ranks in equal states stay one dump per
        // run of ranks, compared on what the view reads.
        compact: true,
        per_rank_detail: args.detail,
    };
    let mut front = Front::new(&Options::default(), collect);
    front.start_with_launcher(job.members());
    drop(job);
    let mut out = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: None,
        processes: Vec::new(),
        failures: Vec::new(),
    };
    for result in front.finish() {
        match result {
            Ok(process) => out.processes.push(process),
            Err((failure, _)) => out.failures.push(failure),
        }
    }
    // One job, rank by rank, as mqs-acquire's inspect::dump_with merges it.
    out.processes
        .sort_by_key(|p| (p.global_rank < 0, p.global_rank));
    out.failures.sort_by_key(|f| f.rank);
    let (levels, expanding) = front.levels();
    Ok(Read {
        job: out,
        bytes: front.received_bytes(),
        levels,
        expanding,
    })
}

/// The launcher template that starts this program as the collector of
/// `{host}` of the job in `spec`; the front end appends the collector's
/// command line (this program again, [`COLLECTOR_COMMAND`] and its
/// arguments).
fn launcher(program: &Path, spec: &Path) -> Result<Template> {
    let words = [program, spec].map(|p| p.to_string_lossy().into_owned());
    if words.iter().any(|w| w.contains(char::is_whitespace)) {
        return Err(Error::Scale(format!(
            "{words:?}: a path with blanks cannot be a launcher's word"
        )));
    }
    let text = format!(
        "{} {COLLECTOR_ROLE} --spec {} --as-host {{host}}",
        words[0], words[1]
    );
    Template::parse(&text).map_err(|e| Error::Scale(format!("{COLLECTOR_COMMAND}: {e}")))
}

/// Prints the figures, each line as soon as it is known (a view that never
/// ends still leaves the first); a reader gone away is an error.
fn report(args: &FrontArgs, read: Read, began: Instant) -> std::io::Result<()> {
    let Read {
        job,
        bytes,
        levels,
        expanding,
    } = read;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "merged_seconds={:.3} merged_rss_mb={:.1} frontend_bytes={bytes} processes={} \
         failures={}",
        began.elapsed().as_secs_f64(),
        peak_rss_mb(),
        job.rank_count(),
        job.failures.len()
    )?;
    out.flush()?;
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
    writeln!(
        out,
        "seconds={:.3} frontend_rss_mb={:.1} view_lines={}",
        began.elapsed().as_secs_f64(),
        peak_rss_mb(),
        text.lines().count()
    )?;
    if args.print_job {
        // Rank by rank, as mqs-dump writes `--json`.
        serde_json::to_writer(&mut out, &job.each_rank()).map_err(std::io::Error::other)?;
        writeln!(out)?;
        out.write_all(text.as_bytes())?;
    }
    out.flush()
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
