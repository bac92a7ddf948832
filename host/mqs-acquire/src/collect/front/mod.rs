//! The front end ([`Front`]): listens, has collectors started on their
//! hosts, checks each one's token, hands it its host's ranks (or, for
//! `--slurm`, has it find them), holds every host at the barrier until all
//! are stopped, and merges what comes back with the ranks read here,
//! reporting each rank not read with the reason.
//!
//! One job a file: `begin.rs` (listening and having collectors started),
//! `connection.rs` (one collector's connection, on a thread of its own),
//! `run.rs` (a collection under way: the waits for callbacks, the
//! barrier and go, the end), `shape.rs` (connected hosts made a tree),
//! `merge.rs` (what collectors report, kept once per member, and a
//! failure for every member not read).

mod begin;
mod connection;
mod merge;
mod run;
mod shape;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::hosts::host_key;
use crate::inspect::{self, Elsewhere, Options, Starter};
use crate::members::Member;
use crate::slurm::{self, Resolved, StarterJob};
use crate::Error;
use mqs_core::model::{ProcessDump, RankFailure};

use super::limits::Limits;
use super::protocol::{Child, Discover, FoundProcess, ShareOptions};
use super::start::Template;
use super::states::Level;
use run::Run;

/// How often waits look at launcher commands and the clock.
const POLL: Duration = Duration::from_millis(20);
/// The rank of a failure that stands for a node's unknown ranks, until
/// [`super::number_found`] numbers it after every known one.
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
    /// Collectors send what only a per-rank output shows (buffer, frame and
    /// request addresses, thread ids). Off: ranks are compared on what the
    /// job view and DOT read, so that a real job's equal ranks travel as
    /// one state (comparing two snapshots, `--confirm` and `--deadlock`'s,
    /// needs the addresses).
    pub per_rank_detail: bool,
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
            per_rank_detail: true,
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
                per_rank_detail: collect.per_rank_detail,
                ranks_by_number: !collect.per_rank_detail,
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
        // Each host's members by pid, and the key of the last member's
        // host name (a table lists a host's ranks together).
        let mut seen: std::collections::HashMap<(String, i32), usize> = Default::default();
        let mut last: Option<(String, String)> = None;
        for member in members {
            let key = match &last {
                Some((name, key)) if *name == member.host => key.clone(),
                _ => {
                    let key = host_key(&member.host);
                    last = Some((member.host.clone(), key.clone()));
                    key
                }
            };
            // One process, listed twice on its host: dumped once.
            if let Some(&of_rank) = seen.get(&(key.clone(), member.pid)) {
                let e = Error::Unreachable {
                    pid: member.pid,
                    detail: crate::members::Unusable::Duplicate { of_rank }.describe(&member),
                };
                self.refused.push((inspect::failure(&member, &e), e));
                continue;
            }
            seen.insert((key.clone(), member.pid), member.rank);
            hosts
                .entry(key)
                .or_insert_with(|| Host::new(&member.host))
                .members
                .push(member);
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

    /// Whether pid `pid` is a member of this host's as rank `rank`, and
    /// not reported yet.
    fn expects(&self, pid: i32, rank: i32) -> bool {
        !self.reported.contains(&pid)
            && self
                .members
                .iter()
                .any(|m| m.pid == pid && m.identity == rank)
    }

    /// Counts pid `pid` as reported as rank `rank`, if it is expected;
    /// else says so and it is ignored (false).
    fn report(&mut self, pid: i32, rank: i32) -> bool {
        if self.expects(pid, rank) {
            self.reported.insert(pid);
            return true;
        }
        eprintln!(
            "mqs-dump: warning: the collector on host '{}' reported pid {pid} as rank \
             {rank}, which it was not asked for: ignored",
            self.name
        );
        false
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
    /// Ranks a root's states name by number: their hosts and pids.
    Roll {
        key: String,
        run: super::states::Run,
    },
    /// A dump of ranks by number (pid 0), accounted for by a `Roll`.
    Numbered {
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
    Assign(Assignment),
    /// In a tree, below the roots: wait for the parent's call.
    Delegate {
        timeout: Duration,
    },
    Go,
}

/// A collector's assignment, as the front end hands it to the thread
/// serving it.
#[derive(Debug)]
struct Assignment {
    members: Vec<Member>,
    options: ShareOptions,
    go_timeout: Duration,
    discover: Option<Discover>,
    /// Its children, in a tree.
    children: Vec<Child>,
    in_tree: bool,
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
        if let Some(mut run) = self.begin_or_fail(Via::Starter(starter), hosts) {
            run.await_callbacks();
            run.assign(&self.share, self.collect.fanout);
            self.run = Some(run);
        }
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
        give_back_freed_memory();
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

/// Returns to the system what a collection freed: the buffers of its
/// connection threads (one per host) stay in the allocator's free lists
/// otherwise, 40 MB at 1,000 hosts and 100,000 ranks, while the analysis
/// that follows allocates anew.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim walks the C allocator's own free lists and
    // takes no pointer of ours; every allocation stays valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whom collectors are asked of.
enum Via<'a> {
    /// The job's starter (or `--launcher`): through its tool-daemon
    /// extension, else as a step of the Slurm job it runs in.
    Starter(&'a Starter),
    /// A step of this Slurm job (`--slurm`).
    Slurm(&'a StarterJob),
    /// `--launcher` alone, no starter involved.
    Launcher,
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
        let Some(mut run) = self.begin_or_fail(Via::Slurm(&job), hosts) else {
            return;
        };
        run.discover = Some(Discover {
            job: target.spec.job.clone(),
            step: target.spec.step.clone(),
        });
        run.await_callbacks();
        // Processes found on nodes are numbered by host and pid later.
        let share = ShareOptions {
            ranks_by_number: false,
            ..self.share.clone()
        };
        run.assign(&share, self.collect.fanout);
        self.run = Some(run);
        self.stopped();
    }

    /// Reads `members` (as a starter's table would list them) through
    /// collectors the `--launcher` template ([`CollectOptions::launcher`])
    /// starts, no starter involved: starts them and waits until every
    /// host's members are stopped (or will not be). [`Elsewhere::finish`]
    /// then has the dumps.
    pub fn start_with_launcher(&mut self, members: Vec<Member>) {
        let hosts = self.hosts_of(members);
        if let Some(mut run) = self.begin_or_fail(Via::Launcher, hosts) {
            run.await_callbacks();
            run.assign(&self.share, self.collect.fanout);
            self.run = Some(run);
            self.stopped();
        }
    }

    /// [`Front::begin`]; when nothing could be started, a run in which
    /// every host fails the same way, and None.
    fn begin_or_fail(&mut self, via: Via<'_>, hosts: BTreeMap<String, Host>) -> Option<Run> {
        match self.begin(via, hosts) {
            Ok(run) => Some(run),
            Err((hosts, e)) => {
                let (_, events) = mpsc::channel();
                let mut run = Run::idle(events, hosts, Limits::new(self.collect.timeout));
                run.fail_hosts_all(&e.to_string());
                self.run = Some(run);
                None
            }
        }
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
}
