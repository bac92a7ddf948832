//! The default command: dump the message queues of a process or a job.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mqs_host::inspect::{self, Options};
use mqs_host::render;

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The MPI process to inspect: a rank, or the job's starter (mpirun,
    /// mpiexec) to dump every local rank of the job, and the processes it
    /// spawned, all stopped at the same time.
    #[arg(long, value_name = "PID", required = true)]
    pub pid: Option<i32>,

    /// Use this message-queue DLL instead of the one the process names.
    #[arg(long, value_name = "PATH")]
    pub dll: Option<PathBuf>,

    /// Load the DLL the process names even if it is not owned by root or
    /// you, or is writable by others.
    #[arg(long)]
    pub trust_dll: bool,

    /// Read the process while it runs instead of stopping it (the snapshot
    /// may then be inconsistent).
    #[arg(long)]
    pub no_stop: bool,

    /// Print JSON (schema in docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,

    /// Also look for separate debug files here (repeatable); /usr/lib/debug
    /// is always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    /// Show the DLL's debugging output and the dump's counters.
    #[arg(long, short)]
    pub verbose: bool,
}

pub fn run(args: &DumpArgs) -> ExitCode {
    let Some(pid) = args.pid else {
        return crate::fail(&mqs_host::Error::Usage("give --pid PID".into()));
    };
    mqs_host::dll::set_verbose(args.verbose);
    let options = Options {
        dll: args.dll.clone(),
        trust_dll: args.trust_dll,
        no_stop: args.no_stop,
        debug_dirs: args.debug_dir.clone(),
    };
    let bar = crate::progress_bar("dumping ranks {pos}/{len} {wide_bar}");
    let mut progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let result = inspect::dump(pid, &options, &mut progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let job = match result {
        Ok(job) => job,
        Err(e) => return crate::fail(&e),
    };
    if args.verbose {
        for p in &job.processes {
            let s = &p.stats;
            eprintln!(
                "mqs-dump: pid {}: {} fetches, {} bytes, {} syscalls, {:.1} ms",
                p.pid, s.fetches, s.fetched_bytes, s.syscalls, s.elapsed_ms
            );
        }
    }
    if args.json {
        println!("{}", render::json(&job));
    } else {
        print!("{}", render::text(&job));
    }
    // Output was printed; a job with ranks that failed still says so.
    match job.failures.first() {
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
    }
}
