//! The default command: dump the message queues of a process or a job.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args};
use mqs_host::inspect::{self, Options};
use mqs_host::process::CoreOptions;
use mqs_host::{render, Error};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["pid", "core", "snapshot"])))]
pub struct DumpArgs {
    /// The MPI process to inspect: a rank, or the job's starter (mpirun,
    /// mpiexec) to dump every local rank of the job, and the processes it
    /// spawned, all stopped at the same time.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,

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

    /// Also show each thread's call stack, read while the process is
    /// stopped (function, and file:line where debug info has it); in the
    /// job view, the stacks of all ranks merged into one call tree.
    #[arg(long)]
    pub stacks: bool,

    /// Show the DLL's debugging output and the dump's counters.
    #[arg(long, short)]
    pub verbose: bool,
}

pub fn run(args: &DumpArgs) -> ExitCode {
    mqs_host::dll::set_verbose(args.verbose);
    let options = Options {
        dll: args.dll.clone(),
        trust_dll: args.trust_dll,
        no_stop: args.no_stop,
        debug_dirs: args.debug_dir.clone(),
        save: args.save.clone(),
        stacks: args.stacks,
    };
    let bar = crate::progress_bar("dumping ranks {pos}/{len} {wide_bar}");
    let mut progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let result = if let Some(pid) = args.pid {
        inspect::dump(pid, &options, &mut progress)
    } else if let Some(snapshot) = &args.snapshot {
        inspect::dump_snapshot(snapshot, &options)
    } else {
        let core = CoreOptions {
            executable: args.exe.clone(),
            sysroot: args.sysroot.clone(),
        };
        core_files(&args.core).and_then(|cores| inspect::dump_cores(&cores, &core, &options))
    };
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
