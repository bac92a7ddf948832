//! The collector: runs on a host of the job (started there by the job's
//! starter, as a step of its Slurm job, or by `--launcher`), calls the
//! front end back, proves the token it was given, dumps the ranks it is
//! assigned (or, for `--slurm`, the MPI processes of the job it finds on
//! its node) with the usual pipeline, and streams the dumps back. It never
//! holds the job longer than the front end's limits, and a watchdog ends it
//! (the kernel then lets go of every process it still traces) should
//! anything hang.
//!
//! [`serve`] runs the same collector over dumps its caller makes instead of
//! processes it reads, for harnesses that exercise the protocol, the
//! barrier, the tree and the merge at scale without a job.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::limits::Limits;
use super::protocol::{
    self, Child, Discover, FoundProcess, ShareOptions, ToCollector, ToFront, MAX_FRAME, PROTOCOL,
};
use super::start::COLLECTOR_COMMAND;
use super::states::{States, OWN_HOST};
use super::tree::{self, Children, Handed};
use crate::inspect::{self, Options};
use crate::members::{Member, MpiEnvironment};
use crate::slurm::{self, StepSpec};
use crate::Error;
use mqs_core::exit_code;
use mqs_core::interface::Target;
use mqs_core::model::{ProcessDump, RankFailure};
use mqs_core::process::{LiveProcess, Mode};

/// The pause between rounds of connection attempts.
const RETRY: Duration = Duration::from_millis(250);

/// How much longer than its usual limit the collector's watchdog waits.
static WATCHDOG_EXTRA_MS: AtomicU64 = AtomicU64::new(0);

/// Lets the watchdog wait `extra` longer.
fn extend_watchdog(extra: Duration) {
    let ms = u64::try_from(extra.as_millis()).unwrap_or(u64::MAX);
    WATCHDOG_EXTRA_MS.fetch_max(ms, Ordering::SeqCst);
}

/// What a collector is started with.
#[derive(Debug, Clone)]
pub struct CollectorArgs {
    /// Where the front end listens, tried in order.
    pub connect: Vec<SocketAddr>,
    pub token: String,
    /// The front end's step ([`Limits`]).
    pub timeout: Duration,
}

impl CollectorArgs {
    /// Its command line after [`COLLECTOR_COMMAND`], as the front end
    /// starts it.
    pub fn to_args(&self) -> Vec<String> {
        let connect: Vec<String> = self.connect.iter().map(SocketAddr::to_string).collect();
        vec![
            "--connect".into(),
            connect.join(","),
            "--token".into(),
            self.token.clone(),
            "--timeout-ms".into(),
            self.timeout.as_millis().max(1).to_string(),
        ]
    }

    /// Reads a command line [`CollectorArgs::to_args`] wrote.
    pub fn parse(args: &[String]) -> crate::Result<Self> {
        let usage = |detail: String| Error::Usage(format!("{COLLECTOR_COMMAND}: {detail}"));
        let (mut connect, mut token, mut timeout) = (None, None, None);
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let value = words
                .next()
                .ok_or_else(|| usage(format!("{word} needs a value")))?;
            match word.as_str() {
                "--connect" => {
                    let addresses: Result<Vec<SocketAddr>, _> =
                        value.split(',').map(str::parse).collect();
                    connect =
                        Some(addresses.map_err(|e| usage(format!("--connect {value}: {e}")))?);
                }
                "--token" => token = Some(value.clone()),
                "--timeout-ms" => {
                    let ms: u64 = value
                        .parse()
                        .map_err(|e| usage(format!("--timeout-ms {value}: {e}")))?;
                    timeout = Some(Duration::from_millis(ms.max(1)));
                }
                other => return Err(usage(format!("unknown argument {other}"))),
            }
        }
        match (connect, token, timeout) {
            (Some(connect), Some(token), Some(timeout)) => Ok(Self {
                connect,
                token,
                timeout,
            }),
            _ => Err(usage(
                "--connect, --token and --timeout-ms are needed".into(),
            )),
        }
    }
}

/// Where a collector's dumps come from.
enum Share<'a, 'b> {
    /// Its members' processes, read on this host.
    Read,
    /// Made by the caller of [`serve`] once every host is stopped.
    Given(&'a mut Dumps<'b>),
}

/// What makes the dumps of a collector's members for [`serve`].
pub type Dumps<'a> = dyn FnMut(&[Member]) -> crate::Result<Vec<ProcessDump>> + 'a;

