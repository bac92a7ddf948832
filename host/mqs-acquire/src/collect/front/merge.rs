//! What collectors report, merged: each member's dump or failure kept
//! once, from the host it was asked of; and at the end a failure, with its
//! host's reason, for every member not read.

use mqs_core::model::{ProcessDump, RankFailure};

use crate::inspect;
use crate::Error;

use super::{Event, Run, Stage, UNKNOWN_RANK};

impl Run {
    pub(super) fn handle(&mut self, event: Event) {
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
            Event::Roll { key, run } => self.roll_call(&key, &run),
            Event::Numbered { process } => self.numbered.push(*process),
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
                super::super::states::absorb_levels(&mut self.levels, &levels, 0);
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
                let whole = run.run_members().all(|(pid, rank)| host.expects(pid, rank));
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
        if host.report(pid, identity) {
            host.results.push(what);
        }
    }

    /// Counts the ranks of `run`, a roll call's, as reported by their host:
    /// their dumps come by number ([`Event::Numbered`]).
    fn roll_call(&mut self, key: &str, run: &super::super::states::Run) {
        let Some(host) = self.hosts.get_mut(key) else {
            return;
        };
        for (pid, rank) in run.members() {
            host.report(pid, rank);
        }
    }

    /// Everything read elsewhere, and a failure for every rank that was not.
    pub(super) fn results(
        &mut self,
    ) -> Vec<std::result::Result<ProcessDump, (RankFailure, Error)>> {
        let mut out: Vec<_> = self.numbered.drain(..).map(Ok).collect();
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
