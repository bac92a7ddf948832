//! The front end ([`Front`]): listens, has collectors started on their
//! hosts, checks each one's token, hands it its host's ranks (or, for
//! `--slurm`, has it find them), holds every host at the barrier until all
//! are stopped, and merges what comes back with the ranks read here,
//! reporting each rank not read with the reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::hosts::host_key;
use crate::inspect::{self, Elsewhere, Options, Starter};
use crate::members::Member;
use crate::slurm::{self, Resolved, StarterJob};
use crate::Error;
#[cfg(test)]
use mqs_core::exit_code;
use mqs_core::model::{ProcessDump, RankFailure};

use super::protocol::{
    Child, Discover, FoundProcess, ShareOptions, ToCollector, ToFront, Token, MAX_FRAME, MAX_HELLO,
    PROTOCOL,
};
use super::start::COLLECTOR_COMMAND;
use super::start::{CollectorCommand, Launched, Poked, Template};
use super::states::Level;
use super::tree;
use super::{protocol, start};

/// How long a connection may take to say who it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a launcher command gets to end once its collector is done.
const LAUNCHER_GRACE: Duration = Duration::from_secs(5);
/// How often waits look at launcher commands and the clock.
const POLL: Duration = Duration::from_millis(20);
/// The most addresses collectors are given to call back to.
const MAX_CALLBACK_ADDRESSES: usize = 8;
/// The rank of a failure that stands for a node's unknown ranks, until
/// [`number_found`] numbers it after every known one.
pub(super) const UNKNOWN_RANK: usize = usize::MAX;

/// The fan-out of the collector tree unless told otherwise: jobs on up
/// to this many hosts are read flat (see `docs/collectors.md` for the
/// figures it was chosen from).
pub const DEFAULT_FANOUT: usize = 32;

/// How ranks on other hosts are read.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Read every rank through a collector, this host's too (to compare
    /// with a direct attach).
    pub all_hosts: bool,
    /// The collector program as the nodes see it (default: this program).
    pub collector: Option<String>,
    /// Start collectors with this command instead of through the starter.
    pub launcher: Option<Template>,
    /// How long collectors get to call back, and each later step.
    pub timeout: Duration,
    /// The address collectors call back to (default: every address of
    /// this machine, loopback last).
    pub callback: Option<IpAddr>,
    /// Collectors in a tree of this fan-out, when there are more hosts
    /// than that ([`super::tree`]); None: each talks to the front end.
    pub fanout: Option<usize>,
    /// Ranks in equal states that a tree sends as one may stay one dump
    /// per run of ranks ([`ProcessDump::run_len`]; `JobDump::expand` gives
    /// each rank's): for callers that only analyse the job, which then
    /// never holds a dump per rank. Off: one dump per rank.
    pub compact: bool,
}

impl Default for CollectOptions {
    fn default() -> Self {
        Self {
            all_hosts: false,
            collector: None,
            launcher: None,
            timeout: Duration::from_secs(30),
            callback: None,
            fanout: Some(DEFAULT_FANOUT),
            compact: false,
        }
    }
}

/// The front end: starts collectors, serves them, merges what they send.
#[derive(Debug)]
pub struct Front {
    share: ShareOptions,
    collect: CollectOptions,
    /// Saving a snapshot needs raw memory, which collectors never send.
    enabled: bool,
    run: Option<Run>,
    /// Members refused before any collector was asked for (a pid listed
    /// twice on one host).
    refused: Vec<(RankFailure, Error)>,
    /// Bytes read from collectors' connections, over every run.
    received: Arc<AtomicU64>,
    /// The last run's levels ([`Front::levels`]).
    levels: (Vec<Level>, Duration),
}

impl Front {
    pub fn new(options: &Options, collect: CollectOptions) -> Self {
        Self {
            share: ShareOptions {
                dll: options.dll.clone(),
                trust_dll: options.trust_dll,
                no_stop: options.no_stop,
                debug_dirs: options.debug_dirs.clone(),
                stacks: options.stacks,
            },
            enabled: options.save.is_none(),
            collect,
            run: None,
            refused: Vec::new(),
            received: Arc::default(),
            levels: (Vec::new(), Duration::ZERO),
        }
    }

    /// In a tree, what each level of collectors did (the roots first),
    /// and how long the front end took to expand their states; for the
    /// last collection.
    pub fn levels(&self) -> (Vec<Level>, Duration) {
        self.levels.clone()
    }

    /// How many bytes collectors have sent so far (frames and their
    /// lengths, refused connections' included).
    pub fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The members grouped by host; a pid listed twice on one host is
    /// refused the second time.
    fn hosts_of(&mut self, members: Vec<Member>) -> BTreeMap<String, Host> {
        let mut hosts: BTreeMap<String, Host> = BTreeMap::new();
        for member in members {
            let host = hosts
                .entry(host_key(&member.host))
                .or_insert_with(|| Host::new(&member.host));
            // One process, listed twice on its host: dumped once.
            if let Some(first) = host.members.iter().find(|m| m.pid == member.pid) {
                let e = Error::Unreachable {
                    pid: member.pid,
                    detail: crate::members::Unusable::Duplicate {
                        of_rank: first.rank,
                    }
                    .describe(&member),
                };
                self.refused.push((inspect::failure(&member, &e), e));
                continue;
            }
            host.members.push(member);
        }
        hosts
    }
}

/// One host's part of the job.
#[derive(Debug)]
struct Host {
    /// As the starter's table names it.
    name: String,
    members: Vec<Member>,
    stage: Stage,
    commands: Option<Sender<Command>>,
    /// Pids already reported, so each member counts once.
    reported: HashSet<i32>,
    results: Vec<std::result::Result<Box<ProcessDump>, RankFailure>>,
    /// `--slurm`: the MPI job each member found belongs to, by pid.
    groups: HashMap<i32, String>,
    /// Where its collector listens for a parent's call (a tree).
    listen: Option<SocketAddr>,
    /// In a tree, for a root: the keys of every host below it, whose
    /// frames come through its connection.
    below: Vec<String>,
}

