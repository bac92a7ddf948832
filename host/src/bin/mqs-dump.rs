//! mqs-dump: show the message queues of a live MPI process.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mqs_host::inspect::{self, Options};
use mqs_host::{exit_code, render, Error};

/// Show the pending sends, posted receives and unexpected messages of a
/// live MPI process, through the message-queue DLL its MPI names (or one
/// you give).
#[derive(Debug, Parser)]
#[command(name = "mqs-dump", version, after_help = EXIT_CODES)]
struct Cli {
    /// The MPI process to inspect: a rank, or the job's starter (mpirun,
    /// mpiexec) to dump every local rank of the job, and the processes it
    /// spawned, all stopped at the same time.
    #[arg(long, value_name = "PID")]
    pid: i32,

    /// Use this message-queue DLL instead of the one the process names.
    #[arg(long, value_name = "PATH")]
    dll: Option<PathBuf>,

    /// Load the DLL the process names even if it is not owned by root or
    /// you, or is writable by others.
    #[arg(long)]
    trust_dll: bool,

    /// Read the process while it runs instead of stopping it (the snapshot
    /// may then be inconsistent).
    #[arg(long)]
    no_stop: bool,

    /// Print JSON (schema in docs/json.md) instead of text.
    #[arg(long)]
    json: bool,

    /// Also look for separate debug files here (repeatable); /usr/lib/debug
    /// is always searched.
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,

    /// Show the DLL's debugging output and the dump's counters.
    #[arg(long, short)]
    verbose: bool,
}

const EXIT_CODES: &str = "Exit codes: 0 ok, 1 other error, 2 usage, 3 no such process, \
4 permission denied, 5 not an MPI process, 6 MPI lacks the debug info the DLL needs, \
7 DLL missing, 8 DLL not loadable, 9 DLL incompatible, 10 DLL untrusted, \
11 process exited during the dump";

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit_code::USAGE as u8
            } else {
                0
            });
        }
    };
    mqs_host::target::install_signal_cleanup();
    mqs_host::dll::set_verbose(cli.verbose);
    let options = Options {
        dll: cli.dll.clone(),
        trust_dll: cli.trust_dll,
        no_stop: cli.no_stop,
        debug_dirs: cli.debug_dir.clone(),
    };
    let bar = progress_bar();
    let mut progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let result = inspect::dump(cli.pid, &options, &mut progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(job) => {
            if cli.verbose {
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
                        "mqs-dump: pid {}: {} callbacks since setup: {}",
                        p.pid,
                        s.callbacks.total(),
                        kinds.join(", ")
                    );
                }
            }
            if cli.json {
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
        Err(e) => {
            eprintln!("mqs-dump: error: {}", message(&e));
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// A progress bar for jobs, on terminals only.
fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("dumping ranks {pos}/{len} {wide_bar}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// The error as one line, with the fix where the error alone does not say it.
fn message(e: &Error) -> String {
    match e {
        Error::NoDebugInfo { detail } => format!(
            "{detail}; the MPI library lacks the debug information its message-queue DLL \
             needs: rebuild the MPI with -g (or install its debug-symbol package)"
        ),
        Error::NotMpi { .. } => format!("{e}; give the pid of an MPI rank, or pass --dll"),
        other => other.to_string(),
    }
    .replace('\n', " ")
}
