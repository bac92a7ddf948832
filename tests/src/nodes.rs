//! Several nodes on this one machine, as Open MPI's `mpirun` sees them (the
//! recipe in docs/mpis.md): each node is a host name in `/etc/hosts`, its own
//! PID and UTS namespace (so its own hostname, and small node-local pids that
//! repeat from node to node) and its own TMPDIR, and `mpirun` reaches it
//! through an rsh launch agent (`plm_rsh_agent`) that enters the namespaces.
//! As on a real cluster, the pids the starter's table lists mean nothing
//! outside their node.
//!
//! [`Nodes::start`] adds the names to `/etc/hosts` if they are missing (once,
//! under a lock, leaving every other line alone: the only change these tests
//! make outside their own directories). Dropping [`Nodes`] kills each node's
//! namespace init, which makes the kernel kill every process left in it; the
//! holder is also tied to the thread that started it (`PR_SET_PDEATHSIG` and
//! `unshare --kill-child`), so a test killed outright leaves nothing behind.
//! Keep a `Nodes` on the thread that made it.

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::procfs::{self, ProcessRecord};

/// How long a node's namespaces get to come up.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest a node lives, should every other cleanup fail.
const HOLDER_SECONDS: u32 = 3600;
/// The programs the recipe needs (util-linux and hostname).
const TOOLS: [&str; 3] = ["unshare", "nsenter", "hostname"];

/// Nodes on this machine, each in its own namespaces.
#[derive(Debug)]
pub struct Nodes {
    dir: PathBuf,
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    name: String,
    /// `unshare`, our child.
    holder: Child,
    /// The first process in the node's PID namespace, as we see it.
    init: ProcessRecord,
    tmpdir: PathBuf,
}