impl Host {
    /// A host named `name`, its collector not called back yet.
    fn new(name: &str) -> Self {
        Host {
            name: name.to_string(),
            members: Vec::new(),
            stage: Stage::Waiting,
            commands: None,
            reported: HashSet::new(),
            results: Vec::new(),
            groups: HashMap::new(),
            listen: None,
            below: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    Waiting,
    Connected,
    Assigned,
    Stopped,
    Done,
    /// Why its ranks were not (all) read.
    Failed(String),
}

/// What the connection threads tell the front end.
#[derive(Debug)]
enum Event {
    Refused {
        peer: SocketAddr,
        reason: String,
    },
    Connected {
        key: String,
        commands: Sender<Command>,
        listen: Option<SocketAddr>,
    },
    Found {
        key: String,
        processes: Vec<FoundProcess>,
        problem: Option<String>,
    },
    Stopped {
        key: String,
    },
    Process {
        key: String,
        process: Box<ProcessDump>,
    },
    Failure {
        key: String,
        failure: RankFailure,
    },
    Done {
        key: String,
    },
    Lost {
        key: String,
        reason: String,
    },
    /// A root reports hosts below it lost, with why.
    LostBelow {
        hosts: Vec<String>,
        reason: String,
    },
    /// What a root's subtree did, level by level, and how long the front
    /// end took to expand its states.
    Levels {
        levels: Vec<Level>,
        expand: Duration,
    },
}

/// What the front end tells a connection thread.
#[derive(Debug)]
enum Command {
    Assign {
        members: Vec<Member>,
        options: ShareOptions,
        go_timeout: Duration,
        discover: Option<Discover>,
        /// Its children, in a tree.
        children: Vec<Child>,
        in_tree: bool,
    },
    /// In a tree, below the roots: wait for the parent's call.
    Delegate {
        timeout: Duration,
    },
    Go,
}

/// Which hosts connection threads may still take.
#[derive(Debug, Default)]
struct Registry {
    /// Hosts with ranks, and whether a collector has claimed each.
    hosts: BTreeMap<String, bool>,
    /// Past the callback deadline, new hosts are turned away.
    closed: bool,
}

enum Claim {
    Mine,
    Nothing,
    TooLate,
}

impl Registry {
    fn claim(&mut self, key: &str) -> Claim {
        match self.hosts.get_mut(key) {
            Some(_) if self.closed => Claim::TooLate,
            Some(claimed) if !*claimed => {
                *claimed = true;
                Claim::Mine
            }
            _ => Claim::Nothing,
        }
    }
}

/// A collection under way.
#[derive(Debug)]
struct Run {
    events: Receiver<Event>,
    registry: Arc<Mutex<Registry>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    hosts: BTreeMap<String, Host>,
    launched: Vec<Launched>,
    poked: Option<Poked>,
    /// Why a host may not have called back, for its message.
    how: String,
    /// `--slurm`: collectors find their hosts' members themselves.
    discover: Option<Discover>,
    timeout: Duration,
    /// When collectors were asked for, and when each step ended (for -v).
    began: Instant,
    steps: Vec<(&'static str, Duration)>,
    /// In a tree: what each level below the front end did (the roots
    /// first), and the front end's longest expansion of one root's states.
    levels: Vec<Level>,
    expanding: Duration,
}

impl Elsewhere for Front {
    fn takes(&self, member: &Member) -> bool {
        // A rank not started yet (pid 0) is nowhere to be read.
        self.enabled
            && member.pid > 0
            && (self.collect.all_hosts || !crate::hosts::is_local_host(&member.host))
    }

    fn start(&mut self, starter: &Starter, members: Vec<Member>) {
        let hosts = self.hosts_of(members);
        let mut run = match self.begin(Via::Starter(starter), hosts) {
            Ok(run) => run,
            Err((hosts, e)) => {
                // Nothing was started: every rank fails the same way.
                let reason = e.to_string();
                let (_, events) = mpsc::channel();
                let mut run = Run::idle(events, hosts, self.collect.timeout);
                for host in run.hosts.values_mut() {
                    host.stage = Stage::Failed(reason.clone());
                }
                self.run = Some(run);
                return;
            }
        };
        run.await_callbacks();
        run.assign(&self.share, self.collect.fanout);
        self.run = Some(run);
    }

    fn stopped(&mut self) {
        if let Some(run) = &mut self.run {
            run.await_stopped();
        }
    }

    fn finish(&mut self) -> Vec<std::result::Result<ProcessDump, (RankFailure, Error)>> {
        let mut results: Vec<_> = self.refused.drain(..).map(Err).collect();
        if let Some(mut run) = self.run.take() {
            run.await_done();
            results.extend(run.results());
            self.levels = (std::mem::take(&mut run.levels), run.expanding);
        }
        if self.collect.compact {
            return results;
        }
        results
            .into_iter()
            .flat_map(|r| match r {
                Ok(p) => p.split_run().into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            })
            .collect()
    }
}

/// Whom collectors are asked of.
enum Via<'a> {
    /// The job's starter (or `--launcher`): through its tool-daemon
    /// extension, else as a step of the Slurm job it runs in.
    Starter(&'a Starter),
    /// A step of this Slurm job (`--slurm`).
    Slurm(&'a StarterJob),
    /// The scale harness: one synthetic collector per host, started here,
    /// serving the job this spec file describes.
    Synthetic(&'a Path),
}

impl Front {
    /// `--slurm`: starts a collector on every node of the job (or step)
    /// as a step of the job, each told to find the job's MPI processes on
    /// its node, and waits until each has said what it found and stopped
    /// it. [`Elsewhere::finish`] then has the dumps, numbered by
    /// [`number_found`].
    pub fn discover(&mut self, target: &Resolved, tools: &slurm::Tools) {
        let hosts: BTreeMap<String, Host> = target
            .nodes
            .iter()
            .map(|node| (host_key(node), Host::new(node)))
            .collect();
        let job = StarterJob {
            job: target.spec.job.clone(),
            conf: None,
            srun: Some(tools.srun.clone()),
        };
        let mut run = match self.begin(Via::Slurm(&job), hosts) {
            Ok(run) => run,
            Err((hosts, e)) => {
                let (_, events) = mpsc::channel();
                let mut run = Run::idle(events, hosts, self.collect.timeout);
                run.fail_hosts_all(&e.to_string());
                self.run = Some(run);
                return;
            }
        };
        run.discover = Some(Discover {
            job: target.spec.job.clone(),
            step: target.spec.step.clone(),
        });
        run.await_callbacks();
        run.assign(&self.share, self.collect.fanout);
        self.run = Some(run);
        self.stopped();
    }

    /// The scale harness: starts a synthetic collector on this machine for
    /// each host of `members` (see [`super::synthetic`]), each serving its
    /// host's members from the job in `spec`, and waits until all have
    /// "stopped" them. [`Elsewhere::finish`] then has the dumps.
    pub fn synthetic(&mut self, spec: &Path, members: Vec<Member>) {
        let hosts = self.hosts_of(members);
        let mut run = match self.begin(Via::Synthetic(spec), hosts) {
            Ok(run) => run,
            Err((hosts, e)) => {
                let (_, events) = mpsc::channel();
                let mut run = Run::idle(events, hosts, self.collect.timeout);
                run.fail_hosts_all(&e.to_string());
                self.run = Some(run);
                return;
            }
        };
        run.await_callbacks();
        run.assign(&self.share, self.collect.fanout);
        self.run = Some(run);
        self.stopped();
    }

    /// `--slurm`: the MPI job each process found belongs to, by host name
    /// and pid.
    pub fn found_groups(&self) -> HashMap<(String, i32), String> {
        let mut out = HashMap::new();
        for host in self.run.iter().flat_map(|r| r.hosts.values()) {
            for (pid, group) in &host.groups {
                out.insert((host.name.clone(), *pid), group.clone());
            }
        }
        out
    }

    /// Listens, and starts collectors on every host of `hosts`.
    fn begin(
        &self,
        via: Via<'_>,
        hosts: BTreeMap<String, Host>,
    ) -> std::result::Result<Run, (BTreeMap<String, Host>, Error)> {
        let timeout = self.collect.timeout;
        let setup = (|| {
            let token =
                Token::new().map_err(|e| Error::Collect(format!("no random token: {e}")))?;
            let bind = self
                .collect
                .callback
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            let listener = TcpListener::bind((bind, 0))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| {
                    Error::Collect(format!("cannot listen for collectors on {bind}: {e}"))
                })?;
            let port = listener
                .local_addr()
                .map_err(|e| Error::Collect(format!("cannot listen for collectors: {e}")))?
                .port();
            let connect: Vec<String> = callback_addresses(self.collect.callback, port)
                .iter()
                .map(SocketAddr::to_string)
                .collect();
            let program = match &self.collect.collector {
                Some(path) => path.clone(),
                None => start::own_program()?,
            };
            let command = CollectorCommand {
                program,
                args: vec![
                    COLLECTOR_COMMAND.into(),
                    "--connect".into(),
                    connect.join(","),
                    "--token".into(),
                    token.as_str().into(),
                    "--timeout-ms".into(),
                    timeout.as_millis().max(1).to_string(),
                ],
            };
            Ok((token, listener, command))
        })();
        let (token, listener, command) = match setup {
            Ok(s) => s,
            Err(e) => return Err((hosts, e)),
        };

        let registry = Arc::new(Mutex::new(Registry {
            hosts: hosts.keys().map(|k| (k.clone(), false)).collect(),
            closed: false,
        }));
        let (tx, events) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (registry, stop) = (registry.clone(), stop.clone());
            let received = self.received.clone();
            std::thread::spawn(move || {
                accept(listener, token, registry, tx, stop, timeout, received)
            })
        };
        let mut run = Run::idle(events, hosts, timeout);
        run.registry = registry;
        run.stop = stop;
        run.acceptor = Some(acceptor);

        let names: Vec<String> = run.hosts.values().map(|h| h.name.clone()).collect();
        let started = match (&self.collect.launcher, via) {
            (_, Via::Synthetic(spec)) => match spec.to_str() {
                Some(spec) => {
                    for name in names {
                        let mut argv = vec![command.program.clone()];
                        argv.extend(command.args.iter().cloned());
                        argv.extend([
                            "--synthetic".into(),
                            spec.into(),
                            "--as-host".into(),
                            name.clone(),
                        ]);
                        match Launched::spawn(vec![name.clone()], argv) {
                            Ok(launched) => run.launched.push(launched),
                            Err(e) => run.fail_hosts(&[name], &e.to_string()),
                        }
                    }
                    run.how = "synthetic collectors started here".into();
                    Ok(())
                }
                None => Err(Error::Usage(format!(
                    "the synthetic job's path {spec:?} is not UTF-8"
                ))),
            },
            (Some(template), Via::Starter(_)) => {
                let names: Vec<String> = run.hosts.values().map(|h| h.name.clone()).collect();
                template.commands(&names, &command).map(|commands| {
                    for (covered, argv) in commands {
                        match Launched::spawn(covered.clone(), argv) {
                            Ok(launched) => run.launched.push(launched),
                            Err(e) => run.fail_hosts(&covered, &e.to_string()),
                        }
                    }
                    run.how = "started with --launcher".into();
                })
            }
            (_, Via::Slurm(job)) => start::through_slurm(job, &names, &command).map(|launched| {
                run.how = format!(
                    "started as step '{}' of Slurm job {}",
                    slurm::TOOL_STEP_NAME,
                    job.job
                );
                run.launched.push(launched);
            }),
            (None, Via::Starter(starter)) => match start::slurm_job_instead(starter) {
                Some(job) => start::through_slurm(&job, &names, &command).map(|launched| {
                    run.how = format!(
                        "started as step '{}' of the starter's Slurm job {}",
                        slurm::TOOL_STEP_NAME,
                        job.job
                    );
                    run.launched.push(launched);
                }),
                None => {
                    start::through_starter(starter.pid, &*starter.symbols, &command).map(|poked| {
                        run.how = match &poked.fifo {
                            Some(fifo) => {
                                format!("asked of the starter through its attach FIFO {fifo}")
                            }
                            None => "asked of the starter, which has no attach FIFO and may \
                                     not poll MPIR_being_debugged"
                                .into(),
                        };
                        run.poked = Some(poked);
                    })
                }
            },
        };
        match started {
            Ok(()) => Ok(run),
            Err(e) => {
                let hosts = std::mem::take(&mut run.hosts);
                Err((hosts, e))
            }
        }
    }
}

impl Run {
    fn idle(events: Receiver<Event>, hosts: BTreeMap<String, Host>, timeout: Duration) -> Self {
        Self {
            events,
            registry: Arc::default(),
            stop: Arc::new(AtomicBool::new(true)),
            acceptor: None,
            hosts,
            launched: Vec::new(),
            poked: None,
            how: String::new(),
            discover: None,
            timeout,
            began: Instant::now(),
            steps: Vec::new(),
            levels: Vec::new(),
            expanding: Duration::ZERO,
        }
    }

    fn step(&mut self, name: &'static str) {
        self.steps.push((name, self.began.elapsed()));
    }

    fn fail_hosts_all(&mut self, reason: &str) {
        for host in self.hosts.values_mut() {
            host.stage = Stage::Failed(reason.to_string());
        }
    }

    fn fail_hosts(&mut self, names: &[String], reason: &str) {
        for name in names {
            if let Some(host) = self.hosts.get_mut(&host_key(name)) {
                host.stage = Stage::Failed(reason.to_string());
            }
        }
    }

    /// Waits until every host has a collector, or the callback time is up.
    fn await_callbacks(&mut self) {
        let deadline = Instant::now() + self.timeout;
        while self.hosts.values().any(|h| h.stage == Stage::Waiting) && Instant::now() < deadline {
            self.next_event(deadline);
            self.check_launched();
        }
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.closed = true;
        drop(registry);
        self.step("called back");
        let how = self.how.clone();
        let seconds = self.timeout.as_secs_f64();
        for host in self.hosts.values_mut() {
            if host.stage == Stage::Waiting {
                host.stage = Stage::Failed(format!(
                    "no collector called back from host '{}' within {seconds} s ({how})",
                    host.name
                ));
            }
        }
        // The starter has started what it was asked to (it copies the
        // program and arguments when it does): put its variables back.
        if let Some(poked) = self.poked.take() {
            if let Err(e) = poked.restore() {
                eprintln!("mqs-dump: warning: could not restore the starter's MPIR variables: {e}");
            }
        }
    }

    /// A launcher command that ended before its hosts called back fails
    /// them at once, with what it said.
    fn check_launched(&mut self) {
        let mut failed = Vec::new();
        for launched in &mut self.launched {
            if let Some(status) = launched.exited() {
                let waiting = launched.hosts.iter().any(|h| {
                    self.hosts
                        .get(&host_key(h))
                        .is_some_and(|h| h.stage == Stage::Waiting)
                });
                if waiting {
                    let said = launched.stderr();
                    let said = if said.is_empty() {
                        "no output".into()
                    } else {
                        said
                    };
                    failed.push((
                        launched.hosts.clone(),
                        format!(
                            "the launcher command '{}' ended ({status}) before a collector \
                             called back: {said}",
                            launched.argv.join(" ")
                        ),
                    ));
                }
            }
        }
        for (hosts, reason) in failed {
            for name in &hosts {
                if let Some(host) = self.hosts.get_mut(&host_key(name)) {
                    if host.stage == Stage::Waiting {
                        host.stage = Stage::Failed(reason.clone());
                    }
                }
            }
        }
    }

    /// Sends each connected collector its members; in a tree, the roots
    /// theirs and their subtrees', the others word to wait for their
    /// parent.
    fn assign(&mut self, share: &ShareOptions, fanout: Option<usize>) {
        let mut children = self.tree(fanout);
        let in_tree = !children.is_empty();
        for (key, host) in self.hosts.iter_mut() {
            if host.stage != Stage::Connected {
                continue;
            }
            let sent = host.commands.as_ref().is_some_and(|c| {
                c.send(Command::Assign {
                    members: host.members.clone(),
                    options: share.clone(),
                    go_timeout: self.timeout,
                    discover: self.discover.clone(),
                    children: children.remove(key).unwrap_or_default(),
                    in_tree,
                })
                .is_ok()
            });
            host.stage = if sent {
                Stage::Assigned
            } else {
                Stage::Failed(format!("the collector on host '{}' went away", host.name))
            };
        }
    }

    /// With more connected hosts than `fanout`, makes them a tree: tells
    /// the hosts below the roots to wait for their parents (they are
    /// assigned through them) and gives each root's children, by root.
    fn tree(&mut self, fanout: Option<usize>) -> HashMap<String, Vec<Child>> {
        let mut children = HashMap::new();
        let connected: Vec<String> = self
            .hosts
            .iter()
            .filter(|(_, h)| h.stage == Stage::Connected && h.listen.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let Some(k) = fanout.filter(|&k| k > 0 && connected.len() > k) else {
            return children;
        };
        let (roots, below) = tree::shape(connected.len(), k);
        fn build(
            i: usize,
            keys: &[String],
            below: &[Vec<usize>],
            hosts: &BTreeMap<String, Host>,
        ) -> Child {
            let host = &hosts[&keys[i]];
            Child {
                key: keys[i].clone(),
                name: host.name.clone(),
                address: host
                    .listen
                    .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
                members: host.members.clone(),
                children: below[i]
                    .iter()
                    .map(|&j| build(j, keys, below, hosts))
                    .collect(),
            }
        }
        for &r in &roots {
            let root = build(r, &connected, &below, &self.hosts);
            let keys: Vec<String> = root.children.iter().flat_map(Child::subtree).collect();
            if let Some(host) = self.hosts.get_mut(&connected[r]) {
                host.below = keys;
            }
            children.insert(connected[r].clone(), root.children);
        }
        // A child waits for its parent's call while the parent waits for
        // its own assignment: twice the step.
        let wait = self.timeout * 2;
        for (i, key) in connected.iter().enumerate() {
            if roots.contains(&i) {
                continue;
            }
            let Some(host) = self.hosts.get_mut(key) else {
                continue;
            };
            let sent = host
                .commands
                .take()
                .is_some_and(|c| c.send(Command::Delegate { timeout: wait }).is_ok());
            host.stage = if sent {
                Stage::Assigned
            } else {
                Stage::Failed(format!("the collector on host '{}' went away", host.name))
            };
        }
        children
    }

    /// The hosts whose frames come through `key`'s connection: itself and,
    /// for a root of a tree, every host below it.
    fn through(&self, key: &str) -> Vec<String> {
        let mut keys = vec![key.to_string()];
        if let Some(host) = self.hosts.get(key) {
            keys.extend(host.below.iter().cloned());
        }
        keys
    }

    /// Waits until every assigned collector has stopped its ranks (or the
    /// time is up), then lets them all go on.
    fn await_stopped(&mut self) {
        let deadline = Instant::now() + self.timeout;
        while self.hosts.values().any(|h| h.stage == Stage::Assigned) && Instant::now() < deadline {
            self.next_event(deadline);
        }
        for host in self.hosts.values() {
            if let (Stage::Assigned | Stage::Stopped, Some(commands)) =
                (&host.stage, &host.commands)
            {
                let _ = commands.send(Command::Go);
            }
        }
        self.step("all stopped");
    }

    /// Waits until every collector has sent everything or is lost. Each of
    /// their frames is bounded in time by its connection thread; this
    /// bound only keeps a pathological stream from running for ever.
    fn await_done(&mut self) {
        let busy = |h: &Host| matches!(h.stage, Stage::Assigned | Stage::Stopped);
        let members: u32 = self
            .hosts
            .values()
            .filter(|h| busy(h))
            .map(|h| h.members.len() as u32)
            .sum();
        let deadline = Instant::now() + self.timeout * (2 + members);
        while self.hosts.values().any(busy) && Instant::now() < deadline {
            self.next_event(deadline);
        }
        for host in self.hosts.values_mut() {
            if busy(host) {
                host.stage = Stage::Failed(format!(
                    "the collector on host '{}' did not finish in time",
                    host.name
                ));
            }
        }
        self.step("all sent");
        self.shut_down();
        if mqs_core::dll::is_verbose() {
            let steps: Vec<String> = self
                .steps
                .iter()
                .map(|(name, at)| format!("{name} {:.0} ms", at.as_secs_f64() * 1e3))
                .collect();
            eprintln!(
                "mqs-dump: collectors on {} hosts: {}",
                self.hosts.len(),
                steps.join(", ")
            );
        }
    }

    /// Stops listening and ends the launcher commands.
    fn shut_down(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let deadline = Instant::now() + LAUNCHER_GRACE;
        while self.launched.iter_mut().any(|l| l.exited().is_none()) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        for launched in &mut self.launched {
            launched.end();
        }
        // Events that arrived late (refusals) are still worth a line.
        while let Ok(event) = self.events.try_recv() {
            self.handle(event);
        }
    }

    fn next_event(&mut self, deadline: Instant) {
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .min(POLL * 5);
        match self.events.recv_timeout(wait) {
            Ok(event) => self.handle(event),
            Err(RecvTimeoutError::Timeout) => {}
            // Every thread is gone: nothing more will come.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Refused { peer, reason } => {
                eprintln!("mqs-dump: warning: refused a collector connection from {peer}: {reason}")
            }
            Event::Connected {
                key,
                commands,
                listen,
            } => {
                if let Some(host) = self.hosts.get_mut(&key) {
                    if host.stage == Stage::Waiting {
                        host.stage = Stage::Connected;
                        host.commands = Some(commands);
                        host.listen = listen;
                    }
                }
            }
            Event::Found {
                key,
                processes,
                problem,
            } => {
                if let Some(host) = self.hosts.get_mut(&key) {
                    for found in processes {
                        // One process listed twice: dumped once.
                        if host.members.iter().any(|m| m.pid == found.member.pid) {
                            continue;
                        }
                        host.groups.insert(found.member.pid, found.group);
                        host.members.push(found.member);
                    }
                    if let (Some(problem), true) = (problem, host.members.is_empty()) {
                        host.stage = Stage::Failed(format!("on host '{}': {problem}", host.name));
                    }
                }
            }
            Event::Stopped { key } => {
                for key in self.through(&key) {
                    if let Some(host) = self.hosts.get_mut(&key) {
                        if host.stage == Stage::Assigned {
                            host.stage = Stage::Stopped;
                        }
                    }
                }
            }
            Event::Process { key, process } => self.received(&key, Ok(process)),
            Event::Failure { key, failure } => self.received(&key, Err(failure)),
            Event::Done { key } => {
                for key in self.through(&key) {
                    if let Some(host) = self.hosts.get_mut(&key) {
                        if !matches!(host.stage, Stage::Failed(_)) {
                            host.stage = Stage::Done;
                        }
                    }
                }
            }
            Event::Lost { key, reason } => {
                let Some(name) = self.hosts.get(&key).map(|h| h.name.clone()) else {
                    return;
                };
                for below in self.through(&key) {
                    if let Some(host) = self.hosts.get_mut(&below) {
                        if host.stage != Stage::Done {
                            host.stage = Stage::Failed(if below == key {
                                format!("the collector on host '{name}' was lost: {reason}")
                            } else {
                                format!(
                                    "the collector on host '{name}', through which host '{}' \
                                     reports, was lost: {reason}",
                                    host.name
                                )
                            });
                        }
                    }
                }
            }
            Event::Levels { levels, expand } => {
                super::states::absorb_levels(&mut self.levels, &levels, 0);
                self.expanding = self.expanding.max(expand);
            }
            Event::LostBelow { hosts, reason } => {
                for key in hosts {
                    if let Some(host) = self.hosts.get_mut(&key) {
                        if host.stage != Stage::Done {
                            host.stage = Stage::Failed(reason.clone());
                        }
                    }
                }
            }
        }
    }

    /// Keeps what a collector reported about one of its own members, once.
    fn received(&mut self, key: &str, what: std::result::Result<Box<ProcessDump>, RankFailure>) {
        let Some(host) = self.hosts.get_mut(key) else {
            return;
        };
        // A run of ranks counts as its ranks; one that is not wholly
        // expected is taken rank by rank, so each is judged alone.
        if let Ok(run) = &what {
            if run.run_len > 1 {
                let whole = run.run_members().all(|(pid, rank)| {
                    !host.reported.contains(&pid)
                        && host
                            .members
                            .iter()
                            .any(|m| m.pid == pid && m.identity == rank)
                });
                if !whole {
                    if let Ok(run) = what {
                        for one in run.split_run() {
                            self.received(key, Ok(Box::new(one)));
                        }
                    }
                    return;
                }
                host.reported.extend(run.run_members().map(|(pid, _)| pid));
                host.results.push(what);
                return;
            }
        }
        let (pid, identity) = match &what {
            Ok(p) => (p.pid, p.global_rank),
            Err(f) => (f.pid, i32::try_from(f.rank).unwrap_or(-1)),
        };
        let member = host
            .members
            .iter()
            .any(|m| m.pid == pid && m.identity == identity);
        if !member || !host.reported.insert(pid) {
            eprintln!(
                "mqs-dump: warning: the collector on host '{}' reported pid {pid} as rank \
                 {identity}, which it was not asked for: ignored",
                host.name
            );
            return;
        }
        host.results.push(what);
    }

    /// Everything read elsewhere, and a failure for every rank that was not.
    fn results(&mut self) -> Vec<std::result::Result<ProcessDump, (RankFailure, Error)>> {
        let mut out = Vec::new();
        for host in self.hosts.values_mut() {
            for what in host.results.drain(..) {
                out.push(match what {
                    Ok(mut process) => {
                        process.host = Some(host.name.clone());
                        Ok(*process)
                    }
                    Err(mut failure) => {
                        failure.host = host.name.clone();
                        let error = Error::OnHost {
                            host: host.name.clone(),
                            message: failure.message.clone(),
                            code: failure.exit_code,
                        };
                        failure.message = error.to_string();
                        failure.exit_code = error.exit_code();
                        Err((failure, error))
                    }
                });
            }
            let reason = match &host.stage {
                Stage::Failed(reason) => reason.clone(),
                _ => format!("the collector on host '{}' did not report it", host.name),
            };
            for member in &host.members {
                if !host.reported.contains(&member.pid) {
                    let who = if member.identity >= 0 {
                        format!(
                            "rank {} (pid {} on host '{}')",
                            member.identity, member.pid, host.name
                        )
                    } else {
                        format!("pid {} on host '{}'", member.pid, host.name)
                    };
                    let error = Error::Collect(format!("{who}: {reason}"));
                    out.push(Err((inspect::failure(member, &error), error)));
                }
            }
            // --slurm: a node whose collector never said what it found has
            // ranks nobody knows; it fails as a whole, numbered later.
            if let (Some(_), true, Stage::Failed(reason)) =
                (&self.discover, host.members.is_empty(), &host.stage)
            {
                let error = Error::Collect(format!(
                    "the MPI processes on host '{}' (unknown): {reason}",
                    host.name
                ));
                let failure = RankFailure {
                    rank: UNKNOWN_RANK,
                    pid: 0,
                    host: host.name.clone(),
                    message: error.to_string(),
                    exit_code: error.exit_code(),
                };
                out.push(Err((failure, error)));
            }
        }
        out
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(poked) = self.poked.take() {
            let _ = poked.restore();
        }
        self.shut_down();
    }
}

/// The addresses collectors are told to call back to.
fn callback_addresses(given: Option<IpAddr>, port: u16) -> Vec<SocketAddr> {
    if let Some(ip) = given {
        return vec![SocketAddr::new(ip, port)];
    }
    let mut found: Vec<Ipv4Addr> = nix::ifaddrs::getifaddrs()
        .map(|addrs| {
            addrs
                .filter_map(|a| Some(a.address?.as_sockaddr_in()?.ip()))
                .collect()
        })
        .unwrap_or_default();
    // Other hosts reach us on a real interface; loopback only serves this
    // machine, so it goes last.
    found.sort_by_key(|ip| (ip.is_loopback(), ip.octets()));
    found.dedup();
    found.retain(|ip| !ip.is_unspecified());
    if !found.contains(&Ipv4Addr::LOCALHOST) {
        found.push(Ipv4Addr::LOCALHOST);
    }
    let mut out: Vec<SocketAddr> = found
        .into_iter()
        .map(|ip| SocketAddr::new(IpAddr::V4(ip), port))
        .collect();
    if out.len() > MAX_CALLBACK_ADDRESSES {
        out.drain(MAX_CALLBACK_ADDRESSES - 1..out.len() - 1);
    }
    out
}

/// Takes connections until told to stop; each is served by a thread.
fn accept(
    listener: TcpListener,
    token: Token,
    registry: Arc<Mutex<Registry>>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    timeout: Duration,
    received: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                let (token, registry, events) = (token.clone(), registry.clone(), events.clone());
                let stream = Counted {
                    stream,
                    received: received.clone(),
                };
                std::thread::spawn(move || {
                    serve(stream, peer, &token, &registry, &events, timeout)
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// A collector's connection, counting what it reads.
struct Counted {
    stream: TcpStream,
    received: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf)?;
        self.received.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// One collector's connection, from its hello to its last dump.
fn serve(
    mut stream: Counted,
    peer: SocketAddr,
    token: &Token,
    registry: &Mutex<Registry>,
    events: &Sender<Event>,
    timeout: Duration,
) {
    let refused = |reason: String| {
        let _ = events.send(Event::Refused { peer, reason });
    };
    // The listener does not block; its connections do, with limits.
    let configured = stream
        .stream
        .set_nonblocking(false)
        .and_then(|()| stream.stream.set_read_timeout(Some(HELLO_TIMEOUT)))
        .and_then(|()| stream.stream.set_write_timeout(Some(timeout)));
    if let Err(e) = configured {
        return refused(e.to_string());
    }
    let (given, host, node, pid, listen) =
        match protocol::receive::<ToFront>(&mut stream, MAX_HELLO) {
            Ok(ToFront::Hello {
                protocol,
                token: given,
                host,
                node,
                pid,
                listen,
            }) if protocol == PROTOCOL => (given, host, node, pid, listen),
            Ok(ToFront::Hello { protocol, host, .. }) => {
                let reason = format!(
                    "protocol {protocol}, this mqs-dump speaks {PROTOCOL}: use the same \
                 mqs-dump on every host"
                );
                let _ = protocol::send(
                    &mut stream,
                    &ToCollector::Refused {
                        reason: reason.clone(),
                    },
                );
                return refused(format!("{reason} (host {host:?})"));
            }
            Ok(_) => return refused("it did not say hello first".into()),
            Err(e) => return refused(format!("no hello within {HELLO_TIMEOUT:?}: {e}")),
        };
    if !token.matches(&given) {
        let _ = protocol::send(
            &mut stream,
            &ToCollector::Refused {
                reason: "wrong token".into(),
            },
        );
        return refused(format!(
            "wrong token (it says it is pid {pid} on host {host:?})"
        ));
    }
    // Slurm's name for its node first (what srun's table and Slurm's node
    // lists say), then its host name.
    let (key, claim) = {
        let mut registry = registry.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<String> = node.iter().map(|n| host_key(n)).collect();
        keys.push(host_key(&host));
        keys.dedup();
        let mut outcome = (host_key(&host), Claim::Nothing);
        for k in keys {
            match registry.claim(&k) {
                Claim::Mine => {
                    outcome = (k, Claim::Mine);
                    break;
                }
                Claim::TooLate => outcome = (k, Claim::TooLate),
                Claim::Nothing => {}
            }
        }
        outcome
    };
    match claim {
        Claim::Mine => {}
        Claim::Nothing => {
            // A host without ranks of ours (the starter's own, say), or a
            // second collector on one host: nothing to do.
            let _ = protocol::send(
                &mut stream,
                &ToCollector::Assignment {
                    members: Vec::new(),
                    options: ShareOptions::default(),
                    go_timeout_ms: 0,
                    discover: None,
                    children: Vec::new(),
                    in_tree: false,
                },
            );
            return;
        }
        Claim::TooLate => {
            let reason = format!("too late: the dump went on without host '{host}'");
            let _ = protocol::send(
                &mut stream,
                &ToCollector::Refused {
                    reason: reason.clone(),
                },
            );
            return refused(reason);
        }
    }
    let (tx, commands) = mpsc::channel();
    let lost = |reason: String| {
        let _ = events.send(Event::Lost {
            key: key.clone(),
            reason,
        });
    };
    if events
        .send(Event::Connected {
            key: key.clone(),
            commands: tx,
            // Where a parent calls it: where it called from.
            listen: listen.map(|port| SocketAddr::new(peer.ip(), port)),
        })
        .is_err()
    {
        return;
    }
    // The front end assigns once every host has called back (or the
    // callback time is up), and tells it to go once every host's ranks are
    // stopped.
    let (members, options, go_timeout, discover, children, in_tree) =
        match commands.recv_timeout(timeout * 3) {
            Ok(Command::Assign {
                members,
                options,
                go_timeout,
                discover,
                children,
                in_tree,
            }) => (members, options, go_timeout, discover, children, in_tree),
            Ok(Command::Delegate { timeout }) => {
                let wait = ToCollector::WaitForParent {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                };
                if let Err(e) = protocol::send(&mut stream, &wait) {
                    return lost(format!("cannot tell it to wait for its parent: {e}"));
                }
                return;
            }
            _ => {
                let reason = "too late: the dump went on without this host".to_string();
                let _ = protocol::send(&mut stream, &ToCollector::Refused { reason });
                return lost("never assigned".into());
            }
        };
    let looks = discover.is_some();
    // A root of a tree speaks for the hosts below it too, and waits for
    // them before it reports.
    let below: HashSet<String> = children.iter().flat_map(Child::subtree).collect();
    // A root reports once its subtree has: it gets what its children get,
    // and a step more.
    let (stop_wait, results_wait) = if children.is_empty() {
        (timeout * 2, timeout)
    } else {
        let handed = tree::Handed {
            token: String::new(),
            options: options.clone(),
            go_timeout,
            discover: discover.clone(),
            timeout,
        };
        let longest = children
            .iter()
            .map(|c| handed.results_limit(c))
            .max()
            .unwrap_or_default();
        (
            timeout * 2 + handed.stop_limit(&children) + timeout,
            longest + timeout * 2,
        )
    };
    let assignment = ToCollector::Assignment {
        members,
        options,
        go_timeout_ms: u64::try_from(go_timeout.as_millis()).unwrap_or(u64::MAX),
        discover,
        children,
        in_tree,
    };
    // The key a frame names: its own, or one of the hosts below it.
    let tagged = |host: Option<String>| -> Option<String> {
        match host {
            None => Some(key.clone()),
            Some(h) if below.contains(&h) => Some(h),
            Some(_) => None,
        }
    };
    if let Err(e) = protocol::send(&mut stream, &assignment) {
        return lost(format!("cannot send it its ranks: {e}"));
    }
    // Stopping a rank may take up to 10 s per thread that is slow to stop.
    let _ = stream.stream.set_read_timeout(Some(stop_wait));
    if looks {
        // What it found comes first; nothing found (and no host below
        // it), it is done.
        match protocol::receive::<ToFront>(&mut stream, MAX_FRAME) {
            Ok(ToFront::Found {
                processes,
                problem,
                host: None,
            }) => {
                let none = processes.is_empty();
                let _ = events.send(Event::Found {
                    key: key.clone(),
                    processes,
                    problem,
                });
                if none && below.is_empty() {
                    let _ = events.send(Event::Done { key });
                    return;
                }
            }
            Ok(other) => return lost(format!("it sent {other:?} instead of what it found")),
            Err(e) => return lost(format!("it did not say what it found in time: {e}")),
        }
    }
    // Until it is stopped: what hosts below it found, and lost.
    loop {
        match protocol::receive::<ToFront>(&mut stream, MAX_FRAME) {
            Ok(ToFront::Stopped) => {
                let _ = events.send(Event::Stopped { key: key.clone() });
                break;
            }
            Ok(ToFront::Found {
                processes,
                problem,
                host,
            }) if looks => match tagged(host) {
                Some(key) => {
                    let _ = events.send(Event::Found {
                        key,
                        processes,
                        problem,
                    });
                }
                None => return lost("it relayed a host not below it".into()),
            },
            Ok(ToFront::Lost { hosts, reason }) => {
                let hosts = hosts.into_iter().filter(|h| below.contains(h)).collect();
                let _ = events.send(Event::LostBelow { hosts, reason });
            }
            Ok(ToFront::Done) if looks => {
                let _ = events.send(Event::Done { key });
                return;
            }
            Ok(other) => return lost(format!("it sent {other:?} before stopping its ranks")),
            Err(e) => return lost(format!("it did not stop its ranks in time: {e}")),
        }
    }
    match commands.recv_timeout(timeout * 3) {
        Ok(Command::Go) => {}
        _ => return lost("the front end never said go".into()),
    }
    if let Err(e) = protocol::send(&mut stream, &ToCollector::Go) {
        return lost(format!("cannot tell it to go: {e}"));
    }
    // Each dump must come within the timeout of the one before (a root
    // sends its subtree's once all of it is in).
    let _ = stream.stream.set_read_timeout(Some(results_wait));
    loop {
        let event = match protocol::receive::<ToFront>(&mut stream, MAX_FRAME) {
            Ok(ToFront::Process { process, host }) => match tagged(host) {
                Some(key) => Event::Process { key, process },
                None => return lost("it relayed a host not below it".into()),
            },
            Ok(ToFront::States { mut states }) => {
                states.own_host_is(&key);
                let levels = std::mem::take(&mut states.levels);
                let began = Instant::now();
                // One dump per run of ranks in one state: the front end
                // splits them only if its caller wants one per rank.
                let runs = states.runs();
                let expand = began.elapsed();
                let _ = events.send(Event::Levels { levels, expand });
                for (host, process) in runs {
                    let own = host == key;
                    let Some(key) = (if own { Some(host) } else { tagged(Some(host)) }) else {
                        return lost("it relayed a host not below it".into());
                    };
                    let process = Box::new(process);
                    if events.send(Event::Process { key, process }).is_err() {
                        return;
                    }
                }
                continue;
            }
            Ok(ToFront::Failure { failure, host }) => match tagged(host) {
                Some(key) => Event::Failure { key, failure },
                None => return lost("it relayed a host not below it".into()),
            },
            Ok(ToFront::Lost { hosts, reason }) => Event::LostBelow {
                hosts: hosts.into_iter().filter(|h| below.contains(h)).collect(),
                reason,
            },
            Ok(ToFront::Done) => {
                let _ = events.send(Event::Done { key });
                return;
            }
            Ok(other) => return lost(format!("it sent {other:?} while dumping")),
            Err(e) => return lost(format!("it stopped sending: {e}")),
        };
        if events.send(event).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqs_core::model::JobDump;
    use std::io::Write;

    /// An acceptor on loopback with `hosts` to hand out; stops when dropped.
    struct Acceptor {
        addr: SocketAddr,
        token: Token,
        registry: Arc<Mutex<Registry>>,
        events: Receiver<Event>,
        stop: Arc<AtomicBool>,
    }

    impl Acceptor {
        fn start(hosts: &[&str]) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let token = Token::new().unwrap();
            let registry = Arc::new(Mutex::new(Registry {
                hosts: hosts.iter().map(|h| (h.to_string(), false)).collect(),
                closed: false,
            }));
            let (tx, events) = mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            {
                let (token, registry, stop) = (token.clone(), registry.clone(), stop.clone());
                std::thread::spawn(move || {
                    accept(
                        listener,
                        token,
                        registry,
                        tx,
                        stop,
                        Duration::from_secs(5),
                        Arc::default(),
                    )
                });
            }
            Self {
                addr,
                token,
                registry,
                events,
                stop,
            }
        }

        fn hello(&self, token: &str, host: &str) -> (TcpStream, ToCollector) {
            hello(self.addr, token, host)
        }

        fn event(&self) -> Event {
            self.events.recv_timeout(Duration::from_secs(20)).unwrap()
        }
    }

    fn greet(addr: SocketAddr, token: &str, host: &str) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let hello = ToFront::Hello {
            protocol: PROTOCOL,
            token: token.into(),
            host: host.into(),
            node: None,
            pid: 42,
            listen: None,
        };
        protocol::send(&mut s, &hello).unwrap();
        s
    }

    fn hello(addr: SocketAddr, token: &str, host: &str) -> (TcpStream, ToCollector) {
        let mut s = greet(addr, token, host);
        let reply = protocol::receive(&mut s, MAX_FRAME).unwrap();
        (s, reply)
    }

    impl Drop for Acceptor {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_wrong_token_is_refused_and_reported() {
        let front = Acceptor::start(&["nodea"]);
        let (_s, reply) = front.hello("0123", "nodea");
        assert!(
            matches!(&reply, ToCollector::Refused { reason } if reason == "wrong token"),
            "{reply:?}"
        );
        match front.event() {
            Event::Refused { reason, .. } => {
                assert!(
                    reason.starts_with("wrong token (it says it is pid 42"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
        // The host is still free for the right collector.
        let (addr, token) = (front.addr, front.token.as_str().to_string());
        let waiting = std::thread::spawn(move || hello(addr, &token, "NodeA.cluster"));
        match front.event() {
            Event::Connected { key, commands, .. } => {
                assert_eq!(key, "nodea");
                commands
                    .send(Command::Assign {
                        members: vec![Member::single(7, 0)],
                        options: ShareOptions::default(),
                        go_timeout: Duration::from_secs(1),
                        discover: None,
                        children: Vec::new(),
                        in_tree: false,
                    })
                    .unwrap();
            }
            other => panic!("{other:?}"),
        }
        let (_s, reply) = waiting.join().unwrap();
        match &reply {
            ToCollector::Assignment {
                members,
                go_timeout_ms,
                ..
            } => assert_eq!((members.len(), *go_timeout_ms), (1, 1000)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hosts_without_ranks_get_nothing_and_late_ones_are_turned_away() {
        let front = Acceptor::start(&["nodea", "nodeb"]);
        let token = front.token.as_str().to_string();
        // The starter's own host, say: nothing to do.
        let (_s, reply) = front.hello(&token, "login");
        assert!(
            matches!(&reply, ToCollector::Assignment { members, .. } if members.is_empty()),
            "{reply:?}"
        );
        // A second collector for a host already taken: nothing either.
        let first = greet(front.addr, &token, "nodea");
        assert!(matches!(front.event(), Event::Connected { .. }));
        let (_s, reply) = front.hello(&token, "nodea");
        assert!(
            matches!(&reply, ToCollector::Assignment { members, .. } if members.is_empty()),
            "{reply:?}"
        );
        drop(first);
        // Past the callback time, a host with ranks is told it is too late.
        front.registry.lock().unwrap().closed = true;
        let (_s, reply) = front.hello(&token, "nodeb");
        assert!(
            matches!(&reply, ToCollector::Refused { reason } if reason.contains("too late")),
            "{reply:?}"
        );
    }

    #[test]
    fn strangers_are_cut_short() {
        let front = Acceptor::start(&["nodea"]);
        // A frame far larger than any hello: refused unread.
        let mut s = TcpStream::connect(front.addr).unwrap();
        s.write_all(&(100u32 << 20).to_be_bytes()).unwrap();
        match front.event() {
            Event::Refused { reason, .. } => assert!(reason.contains("at most 65536"), "{reason}"),
            other => panic!("{other:?}"),
        }
        // Another protocol: told so.
        let mut s = TcpStream::connect(front.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let hello = ToFront::Hello {
            protocol: PROTOCOL + 1,
            token: front.token.as_str().into(),
            host: "nodea".into(),
            node: None,
            pid: 1,
            listen: None,
        };
        protocol::send(&mut s, &hello).unwrap();
        let reply: ToCollector = protocol::receive(&mut s, MAX_FRAME).unwrap();
        assert!(
            matches!(&reply, ToCollector::Refused { reason } if reason.contains("same mqs-dump")),
            "{reply:?}"
        );
    }

    fn host(name: &str, members: &[(i32, i32)]) -> Host {
        Host {
            members: members
                .iter()
                .map(|&(pid, rank)| Member {
                    host: name.into(),
                    ..Member::single(pid, rank)
                })
                .collect(),
            stage: Stage::Assigned,
            ..Host::new(name)
        }
    }

    /// What a collector sends for one process.
    fn dump(pid: i32, rank: i32) -> Box<ProcessDump> {
        let mut job: JobDump = serde_json::from_str(
            r#"{"schema_version":1,"launcher":null,"failures":[],"processes":[{"pid":0,
            "global_rank":0,"executable":"a","dll":{"path":"d","version":"v",
            "compatibility":2},"communicators":{"status":"ok","list":[]},
            "stats":{"fetches":0,"fetched_bytes":0,"syscalls":0,"elapsed_ms":0.0}}]}"#,
        )
        .unwrap();
        let mut p = job.processes.remove(0);
        p.pid = pid;
        p.global_rank = rank;
        Box::new(p)
    }

    /// What a collector on a host (by its key) sends about one process.
    type Report = (
        &'static str,
        std::result::Result<Box<ProcessDump>, RankFailure>,
    );

    /// What a collector sends when it could not dump one process.
    fn failed(pid: i32, rank: usize) -> RankFailure {
        RankFailure {
            rank,
            pid,
            host: String::new(),
            message: "permission denied".into(),
            exit_code: 4,
        }
    }

    /// The front end's results after each host reported `reports` and was
    /// done, nodea holding ranks 0 (pid 7) and 1 (pid 8), nodeb rank 2
    /// (pid 7 there too): (rank, host, what became of it).
    fn merged(reports: Vec<Report>) -> Vec<(usize, String, String)> {
        let (_tx, events) = mpsc::channel();
        let hosts = [
            ("nodea".to_string(), host("nodea", &[(7, 0), (8, 1)])),
            ("nodeb".to_string(), host("nodeb", &[(7, 2)])),
        ]
        .into_iter()
        .collect();
        let mut run = Run::idle(events, hosts, Duration::from_secs(1));
        for (key, report) in reports {
            run.handle(match report {
                Ok(process) => Event::Process {
                    key: key.into(),
                    process,
                },
                Err(failure) => Event::Failure {
                    key: key.into(),
                    failure,
                },
            });
        }
        for key in ["nodea", "nodeb"] {
            run.handle(Event::Done { key: key.into() });
        }
        let mut results: Vec<(usize, String, String)> = run
            .results()
            .into_iter()
            .map(|r| match r {
                Ok(p) => (
                    p.global_rank as usize,
                    p.host.unwrap_or_default(),
                    format!("dumped (pid {})", p.pid),
                ),
                Err((f, _)) => (f.rank, f.host, f.message),
            })
            .collect();
        results.sort();
        results
    }

    /// A report is a member's only if host, pid and rank all are: one
    /// differing field, and the member counts as not reported.
    #[test]
    fn a_report_that_differs_from_a_member_in_one_field_is_not_merged() {
        let not_reported = |rank: usize, pid: i32, host: &str| {
            (
                rank,
                host.to_string(),
                format!(
                    "rank {rank} (pid {pid} on host '{host}'): the collector on host '{host}' did \
                     not report it"
                ),
            )
        };
        let none = vec![
            not_reported(0, 7, "nodea"),
            not_reported(1, 8, "nodea"),
            not_reported(2, 7, "nodeb"),
        ];
        let cases: Vec<(&str, Report)> = vec![
            ("pid", ("nodea", Ok(dump(8, 0)))),
            ("rank", ("nodea", Ok(dump(7, 1)))),
            ("rank (not the host's)", ("nodea", Ok(dump(7, 2)))),
            ("host", ("nodeb", Ok(dump(7, 0)))),
            ("pid of a failure", ("nodea", Err(failed(7, 1)))),
            ("rank of a failure", ("nodea", Err(failed(8, 0)))),
            ("host of a failure", ("nodeb", Err(failed(8, 1)))),
        ];
        for (what, report) in cases {
            assert_eq!(merged(vec![report]), none, "a report with another {what}");
        }
        // The same reports with every field right are merged.
        assert_eq!(
            merged(vec![
                ("nodea", Ok(dump(7, 0))),
                ("nodea", Err(failed(8, 1))),
                ("nodeb", Ok(dump(7, 2))),
            ]),
            [
                (0, "nodea".to_string(), "dumped (pid 7)".to_string()),
                (
                    1,
                    "nodea".to_string(),
                    "on host 'nodea': permission denied".to_string()
                ),
                (2, "nodeb".to_string(), "dumped (pid 7)".to_string()),
            ]
        );
    }

    #[test]
    fn every_rank_ends_up_dumped_or_failed_with_its_hosts_reason() {
        let (_tx, events) = mpsc::channel();
        let hosts = [
            ("nodea".to_string(), host("nodea", &[(7, 0), (8, 1)])),
            ("nodeb".to_string(), host("nodeb", &[(7, 2)])),
        ]
        .into_iter()
        .collect();
        let mut run = Run::idle(events, hosts, Duration::from_secs(1));
        run.handle(Event::Process {
            key: "nodea".into(),
            process: dump(7, 0),
        });
        // Twice, and a rank it was not given: ignored.
        run.handle(Event::Process {
            key: "nodea".into(),
            process: dump(7, 0),
        });
        run.handle(Event::Process {
            key: "nodea".into(),
            process: dump(7, 2),
        });
        run.handle(Event::Failure {
            key: "nodea".into(),
            failure: RankFailure {
                rank: 1,
                pid: 8,
                host: String::new(),
                message: "permission denied for pid 8: no".into(),
                exit_code: 4,
            },
        });
        run.handle(Event::Done {
            key: "nodea".into(),
        });
        run.handle(Event::Lost {
            key: "nodeb".into(),
            reason: "it stopped sending: reset".into(),
        });
        let results = run.results();
        assert_eq!(results.len(), 3);
        let ok: Vec<(i32, Option<&str>)> = results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|p| (p.global_rank, p.host.as_deref()))
            .collect();
        assert_eq!(ok, [(0, Some("nodea"))]);
        let failed: Vec<(usize, &str, &str, i32)> = results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .map(|(f, _)| (f.rank, f.host.as_str(), f.message.as_str(), f.exit_code))
            .collect();
        assert_eq!(
            failed,
            [
                (
                    1,
                    "nodea",
                    "on host 'nodea': permission denied for pid 8: no",
                    4
                ),
                (
                    2,
                    "nodeb",
                    "rank 2 (pid 7 on host 'nodeb'): the collector on host 'nodeb' was lost: \
                     it stopped sending: reset",
                    exit_code::COLLECT
                ),
            ]
        );
    }

    #[test]
    fn a_run_of_ranks_counts_as_its_ranks_and_one_not_wholly_asked_for_is_split() {
        let (_tx, events) = mpsc::channel();
        let hosts = [(
            "nodea".to_string(),
            host("nodea", &[(7, 0), (8, 1), (9, 2), (20, 5), (21, 6)]),
        )]
        .into_iter()
        .collect();
        let mut run = Run::idle(events, hosts, Duration::from_secs(1));
        let run_of = |pid, rank, len| {
            let mut p = dump(pid, rank);
            p.run_len = len;
            Event::Process {
                key: "nodea".into(),
                process: p,
            }
        };
        // Pids 7-9 as ranks 0-2: one result. Pids 20-22 as ranks 5-7:
        // rank 7 was not asked for, so ranks 5 and 6 are taken alone and
        // rank 7 ignored. Rank 1 again (inside a run): ignored.
        run.handle(run_of(7, 0, 3));
        run.handle(run_of(20, 5, 3));
        run.handle(run_of(8, 1, 1));
        run.handle(Event::Done {
            key: "nodea".into(),
        });
        let results = run.results();
        let ok: Vec<(i32, i32, u32)> = results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|p| (p.pid, p.global_rank, p.run_len))
            .collect();
        assert_eq!(ok, [(7, 0, 3), (20, 5, 1), (21, 6, 1)]);
        assert!(results.iter().all(Result::is_ok), "every rank reported");
    }

    #[test]
    fn collectors_call_back_to_real_interfaces_before_loopback() {
        let addrs = callback_addresses(None, 4000);
        assert!(!addrs.is_empty() && addrs.len() <= MAX_CALLBACK_ADDRESSES);
        assert_eq!(addrs.last().unwrap().to_string(), "127.0.0.1:4000");
        assert!(addrs.iter().all(|a| a.port() == 4000));
        let given: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            callback_addresses(Some(given), 5),
            [SocketAddr::new(given, 5)]
        );
    }
}

#[cfg(test)]
mod front_tests {
    use super::*;
    use mqs_core::symbols::SymbolIndex;

    #[test]
    fn a_starter_without_the_extension_fails_each_rank_once_with_the_fix() {
        let mut front = Front::new(&Options::default(), CollectOptions::default());
        let member = |rank: i32, host: &str, pid: i32| Member {
            host: host.into(),
            ..Member::single(pid, rank)
        };
        let members = vec![
            member(0, "nodea", 7),
            member(1, "nodea", 7),
            member(2, "nodeb", 7),
        ];
        assert!(members.iter().all(|m| front.takes(m)));
        assert!(!front.takes(&member(3, "nodeb", 0)), "a rank not started");
        assert!(!front.takes(&member(4, "localhost", 9)), "a local rank");
        let starter = Starter {
            pid: std::process::id() as i32,
            symbols: Arc::new(SymbolIndex::new(Vec::new(), Vec::new()).unwrap()),
        };
        front.start(&starter, members);
        front.stopped();
        let mut failed: Vec<(usize, String)> = front
            .finish()
            .into_iter()
            .map(|r| {
                let (f, _) = r.unwrap_err();
                (f.rank, f.message)
            })
            .collect();
        failed.sort();
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert!(
            failed[0]
                .1
                .contains("rank 0 (pid 7 on host 'nodea'): the starter cannot start collectors"),
            "{}",
            failed[0].1
        );
        assert!(
            failed[0].1.contains("--launcher 'ssh {host}'"),
            "{}",
            failed[0].1
        );
        assert!(
            failed[1].1.contains("has the pid 7 of rank 0 too"),
            "{}",
            failed[1].1
        );
        assert!(failed[2].1.contains("host 'nodeb'"), "{}", failed[2].1);
    }
}