/// Runs the collector; its exit code (0, or [`exit_code::COLLECT`] when it
/// could not do its part, with one line on stderr saying why).
pub fn run(args: &CollectorArgs) -> i32 {
    run_as(args, &crate::hosts::local_host_name(), Share::Read)
}

/// Runs a collector that stands for host `host` and, instead of reading
/// processes, sends the dumps `dumps` makes of its members once every host
/// is stopped: the same calls, token, barrier, tree, limits and watchdog
/// as [`run`]; its exit code.
pub fn serve(args: &CollectorArgs, host: &str, dumps: &mut Dumps<'_>) -> i32 {
    run_as(args, host, Share::Given(dumps))
}

/// [`run`] for host `host`, its dumps from `share`.
fn run_as(args: &CollectorArgs, host: &str, share: Share<'_, '_>) -> i32 {
    let me = format!(
        "mqs-dump collector on host '{host}' (pid {})",
        std::process::id()
    );
    // No step waits longer than a few steps; this is the backstop (a
    // parent extends it by what its subtree may take).
    let limit = Limits::new(args.timeout).watchdog();
    WATCHDOG_EXTRA_MS.store(0, Ordering::SeqCst);
    {
        let me = me.clone();
        let began = Instant::now();
        std::thread::spawn(move || loop {
            let extra = Duration::from_millis(WATCHDOG_EXTRA_MS.load(Ordering::SeqCst));
            let due = limit + extra;
            let waited = began.elapsed();
            if waited >= due {
                eprintln!("{me}: gave up after {due:?}");
                std::process::exit(exit_code::COLLECT);
            }
            std::thread::sleep((due - waited).min(Duration::from_secs(5)));
        });
    }
    match collect(args, host, share) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("{me}: {message}");
            exit_code::COLLECT
        }
    }
}

/// The collector's connection once answered: to the front end, or to the
/// parent collector that called it instead.
struct Called {
    stream: TcpStream,
    peer: SocketAddr,
    answer: std::io::Result<ToCollector>,
    has_parent: bool,
    /// Its node's Slurm name, in a Slurm step.
    node: Option<String>,
}

/// What a collector is assigned.
struct Assignment {
    members: Vec<Member>,
    options: ShareOptions,
    go_timeout: Duration,
    discover: Option<Discover>,
    children: Vec<Child>,
    in_tree: bool,
}

fn collect(args: &CollectorArgs, host: &str, share: Share<'_, '_>) -> Result<(), String> {
    let limits = Limits::new(args.timeout);
    let Called {
        stream,
        peer,
        answer,
        has_parent,
        node,
    } = call_back(args, host, limits)?;
    let Assignment {
        mut members,
        options,
        go_timeout,
        discover,
        children,
        in_tree,
    } = assignment(answer, peer, has_parent)?;
    let limits = limits.assigned(go_timeout, discover.is_some());
    let (stop_limit, results_limit) = (
        limits.subtree_stopped(&children),
        limits.subtree_results(&children),
    );
    // A parent waits for its subtree: its watchdog waits as long again.
    extend_watchdog(limits.watchdog_extra(&children));
    let handed = Handed {
        token: args.token.clone(),
        options: options.clone(),
        discover: discover.clone(),
        limits,
    };
    let kids = Children::start(children, &handed);
    let mut up = Upward {
        stream,
        peer,
        above: if has_parent {
            "its parent collector"
        } else {
            "the front end"
        },
        kids,
        states: States::with_detail(options.per_rank_detail).by_number(options.ranks_by_number),
        relayed: Vec::new(),
        limits,
        stop_limit,
        results_limit,
    };
    if let Some(wanted) = &discover {
        members = up.report_found(wanted, host, node.as_deref())?;
        if members.is_empty() && up.kids.is_empty() {
            return protocol::send(&mut up.stream, &ToFront::Done)
                .map_err(|e| up.io("cannot finish with", e));
        }
    }
    if members.is_empty() && up.kids.is_empty() {
        return Ok(());
    }
    let (processes, failures) = up.read_share(share, members, options)?;
    if !in_tree {
        return send_results(&mut up.stream, processes, failures, limits.write())
            .map_err(|(what, e)| up.io(what, e));
    }
    up.send_tree(processes, failures)
}

