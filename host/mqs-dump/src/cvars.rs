//! `mqs-dump cvars`: MPI_T control variables of an MPI library or of a live
//! job; validating a setting; checking a library against the standard.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::error::{Error, Result};
use clap::Args;
use mqs_core::exit_code;
use mqs_cvars::helper::Helper;
use mqs_cvars::processes::{self as job, JobOptions};
use mqs_cvars::protocol::SetVerdict;
use mqs_cvars::{live, render, Filter, Verbosity};

/// The control variables (MPI_T cvars) of an MPI library: every variable
/// with its value, datatype, verbosity, scope and binding; or the values a
/// live job runs with (--pid); or whether a setting is valid (--set); or
/// how well the library follows the standard's MPI_T rules (--check).
///
/// The library is loaded in a helper process, never in mqs-dump: a library
/// that crashes or hangs is reported, with exit code 22.
#[derive(Debug, Args)]
#[command(after_help = CVARS_EXIT_CODES)]
pub struct CvarsArgs {
    /// The MPI installation prefix whose lib/libmpi.so to load.
    #[arg(long, value_name = "PREFIX", conflicts_with = "lib")]
    pub mpi: Option<PathBuf>,

    /// The MPI library to load (default: the one --pid runs, else the one
    /// of the mpicc on PATH).
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,

    /// Show the values this running process holds (a rank, or a starter
    /// such as mpirun for every local rank; ranks that agree are merged),
    /// read from its memory without stopping it, next to the library's
    /// defaults.
    #[arg(long, value_name = "PID", conflicts_with_all = ["set", "check"])]
    pub pid: Option<i32>,

    /// Check NAME=VALUE with MPI_T_cvar_write in the helper (never in a
    /// job) and say how to apply it; repeatable.
    #[arg(long, value_name = "NAME=VALUE", conflicts_with = "check")]
    pub set: Vec<String>,

    /// Report where the library's MPI_T deviates from the standard, one
    /// line per finding; exit 0 if it conforms.
    #[arg(long)]
    pub check: bool,

    /// Only variables whose name (or description) matches; `*` and `?`
    /// match any characters of the name, case is ignored.
    #[arg(long, value_name = "PATTERN")]
    pub filter: Option<String>,

    /// Only variables up to this verbosity: 1..9 or user/basic ..
    /// mpidev/all (default: all).
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub verbosity: Option<u8>,

    /// With --pid: only variables whose value differs from the default.
    #[arg(long, requires = "pid")]
    pub changed: bool,

    /// Keep the MPI's own environment variables (OMPI_MCA_*, MPIR_CVAR_*,
    /// MPICH_*) for the helper: values are then what a job started from
    /// here would get, not the library's defaults.
    #[arg(long)]
    pub keep_env: bool,

    /// Seconds the helper may take before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Also look for separate debug files here (repeatable), for --pid.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
}

pub const CVARS_EXIT_CODES: &str = "Exit codes: 0 ok, 1 other error, 2 usage, \
3 no such process, 4 permission denied, 5 not an MPI process, \
6 the MPI lacks the debug information to read values, 11 the process exited while it was read, \
20 not an MPI library mqs can load, \
21 the MPI library has no usable MPI_T, 22 the helper that loads the library crashed or hung, \
23 --set: a value was rejected, 24 --check: the library deviates from the standard";

fn parse_level(text: &str) -> std::result::Result<u8, String> {
    Verbosity::parse_level(text)
        .ok_or_else(|| format!("'{text}' is no verbosity: use 1..9 or user/basic .. mpidev/all"))
}

pub fn run(args: &CvarsArgs) -> ExitCode {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) if matches!(e.acquire(), Some(mqs_acquire::Error::NotMpi { .. })) => {
            let line = format!("{e}; give the pid of an MPI rank, or of the job's starter");
            eprintln!("mqs-dump: error: {}", line.replace('\n', " "));
            ExitCode::from(e.exit_code() as u8)
        }
        Err(e) => crate::output::fail(e),
    }
}

