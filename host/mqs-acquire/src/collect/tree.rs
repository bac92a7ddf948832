//! Collectors in a tree: the shape the front end hands out, and a parent's
//! side of its children (calling each, handing it its assignment, relaying
//! what it sends up).
//!
//! With fan-out `k`, the first `k` hosts are the front end's children (the
//! roots) and host `i` is the parent of hosts `k(i+1)` to `k(i+1)+k-1`:
//! every collector talks to at most `k` children and one parent, and the
//! front end to at most `k` collectors, whatever the number of hosts.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use super::limits::Limits;
use super::protocol::{
    self, Child, Discover, FoundProcess, ShareOptions, States, ToCollector, ToFront, MAX_FRAME,
    PROTOCOL,
};
use mqs_core::model::{ProcessDump, RankFailure};

/// The children of each of `n` hosts (by index) and the roots, for
/// fan-out `fanout` (at least 1).
pub fn shape(n: usize, fanout: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
    let k = fanout.max(1);
    let roots: Vec<usize> = (0..n.min(k)).collect();
    let children = (0..n)
        .map(|i| {
            let first = k.saturating_mul(i + 1);
            (first..first.saturating_add(k).min(n)).collect()
        })
        .collect();
    (roots, children)
}

/// What a child's connection tells its parent.
#[derive(Debug)]
pub enum Up {
    Found {
        host: String,
        processes: Vec<FoundProcess>,
        problem: Option<String>,
    },
    /// Child `.0`'s whole subtree is stopped.
    Stopped(usize),
    Process {
        host: String,
        process: Box<ProcessDump>,
    },
    States(Box<States>),
    Failure {
        host: String,
        failure: RankFailure,
    },
    /// Hosts below the child that it lost.
    LostBelow {
        hosts: Vec<String>,
        reason: String,
    },
    /// Child `.0` sent everything, `.1` bytes over its connection.
    Done(usize, u64),
    /// Child `.0` is lost, with why.
    Broken(usize, String),
}

/// Where a child stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Assigned,
    Stopped,
    Done,
    Lost,
}

/// A parent's children, each served by a thread of its own.
#[derive(Debug)]
pub struct Children {
    children: Vec<Child>,
    stages: Vec<Stage>,
    go: Vec<Sender<()>>,
    events: Receiver<Up>,
    /// Bytes read from the children that finished.
    pub bytes_received: u64,
    /// Time spent merging their results.
    pub merging: Duration,
}

/// What a parent hands on to its children.
#[derive(Debug, Clone)]
pub struct Handed {
    pub token: String,
    pub options: ShareOptions,
    pub discover: Option<Discover>,
    /// The limits of the collection, as the parent's assignment set them.
    pub limits: Limits,
}

