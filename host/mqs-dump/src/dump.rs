//! The default command: dump the message queues of a process or a job.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::error::Error;
use clap::{ArgGroup, Args, ValueEnum};
use mqs_abi::OpClass;
use mqs_acquire::collect::{self, start::Template, CollectOptions};
use mqs_acquire::inspect::{self, Options};
use mqs_analysis::view::{self, ViewOptions};
use mqs_analysis::{confirm, render, Analysis, Job, RankSet};
use mqs_core::exit_code;
use mqs_core::model::JobDump;
use mqs_core::process::CoreOptions;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["pid", "core", "snapshot", "slurm"])))]
pub struct DumpArgs {
    /// The MPI process to inspect: a rank, or the job's starter (mpirun,
    /// mpiexec, an MPI2DD directory) to dump every local rank of the job,
    /// and the processes it spawned, all stopped at the same time. Repeat
    /// it for several processes or jobs (ranks of different jobs, two
    /// mpiruns joined by MPI_Comm_connect, hand-picked ranks): all are
    /// stopped together and numbered one after the other, job by job.
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,

    /// A running Slurm job, JOBID or JOBID.STEP: its MPI processes on every
    /// node of the job (of the step), each found and read by a collector
    /// started there as a step of the job (srun --overlap; srun must be on
    /// PATH here, mqs-dump at the same path on the nodes). Ranks are
    /// numbered by their MPI_COMM_WORLD rank. Without a step: the MPI
    /// processes of all of the job's steps.
    #[arg(long, value_name = "JOBID[.STEP]", conflicts_with_all = ["pid", "save"])]
    pub slurm: Option<String>,

    /// Read a core file instead of a live process (from gdb's gcore or the
    /// kernel). Repeat it, or give a directory of core files, for the ranks
    /// of a job; they are numbered by their MPI rank.
    #[arg(long, value_name = "FILE", conflicts_with = "pid")]
    pub core: Vec<PathBuf>,

    /// With --core: the program, if it is no longer where the core says.
    #[arg(long, value_name = "PATH", requires = "core")]
    pub exe: Option<PathBuf>,

    /// With --core: a directory holding the process's files under their
    /// original paths (for cores from another machine).
    #[arg(long, value_name = "DIR", requires = "core")]
    pub sysroot: Option<PathBuf>,

    /// Replay a snapshot saved with --save, offline, with any DLL.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "core"])]
    pub snapshot: Option<PathBuf>,

    /// Also save what the dump read (memory, symbols, threads) into FILE,
    /// to replay later with --snapshot or attach to a bug report.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,

    #[command(flatten)]
    pub read: crate::read_args::ReadArgs,

    /// Read the process while it runs instead of stopping it (the snapshot
    /// may then be inconsistent).
    #[arg(long)]
    pub no_stop: bool,

    /// Print JSON (schema in docs/json.md) instead of text; the same as
    /// --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// Output: text (for a job of several processes the merged job view,
    /// else the full listing), json (every detail, docs/json.md) or dot
    /// (the wait-for graph for Graphviz: `| dot -Tsvg > graph.svg`).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,

    /// In the job view, also show empty communicators and queues and the
    /// stacks of every thread (MPI's progress threads too).
    #[arg(long)]
    pub all: bool,

    /// Show the full listing of every process, one after the other,
    /// instead of the merged job view.
    #[arg(long)]
    pub per_rank: bool,

    /// In the text output, show only these ranks (global ranks, like
    /// 0-3,7); JSON, DOT and --deadlock always cover the whole job.
    #[arg(long, value_name = "LIST", value_parser = parse_ranks)]
    pub rank: Option<RankSet>,

    /// In the job view, show only communicators of this name
    /// (MPI_COMM_WORLD, ring...).
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,

    /// In the job view, show only this queue.
    #[arg(long, value_enum, value_name = "QUEUE")]
    pub queue: Option<QueueArg>,

    /// Print only who waits for whom, from what each rank is blocked in:
    /// deadlock cycles, wait chains, stopped ranks and mismatched
    /// collectives (takes the stacks). A deadlock seen in a live job is
    /// looked at again a second later and claimed only if it is still
    /// there. Exit 12 if a deadlock was found, 17 if it cannot tell, 0 if
    /// there is none.
    #[arg(long)]
    pub deadlock: bool,

    /// Take a second snapshot SECS seconds after the first and report only
    /// what is in both (the same operations, the same place in MPI).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub confirm: Option<f64>,