fn run_inner(args: &CvarsArgs) -> Result<ExitCode> {
    let mut helper = Helper::current_exe()?;
    helper.timeout = Duration::from_secs(args.timeout.max(1));
    helper.keep_environment = args.keep_env;
    let filter = Filter {
        pattern: args.filter.clone(),
        max_level: args.verbosity,
    };
    if let Some(pid) = args.pid {
        let options = JobOptions {
            library: explicit_library(args)?,
            debug_dirs: args.debug_dir.clone(),
            filter,
            only_changed: args.changed,
        };
        let report = job::read(pid, &helper, &options)?;
        if args.json {
            crate::output::emit(&render::json(&report));
        } else {
            crate::output::emit(&render::live_text(&report));
        }
        return Ok(match report.failures.first() {
            Some(f) => {
                eprintln!(
                    "mqs-dump: error: {} of the job's processes could not be read (first: pid {}: {})",
                    report.failures.len(),
                    f.pid,
                    f.message
                );
                ExitCode::from(f.exit_code as u8)
            }
            None => ExitCode::SUCCESS,
        });
    }
    let library = match explicit_library(args)? {
        Some(lib) => lib,
        None => default_library()?,
    };
    if args.check {
        let report = helper.check(&library)?;
        if args.json {
            crate::output::emit(&render::json(&report));
        } else {
            crate::output::emit(&render::check_text(&report));
        }
        let family = report.family.map(|f| f.name()).unwrap_or("MPI");
        return Ok(if report.conformant() {
            eprintln!(
                "mqs-dump: {}: the {family} library's MPI_T follows all {} rules checked",
                library.display(),
                report.rules.len()
            );
            ExitCode::SUCCESS
        } else {
            eprintln!(
                "mqs-dump: {}: {} deviations from the standard's MPI_T rules",
                library.display(),
                report.findings.len()
            );
            ExitCode::from(exit_code::NOT_CONFORMANT as u8)
        });
    }
    if !args.set.is_empty() {
        let assignments = args
            .set
            .iter()
            .map(|a| {
                a.split_once('=')
                    .map(|(n, v)| (n.trim().to_owned(), v.to_owned()))
                    .filter(|(n, _)| !n.is_empty())
                    .ok_or_else(|| Error::Usage(format!("--set {a}: NAME=VALUE expected")))
            })
            .collect::<Result<Vec<_>>>()?;
        let results = helper.set(&library, &assignments)?;
        if args.json {
            crate::output::emit(&render::json(&results));
        } else {
            crate::output::emit(&render::settings_text(&results));
        }
        let rejected = results.iter().any(|r| r.verdict == SetVerdict::Rejected);
        return Ok(if rejected {
            ExitCode::from(exit_code::CVAR_REJECTED as u8)
        } else {
            ExitCode::SUCCESS
        });
    }
    let listing = render::filtered(&helper.list(&library)?, &filter);
    if args.json {
        crate::output::emit(&render::json(&listing));
    } else {
        crate::output::emit(&render::listing_text(&listing));
    }
    Ok(ExitCode::SUCCESS)
}

/// The library --lib or --mpi names, if either was given.
fn explicit_library(args: &CvarsArgs) -> Result<Option<PathBuf>> {
    if let Some(lib) = &args.lib {
        if !lib.exists() {
            return Err(mqs_cvars::Error::NotMpiLibrary {
                path: lib.clone(),
                detail: "no such file".into(),
            }
            .into());
        }
        return Ok(Some(lib.clone()));
    }
    match &args.mpi {
        Some(prefix) => library_of_prefix(prefix).map(Some),
        None => Ok(None),
    }
}

fn library_of_prefix(prefix: &Path) -> Result<PathBuf> {
    live::library_in_prefix(prefix).ok_or_else(|| {
        mqs_cvars::Error::NotMpiLibrary {
            path: prefix.to_path_buf(),
            detail: "no libmpi.so under its lib directory: give the MPI's installation prefix, \
                     or the library with --lib"
                .into(),
        }
        .into()
    })
}

/// The MPI of the mpicc on PATH.
fn default_library() -> Result<PathBuf> {
    let prefix = live::prefix_of_mpicc().ok_or_else(|| {
        Error::Usage("which MPI? no mpicc on PATH: pass --mpi PREFIX or --lib PATH".into())
    })?;
    library_of_prefix(&prefix)
}