/// Calls the front end back and says hello; its answer, or, told to wait
/// for a parent collector, the parent's call and its answer.
fn call_back(args: &CollectorArgs, host: &str, limits: Limits) -> Result<Called, String> {
    let (mut stream, peer) = connect(&args.connect, limits.callback())?;
    let io = |what: &str, e: std::io::Error| format!("{what} the front end at {peer}: {e}");
    stream
        .set_write_timeout(Some(limits.write()))
        // The front end assigns ranks once every host has called back.
        .and_then(|()| stream.set_read_timeout(Some(limits.assignment())))
        .map_err(|e| io("cannot talk to", e))?;
    // A task of a Slurm step knows its node's Slurm name, which is what
    // srun's table and Slurm's node lists say.
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty());
    // In a tree, a parent collector calls this one here.
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).ok();
    let hello = ToFront::Hello {
        protocol: PROTOCOL,
        token: args.token.clone(),
        host: host.to_string(),
        node: node.clone(),
        pid: std::process::id() as i32,
        listen: listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port()),
    };
    protocol::send(&mut stream, &hello).map_err(|e| io("cannot greet", e))?;
    match protocol::receive(&mut stream, MAX_FRAME) {
        Ok(ToCollector::WaitForParent { timeout_ms }) => {
            drop(stream);
            let listener = listener
                .as_ref()
                .ok_or("told to wait for a parent collector, but it cannot listen")?;
            let (up, parent, answer) =
                tree::await_parent(listener, &args.token, Duration::from_millis(timeout_ms))?;
            Ok(Called {
                stream: up,
                peer: parent,
                answer: Ok(answer),
                has_parent: true,
                node,
            })
        }
        answer => Ok(Called {
            stream,
            peer,
            answer,
            has_parent: false,
            node,
        }),
    }
}

/// The assignment in `answer`, from `peer`; or why there is none.
fn assignment(
    answer: std::io::Result<ToCollector>,
    peer: SocketAddr,
    has_parent: bool,
) -> Result<Assignment, String> {
    match answer {
        Ok(ToCollector::Assignment {
            members,
            options,
            go_timeout_ms,
            discover,
            children,
            in_tree,
        }) => Ok(Assignment {
            members,
            options,
            go_timeout: Duration::from_millis(go_timeout_ms),
            discover,
            children,
            in_tree: in_tree || has_parent,
        }),
        Ok(ToCollector::Refused { reason }) => {
            Err(format!("refused by the front end at {peer}: {reason}"))
        }
        Ok(other) => Err(format!("{peer} sent {other:?} instead of an assignment")),
        Err(e) => Err(format!(
            "no answer from the collector's parent at {peer}: {e}"
        )),
    }
}

/// An assigned collector's side: its connection upwards (to the front end
/// or its parent collector), its children, and what they sent meanwhile.
struct Upward {
    stream: TcpStream,
    peer: SocketAddr,
    /// Who is up there, for messages.
    above: &'static str,
    kids: Children,
    states: States,
    relayed: Vec<(String, RankFailure)>,
    limits: Limits,
    /// How long it waits for its children's stop, and for their results.
    stop_limit: Duration,
    results_limit: Duration,
}

impl Upward {
    /// What could not be done with the connection upwards, and why.
    fn io(&self, what: &str, e: std::io::Error) -> String {
        format!("{what} the collector's parent at {}: {e}", self.peer)
    }

    /// `--slurm`: finds the job's MPI processes on this node and says what
    /// it found; they are its members.
    fn report_found(
        &mut self,
        wanted: &Discover,
        host: &str,
        node: Option<&str>,
    ) -> Result<Vec<Member>, String> {
        let (processes, problem) = find_processes(wanted, host, node);
        let members = processes.iter().map(|p| p.member.clone()).collect();
        protocol::send(
            &mut self.stream,
            &ToFront::Found {
                processes,
                problem,
                host: None,
            },
        )
        .map_err(|e| self.io("cannot tell what it found to", e))?;
        Ok(members)
    }

