//! One collector's connection, served on a thread of its own from its
//! hello to its last dump: its token checked, its host claimed, its
//! assignment sent, its stop awaited, go passed on, its frames turned into
//! [`Event`]s for the front end.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::hosts::host_key;

use super::super::limits::Limits;
use super::super::protocol::{
    self, Child, ShareOptions, ToCollector, ToFront, Token, MAX_FRAME, MAX_HELLO, PROTOCOL,
};
use super::{Assignment, Command, Event, POLL};

/// Which hosts connection threads may still take.
#[derive(Debug, Default)]
pub(super) struct Registry {
    /// Hosts with ranks, and whether a collector has claimed each.
    pub(super) hosts: BTreeMap<String, bool>,
    /// Past the callback deadline, new hosts are turned away.
    pub(super) closed: bool,
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

/// Takes connections until told to stop; each is served by a thread.
pub(super) fn accept(
    listener: TcpListener,
    token: Token,
    registry: Arc<Mutex<Registry>>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    limits: Limits,
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
                std::thread::spawn(move || serve(stream, peer, &token, &registry, &events, limits));
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

/// Who a collector says it is in its hello.
struct Hello {
    host: String,
    /// Its node's Slurm name, in a Slurm step.
    node: Option<String>,
    /// The port it listens on for a parent's call.
    listen: Option<u16>,
}

/// How a stage of a connection ended, when it did not fail.
enum Next {
    /// On to the next stage.
    Continue,
    /// Nothing more to do on this connection.
    Finished,
}

/// One collector's connection, from its hello to its last dump.
fn serve(
    mut stream: Counted,
    peer: SocketAddr,
    token: &Token,
    registry: &Mutex<Registry>,
    events: &Sender<Event>,
    limits: Limits,
) {
    let refused = |reason: String| {
        let _ = events.send(Event::Refused { peer, reason });
    };
    // The listener does not block; its connections do, with limits.
    let configured = stream
        .stream
        .set_nonblocking(false)
        .and_then(|()| stream.stream.set_read_timeout(Some(Limits::HELLO)))
        .and_then(|()| stream.stream.set_write_timeout(Some(limits.write())));
    if let Err(e) = configured {
        return refused(e.to_string());
    }
    let hello = match greet(&mut stream, token) {
        Ok(hello) => hello,
        Err(reason) => return refused(reason),
    };
    let (key, claim) = claim(registry, &hello);
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
            let reason = format!("too late: the dump went on without host '{}'", hello.host);
            let _ = protocol::send(
                &mut stream,
                &ToCollector::Refused {
                    reason: reason.clone(),
                },
            );
            return refused(reason);
        }
    }
    let mut connection = Connection {
        stream,
        key,
        events,
        below: HashSet::new(),
    };
    // Where a parent calls it: where it called from.
    let listen = hello.listen.map(|port| SocketAddr::new(peer.ip(), port));
    if let Err(reason) = connection.serve(listen, limits) {
        connection.lost(reason);
    }
}

/// Reads a collector's hello; it must speak our protocol and know the
/// token (what it is told otherwise, and why it is refused, as `Err`).
fn greet(stream: &mut Counted, token: &Token) -> Result<Hello, String> {
    let (given, hello, pid) = match protocol::receive::<ToFront>(stream, MAX_HELLO) {
        Ok(ToFront::Hello {
            protocol,
            token: given,
            host,
            node,
            pid,
            listen,
        }) if protocol == PROTOCOL => (given, Hello { host, node, listen }, pid),
        Ok(ToFront::Hello { protocol, host, .. }) => {
            let reason = format!(
                "protocol {protocol}, this mqs-dump speaks {PROTOCOL}: use the same mqs-dump on \
                 every host"
            );
            let _ = protocol::send(
                stream,
                &ToCollector::Refused {
                    reason: reason.clone(),
                },
            );
            return Err(format!("{reason} (host {host:?})"));
        }
        Ok(_) => return Err("it did not say hello first".into()),
        Err(e) => return Err(format!("no hello within {:?}: {e}", Limits::HELLO)),
    };
    if !token.matches(&given) {
        let _ = protocol::send(
            stream,
            &ToCollector::Refused {
                reason: "wrong token".into(),
            },
        );
        return Err(format!(
            "wrong token (it says it is pid {pid} on host {:?})",
            hello.host
        ));
    }
    Ok(hello)
}

/// Claims the collector's host: Slurm's name for its node first (what
/// srun's table and Slurm's node lists say), then its host name.
fn claim(registry: &Mutex<Registry>, hello: &Hello) -> (String, Claim) {
    let mut registry = registry.lock().unwrap_or_else(|p| p.into_inner());
    let mut keys: Vec<String> = hello.node.iter().map(|n| host_key(n)).collect();
    keys.push(host_key(&hello.host));
    keys.dedup();
    let mut outcome = (host_key(&hello.host), Claim::Nothing);
    for k in keys {
        match registry.claim(&k) {
            Claim::Mine => return (k, Claim::Mine),
            Claim::TooLate => outcome = (k, Claim::TooLate),
            Claim::Nothing => {}
        }
    }
    outcome
}

