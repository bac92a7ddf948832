//! mqs-dump: see inside hung MPI jobs.
//!
//! A thin binary over the mqs crates (`mqs-core`, `mqs-acquire`,
//! `mqs-analysis`, `mqs-cvars`): each command is a module here that parses
//! its options, calls the libraries and prints. With no
//! command, `mqs-dump --pid PID` dumps message queues (the `dump` module).

mod collector;
mod cvars;
mod dump;
mod error;
mod launch;
mod output;
mod read_args;
mod typepack;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mqs_core::exit_code;

/// Show the pending sends, posted receives and unexpected messages of MPI
/// processes, through the message-queue DLL their MPI names (or one you
/// give).
#[derive(Debug, Parser)]
#[command(
    name = "mqs-dump",
    version,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    dump: dump::DumpArgs,

    /// Seconds one call into the message-queue DLL may take: past that the
    /// DLL is taken for stuck, and mqs-dump says so and ends, which lets the
    /// job's processes go (exit 15). 0: no limit.
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        default_value_t = 120.0,
        value_parser = dump::parse_secs
    )]
    dll_timeout: f64,
}

#[derive(Debug, Subcommand)]
enum Command {
    Launch(launch::LaunchArgs),
    /// A collector on a host of a job (internal: started there by the job's
    /// starter or by --launcher).
    #[command(name = mqs_acquire::collect::COLLECTOR_COMMAND, hide = true)]
    Collector(collector::CollectorArgs),
    /// The tracer process of `launch` (internal).
    #[command(name = mqs_acquire::launch::TRACER_COMMAND, hide = true)]
    TraceStarter(launch::TracerArgs),
    /// Snapshot a job every few seconds and report as soon as a deadlock
    /// (or a wait chain ending in a rank outside MPI) is in two snapshots
    /// in a row; then show the job view with stacks and exit 12. Exits 0
    /// when the job ends without one.
    Watch(watch::WatchArgs),
    /// MPI_T control variables: list a library's, read a job's, validate a
    /// setting, check the library against the standard.
    Cvars(cvars::CvarsArgs),
    /// Type packs for stripped MPI libraries: extract one from a library's
    /// DWARF, check one against a library.
    Typepack(typepack::TypepackArgs),
}

/// The exit codes, for every command's --help.
pub const EXIT_CODES: &str = "Exit codes: 0 ok, 1 other error, 2 usage, 3 no such process, \
4 permission denied, 5 not an MPI process, 6 MPI lacks the debug info the DLL needs, \
7 DLL missing, 8 DLL not loadable, 9 DLL incompatible, 10 DLL untrusted, \
11 process exited during the dump, 12 deadlock found (--deadlock, watch), \
13 unreadable core or snapshot file, 14 ranks on other hosts not reached (no collector \
called back), 15 the DLL is stuck (a call took longer than --dll-timeout), 16 a PMIx launcher \
(prterun) did not tell its job, 17 cannot tell (--deadlock, watch: some ranks' queues could not \
be read and no cycle was found among the others), 18 no such Slurm job or step (--slurm), 19 the \
Slurm job is not running (pending, suspended or ended), 25 no Slurm commands (srun, scontrol) on \
PATH; for `cvars`, see `mqs-dump cvars --help`";

fn main() -> ExitCode {
    // The subprocess `cvars` loads MPI libraries in: not a command.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(mqs_cvars::helper::HELPER_ARG))
    {
        return ExitCode::from(mqs_cvars::helper::serve() as u8);
    }
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
    // Commands that call into a DLL let a stuck one end them (and so let
    // the job go) rather than hold the job stopped.
    if matches!(
        cli.command,
        None | Some(Command::Launch(_) | Command::Watch(_) | Command::Collector(_))
    ) && cli.dll_timeout > 0.0
    {
        mqs_core::dll::watchdog::set_call_limit(Some(Duration::from_secs_f64(cli.dll_timeout)));
    }
    match cli.command {
        None => {
            mqs_core::process::install_signal_cleanup();
            dump::run(&cli.dump)
        }
        Some(Command::Launch(args)) => launch::run(&args),
        Some(Command::TraceStarter(args)) => launch::run_tracer(&args),
        Some(Command::Watch(args)) => {
            // Each snapshot stops the job: let it go if we are stopped.
            mqs_core::process::install_signal_cleanup();
            watch::run(&args)
        }
        Some(Command::Cvars(args)) => cvars::run(&args),
        Some(Command::Collector(args)) => {
            mqs_core::process::install_signal_cleanup();
            collector::run(&args)
        }
        Some(Command::Typepack(args)) => typepack::run(&args),
    }
}
