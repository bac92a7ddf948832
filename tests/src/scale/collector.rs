//! The harness's collector: stands for one synthetic host and serves its
//! ranks of the synthetic job through the real collector
//! ([`mqs_acquire::collect::serve`]): the call back, the token, the
//! barrier, the tree and the stream as ever, with nothing to stop or read.

use std::time::Duration;

use mqs_acquire::collect::{self, CollectorArgs, COLLECTOR_COMMAND};
use mqs_core::exit_code;

use super::{value, SyntheticJob};
use crate::{Error, Result};

/// Serves its host's ranks: `--spec FILE --as-host HOST`, then the
/// collector's command line as the front end gives it (this program,
/// [`COLLECTOR_COMMAND`] and its arguments). Its exit code.
pub(super) fn run(args: &[String]) -> i32 {
    let (spec, host, called) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("mqs-scale collector: {e}");
            return exit_code::COLLECT;
        }
    };
    let job = match SyntheticJob::load(&spec) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("mqs-scale collector of host '{host}': {e}");
            return exit_code::COLLECT;
        }
    };
    let held = job.hold.as_deref() == Some(host.as_str());
    collect::serve(&called, &host, &mut |members| {
        if held {
            let marker = SyntheticJob::held_marker(&spec);
            std::fs::write(&marker, std::process::id().to_string()).map_err(|e| {
                mqs_acquire::Error::Collect(format!("cannot write {}: {e}", marker.display()))
            })?;
            // Until it is killed, or its watchdog ends it.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Ok(members.iter().map(|m| job.process(m)).collect())
    })
}

/// The spec file, the host, and the collector's arguments.
fn parse(args: &[String]) -> Result<(std::path::PathBuf, String, CollectorArgs)> {
    let at = args
        .iter()
        .position(|a| a == COLLECTOR_COMMAND)
        .ok_or_else(|| Error::Scale(format!("no {COLLECTOR_COMMAND} command line")))?;
    let own = &args[..at];
    let spec = value(own, "--spec").ok_or_else(|| Error::Scale("--spec FILE is needed".into()))?;
    let host =
        value(own, "--as-host").ok_or_else(|| Error::Scale("--as-host HOST is needed".into()))?;
    let called = CollectorArgs::parse(&args[at + 1..]).map_err(|e| Error::Scale(e.to_string()))?;
    Ok((spec.into(), host.to_string(), called))
}
