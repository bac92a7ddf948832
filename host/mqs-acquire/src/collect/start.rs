//! Starting collectors on the hosts of a job: through the job's own starter
//! (the MPIR tool-daemon launch extension: the starter starts the program
//! once on every node of the job), as a step of the Slurm job the starter
//! runs in (`srun --overlap`, for starters without the extension: srun
//! itself, hydra, prterun inside an allocation), or with a command template
//! the user gives (`ssh {host}`, `srun ... -w {hosts}`).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use super::agent::{self, Agent};
use super::limits::Limits;
use crate::inspect::Starter;
use crate::mpir::{self, ToolDaemonSymbols};
use crate::slurm::{self, StarterJob};
use crate::{Error, Result};
use mqs_core::interface::{ImageSymbols, Target};
use mqs_core::process::{LiveProcess, Mode};
use mqs_core::Error as CoreError;

/// The subcommand that runs a collector (hidden from users).
pub const COLLECTOR_COMMAND: &str = "__collector";

/// The most of a launcher command's stderr kept for messages.
const STDERR_KEPT: usize = 4096;

/// A collector's command line: the program as the nodes see it, and its
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorCommand {
    pub program: String,
    pub args: Vec<String>,
}

/// A `--launcher` template: words separated by blanks, with `{host}` (one
/// command per host) or `{hosts}` (one command for all hosts, comma
/// separated) in them; the collector's command is appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    words: Vec<String>,
    per_host: bool,
}

impl Template {
    /// The template a starter's remote shell amounts to: `AGENT {host}`.
    pub fn for_agent(agent: &Agent) -> Result<Self> {
        Self::parse(&format!("{} {{host}}", agent.words.join(" ")))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        let has = |p: &str| words.iter().any(|w| w.contains(p));
        let usage = |detail: &str| {
            Error::Usage(format!(
                "--launcher {text:?}: {detail} (e.g. 'ssh {{host}}' or \
                 'srun --nodelist={{hosts}} --ntasks-per-node=1')"
            ))
        };
        if words.is_empty() {
            return Err(usage("empty"));
        }
        match (has("{host}"), has("{hosts}")) {
            (true, true) => Err(usage("give {host} or {hosts}, not both")),
            (false, false) => Err(usage("it names no {host} or {hosts}")),
            (per_host, _) => Ok(Self { words, per_host }),
        }
    }

    /// The command lines that start one collector on each of `hosts`, each
    /// with the hosts it covers.
    pub fn commands(
        &self,
        hosts: &[String],
        collector: &CollectorCommand,
    ) -> Result<Vec<(Vec<String>, Vec<String>)>> {
        // A remote shell (ssh) joins the words and parses them again: only
        // words that mean the same either way are passed.
        for word in std::iter::once(&collector.program).chain(&collector.args) {
            if word.is_empty() || !word.bytes().all(is_shell_safe) {
                return Err(Error::Usage(format!(
                    "the collector command word {word:?} cannot be passed through \
                     --launcher unquoted: use a collector path of letters, digits and ./_+-:,="
                )));
            }
        }
        let line = |replace: &dyn Fn(&str) -> String| {
            let mut argv: Vec<String> = self.words.iter().map(|w| replace(w)).collect();
            argv.push(collector.program.clone());
            argv.extend(collector.args.iter().cloned());
            argv
        };
        Ok(if self.per_host {
            hosts
                .iter()
                .map(|h| (vec![h.clone()], line(&|w: &str| w.replace("{host}", h))))
                .collect()
        } else {
            let all = hosts.join(",");
            vec![(hosts.to_vec(), line(&|w: &str| w.replace("{hosts}", &all)))]
        })
    }
}

fn is_shell_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/._+-:,=@%".contains(&b)
}