    /// The barrier, once its own ranks are stopped: waits for the
    /// children's, reports, waits for go and passes it down. What children
    /// send meanwhile is kept.
    fn barrier(&mut self) -> crate::Result<()> {
        let above = self.above;
        self.kids
            .await_stopped(
                &mut self.stream,
                &mut self.states,
                &mut self.relayed,
                Instant::now() + self.stop_limit,
            )
            .and_then(|()| protocol::send(&mut self.stream, &ToFront::Stopped))
            .map_err(|e| Error::Collect(format!("cannot report to {above}: {e}")))?;
        let go_timeout = self.limits.go();
        let said = self
            .stream
            .set_read_timeout(Some(go_timeout))
            .and_then(|()| protocol::receive::<ToCollector>(&mut self.stream, MAX_FRAME));
        match said {
            Ok(ToCollector::Go) => {
                self.kids.go();
                Ok(())
            }
            Ok(other) => Err(Error::Collect(format!(
                "{above} sent {other:?} instead of go"
            ))),
            Err(e) => Err(Error::Collect(format!(
                "{above} did not say go within {go_timeout:?} ({e}); let go unread"
            ))),
        }
    }

    /// Its own members, stopped (then the barrier) and dumped: the dumps,
    /// and a failure for each member not dumped.
    fn read_share(
        &mut self,
        share: Share<'_, '_>,
        members: Vec<Member>,
        options: ShareOptions,
    ) -> Result<(Vec<ProcessDump>, Vec<RankFailure>), String> {
        if let Share::Given(dumps) = share {
            // Nothing to stop or read: the barrier and the stream as ever.
            self.barrier().map_err(|e| e.to_string())?;
            return Ok((dumps(&members).map_err(|e| e.to_string())?, Vec::new()));
        }
        if members.is_empty() {
            // Only children's ranks on this host's watch.
            self.barrier().map_err(|e| e.to_string())?;
            return Ok((Vec::new(), Vec::new()));
        }
        let (members, mut failures) = check_identities(members);
        let job = inspect::dump_share(
            members.clone(),
            &options_of(options),
            &mut |_, _| {},
            &mut || self.barrier(),
        );
        let (processes, more) = match job {
            Ok(job) => (job.processes, job.failures),
            Err(e) => (
                Vec::new(),
                members.iter().map(|m| inspect::failure(m, &e)).collect(),
            ),
        };
        failures.extend(more);
        Ok((processes, failures))
    }

    /// In a tree: its own dumps and every child's, equal states merged, in
    /// one frame; failures as they are; then done.
    fn send_tree(
        mut self,
        processes: Vec<ProcessDump>,
        failures: Vec<RankFailure>,
    ) -> Result<(), String> {
        let began = Instant::now();
        self.states.find_hubs(&processes);
        for process in processes {
            self.states.add(OWN_HOST, process);
        }
        let own = began.elapsed();
        let _ = self.stream.set_write_timeout(Some(self.limits.write()));
        self.kids
            .await_done(
                &mut self.stream,
                &mut self.states,
                &mut self.relayed,
                Instant::now() + self.results_limit,
            )
            .map_err(|e| self.io("cannot report to", e))?;
        self.states.own_level(
            self.kids.bytes_received,
            (own + self.kids.merging).as_secs_f64() * 1e3,
        );
        if !self.states.is_empty() {
            self.states.in_rank_order();
            let states = Box::new(std::mem::take(&mut self.states));
            protocol::send(&mut self.stream, &ToFront::States { states })
                .map_err(|e| self.io("cannot send the dumps to", e))?;
        }
        let own = failures.into_iter().map(|f| (None, f));
        let below = std::mem::take(&mut self.relayed)
            .into_iter()
            .map(|(h, f)| (Some(h), f));
        for (host, failure) in own.chain(below) {
            protocol::send(&mut self.stream, &ToFront::Failure { failure, host })
                .map_err(|e| self.io("cannot send a failure to", e))?;
        }
        protocol::send(&mut self.stream, &ToFront::Done)
            .map_err(|e| self.io("cannot finish with", e))
    }
}

/// Streams the dumps and failures to the front end, then says it is done;
/// on error, what it could not do.
fn send_results(
    stream: &mut TcpStream,
    processes: Vec<ProcessDump>,
    failures: Vec<RankFailure>,
    write_limit: Duration,
) -> Result<(), (&'static str, std::io::Error)> {
    let _ = stream.set_write_timeout(Some(write_limit));
    for process in processes {
        protocol::send(
            stream,
            &ToFront::Process {
                process: Box::new(process),
                host: None,
            },
        )
        .map_err(|e| ("cannot send a dump to", e))?;
    }
    for failure in failures {
        protocol::send(
            stream,
            &ToFront::Failure {
                failure,
                host: None,
            },
        )
        .map_err(|e| ("cannot send a failure to", e))?;
    }
    protocol::send(stream, &ToFront::Done).map_err(|e| ("cannot finish with", e))
}

