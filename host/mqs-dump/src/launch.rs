//! `mqs-dump launch -- mpirun ...`: start a job under the tool (MPIR launch
//! mode), let it run, dump it on a timer, on SIGUSR1 or when it aborts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mqs_acquire::inspect::Options;
use mqs_acquire::launch::{self, LaunchOptions};
use mqs_core::model::JobDump;

/// Start an MPI job under mqs-dump and dump its queues while it runs.
///
/// The job's own input and output pass through; dumps go to stderr (or
/// --output). mqs-dump exits with the job's exit status. Signals sent to
/// mqs-dump (SIGINT, SIGTERM, SIGHUP) are passed to the starter.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Dump the whole job once, SECS seconds after its processes started
    /// (the starter's job-spawn event).
    #[arg(long, value_name = "SECS")]
    pub dump_after: Option<f64>,

    /// Dump the whole job each time mqs-dump gets SIGUSR1.
    #[arg(long)]
    pub dump_on_signal: bool,

    /// When the job aborts, dump the queues of its ranks before it is torn
    /// down.
    #[arg(long)]
    pub dump_on_abort: bool,

    /// Dumps as JSON, one document per line.
    #[arg(long)]
    pub json: bool,

    /// Snapshot the job every SECS seconds; once a deadlock (or a wait
    /// chain ending in a rank outside MPI) is in two snapshots in a row,
    /// print it with the job view and exit 12, leaving the job as it is.
    #[arg(long, value_name = "SECS", value_parser = crate::dump::parse_secs)]
    pub watch: Option<f64>,

    /// With --watch: report each new finding and go on until the job ends
    /// (then exit 12 if there was one).
    #[arg(long, requires = "watch")]
    pub keep_going: bool,

    /// Also show each thread's call stack in the dumps.
    #[arg(long)]
    pub stacks: bool,

    /// Append dumps to FILE instead of writing them to stderr.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub read: crate::read_args::ReadArgs,

    /// Ranks on other hosts are read by collectors there, started through
    /// the starter (its MPIR tool-daemon launch) or --launcher.
    #[command(flatten)]
    pub collecting: crate::dump::CollectArgs,

    /// The job's command: the starter (mpirun, mpiexec) and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(args: &LaunchArgs) -> ExitCode {
    let dump_after = match args.dump_after {
        Some(s) if !(s.is_finite() && s >= 0.0) => {
            return crate::output::fail(crate::error::Error::Usage(format!(
                "--dump-after {s}: give a number of seconds, 0 or more"
            )))
        }
        other => other.map(Duration::from_secs_f64),
    };
    let collect = match args.collecting.options() {
        Ok(c) => c,
        Err(e) => return crate::output::fail(e),
    };
    let read = match args.read.options() {
        Ok(read) => read,
        Err(e) => return crate::output::fail(e),
    };
    let options = LaunchOptions {
        dump_after,
        dump_on_signal: args.dump_on_signal,
        dump_on_abort: args.dump_on_abort,
        json: args.json,
        watch: args.watch.map(|s| Duration::from_secs_f64(s.max(0.1))),
        keep_going: args.keep_going,
        output: args.output.clone(),
        collect,
        dump: Options {
            stacks: args.stacks,
            ..read
        },
    };
    match launch::launch(&args.command, &options, &JobAnalyst) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => crate::output::fail(e),
    }
}

/// What launch mode prints of a dump (the job view) and what its watch
/// looks for, from the analyses.
struct JobAnalyst;

impl launch::Analyst for JobAnalyst {
    fn view(&self, job: &JobDump) -> String {
        mqs_analysis::view::job_view(job, &mqs_analysis::view::ViewOptions::default())
    }

    fn persistent_finding(&self, before: &JobDump, now: &JobDump) -> Option<(String, i32)> {
        mqs_analysis::confirm::persistent_finding(before, now).map(|f| {
            let code = f.exit_code();
            (f.words, code)
        })
    }
}

/// The tracer process launch mode runs (not for users).
#[derive(Debug, Args)]
pub struct TracerArgs {
    #[arg(long)]
    pub control_fd: i32,
    #[arg(long)]
    pub watch_ranks: bool,
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

pub fn run_tracer(args: &TracerArgs) -> ExitCode {
    // SAFETY: the front end passes the socket it made for us, open and ours.
    let code = unsafe { launch::run_tracer(args.control_fd, &args.command, args.watch_ranks) };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
