//! `mqs-dump watch`: snapshot a job every few seconds (each snapshot stops
//! the job only while it is read) and report as soon as a deadlock cycle,
//! or a wait chain ending in a rank outside MPI, is in two snapshots in a
//! row; then print the job view with stacks once and exit 12.
//!
//! [`watch`] is the loop itself. `mqs-dump launch --watch SECS` takes its
//! snapshots through launch mode instead (which traces the starter) and
//! decides with the same `analysis::confirm::persistent_finding`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use mqs_acquire::inspect::{self, Options};
use mqs_analysis::confirm;
use mqs_analysis::view::{self, ViewOptions};
use mqs_core::exit_code;
use mqs_core::model::JobDump;

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The job's starter (mpirun, mpiexec), or one rank.
    #[arg(long, value_name = "PID")]
    pub pid: i32,

    /// Seconds between snapshots.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = crate::dump::parse_secs)]
    pub every: f64,

    /// Do not exit at the first finding: report each new one and go on
    /// until the job ends.
    #[arg(long)]
    pub keep_going: bool,

    #[command(flatten)]
    pub read: crate::read_args::ReadArgs,
}

pub fn run(args: &WatchArgs) -> ExitCode {
    let options = match args.read.options() {
        Ok(read) => Options {
            stacks: true,
            ..read
        },
        Err(e) => return crate::output::fail(e),
    };
    watch(
        args.pid,
        &options,
        // A snapshot needs some time anyway; never spin.
        Duration::from_secs_f64(args.every.max(0.1)),
        args.keep_going,
    )
}

/// Whether an error says that the job is over.
fn ended(e: &mqs_acquire::Error, seen_before: bool) -> bool {
    matches!(
        e.core(),
        Some(mqs_core::Error::NoSuchProcess { .. } | mqs_core::Error::ProcessGone { .. })
    ) || matches!(e, mqs_acquire::Error::RankExited { .. })
        || (seen_before && matches!(e, mqs_acquire::Error::NotMpi { .. }))
}

/// Watches the job of `pid` until a finding persists (exit 12) or the job
/// ends (exit 0); with `keep_going`, until the job ends, reporting each new
/// finding (exit 12 if there was one).
pub fn watch(pid: i32, options: &Options, every: Duration, keep_going: bool) -> ExitCode {
    let mut previous: Option<JobDump> = None;
    let mut reported: Option<(String, i32)> = None;
    let mut ended_with: Option<i32> = None;
    let mut snapshots = 0u64;
    loop {
        let started = Instant::now();
        let job = match inspect::dump(pid, options, &mut |_, _| {}) {
            Ok(job) if job.processes.is_empty() && snapshots > 0 => {
                eprintln!("mqs-dump: watch: the job ended");
                break;
            }
            Ok(job) => job,
            Err(e) if ended(&e, snapshots > 0) => {
                eprintln!("mqs-dump: watch: the job ended after {snapshots} snapshots");
                break;
            }
            Err(e) => return crate::output::fail(e),
        };
        snapshots += 1;
        if let Some(previous) = &previous {
            if let Some(finding) = confirm::persistent_finding(previous, &job) {
                let (words, code) = (finding.words.clone(), finding.exit_code());
                if reported.as_ref().map(|r| &r.0) != Some(&words) {
                    crate::output::emit(&format!(
                        "mqs-dump watch: snapshot {snapshots} ({:.1} s apart) agrees with the one before:",
                        every.as_secs_f64()
                    ));
                    crate::output::emit(&words);
                    let view_options = ViewOptions {
                        elapsed: Some(started.elapsed()),
                        ..ViewOptions::default()
                    };
                    crate::output::emit(&view::job_view(&job, &view_options));
                    // A deadlock seen once is what the watch ends with.
                    if code == exit_code::DEADLOCK || ended_with.is_none() {
                        ended_with = Some(code);
                    }
                    reported = Some((words, code));
                    if !keep_going {
                        return ExitCode::from(code as u8);
                    }
                }
            }
        }
        previous = Some(job);
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
    match ended_with {
        Some(code) => ExitCode::from(code as u8),
        None => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::ended;
    use mqs_acquire::Error;

    /// A rank that exited between the starter's table and its attach is
    /// the job ending (seen when the watched chain completes mid-snapshot),
    /// and so is a process that is gone; a rank that cannot be read for
    /// another reason is not.
    #[test]
    fn a_rank_that_exited_ends_the_watch() {
        assert!(ended(&Error::RankExited { pid: 7, rank: 0 }, false));
        assert!(ended(
            &Error::Core(mqs_core::Error::NoSuchProcess { pid: 7 }),
            false
        ));
        let other = Error::Unreachable {
            pid: 7,
            detail: "permission denied".into(),
        };
        assert!(!ended(&other, true));
    }
}