impl Nodes {
    /// Starts one node per name (each name a plain host name such as
    /// `nodea`; it is added to `/etc/hosts` on a loopback address if
    /// missing).
    pub fn start(names: &[&str]) -> Result<Nodes> {
        for tool in TOOLS {
            if find_program(tool).is_none() {
                return Err(Error::io(
                    format!("finding {tool}"),
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "not installed: the multi-node tests need util-linux and hostname \
                         (scripts/setup-mpis installs them)",
                    ),
                ));
            }
        }
        ensure_hosts(names)?;
        remove_stale_dirs("mqs-nodes-");
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqs-nodes-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let mut nodes = Nodes {
            dir,
            nodes: Vec::new(),
        };
        for name in names {
            let node = Node::start(name, &nodes.dir)?;
            nodes.nodes.push(node);
        }
        nodes.write_agent()?;
        nodes.write_hostfile(1)?;
        Ok(nodes)
    }

    /// The node names, in order.
    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The rsh launch agent: `agent [OPTIONS] HOST COMMAND...` runs COMMAND
    /// with `/bin/sh -c` inside node HOST, as `ssh` would; an unknown host
    /// fails with status 255, as ssh does.
    pub fn agent(&self) -> PathBuf {
        self.dir.join("agent")
    }

    /// The Open MPI settings that make `mpirun` start its job on these
    /// nodes, `slots` ranks per node before it wraps around.
    pub fn openmpi_env(&self, slots: u32) -> Result<Vec<(OsString, OsString)>> {
        self.launch_env(
            slots,
            "OMPI_MCA_plm_rsh_agent",
            "OMPI_MCA_orte_default_hostfile",
        )
    }

    /// The same for Open MPI 5's `prterun` (PRRTE reads `PRTE_MCA_*`; its
    /// launch agent is `plm_ssh_agent`).
    pub fn prrte_env(&self, slots: u32) -> Result<Vec<(OsString, OsString)>> {
        self.launch_env(
            slots,
            "PRTE_MCA_plm_ssh_agent",
            "PRTE_MCA_prte_default_hostfile",
        )
    }

    /// The launch agent and hostfile under the names the starter reads.
    fn launch_env(
        &self,
        slots: u32,
        agent_var: &str,
        hostfile_var: &str,
    ) -> Result<Vec<(OsString, OsString)>> {
        let hostfile = self.write_hostfile(slots)?;
        Ok(vec![
            (agent_var.into(), self.agent().into()),
            (hostfile_var.into(), hostfile.into()),
            // Two nodes on one machine must not share memory segments.
            ("OMPI_MCA_btl".into(), "self,tcp".into()),
        ])
    }

    /// A command that runs `program` inside node `name` (its PID, mount
    /// and UTS namespaces, its TMPDIR).
    pub fn command_in(&self, name: &str, program: impl AsRef<Path>) -> Result<Command> {
        let node = self.node(name)?;
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(node.init.pid.to_string())
            .args(["-p", "-m", "-u", "env"])
            .arg(format!("TMPDIR={}", node.tmpdir.display()))
            .arg(program.as_ref());
        Ok(cmd)
    }

    /// The pid, as this machine sees it, of the process with node-local pid
    /// `local` in node `name`.
    pub fn global_pid(&self, name: &str, local: u32) -> Result<Option<u32>> {
        let node = self.node(name)?;
        procfs::pid_in_namespace_of(node.init.pid, local)
            .map_err(|e| Error::io(format!("reading node {name}'s namespace"), e))
    }

    fn node(&self, name: &str) -> Result<&Node> {
        self.nodes.iter().find(|n| n.name == name).ok_or_else(|| {
            Error::io(
                format!("node {name}"),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such node"),
            )
        })
    }

    fn write_agent(&self) -> Result<()> {
        let mut script = String::from(
            "#!/bin/sh\n\
             # rsh launch agent of the mqs tests: [options] host command...\n\
             while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
             host=$1; shift\n\
             case \"$host\" in\n",
        );
        for node in &self.nodes {
            script.push_str(&format!(
                "  {name}) exec nsenter -t {pid} -p -m -u env TMPDIR={tmp} /bin/sh -c \"$*\";;\n",
                name = node.name,
                pid = node.init.pid,
                tmp = node.tmpdir.display()
            ));
        }
        script.push_str("  *) echo \"agent: no such host: $host\" >&2; exit 255;;\nesac\n");
        let path = self.agent();
        fs::write(&path, script)
            .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    fn write_hostfile(&self, slots: u32) -> Result<PathBuf> {
        let path = self.dir.join(format!("hostfile-{slots}"));
        let text: String = self
            .nodes
            .iter()
            .map(|n| format!("{} slots={slots}\n", n.name))
            .collect();
        fs::write(&path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(path)
    }
}

impl Node {
    fn start(name: &str, dir: &Path) -> Result<Node> {
        let tmpdir = dir.join(name);
        fs::create_dir_all(&tmpdir)
            .map_err(|e| Error::io(format!("creating {}", tmpdir.display()), e))?;
        let script = format!("hostname {name} && echo up && exec sleep {HOLDER_SECONDS}");
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--pid",
            "--uts",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (prctl, getppid).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let mut holder = cmd
            .spawn()
            .map_err(|e| Error::io(format!("starting node {name} with unshare"), e))?;
        let fail = |holder: &mut Child, what: String| {
            let _ = holder.kill();
            let _ = holder.wait();
            Error::io(format!("starting node {name}"), std::io::Error::other(what))
        };
        // "up" once the hostname is set; read on a thread so the wait is
        // bounded.
        let (tx, rx) = mpsc::channel();
        if let Some(out) = holder.stdout.take() {
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(out).read_line(&mut line);
                let _ = tx.send(line);
            });
        }
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) if line.trim() == "up" => {}
            Ok(line) => return Err(fail(&mut holder, format!("it said {line:?}, not up"))),
            Err(_) => {
                return Err(fail(
                    &mut holder,
                    format!("not up within {START_TIMEOUT:?}"),
                ))
            }
        }
        let deadline = Instant::now() + START_TIMEOUT;
        let init = loop {
            if let Some(init) = procfs::descendants(holder.id()).into_iter().next() {
                break init;
            }
            if Instant::now() > deadline {
                return Err(fail(
                    &mut holder,
                    "its namespace init did not appear".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Node {
            name: name.to_string(),
            holder,
            init,
            tmpdir,
        })
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            // The kernel kills everything in a PID namespace whose init dies.
            node.init.kill();
            let _ = node.holder.kill();
            let _ = node.holder.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The directories of test processes that were killed before they could
/// remove their own (`<prefix><pid>-<n>` in the temporary directory).
pub(crate) fn remove_stale_dirs(prefix: &str) {
    let tmp = std::env::temp_dir();
    let Ok(entries) = fs::read_dir(&tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
        else {
            continue;
        };
        if !procfs::process_alive(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A program on PATH, or in the sbin directories a root shell would have.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Makes each of `names` resolve (to a loopback address of its own) by
/// appending the missing ones to `/etc/hosts`, under a lock so that
/// concurrent tests do not add a name twice.
fn ensure_hosts(names: &[&str]) -> Result<()> {
    let hosts = Path::new("/etc/hosts");
    let lock_path = std::env::temp_dir().join("mqs-etc-hosts.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
    // SAFETY: flock on a descriptor we own; released when `lock` closes.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(Error::io(
            "locking /etc/hosts",
            std::io::Error::last_os_error(),
        ));
    }
    let text = fs::read_to_string(hosts).map_err(|e| Error::io("reading /etc/hosts", e))?;
    let known = |name: &str| {
        text.lines().any(|l| {
            let l = l.split('#').next().unwrap_or("");
            l.split_whitespace().skip(1).any(|n| n == name)
        })
    };
    let mut add = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        add.push('\n');
    }
    for (i, name) in names.iter().enumerate() {
        if !known(name) {
            add.push_str(&format!(
                "127.0.0.{} {name} # added by the mqs tests\n",
                i + 2
            ));
        }
    }
    if add.trim().is_empty() {
        return Ok(());
    }
    fs::OpenOptions::new()
        .append(true)
        .open(hosts)
        .and_then(|mut f| f.write_all(add.as_bytes()))
        .map_err(|e| Error::io("adding the test nodes to /etc/hosts (run as root)", e))
}