impl Children {
    /// Calls every child and hands it its assignment, in the background.
    pub fn start(children: Vec<Child>, handed: &Handed) -> Self {
        let (tx, events) = mpsc::channel();
        let mut go = Vec::new();
        for (index, child) in children.iter().enumerate() {
            let (go_tx, go_rx) = mpsc::channel();
            go.push(go_tx);
            let (child, handed, tx) = (child.clone(), handed.clone(), tx.clone());
            std::thread::spawn(move || {
                if let Err(reason) = serve_child(index, &child, &handed, &tx, &go_rx) {
                    let _ = tx.send(Up::Broken(index, reason));
                }
            });
        }
        Self {
            stages: vec![Stage::Assigned; children.len()],
            children,
            go,
            events,
            bytes_received: 0,
            merging: Duration::ZERO,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Waits until every child has stopped its subtree or is lost (or
    /// `deadline`), passing up what arrives meanwhile; the children still
    /// not stopped then are given up.
    pub fn await_stopped(
        &mut self,
        up: &mut TcpStream,
        states: &mut States,
        failures: &mut Vec<(String, RankFailure)>,
        deadline: Instant,
    ) -> std::io::Result<()> {
        let late = "did not stop its ranks in time";
        self.await_past(Stage::Assigned, late, up, states, failures, deadline)
    }

    /// Tells every stopped child to go on.
    pub fn go(&mut self) {
        for (i, go) in self.go.iter().enumerate() {
            if self.stages[i] == Stage::Stopped {
                let _ = go.send(());
            }
        }
    }

    /// Waits until every child has sent everything or is lost (each frame
    /// is bounded in time by its thread; `deadline` bounds the whole),
    /// gathering their states and failures.
    pub fn await_done(
        &mut self,
        up: &mut TcpStream,
        states: &mut States,
        failures: &mut Vec<(String, RankFailure)>,
        deadline: Instant,
    ) -> std::io::Result<()> {
        let late = "did not finish in time";
        self.await_past(Stage::Stopped, late, up, states, failures, deadline)
    }

    /// Handles what the children send until none is at `stage` any more
    /// (or `deadline`); those still there are given up, `late` saying why.
    fn await_past(
        &mut self,
        stage: Stage,
        late: &str,
        up: &mut TcpStream,
        states: &mut States,
        failures: &mut Vec<(String, RankFailure)>,
        deadline: Instant,
    ) -> std::io::Result<()> {
        while self.stages.contains(&stage) {
            let Some(event) = self.next(deadline) else {
                break;
            };
            self.handle(event, up, states, failures)?;
        }
        for i in 0..self.children.len() {
            if self.stages[i] == stage {
                let reason = format!("the collector on host '{}' {late}", self.children[i].name);
                self.give_up(i, &reason, up)?;
            }
        }
        Ok(())
    }

    fn next(&self, deadline: Instant) -> Option<Up> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.events.recv_timeout(wait).ok()
    }

    /// Child `i` and its subtree are out of reach: says so upwards.
    fn give_up(&mut self, i: usize, reason: &str, up: &mut TcpStream) -> std::io::Result<()> {
        if self.stages[i] == Stage::Lost || self.stages[i] == Stage::Done {
            return Ok(());
        }
        self.stages[i] = Stage::Lost;
        // Dropping its go sender ends a thread waiting for go: the child
        // then lets its ranks go unread.
        let (dead, _) = mpsc::channel();
        self.go[i] = dead;
        protocol::send(
            up,
            &ToFront::Lost {
                hosts: self.children[i].subtree(),
                reason: reason.to_string(),
            },
        )
    }

    fn handle(
        &mut self,
        event: Up,
        up: &mut TcpStream,
        states: &mut States,
        failures: &mut Vec<(String, RankFailure)>,
    ) -> std::io::Result<()> {
        match event {
            Up::Found {
                host,
                processes,
                problem,
            } => protocol::send(
                up,
                &ToFront::Found {
                    processes,
                    problem,
                    host: Some(host),
                },
            ),
            Up::Stopped(i) => {
                if self.stages[i] == Stage::Assigned {
                    self.stages[i] = Stage::Stopped;
                }
                Ok(())
            }
            Up::Process { host, process } => {
                let began = Instant::now();
                states.add(&host, *process);
                self.merging += began.elapsed();
                Ok(())
            }
            Up::States(more) => {
                let began = Instant::now();
                states.merge(*more);
                self.merging += began.elapsed();
                Ok(())
            }
            Up::Failure { host, failure } => {
                failures.push((host, failure));
                Ok(())
            }
            Up::LostBelow { hosts, reason } => protocol::send(up, &ToFront::Lost { hosts, reason }),
            Up::Done(i, bytes) => {
                if self.stages[i] != Stage::Lost {
                    self.stages[i] = Stage::Done;
                }
                self.bytes_received += bytes;
                Ok(())
            }
            Up::Broken(i, why) => {
                let reason = format!(
                    "the collector on host '{}' was lost: {why}",
                    self.children[i].name
                );
                self.give_up(i, &reason, up)
            }
        }
    }
}

/// One child's connection: call, prove the token, assign, relay.
fn serve_child(
    index: usize,
    child: &Child,
    handed: &Handed,
    up: &Sender<Up>,
    go: &Receiver<()>,
) -> Result<(), String> {
    let stream = TcpStream::connect_timeout(&child.address, Limits::CALL)
        .map_err(|e| format!("cannot call it at {}: {e}", child.address))?;
    let mut stream = Counting { stream, read: 0 };
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let limits = handed.limits;
    stream
        .stream
        .set_write_timeout(Some(limits.write()))
        .and_then(|()| {
            stream
                .stream
                .set_read_timeout(Some(limits.child_stopped(child)))
        })
        .map_err(|e| io("cannot talk to it", e))?;
    protocol::send(
        &mut stream,
        &ToCollector::Parent {
            protocol: PROTOCOL,
            token: handed.token.clone(),
        },
    )
    .map_err(|e| io("cannot greet it", e))?;
    let assignment = ToCollector::Assignment {
        members: child.members.clone(),
        options: handed.options.clone(),
        go_timeout_ms: u64::try_from(limits.go().as_millis()).unwrap_or(u64::MAX),
        discover: handed.discover.clone(),
        children: child.children.clone(),
        in_tree: true,
    };
    protocol::send(&mut stream, &assignment).map_err(|e| io("cannot send it its ranks", e))?;
    let tag = |host: Option<String>| host.unwrap_or_else(|| child.key.clone());
    let send = |event: Up| up.send(event).map_err(|_| "its parent is gone".to_string());
    // Until its subtree is stopped: what it found, hosts it lost.
    loop {
        match protocol::receive::<ToFront>(&mut stream, MAX_FRAME) {
            Ok(ToFront::Found {
                processes,
                problem,
                host,
            }) => send(Up::Found {
                host: tag(host),
                processes,
                problem,
            })?,
            Ok(ToFront::Lost { hosts, reason }) => send(Up::LostBelow { hosts, reason })?,
            Ok(ToFront::Stopped) => {
                send(Up::Stopped(index))?;
                break;
            }
            // Found nothing (a --slurm node without ranks): done already.
            Ok(ToFront::Done) => return send(Up::Done(index, stream.read)),
            Ok(other) => return Err(format!("it sent {other:?} before stopping its ranks")),
            Err(e) => return Err(format!("it did not stop its ranks in time: {e}")),
        }
    }
    // Go comes once every host is stopped; a parent that gives up on this
    // child drops the sender instead.
    if go.recv_timeout(limits.child_go(child)).is_err() {
        return Err("no go came for it in time".into());
    }
    protocol::send(&mut stream, &ToCollector::Go).map_err(|e| io("cannot tell it to go", e))?;
    let _ = stream
        .stream
        .set_read_timeout(Some(limits.child_results(child)));
    loop {
        let event = match protocol::receive::<ToFront>(&mut stream, MAX_FRAME) {
            Ok(ToFront::Process { process, host }) => Up::Process {
                host: tag(host),
                process,
            },
            Ok(ToFront::States { mut states }) => {
                states.own_host_is(&child.key);
                Up::States(states)
            }
            Ok(ToFront::Failure { failure, host }) => Up::Failure {
                host: tag(host),
                failure,
            },
            Ok(ToFront::Lost { hosts, reason }) => Up::LostBelow { hosts, reason },
            Ok(ToFront::Done) => return send(Up::Done(index, stream.read)),
            Ok(other) => return Err(format!("it sent {other:?} while dumping")),
            Err(e) => return Err(format!("it stopped sending: {e}")),
        };
        send(event)?;
    }
}

/// A child's connection, counting what it reads.
struct Counting {
    stream: TcpStream,
    read: u64,
}

impl std::io::Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// Waits on `listener` for the parent's call (a stranger, or a wrong
/// token, is turned away), then for its assignment.
pub fn await_parent(
    listener: &std::net::TcpListener,
    token: &str,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr, ToCollector), String> {
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot wait for the parent collector: {e}"))?;
    loop {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let ready = stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_read_timeout(Some(timeout)))
                    .and_then(|()| stream.set_write_timeout(Some(timeout)));
                if ready.is_err() {
                    continue;
                }
                match protocol::receive::<ToCollector>(&mut stream, protocol::MAX_HELLO) {
                    Ok(ToCollector::Parent {
                        protocol,
                        token: given,
                    }) if protocol == PROTOCOL
                        && protocol::Token::from(token.to_string()).matches(&given) =>
                    {
                        let assignment = protocol::receive::<ToCollector>(&mut stream, MAX_FRAME)
                            .map_err(|e| {
                            format!("the parent collector at {peer} sent no assignment: {e}")
                        })?;
                        return Ok((stream, peer, assignment));
                    }
                    // Not our parent: turned away, keep waiting.
                    _ => continue,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(format!("no parent collector called within {timeout:?}"));
                }
                // Asleep until a call comes: a thousand collectors that
                // looked every few ms kept two cores busy switching.
                let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                let _ = poll(
                    &mut fds,
                    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
                );
            }
            Err(e) => return Err(format!("cannot wait for the parent collector: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_has_one_parent_and_at_most_k_children() {
        for (n, k) in [(1, 4), (4, 4), (5, 4), (100, 3), (1000, 16), (7, 1)] {
            let (roots, children) = shape(n, k);
            assert_eq!(roots.len(), n.min(k));
            let mut parents = vec![0usize; n];
            for r in &roots {
                parents[*r] += 1;
            }
            for (i, c) in children.iter().enumerate() {
                assert!(c.len() <= k);
                for &j in c {
                    assert!(j > i, "children come after their parent");
                    parents[j] += 1;
                }
            }
            assert!(parents.iter().all(|&p| p == 1), "n={n} k={k}: {parents:?}");
        }
        // A chain with fan-out 1.
        let (roots, children) = shape(3, 1);
        assert_eq!(roots, vec![0]);
        assert_eq!(children, vec![vec![1], vec![2], vec![]]);
    }
}
