//! The start of a collection: listening for collectors, and having them
//! started on their hosts, through the starter, as a step of a Slurm job,
//! or with `--launcher`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::slurm;
use crate::Error;

use super::super::collector::CollectorArgs;
use super::super::limits::Limits;
use super::super::protocol::Token;
use super::super::start::{self, CollectorCommand, Launched, Template, COLLECTOR_COMMAND};
use super::connection::{accept, Registry};
use super::{Front, Host, Run, Via};

/// The most addresses collectors are given to call back to.
pub(super) const MAX_CALLBACK_ADDRESSES: usize = 8;

impl Front {
    /// Listens, and starts collectors on every host of `hosts`.
    pub(super) fn begin(
        &self,
        via: Via<'_>,
        hosts: BTreeMap<String, Host>,
    ) -> std::result::Result<Run, (BTreeMap<String, Host>, Error)> {
        let limits = Limits::new(self.collect.timeout);
        let (token, listener, command) = match self.listen(limits) {
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
                accept(listener, token, registry, tx, stop, limits, received)
            })
        };
        let mut run = Run::idle(events, hosts, limits);
        run.registry = registry;
        run.stop = stop;
        run.acceptor = Some(acceptor);
        match self.start_collectors(&mut run, via, &command) {
            Ok(()) => Ok(run),
            Err(e) => {
                let hosts = std::mem::take(&mut run.hosts);
                Err((hosts, e))
            }
        }
    }

    /// A one-time token, a listener, and the collector's command line
    /// that calls it back with the token.
    fn listen(&self, limits: Limits) -> crate::Result<(Token, TcpListener, CollectorCommand)> {
        let token = Token::new().map_err(|e| Error::Collect(format!("no random token: {e}")))?;
        let bind = self
            .collect
            .callback
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let listener = TcpListener::bind((bind, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| Error::Collect(format!("cannot listen for collectors on {bind}: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::Collect(format!("cannot listen for collectors: {e}")))?
            .port();
        let program = match &self.collect.collector {
            Some(path) => path.clone(),
            None => start::own_program()?,
        };
        let called = CollectorArgs {
            connect: callback_addresses(self.collect.callback, port),
            token: token.as_str().into(),
            timeout: limits.step(),
        };
        let mut args = vec![COLLECTOR_COMMAND.to_string()];
        args.extend(called.to_args());
        let command = CollectorCommand { program, args };
        Ok((token, listener, command))
    }

    /// Has a collector started for every host of `run`, as `via` says;
    /// `run.how` then says how, for the message of a host that never
    /// calls back.
    fn start_collectors(
        &self,
        run: &mut Run,
        via: Via<'_>,
        command: &CollectorCommand,
    ) -> crate::Result<()> {
        let names: Vec<String> = run.hosts.values().map(|h| h.name.clone()).collect();
        match (&self.collect.launcher, via) {
            (None, Via::Launcher) => Err(Error::Usage(
                "ranks without a starter are read through collectors that --launcher starts; \
                 none was given"
                    .into(),
            )),
            (Some(template), Via::Starter(_) | Via::Launcher) => launch(
                run,
                template,
                &names,
                command,
                "started with --launcher".into(),
            ),
            (_, Via::Slurm(job)) => start::through_slurm(job, &names, command).map(|launched| {
                run.how = format!(
                    "started as step '{}' of Slurm job {}",
                    slurm::TOOL_STEP_NAME,
                    job.job
                );
                run.launched.push(launched);
            }),
            (None, Via::Starter(starter)) => match start::slurm_job_instead(starter) {
                Some(job) => start::through_slurm(&job, &names, command).map(|launched| {
                    run.how = format!(
                        "started as step '{}' of the starter's Slurm job {}",
                        slurm::TOOL_STEP_NAME,
                        job.job
                    );
                    run.launched.push(launched);
                }),
                None => match start::agent_instead(starter) {
                    Some(Ok(agent)) => {
                        let template = start::Template::for_agent(&agent)?;
                        let how = format!(
                            "started with the starter's remote shell '{}' ({}), as it starts \
                             its daemons",
                            agent.words.join(" "),
                            agent.from
                        );
                        launch(run, &template, &names, command, how)
                    }
                    Some(Err(why)) => Err(Error::Collect(format!(
                        "the starter (PRRTE's prterun) cannot start collectors on the nodes and \
                         {why}: give --launcher, e.g. --launcher 'ssh {{host}}'"
                    ))),
                    None => start::through_starter(starter.pid, &*starter.symbols, command).map(
                        |poked| {
                            run.how = match &poked.fifo {
                                Some(fifo) => {
                                    format!("asked of the starter through its attach FIFO {fifo}")
                                }
                                None => "asked of the starter, which has no attach FIFO and may \
                                     not poll MPIR_being_debugged"
                                    .into(),
                            };
                            run.poked = Some(poked);
                        },
                    ),
                },
            },
        }
    }
}

/// Starts collectors on `names` with `template`; `how` says so in the
/// message of a host that never calls back.
fn launch(
    run: &mut Run,
    template: &Template,
    names: &[String],
    command: &CollectorCommand,
    how: String,
) -> crate::Result<()> {
    template.commands(names, command).map(|commands| {
        for (covered, argv) in commands {
            match Launched::spawn(covered.clone(), argv) {
                Ok(launched) => run.launched.push(launched),
                Err(e) => run.fail_hosts(&covered, &e.to_string()),
            }
        }
        run.how = how;
    })
}

/// The addresses collectors are told to call back to.
pub(super) fn callback_addresses(given: Option<IpAddr>, port: u16) -> Vec<SocketAddr> {
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
