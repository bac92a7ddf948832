//! The collector: runs on a host of the job (started there by the job's
//! starter or by `--launcher`), calls the front end back, proves the token
//! it was given, dumps the ranks it is assigned with the usual pipeline,
//! and streams the dumps back. It never holds the job longer than the
//! front end's limits, and a watchdog ends it (the kernel then lets go of
//! every process it still traces) should anything hang.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::protocol::{self, ShareOptions, ToCollector, ToFront, MAX_FRAME, PROTOCOL};
use crate::dump::RankFailure;
use crate::error::exit_code;
use crate::inspect::{self, Options};
use crate::job::{Member, MpiEnvironment};
use crate::process::{LiveProcess, Mode, Target};
use crate::Error;

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between rounds of connection attempts.
const RETRY: Duration = Duration::from_millis(250);

/// What a collector is started with.
#[derive(Debug, Clone)]
pub struct CollectorArgs {
    /// Where the front end listens, tried in order.
    pub connect: Vec<SocketAddr>,
    pub token: String,
    /// The front end's step timeout.
    pub timeout: Duration,
}

/// Runs the collector; its exit code (0, or [`exit_code::COLLECT`] when it
/// could not do its part, with one line on stderr saying why).
pub fn run(args: &CollectorArgs) -> i32 {
    let host = super::local_host_name();
    let me = format!(
        "mqs-dump collector on host '{host}' (pid {})",
        std::process::id()
    );
    // No step waits longer than a few timeouts; this is the backstop.
    let limit = args.timeout * 10 + Duration::from_secs(60);
    {
        let me = me.clone();
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            eprintln!("{me}: gave up after {limit:?}");
            std::process::exit(exit_code::COLLECT);
        });
    }
    match collect(args, &host) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("{me}: {message}");
            exit_code::COLLECT
        }
    }
}

fn collect(args: &CollectorArgs, host: &str) -> Result<(), String> {
    let (mut stream, peer) = connect(&args.connect, args.timeout)?;
    let io = |what: &str, e: std::io::Error| format!("{what} the front end at {peer}: {e}");
    stream
        .set_write_timeout(Some(args.timeout))
        // The front end assigns ranks once every host has called back.
        .and_then(|()| stream.set_read_timeout(Some(args.timeout * 3)))
        .map_err(|e| io("cannot talk to", e))?;
    let hello = ToFront::Hello {
        protocol: PROTOCOL,
        token: args.token.clone(),
        host: host.to_string(),
        pid: std::process::id() as i32,
    };
    protocol::send(&mut stream, &hello).map_err(|e| io("cannot greet", e))?;
    let (members, options, go_timeout) = match protocol::receive(&mut stream, MAX_FRAME) {
        Ok(ToCollector::Assignment {
            members,
            options,
            go_timeout_ms,
        }) => (members, options, Duration::from_millis(go_timeout_ms)),
        Ok(ToCollector::Refused { reason }) => {
            return Err(format!("refused by the front end at {peer}: {reason}"))
        }
        Ok(ToCollector::Go) => return Err(format!("the front end at {peer} said go too early")),
        Err(e) => return Err(io("no answer from", e)),
    };
    if members.is_empty() {
        return Ok(());
    }
    let (members, mut failures) = check_identities(members);
    let mut barrier = || -> crate::Result<()> {
        let said = protocol::send(&mut stream, &ToFront::Stopped)
            .and_then(|()| stream.set_read_timeout(Some(go_timeout)))
            .and_then(|()| protocol::receive::<ToCollector>(&mut stream, MAX_FRAME));
        match said {
            Ok(ToCollector::Go) => Ok(()),
            Ok(other) => Err(Error::Collect(format!(
                "the front end sent {other:?} instead of go"
            ))),
            Err(e) => Err(Error::Collect(format!(
                "the front end did not say go within {go_timeout:?} ({e}); let go unread"
            ))),
        }
    };
    let job = inspect::dump_share(
        members.clone(),
        &options_of(options),
        &mut |_, _| {},
        &mut barrier,
    );
    let (processes, more) = match job {
        Ok(job) => (job.processes, job.failures),
        Err(e) => (
            Vec::new(),
            members.iter().map(|m| inspect::failure(m, &e)).collect(),
        ),
    };
    failures.extend(more);
    let _ = stream.set_write_timeout(Some(args.timeout));
    for process in processes {
        protocol::send(
            &mut stream,
            &ToFront::Process {
                process: Box::new(process),
            },
        )
        .map_err(|e| io("cannot send a dump to", e))?;
    }
    for failure in failures {
        protocol::send(&mut stream, &ToFront::Failure { failure })
            .map_err(|e| io("cannot send a failure to", e))?;
    }
    protocol::send(&mut stream, &ToFront::Done).map_err(|e| io("cannot finish with", e))
}

fn options_of(share: ShareOptions) -> Options {
    Options {
        dll: share.dll,
        trust_dll: share.trust_dll,
        no_stop: share.no_stop,
        debug_dirs: share.debug_dirs,
        save: None,
        stacks: share.stacks,
    }
}

/// Calls the front end back: each address in turn, round after round,
/// until one answers or `timeout` has passed.
fn connect(addresses: &[SocketAddr], timeout: Duration) -> Result<(TcpStream, SocketAddr), String> {
    if addresses.is_empty() {
        return Err("no address to call back to".into());
    }
    let deadline = Instant::now() + timeout;
    let mut errors: Vec<String> = Vec::new();
    loop {
        errors.clear();
        for &addr in addresses {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => return Ok((stream, addr)),
                Err(e) => errors.push(format!("{addr}: {e}")),
            }
        }
        if Instant::now() + RETRY >= deadline {
            return Err(format!(
                "cannot call the front end back within {timeout:?} ({})",
                errors.join("; ")
            ));
        }
        std::thread::sleep(RETRY);
    }
}

/// A pid of the starter's table is only believed if the process there is
/// that rank (its launcher's environment says so where it says anything):
/// otherwise we would dump a stranger under the rank's name.
fn check_identities(members: Vec<Member>) -> (Vec<Member>, Vec<RankFailure>) {
    let mut good = Vec::new();
    let mut failures = Vec::new();
    for member in members {
        let said = LiveProcess::attach(member.pid, Mode::NoStop)
            .and_then(|p| p.environment())
            .ok()
            .and_then(|env| MpiEnvironment::of(&env).rank);
        match said {
            Some(rank) if usize::try_from(rank).ok() != Some(member.rank) => {
                let e = Error::Collect(format!(
                    "pid {} on this host is rank {rank} of some job, not rank {} of this one",
                    member.pid, member.rank
                ));
                failures.push(inspect::failure(&member, &e));
            }
            // Not readable here: the dump says why.
            _ => good.push(member),
        }
    }
    (good, failures)
}