    /// Also show each thread's call stack, read while the process is
    /// stopped (function, and file:line where debug info has it); in the
    /// job view, the stacks of all ranks merged into one call tree.
    #[arg(long)]
    pub stacks: bool,
    #[command(flatten)]
    pub collecting: CollectArgs,

    /// Show the DLL's debugging output and the dump's counters.
    #[arg(long, short)]
    pub verbose: bool,
}

/// How ranks on other hosts are read: by collectors started there (the
/// options `mqs-dump --pid` and `mqs-dump launch` share).
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Read every rank through a collector started on its host, this
    /// one's too (ranks on other hosts always are), e.g. to compare with a
    /// direct attach. With --pid: of a starter.
    #[arg(long)]
    pub collect: bool,

    /// The collector program as the job's hosts see it (default: this
    /// mqs-dump, which must then be at the same path there).
    #[arg(long, value_name = "PATH")]
    pub collector: Option<String>,

    /// Start collectors with this command instead of through the job's
    /// starter, the collector's command appended: 'ssh {host}' runs once per
    /// host, 'srun --nodelist={hosts} --ntasks-per-node=1' once for all
    /// hosts (comma separated). Words are split at blanks, without quoting.
    #[arg(long, value_name = "TEMPLATE")]
    pub launcher: Option<String>,

    /// Seconds collectors get to call back, and each later step.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub collector_timeout: f64,

    /// The address collectors call back to (default: every address of this
    /// machine, loopback last).
    #[arg(long, value_name = "ADDR")]
    pub callback: Option<IpAddr>,

    /// Collectors form a tree in which each talks to at most K others
    /// below it, merging their results on the way up; jobs on at most K
    /// hosts are read flat. 0: every collector talks to mqs-dump itself.
    #[arg(long, value_name = "K", default_value_t = mqs_acquire::collect::DEFAULT_FANOUT)]
    pub fanout: usize,
}

impl CollectArgs {
    /// Whether any option that only collectors use was given.
    fn given(&self) -> bool {
        self.collect || self.collector.is_some() || self.launcher.is_some()
    }