/// A launcher command started for some hosts; its stderr is kept.
#[derive(Debug)]
pub struct Launched {
    pub hosts: Vec<String>,
    pub argv: Vec<String>,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Launched {
    pub fn spawn(hosts: Vec<String>, argv: Vec<String>) -> Result<Self> {
        Self::spawn_with(hosts, argv, |_| {})
    }

    /// [`Launched::spawn`], the command adjusted first (its environment).
    pub fn spawn_with(
        hosts: Vec<String>,
        argv: Vec<String>,
        adjust: impl FnOnce(&mut Command),
    ) -> Result<Self> {
        let mut command = Command::new(&argv[0]);
        adjust(&mut command);
        let mut child = command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Collect(format!("cannot run the launcher {:?}: {e}", argv[0])))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let kept = stderr.clone();
            // Ends when the command (and whatever holds its stderr) does.
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                    kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if kept.len() > STDERR_KEPT {
                        let mut cut = kept.len() - STDERR_KEPT;
                        while !kept.is_char_boundary(cut) {
                            cut += 1;
                        }
                        kept.drain(..cut);
                    }
                }
            });
        }
        Ok(Self {
            hosts,
            argv,
            child,
            stderr,
        })
    }

    /// Its exit status, once it has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The end of what it printed on stderr, on one line.
    pub fn stderr(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        kept.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Ends it if it still runs (our own child, by its handle) and reaps
    /// it: SIGTERM first, which srun passes to its step's tasks before it
    /// ends the step, then SIGKILL.
    pub fn end(&mut self) {
        if self.exited().is_none() {
            if let Ok(pid) = i32::try_from(self.child.id()) {
                // Our child, not reaped yet: the pid is still its.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let deadline = std::time::Instant::now() + Limits::TERM_GRACE;
            while self.exited().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if self.exited().is_none() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.end();
    }
}

/// A starter made to start collectors, with what was in its variables
/// before, to put back.
#[derive(Debug)]
pub struct Poked {
    process: LiveProcess,
    symbols: ToolDaemonSymbols,
    before: [Vec<u8>; 3],
    /// The attach FIFO written to, if the starter has one.
    pub fifo: Option<String>,
}

/// Has the starter `pid` start `collector` on every node of its job: writes
/// `MPIR_executable_path` and `MPIR_server_arguments`, sets
/// `MPIR_being_debugged`, and writes the byte 1 into `MPIR_attach_fifo`
/// where there is one (otherwise the starter is left to notice). The
/// starter is not stopped and not traced: only the MPIR variables are
/// written, through its memory file.
pub fn through_starter(
    pid: i32,
    symbols: &dyn ImageSymbols,
    collector: &CollectorCommand,
) -> Result<Poked> {
    let found = ToolDaemonSymbols::find(symbols).ok_or_else(|| {
        Error::Collect(
            "the starter cannot start collectors on the nodes (it has no MPIR_executable_path, \
             MPIR_server_arguments and MPIR_being_debugged): give --launcher, e.g. \
             --launcher 'ssh {host}'"
                .into(),
        )
    })?;
    let path = mpir::encode_executable_path(&collector.program)?;
    let args = mpir::encode_server_arguments(&collector.args)?;
    let process = LiveProcess::attach(pid, Mode::NoStop)?;
    let read = |addr: u64, len: usize| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        process.read(addr, &mut buf)?;
        Ok(buf)
    };
    let before = [
        read(found.executable_path, path.len())?,
        read(found.server_arguments, args.len())?,
        read(found.being_debugged, 4)?,
    ];
    let mut poked = Poked {
        process,
        symbols: found,
        before,
        fifo: None,
    };
    // The program and its arguments first: the starter reads them only
    // once it is told to look.
    let written = (|| {
        poked.write(found.executable_path, &path)?;
        poked.write(found.server_arguments, &args)?;
        poked.write(found.being_debugged, &1i32.to_ne_bytes())?;
        poked.fifo = mpir::attach_fifo(&poked.process, &found);
        if let Some(fifo) = &poked.fifo {
            poked.process.write_attach_fifo(fifo, 1)?;
        }
        Ok(())
    })();
    match written {
        Ok(()) => Ok(poked),
        Err(e) => {
            let _ = poked.restore();
            Err(e)
        }
    }
}

impl Poked {
    fn write(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        Ok(self.process.write_mpir_variable(addr, bytes)?)
    }

    /// Puts the variables back as they were, once the starter has started
    /// the collectors (it copies them when it does), so that it does not
    /// start them again for the next tool that pokes it.
    pub fn restore(&self) -> Result<()> {
        let s = &self.symbols;
        self.write(s.being_debugged, &self.before[2])?;
        self.write(s.server_arguments, &self.before[1])?;
        self.write(s.executable_path, &self.before[0])
    }
}

/// The Slurm job to start collectors in, for a starter without the
/// tool-daemon extension (srun, hydra's mpiexec, prterun) that runs one.
pub fn slurm_job_instead(starter: &Starter) -> Option<StarterJob> {
    if ToolDaemonSymbols::find(&*starter.symbols).is_some() {
        return None;
    }
    let target = LiveProcess::attach(starter.pid, Mode::NoStop).ok()?;
    slurm::job_of_starter(&target, &*starter.symbols)
}

/// For a PRRTE starter (`prterun`, Open MPI 5's `mpirun`: no tool-daemon
/// extension), the remote shell it reaches its nodes with, or why none
/// can be used; None for other starters.
pub fn agent_instead(starter: &Starter) -> Option<std::result::Result<Agent, String>> {
    if ToolDaemonSymbols::find(&*starter.symbols).is_some()
        || starter
            .symbols
            .find_symbol(agent::PRRTE_SSH_COMPONENT)
            .is_none()
    {
        return None;
    }
    let process = LiveProcess::attach(starter.pid, Mode::NoStop).map_err(|e| e.to_string());
    Some(process.and_then(|p| agent::of_starter(&p)))
}

/// Starts one collector on each of `hosts` as a step of Slurm job `job`
/// (`srun --overlap`, taking nothing from the job's steps), with srun from
/// `PATH` (else the starter's own srun) and the cluster the starter names
/// when we name none.
pub fn through_slurm(
    job: &StarterJob,
    hosts: &[String],
    collector: &CollectorCommand,
) -> Result<Launched> {
    let srun = slurm::find_program("srun")
        .or_else(|| job.srun.clone())
        .ok_or_else(|| {
            Error::Collect(format!(
                "the job runs in Slurm job {}, but there is no srun on PATH to start \
                 collectors in it: add Slurm's commands to PATH, or give --launcher",
                job.job
            ))
        })?;
    let argv = slurm::tool_step_argv(&srun, &job.job, hosts, &collector.program, &collector.args);
    let conf = job.conf.clone();
    Launched::spawn_with(hosts.to_vec(), argv, |cmd| {
        slurm::clean_environment(cmd);
        if let (None, Some(conf)) = (std::env::var_os("SLURM_CONF"), conf) {
            cmd.env("SLURM_CONF", conf);
        }
    })
}

/// The collector program on this machine: this very executable.
pub fn own_program() -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| {
        Error::from(CoreError::Io {
            path: Path::new("/proc/self/exe").to_path_buf(),
            source: e,
        })
    })?;
    exe.into_os_string().into_string().map_err(|p| {
        Error::Usage(format!(
            "the collector path {p:?} is not UTF-8: give --collector"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collector() -> CollectorCommand {
        CollectorCommand {
            program: "/opt/mqs/mqs-dump".into(),
            args: vec!["__collector".into(), "--token".into(), "ab12".into()],
        }
    }

    #[test]
    fn a_remote_shell_is_a_template_per_host() {
        let agent = Agent {
            words: vec!["/usr/bin/rsh".into(), "-l".into(), "me".into()],
            from: "PRRTE's default".into(),
        };
        let template = Template::for_agent(&agent).unwrap();
        let command = CollectorCommand {
            program: "/bin/mqs-dump".into(),
            args: vec!["__collector".into()],
        };
        let lines = template.commands(&["nodea".to_string()], &command).unwrap();
        assert_eq!(
            lines[0].1,
            [
                "/usr/bin/rsh",
                "-l",
                "me",
                "nodea",
                "/bin/mqs-dump",
                "__collector"
            ]
        );
    }

    #[test]
    fn per_host_templates_run_once_per_host() {
        let t = Template::parse("ssh -o BatchMode=yes {host}").unwrap();
        let hosts = vec!["nodea".to_string(), "nodeb".to_string()];
        let commands = t.commands(&hosts, &collector()).unwrap();
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[1].0, ["nodeb"]);
        assert_eq!(
            commands[1].1,
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "nodeb",
                "/opt/mqs/mqs-dump",
                "__collector",
                "--token",
                "ab12"
            ]
        );
    }

    #[test]
    fn all_host_templates_run_once() {
        let t = Template::parse("srun --nodelist={hosts} --ntasks-per-node=1").unwrap();
        let hosts = vec!["nodea".to_string(), "nodeb".to_string()];
        let commands = t.commands(&hosts, &collector()).unwrap();
        assert_eq!(commands.len(), 1);
        assert_eq!(commands[0].0, hosts);
        assert_eq!(commands[0].1[1], "--nodelist=nodea,nodeb");
    }

    #[test]
    fn bad_templates_and_unsafe_words_are_refused() {
        for bad in ["", "  ", "ssh", "x {host} {hosts}"] {
            assert!(
                matches!(Template::parse(bad), Err(Error::Usage(_))),
                "{bad:?}"
            );
        }
        let t = Template::parse("ssh {host}").unwrap();
        let mut c = collector();
        c.program = "/opt/my tools/mqs-dump".into();
        assert!(matches!(
            t.commands(&["a".into()], &c),
            Err(Error::Usage(_))
        ));
        c.program = "/opt/x;rm".into();
        assert!(matches!(
            t.commands(&["a".into()], &c),
            Err(Error::Usage(_))
        ));
    }
}
