//! mqs-dump: see inside hung MPI jobs.
//!
//! A thin binary over the `mqs_host` library: each command is a module
//! here that parses its options, calls the library and prints. With no
//! command, `mqs-dump --pid PID` dumps message queues (the `dump` module).

mod collector;
mod cvars;
mod dump;
mod launch;
mod typepack;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mqs_host::{exit_code, Error};

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
    #[command(name = "__collector", hide = true)]
    Collector(collector::CollectorArgs),
    /// The tracer process of `launch` (internal).
    #[command(name = "__trace-starter", hide = true)]
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
(prterun) did not tell its job; for `cvars`, see \
`mqs-dump cvars --help`";

fn main() -> ExitCode {
    // The subprocess `cvars` loads MPI libraries in: not a command.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(mqs_host::cvars::helper::HELPER_ARG))
    {
        return ExitCode::from(mqs_host::cvars::helper::serve() as u8);
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
        mqs_host::dll::watchdog::set_call_limit(Some(Duration::from_secs_f64(cli.dll_timeout)));
    }
    match cli.command {
        None => {
            mqs_host::process::install_signal_cleanup();
            dump::run(&cli.dump)
        }
        Some(Command::Launch(args)) => launch::run(&args),
        Some(Command::TraceStarter(args)) => launch::run_tracer(&args),
        Some(Command::Watch(args)) => {
            // Each snapshot stops the job: let it go if we are stopped.
            mqs_host::process::install_signal_cleanup();
            watch::run(&args)
        }
        Some(Command::Cvars(args)) => cvars::run(&args),
        Some(Command::Collector(args)) => {
            mqs_host::process::install_signal_cleanup();
            collector::run(&args)
        }
        Some(Command::Typepack(args)) => typepack::run(&args),
    }
}

/// Reports `e` as one line on stderr and gives its exit code.
pub fn fail(e: &Error) -> ExitCode {
    eprintln!("mqs-dump: error: {}", message(e));
    ExitCode::from(e.exit_code() as u8)
}

/// The error as one line, with the fix where the error alone does not say it.
pub fn message(e: &Error) -> String {
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

/// Prints a document on stdout (a newline added if it lacks one); a reader
/// that went away (`| head`) is no error.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.is_empty() && !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Writes output produced piece by piece (a large dump's JSON or listing)
/// to stdout through one buffer, with the final newline [`emit`] gives.
pub fn emit_with(
    write: impl FnOnce(
        &mut std::io::BufWriter<LastByte<std::io::StdoutLock<'static>>>,
    ) -> std::io::Result<()>,
) {
    use std::io::Write;
    let stdout = LastByte {
        inner: std::io::stdout().lock(),
        last: None,
    };
    // The buffer comes first: serializers write a few bytes at a time.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    // As emit: a closed stdout (a pipe whose reader left) is not an error
    // worth reporting over the dump's own outcome.
    if write(&mut out).is_ok() && out.flush().is_ok() {
        let stdout = out.get_mut();
        if stdout.last.is_some_and(|b| b != b'\n') {
            let _ = stdout.inner.write_all(b"\n");
        }
    }
    let _ = out.flush();
}

/// Remembers the last byte written through it.
#[derive(Debug)]
pub struct LastByte<W: std::io::Write> {
    inner: W,
    last: Option<u8>,
}

impl<W: std::io::Write> std::io::Write for LastByte<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A progress bar on terminals only.
pub fn progress_bar(template: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}