    pub fn options(&self) -> Result<CollectOptions, Error> {
        let secs = self.collector_timeout;
        if !(secs.is_finite() && secs > 0.0 && secs <= 86400.0) {
            return Err(Error::Usage(format!(
                "--collector-timeout {secs}: give a number of seconds above 0"
            )));
        }
        Ok(CollectOptions {
            all_hosts: self.collect,
            collector: self.collector.clone(),
            launcher: self.launcher.as_deref().map(Template::parse).transpose()?,
            timeout: Duration::from_secs_f64(secs),
            callback: self.callback,
            fanout: (self.fanout > 0).then_some(self.fanout),
            compact: false,
            per_rank_detail: true,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Dot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueArg {
    Sends,
    Receives,
    Unexpected,
}

impl From<QueueArg> for OpClass {
    fn from(q: QueueArg) -> Self {
        match q {
            QueueArg::Sends => OpClass::PendingSends,
            QueueArg::Receives => OpClass::PendingReceives,
            QueueArg::Unexpected => OpClass::UnexpectedMessages,
        }
    }
}

fn parse_ranks(text: &str) -> Result<RankSet, String> {
    RankSet::parse(text)
}

pub fn parse_secs(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
        .ok_or_else(|| format!("'{text}' is not a number of seconds (0 to 86400)"))
}

/// One dump of the source `args` names, with a progress bar on a terminal.
pub fn dump_once(args: &DumpArgs, options: &Options) -> Result<JobDump, Error> {
    let bar = crate::output::progress_bar("dumping ranks {pos}/{len} {wide_bar}");
    let mut progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let result = collect_options(args).and_then(|collect| {
        if let Some(spec) = &args.slurm {
            let spec = mqs_acquire::slurm::StepSpec::parse(spec)?;
            Ok(collect::dump_slurm(&spec, options, &collect)?)
        } else if let [pid] = args.pid[..] {
            Ok(collect::dump(pid, options, &collect, &mut progress)?)
        } else if !args.pid.is_empty() {
            Ok(collect::dump_pids(
                &args.pid,
                options,
                &collect,
                &mut progress,
            )?)
        } else {
            other_sources(args, options)
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// A dump of what is not a live process: a snapshot or core files.
fn other_sources(args: &DumpArgs, options: &Options) -> Result<JobDump, Error> {
    if let Some(snapshot) = &args.snapshot {
        Ok(inspect::dump_snapshot(snapshot, options)?)
    } else {
        let core = CoreOptions {
            executable: args.exe.clone(),
            sysroot: args.sysroot.clone(),
        };
        let cores = core_files(&args.core)?;
        Ok(inspect::dump_cores(&cores, &core, options)?)
    }
}

impl DumpArgs {
    /// What is printed: `--json` is `--format json`; text by default.
    fn output_format(&self) -> Format {
        match (self.json, self.format) {
            (true, _) => Format::Json,
            (false, Some(f)) => f,
            (false, None) => Format::Text,
        }
    }
}

pub fn run(args: &DumpArgs) -> ExitCode {
    mqs_core::dll::set_verbose(args.verbose);
    let format = args.output_format();
    let options = match args.read.options() {
        Ok(read) => Options {
            no_stop: args.no_stop,
            save: args.save.clone(),
            // Collectives and blocking calls are found from the stacks.
            stacks: args.stacks || args.deadlock || format == Format::Dot,
            ..read
        },
        Err(e) => return crate::output::fail(e),
    };
    let started = Instant::now();
    let (mut job, confirmed) = match dump_confirmed(args, &options) {
        Ok(dumped) => dumped,
        Err(e) => return crate::output::fail(e),
    };
    let elapsed = started.elapsed();
    // The per-rank listing needs each rank's own dump; JSON makes each as
    // it writes it (`JobDump::each_rank`).
    let per_rank = format == Format::Text && (job.rank_count() <= 1 || args.per_rank);
    if per_rank && !args.deadlock {
        job.expand();
    }
    if args.verbose {
        verbose_counters(&job);
    }
    let failed = || match job.failures.first() {
        Some(failure) => {
            eprintln!(
                "mqs-dump: error: {} of the job's ranks could not be dumped (first: rank {}: {})",
                job.failures.len(),
                failure.rank,
                failure.message
            );
            ExitCode::from(failure.exit_code as u8)
        }
        None => ExitCode::SUCCESS,
    };
    if args.deadlock {
        let analysed = Job::new(&job);
        let analysis = Analysis::new(&analysed);
        if format == Format::Dot {
            crate::output::emit(&view::dot::dot(&analysis));
        } else if format == Format::Json {
            return crate::output::fail(Error::Usage(
                "--deadlock prints words or DOT, not JSON".into(),
            ));
        } else {
            let mut words = analysis.words();
            // The second look goes last but one: the verdict ends the
            // words.
            let verdict = words.trim_end().rfind('\n').map_or(0, |at| at + 1);
            match confirmed {
                Some(true) => words.insert_str(
                    verdict,
                    &format!(
                        "confirmed: the same cycle {AUTO_CONFIRM_SECS:.1} s later (--confirm \
                         SECS waits longer)\n"
                    ),
                ),
                Some(false) => words.insert_str(
                    verdict,
                    &format!(
                        "not confirmed: a cycle seen at one moment was gone \
                         {AUTO_CONFIRM_SECS:.1} s later (operations caught in passing: the job \
                         moves); the words above are what stayed in both\n"
                    ),
                ),
                None => {}
            }
            crate::output::emit(&words);
        }
        if analysis.has_deadlock() {
            return ExitCode::from(exit_code::DEADLOCK as u8);
        }
        // Ranks not dumped say why with their own code; ranks dumped but
        // not judged, with "cannot tell".
        if analysis.cannot_tell() && job.failures.is_empty() {
            return ExitCode::from(exit_code::CANNOT_TELL as u8);
        }
        return failed();
    }
    match format {
        Format::Json => crate::output::emit_with(|out| render::write_json(&job.each_rank(), out)),
        Format::Dot => {
            let analysed = Job::new(&job);
            crate::output::emit(&view::dot::dot(&Analysis::new(&analysed)));
        }
        Format::Text if job.rank_count() > 1 && !args.per_rank => {
            let view_options = ViewOptions {
                all: args.all,
                ranks: args.rank.clone(),
                comm: args.comm.clone(),
                queue: args.queue.map(OpClass::from),
                elapsed: Some(elapsed),
            };
            crate::output::emit(&view::job_view(&job, &view_options));
        }
        Format::Text => {
            if let Some(ranks) = &args.rank {
                job.processes
                    .retain(|p| ranks.contains(i64::from(p.global_rank)));
            }
            crate::output::emit_with(|out| render::write_text(&job, out));
        }
    }
    // Output was printed; a job with ranks that failed still says so.
    let code = failed();
    // mqs-dump ends next, and its memory goes back at once; freeing a
    // model of 200,000 operations piece by piece took tens of ms.
    std::mem::forget(job);
    code
}

/// The dump's counters, per process, on stderr (`--verbose`).
fn verbose_counters(job: &mqs_core::model::JobDump) {
    for p in &job.processes {
        let s = &p.stats;
        eprintln!(
            "mqs-dump: pid {}: {} fetches, {} bytes, {} syscalls, {:.1} ms",
            p.pid, s.fetches, s.fetched_bytes, s.syscalls, s.elapsed_ms
        );
        let kinds: Vec<String> = s
            .callbacks
            .kinds()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        eprintln!(
            "mqs-dump: pid {}: {} callbacks since setup: {}; {} round trips where a debugger \
             answers through another process (lookups, fetches in {}-byte pieces)",
            p.pid,
            s.callbacks.total(),
            kinds.join(", "),
            s.callbacks.round_trips(),
            mqs_core::model::FETCH_PIECE
        );
    }
}

/// The dump, and for `--confirm` or a deadlock seen in a live job, what a
/// second snapshot kept of it; whether that confirmed the deadlock (None:
/// no second look was needed).
fn dump_confirmed(
    args: &DumpArgs,
    options: &Options,
) -> Result<(mqs_core::model::JobDump, Option<bool>), Error> {
    let job = dump_once(args, options)?;
    if let Some(secs) = args.confirm {
        std::thread::sleep(Duration::from_secs_f64(secs));
        let again = dump_once(args, options)?;
        return Ok((confirm::persistent(&job, &again), None));
    }
    if !(args.deadlock && live(args) && claims_deadlock(&job)) {
        return Ok((job, None));
    }
    // One moment of a running job can show a cycle that is only messages
    // in flight (one a progress engine holds in hand, say): a deadlock is
    // claimed only if it is still there a moment later.
    std::thread::sleep(Duration::from_secs_f64(AUTO_CONFIRM_SECS));
    let again = Options {
        save: None,
        ..options.clone()
    };
    let kept = confirm::persistent(&job, &dump_once(args, &again)?);
    let confirmed = claims_deadlock(&kept);
    Ok((kept, Some(confirmed)))
}

/// How long `--deadlock` waits before it looks again at a live job in
/// which it saw a deadlock.
const AUTO_CONFIRM_SECS: f64 = 1.0;

/// Whether the dump reads running processes (not cores or a snapshot).
fn live(args: &DumpArgs) -> bool {
    (!args.pid.is_empty() || args.slurm.is_some())
        && args.core.is_empty()
        && args.snapshot.is_none()
}

/// Whether the analysis of `job` claims a deadlock.
fn claims_deadlock(job: &mqs_core::model::JobDump) -> bool {
    let analysed = Job::new(job);
    Analysis::new(&analysed).has_deadlock()
}

fn collect_options(args: &DumpArgs) -> Result<CollectOptions, Error> {
    let c = &args.collecting;
    if args.slurm.is_some() && c.launcher.is_some() {
        return Err(Error::Usage(
            "--slurm starts its collectors as a step of the job itself: drop --launcher".into(),
        ));
    }
    if c.given() && args.pid.is_empty() && args.slurm.is_none() {
        return Err(Error::Usage(
            "--collect, --launcher and --collector read a live job: give --pid of its starter"
                .into(),
        ));
    }
    if args.save.is_some() && (c.collect || c.launcher.is_some()) {
        return Err(Error::Usage(
            "--save keeps the memory read, which collectors never send: drop --collect and \
             --launcher to save a snapshot of the ranks on this host"
                .into(),
        ));
    }
    let mut options = c.options()?;
    // The job view, --deadlock and DOT read ranks in equal states as one
    // dump each run, and JSON writes each rank's dump from its run as it
    // goes (`JobDump::each_rank`); the per-rank listing, --verbose's
    // counters and --confirm's second look expand.
    let json = args.output_format() == Format::Json;
    options.compact = !args.per_rank && !args.verbose && args.confirm.is_none();
    // The view and DOT alone compare ranks on what they read; JSON writes
    // every rank's addresses, and --deadlock compares two snapshots of a
    // live job by theirs.
    options.per_rank_detail = !options.compact || args.deadlock || json;
    Ok(options)
}

/// The core files named: files as given, directories by their `core*`
/// entries, in name order.
fn core_files(given: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut cores = Vec::new();
    for path in given {
        if !path.is_dir() {
            cores.push(path.clone());
            continue;
        }
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("core"))
            .map(|e| e.path())
            .collect();
        if found.is_empty() {
            return Err(Error::BadInput {
                path: path.clone(),
                detail: "the directory holds no core files (core, core.PID...)".into(),
            });
        }
        found.sort();
        cores.extend(found);
    }
    Ok(cores)
}