fn options_of(share: ShareOptions) -> Options {
    Options {
        dll: share.dll,
        trust_dll: share.trust_dll,
        no_stop: share.no_stop,
        debug_dirs: share.debug_dirs,
        save: None,
        stacks: share.stacks,
        // The node's own pack directories and DEBUGINFOD_URLS.
        typepack_dirs: Vec::new(),
        offline: false,
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
            match TcpStream::connect_timeout(&addr, Limits::CONNECT_ATTEMPT) {
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

/// The MPI processes of a Slurm job (or step) on this node: those its
/// slurmd lists (`scontrol listpids`) that carry an MPI rank in their
/// environment or map an MPI library, less the collectors' own step, a
/// rank's own children and any mqs-dump. Each is numbered by the rank its
/// environment gives, else -1 (the front end then takes MPI_COMM_WORLD's);
/// its group is the MPI job it belongs to. With the reason, if the node's
/// processes could not be listed.
fn find_processes(
    wanted: &Discover,
    host: &str,
    node: Option<&str>,
) -> (Vec<FoundProcess>, Option<String>) {
    let spec = StepSpec {
        job: wanted.job.clone(),
        step: wanted.step.clone(),
    };
    let listed = match slurm::listpids(&spec, node) {
        Ok(listed) => listed,
        Err(e) => {
            return (
                Vec::new(),
                Some(format!(
                    "cannot list the processes of Slurm job {}: {e}",
                    spec.text()
                )),
            )
        }
    };
    let own_step = std::env::var("SLURM_STEP_ID").ok();
    let own_job = std::env::var("SLURM_JOB_ID").ok();
    let ours = std::env::current_exe().ok();
    let me = std::process::id() as i32;
    struct Candidate {
        pid: i32,
        ppid: Option<i32>,
        env: MpiEnvironment,
        pmi_job: Option<String>,
        step: String,
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for entry in listed {
        let our_step = own_job.as_deref() == Some(spec.job.as_str())
            && own_step.as_deref() == Some(&entry.step);
        if entry.pid == me || our_step || candidates.iter().any(|c| c.pid == entry.pid) {
            continue;
        }
        let Ok(process) = LiveProcess::attach(entry.pid, Mode::NoStop) else {
            continue;
        };
        if ours.is_some() && process.executable().ok() == ours {
            continue;
        }
        let environment = process.environment().unwrap_or_default();
        let env = MpiEnvironment::of(&environment);
        let maps_mpi = || {
            process.mapped_objects().is_ok_and(|objects| {
                objects.iter().any(|o| {
                    o.path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libmpi"))
                })
            })
        };
        if env.rank.is_none() && !maps_mpi() {
            continue;
        }
        candidates.push(Candidate {
            pid: entry.pid,
            ppid: process.parent_pid(),
            pmi_job: environment.get("PMI_JOBID").map(str::to_string),
            env,
            step: entry.step,
        });
    }
    let pids: Vec<i32> = candidates.iter().map(|c| c.pid).collect();
    let found = candidates
        .iter()
        // A rank's own child (a helper it forked) inherits its environment:
        // only the process the launcher started counts.
        .filter(|c| c.ppid.is_none_or(|p| !pids.contains(&p)))
        .map(|c| {
            let rank = c.env.rank.unwrap_or(-1);
            FoundProcess {
                member: Member {
                    pid: c.pid,
                    host: host.to_string(),
                    rank: usize::try_from(rank).unwrap_or(0),
                    identity: rank,
                    spawned_job: None,
                    spawned_by: None,
                },
                group: c
                    .env
                    .job
                    .clone()
                    .or_else(|| c.pmi_job.clone())
                    .unwrap_or_else(|| format!("step {}.{}", spec.job, c.step)),
            }
        })
        .collect();
    (found, None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn args(connect: Vec<SocketAddr>, token: &str) -> CollectorArgs {
        CollectorArgs {
            connect,
            token: token.into(),
            timeout: Duration::from_secs(2),
        }
    }

    /// A front end that answers the first hello with `reply`; what it was
    /// told.
    fn front(reply: ToCollector) -> (SocketAddr, std::thread::JoinHandle<ToFront>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let hello = protocol::receive(&mut s, protocol::MAX_HELLO).unwrap();
            protocol::send(&mut s, &reply).unwrap();
            hello
        });
        (addr, served)
    }

    /// An address where connections are refused for as long as the socket
    /// lives. The port is bound but never listened on, so no other test's
    /// listener can take it over and no connection to it can be a TCP
    /// self-connect (which a closed ephemeral port allows).
    fn refusing() -> (std::os::fd::OwnedFd, SocketAddr) {
        use nix::sys::socket::{
            bind, getsockname, socket, AddressFamily, SockFlag, SockType, SockaddrIn,
        };
        use std::os::fd::AsRawFd;
        let fd = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
        let at: SockaddrIn = getsockname(fd.as_raw_fd()).unwrap();
        (fd, SocketAddr::V4(at.into()))
    }

    #[test]
    fn the_command_line_the_front_end_writes_reads_back() {
        let written = CollectorArgs {
            connect: vec![
                "10.1.2.3:4000".parse().unwrap(),
                "127.0.0.1:4000".parse().unwrap(),
            ],
            token: "abc123".into(),
            timeout: Duration::from_millis(1500),
        };
        let read = CollectorArgs::parse(&written.to_args()).unwrap();
        assert_eq!(
            (read.connect, read.token, read.timeout),
            (written.connect, written.token, written.timeout)
        );
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for bad in [
            words(&["--token", "t", "--timeout-ms", "5"]),
            words(&["--connect", "nowhere", "--token", "t", "--timeout-ms", "5"]),
            words(&["--connect", "127.0.0.1:1", "--token"]),
            words(&[
                "--connect",
                "127.0.0.1:1",
                "--token",
                "t",
                "--timeout-ms",
                "5",
                "-x",
                "1",
            ]),
        ] {
            assert!(CollectorArgs::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_refusal_is_reported_with_its_reason() {
        let (addr, served) = front(ToCollector::Refused {
            reason: "wrong token".into(),
        });
        let err = collect(&args(vec![addr], "bad"), "nodea", Share::Read).unwrap_err();
        assert_eq!(
            err,
            format!("refused by the front end at {addr}: wrong token")
        );
        match served.join().unwrap() {
            ToFront::Hello {
                token, host, pid, ..
            } => {
                assert_eq!((token.as_str(), host.as_str()), ("bad", "nodea"));
                assert_eq!(pid, std::process::id() as i32);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_to_do_is_done_at_once() {
        let (addr, served) = front(ToCollector::Assignment {
            members: Vec::new(),
            options: ShareOptions::default(),
            go_timeout_ms: 0,
            discover: None,
            children: Vec::new(),
            in_tree: false,
        });
        // The first address refuses connections: the next one is tried.
        let (_held, closed) = refusing();
        assert_eq!(
            collect(&args(vec![closed, addr], "t"), "nodea", Share::Read),
            Ok(())
        );
        served.join().unwrap();
    }

    #[test]
    fn a_front_end_that_is_gone_is_given_up_on_in_time() {
        let (_held, closed) = refusing();
        let start = Instant::now();
        let err = collect(&args(vec![closed], "t"), "nodea", Share::Read).unwrap_err();
        assert!(
            err.starts_with("cannot call the front end back within 2s"),
            "{err}"
        );
        assert!(start.elapsed() < Duration::from_secs(15));
    }

    #[test]
    fn a_pid_that_is_another_rank_is_not_dumped() {
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .env("OMPI_COMM_WORLD_RANK", "5")
            .spawn()
            .unwrap();
        let pid = other.id() as i32;
        // Until the child has run exec, its environment is still ours.
        let deadline = Instant::now() + Duration::from_secs(10);
        while LiveProcess::attach(pid, Mode::NoStop)
            .and_then(|p| p.environment())
            .map_or(true, |e| e.get("OMPI_COMM_WORLD_RANK").is_none())
        {
            assert!(Instant::now() < deadline, "sleep never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        let (good, failed) = check_identities(vec![Member::single(pid, 3), Member::single(pid, 5)]);
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(good, [Member::single(pid, 5)]);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].rank, 3);
        assert!(
            failed[0]
                .message
                .contains("is rank 5 of some job, not rank 3 of this one"),
            "{}",
            failed[0].message
        );
        // A process whose environment names no rank is believed.
        let me = Member::single(std::process::id() as i32, 3);
        assert_eq!(check_identities(vec![me.clone()]).0, [me]);
    }
}
