//! A collection under way ([`Run`]): the front end's waits, for the
//! collectors to call back, for every host to be stopped (then go), for
//! everything to be sent, each bounded; and the end, every launcher
//! command ended.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::hosts::host_key;

use super::super::limits::Limits;
use super::super::protocol::{Discover, ShareOptions};
use super::super::start::{Launched, Poked};
use super::super::states::Level;
use super::connection::Registry;
use super::{Assignment, Command, Event, Host, Stage, POLL};

/// A collection under way.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) events: Receiver<Event>,
    pub(super) registry: Arc<Mutex<Registry>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) acceptor: Option<JoinHandle<()>>,
    pub(super) hosts: BTreeMap<String, Host>,
    pub(super) launched: Vec<Launched>,
    pub(super) poked: Option<Poked>,
    /// Why a host may not have called back, for its message.
    pub(super) how: String,
    /// `--slurm`: collectors find their hosts' members themselves.
    pub(super) discover: Option<Discover>,
    pub(super) limits: Limits,
    /// When collectors were asked for, and when each step ended (for -v).
    pub(super) began: Instant,
    pub(super) steps: Vec<(&'static str, Duration)>,
    /// In a tree: what each level below the front end did (the roots
    /// first), and the front end's longest expansion of one root's states.
    pub(super) levels: Vec<Level>,
    pub(super) expanding: Duration,
    /// Dumps of ranks by number, from every root: the roll calls account
    /// for their ranks host by host.
    pub(super) numbered: Vec<mqs_core::model::ProcessDump>,
}

impl Run {
    pub(super) fn idle(
        events: Receiver<Event>,
        hosts: BTreeMap<String, Host>,
        limits: Limits,
    ) -> Self {
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
            limits,
            began: Instant::now(),
            steps: Vec::new(),
            levels: Vec::new(),
            expanding: Duration::ZERO,
            numbered: Vec::new(),
        }
    }

    pub(super) fn step(&mut self, name: &'static str) {
        self.steps.push((name, self.began.elapsed()));
    }

    pub(super) fn fail_hosts_all(&mut self, reason: &str) {
        for host in self.hosts.values_mut() {
            host.stage = Stage::Failed(reason.to_string());
        }
    }

    pub(super) fn fail_hosts(&mut self, names: &[String], reason: &str) {
        for name in names {
            if let Some(host) = self.hosts.get_mut(&host_key(name)) {
                host.stage = Stage::Failed(reason.to_string());
            }
        }
    }

    /// Waits until every host has a collector, or the callback time is up.
    pub(super) fn await_callbacks(&mut self) {
        let deadline = Instant::now() + self.limits.callback();
        // Each launcher command is asked after at most a poll's time, not
        // after every event: a thousand hosts calling back would otherwise
        // cost a million `wait4` calls.
        let mut checked = Instant::now();
        while self.hosts.values().any(|h| h.stage == Stage::Waiting) && Instant::now() < deadline {
            self.next_event(deadline);
            if checked.elapsed() >= POLL {
                self.check_launched();
                checked = Instant::now();
            }
        }
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.closed = true;
        drop(registry);
        self.step("called back");
        let how = self.how.clone();
        let seconds = self.limits.callback().as_secs_f64();
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
    pub(super) fn assign(&mut self, share: &ShareOptions, fanout: Option<usize>) {
        let mut children = self.tree(fanout);
        let in_tree = !children.is_empty();
        for (key, host) in self.hosts.iter_mut() {
            if host.stage != Stage::Connected {
                continue;
            }
            let sent = host.commands.as_ref().is_some_and(|c| {
                c.send(Command::Assign(Assignment {
                    members: host.members.clone(),
                    options: share.clone(),
                    go_timeout: self.limits.go(),
                    discover: self.discover.clone(),
                    children: children.remove(key).unwrap_or_default(),
                    in_tree,
                }))
                .is_ok()
            });
            host.stage = if sent {
                Stage::Assigned
            } else {
                Stage::Failed(format!("the collector on host '{}' went away", host.name))
            };
        }
    }

    /// Waits until every assigned collector has stopped its ranks (or the
    /// time is up), then lets them all go on.
    pub(super) fn await_stopped(&mut self) {
        let deadline = Instant::now() + self.limits.all_stopped();
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
    pub(super) fn await_done(&mut self) {
        let busy = |h: &Host| matches!(h.stage, Stage::Assigned | Stage::Stopped);
        let members: u32 = self
            .hosts
            .values()
            .filter(|h| busy(h))
            .map(|h| h.members.len() as u32)
            .sum();
        let deadline = Instant::now() + self.limits.all_sent(members);
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
    pub(super) fn shut_down(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let deadline = Instant::now() + Limits::LAUNCHER_GRACE;
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

    pub(super) fn next_event(&mut self, deadline: Instant) {
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
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(poked) = self.poked.take() {
            let _ = poked.restore();
        }
        self.shut_down();
    }
}