/// A connection whose collector has claimed its host (`key`).
struct Connection<'a> {
    stream: Counted,
    key: String,
    events: &'a Sender<Event>,
    /// In a tree, for a root: the hosts below it, which it speaks for too.
    below: HashSet<String>,
}

impl Connection<'_> {
    /// Tells the front end; false if it is gone (then nothing more is
    /// worth doing).
    fn tell(&self, event: Event) -> bool {
        self.events.send(event).is_ok()
    }

    /// The collector is lost, with why.
    fn lost(&self, reason: String) {
        self.tell(Event::Lost {
            key: self.key.clone(),
            reason,
        });
    }

    /// The key a frame names: its own, or one of the hosts below it.
    fn tagged(&self, host: Option<String>) -> Option<String> {
        match host {
            None => Some(self.key.clone()),
            Some(h) if self.below.contains(&h) => Some(h),
            Some(_) => None,
        }
    }

    /// After the claim: registers with the front end, then its
    /// assignment, the barrier and its dumps; `Err` says why it is lost.
    fn serve(&mut self, listen: Option<SocketAddr>, limits: Limits) -> Result<(), String> {
        let (tx, commands) = mpsc::channel();
        let connected = Event::Connected {
            key: self.key.clone(),
            commands: tx,
            listen,
        };
        if !self.tell(connected) {
            return Ok(());
        }
        // The front end assigns once every host has called back (or the
        // callback time is up), and tells it to go once every host's ranks
        // are stopped.
        let Some(assigned) = self.await_assignment(&commands, limits)? else {
            return Ok(());
        };
        let looks = assigned.discover.is_some();
        let limits = limits.assigned(assigned.go_timeout, looks);
        let (stop_wait, results_wait) = self.assign(assigned, limits)?;
        // Stopping a rank may take up to 10 s per thread that is slow to stop.
        let _ = self.stream.stream.set_read_timeout(Some(stop_wait));
        if let Next::Finished = self.await_stopped(looks)? {
            return Ok(());
        }
        match commands.recv_timeout(limits.go_relay()) {
            Ok(Command::Go) => {}
            _ => return Err("the front end never said go".into()),
        }
        protocol::send(&mut self.stream, &ToCollector::Go)
            .map_err(|e| format!("cannot tell it to go: {e}"))?;
        // Each dump must come within the timeout of the one before (a root
        // sends its subtree's once all of it is in).
        let _ = self.stream.stream.set_read_timeout(Some(results_wait));
        self.relay_results()
    }

    /// The front end's word for this host: its assignment, or (below the
    /// roots of a tree) to wait for its parent, which this connection
    /// passes on and is done.
    fn await_assignment(
        &mut self,
        commands: &Receiver<Command>,
        limits: Limits,
    ) -> Result<Option<Assignment>, String> {
        match commands.recv_timeout(limits.assignment()) {
            Ok(Command::Assign(assignment)) => Ok(Some(assignment)),
            Ok(Command::Delegate { timeout }) => {
                let wait = ToCollector::WaitForParent {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                };
                protocol::send(&mut self.stream, &wait)
                    .map_err(|e| format!("cannot tell it to wait for its parent: {e}"))?;
                Ok(None)
            }
            _ => {
                let reason = "too late: the dump went on without this host".to_string();
                let _ = protocol::send(&mut self.stream, &ToCollector::Refused { reason });
                Err("never assigned".into())
            }
        }
    }

    /// Sends the collector its assignment; how long it may then take to
    /// stop its ranks, and to send each dump.
    fn assign(
        &mut self,
        assigned: Assignment,
        limits: Limits,
    ) -> Result<(Duration, Duration), String> {
        let Assignment {
            members,
            options,
            go_timeout,
            discover,
            children,
            in_tree,
        } = assigned;
        // A root of a tree speaks for the hosts below it too, and waits for
        // them before it reports.
        self.below = children.iter().flat_map(Child::subtree).collect();
        let waits = (
            limits.stopped_report(&children),
            limits.results_frame(&children),
        );
        let assignment = ToCollector::Assignment {
            members,
            options,
            go_timeout_ms: u64::try_from(go_timeout.as_millis()).unwrap_or(u64::MAX),
            discover,
            children,
            in_tree,
        };
        protocol::send(&mut self.stream, &assignment)
            .map_err(|e| format!("cannot send it its ranks: {e}"))?;
        Ok(waits)
    }

    /// Until the collector has stopped its ranks: what it found first (when
    /// told to look), then what hosts below it found, and lost. Finished
    /// when it found nothing to stop.
    fn await_stopped(&mut self, looks: bool) -> Result<Next, String> {
        if looks {
            // What it found comes first; nothing found (and no host below
            // it), it is done.
            match protocol::receive::<ToFront>(&mut self.stream, MAX_FRAME) {
                Ok(ToFront::Found {
                    processes,
                    problem,
                    host: None,
                }) => {
                    let none = processes.is_empty();
                    self.tell(Event::Found {
                        key: self.key.clone(),
                        processes,
                        problem,
                    });
                    if none && self.below.is_empty() {
                        self.tell(Event::Done {
                            key: self.key.clone(),
                        });
                        return Ok(Next::Finished);
                    }
                }
                Ok(other) => return Err(format!("it sent {other:?} instead of what it found")),
                Err(e) => return Err(format!("it did not say what it found in time: {e}")),
            }
        }
        loop {
            match protocol::receive::<ToFront>(&mut self.stream, MAX_FRAME) {
                Ok(ToFront::Stopped) => {
                    self.tell(Event::Stopped {
                        key: self.key.clone(),
                    });
                    return Ok(Next::Continue);
                }
                Ok(ToFront::Found {
                    processes,
                    problem,
                    host,
                }) if looks => {
                    let key = self.tagged(host).ok_or("it relayed a host not below it")?;
                    self.tell(Event::Found {
                        key,
                        processes,
                        problem,
                    });
                }
                Ok(ToFront::Lost { hosts, reason }) => {
                    let hosts = hosts
                        .into_iter()
                        .filter(|h| self.below.contains(h))
                        .collect();
                    self.tell(Event::LostBelow { hosts, reason });
                }
                Ok(ToFront::Done) if looks => {
                    self.tell(Event::Done {
                        key: self.key.clone(),
                    });
                    return Ok(Next::Finished);
                }
                Ok(other) => return Err(format!("it sent {other:?} before stopping its ranks")),
                Err(e) => return Err(format!("it did not stop its ranks in time: {e}")),
            }
        }
    }

    /// Once told to go: its dumps, failures and lost hosts passed on as
    /// they come, until it is done.
    fn relay_results(&mut self) -> Result<(), String> {
        let below = "it relayed a host not below it";
        loop {
            let event = match protocol::receive::<ToFront>(&mut self.stream, MAX_FRAME) {
                Ok(ToFront::Process { process, host }) => Event::Process {
                    key: self.tagged(host).ok_or(below)?,
                    process,
                },
                Ok(ToFront::States { states }) => match self.relay_states(*states)? {
                    Next::Continue => continue,
                    Next::Finished => return Ok(()),
                },
                Ok(ToFront::Failure { failure, host }) => Event::Failure {
                    key: self.tagged(host).ok_or(below)?,
                    failure,
                },
                Ok(ToFront::Lost { hosts, reason }) => Event::LostBelow {
                    hosts: hosts
                        .into_iter()
                        .filter(|h| self.below.contains(h))
                        .collect(),
                    reason,
                },
                Ok(ToFront::Done) => {
                    self.tell(Event::Done {
                        key: self.key.clone(),
                    });
                    return Ok(());
                }
                Ok(other) => return Err(format!("it sent {other:?} while dumping")),
                Err(e) => return Err(format!("it stopped sending: {e}")),
            };
            if !self.tell(event) {
                return Ok(());
            }
        }
    }

    /// A root's states of its subtree: one dump per run of ranks in one
    /// state (the front end splits them only if its caller wants one per
    /// rank), each passed on under its host.
    fn relay_states(&mut self, mut states: protocol::States) -> Result<Next, String> {
        states.own_host_is(&self.key);
        let levels = std::mem::take(&mut states.levels);
        let roll = std::mem::take(&mut states.roll);
        let began = Instant::now();
        let runs = states.runs();
        let expand = began.elapsed();
        self.tell(Event::Levels { levels, expand });
        // Every host checked before any event is told: a root that names a
        // host not below it is refused whole. Then each is told as it goes.
        let roll_keys = roll
            .iter()
            .map(|run| self.below_or_own(run.host.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let run_keys = runs
            .iter()
            .map(|(host, _)| host.clone().map(|h| self.below_or_own(h)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let roll_events = roll
            .into_iter()
            .zip(roll_keys)
            .map(|(run, key)| Event::Roll { key, run });
        let run_events = runs.into_iter().zip(run_keys).map(|((_, process), key)| {
            let process = Box::new(process);
            match key {
                Some(key) => Event::Process { key, process },
                None => Event::Numbered { process },
            }
        });
        for event in roll_events.chain(run_events) {
            if !self.tell(event) {
                return Ok(Next::Finished);
            }
        }
        Ok(Next::Continue)
    }

    /// The key of `host`, a host of this root's subtree or the root's own.
    fn below_or_own(&self, host: String) -> Result<String, &'static str> {
        if host == self.key {
            Ok(host)
        } else {
            self.tagged(Some(host))
                .ok_or("it relayed a host not below it")
        }
    }
}
