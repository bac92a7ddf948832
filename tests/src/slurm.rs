//! A real two-node Slurm on this one machine (Debian 12's `slurm-wlm`
//! 22.05 and `munge`, installed by `scripts/setup-mpis`): a `munged`, a
//! `slurmctld` and two `slurmd`s, nodes `nodea` and `nodeb`, each `slurmd`
//! in its own PID, UTS and mount namespace (its own hostname; its tasks'
//! pids node-local, as on a cluster), all of it under a fresh temporary
//! directory with ports chosen free for this run, so that a second cluster
//! (another test binary, a CI run) never meets this one.
//!
//! Dropping [`Slurm`] takes it down, on success, failure and panic alike,
//! by the pids it started only: each node's namespace init is killed, which
//! makes the kernel kill everything left in the namespace (`slurmstepd`s,
//! tasks, collectors), then `slurmctld` and `munged`. Every daemon is also
//! tied to the thread that started it (`PR_SET_PDEATHSIG`), so a test
//! killed outright leaves nothing behind either. Keep a `Slurm` on the
//! thread that made it. Clusters of one test binary take turns (a lock):
//! the machines that run the tests have few cores.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::job::{Job, LaunchOptions};
use crate::mpi::{build_fixture, Family, Mpi};
use crate::nodes::{find_program, remove_stale_dirs};
use crate::procfs::{self, ProcessRecord};

/// The nodes, by Slurm name (also their hostnames inside their namespaces).
pub const SLURM_NODES: [&str; 2] = ["nodea", "nodeb"];
/// Each node's address (all of 127/8 is the loopback interface).
const NODE_ADDRS: [&str; 2] = ["127.0.1.1", "127.0.1.2"];
/// CPUs Slurm counts per node (more than the machine's cores: Slurm is told
/// to believe the configuration).
pub const SLURM_CPUS: u32 = 4;
/// How long the cluster gets to come up, and a daemon to go.
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);
/// What the cluster needs, and the packages that have it.
const TOOLS: [(&str, &str); 8] = [
    ("munged", "munge"),
    ("mungekey", "munge"),
    ("slurmctld", "slurmctld (slurm-wlm)"),
    ("slurmd", "slurmd (slurm-wlm)"),
    ("srun", "slurm-client (slurm-wlm)"),
    ("sinfo", "slurm-client (slurm-wlm)"),
    ("unshare", "util-linux"),
    ("nsenter", "util-linux"),
];

/// One cluster at a time per test binary.
static TURN: Mutex<()> = Mutex::new(());

/// A running two-node Slurm; see the module's comment.
#[derive(Debug)]
pub struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    munged: Option<Child>,
    slurmctld: Option<Child>,
    nodes: Vec<SlurmNode>,
    _turn: MutexGuard<'static, ()>,
}

#[derive(Debug)]
struct SlurmNode {
    name: String,
    /// `unshare`, our child.
    holder: Child,
    /// The namespace's init (a shell that waits for its slurmd), as we see
    /// it.
    init: ProcessRecord,
}

impl Slurm {
    /// Brings the cluster up and waits until both nodes are idle.
    pub fn start() -> Result<Slurm> {
        let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        for (tool, package) in TOOLS {
            if find_program(tool).is_none() {
                return Err(Error::io(
                    format!("finding {tool}"),
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "not installed: the Slurm tests need {package} \
                             (scripts/setup-mpis installs it)"
                        ),
                    ),
                ));
            }
        }
        remove_stale_dirs("mqs-slurm-");
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqs-slurm-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        let mut slurm = Slurm {
            conf: dir.join("etc/slurm.conf"),
            dir,
            munged: None,
            slurmctld: None,
            nodes: Vec::new(),
            _turn: turn,
        };
        // From here on, a failure drops `slurm`, which stops what started.
        slurm.make_dirs()?;
        slurm.start_munged()?;
        slurm.write_conf()?;
        let mut ctld = slurm.daemon("slurmctld");
        ctld.args(["-D", "-i", "-f"]).arg(&slurm.conf);
        slurm.slurmctld = Some(slurm.spawn(ctld, "slurmctld")?);
        for name in SLURM_NODES {
            slurm.start_node(name)?;
        }
        slurm.await_idle_nodes()?;
        Ok(slurm)
    }

    /// `slurm.conf`, which every Slurm command is pointed to
    /// (`SLURM_CONF`).
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The cluster's base directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A command for this cluster: `SLURM_CONF` names it, and no variable
    /// of an enclosing Slurm job (the tests may run inside one) shapes it.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        for (key, _) in std::env::vars_os() {
            let Some(key) = key.to_str() else { continue };
            if ["SLURM_", "SRUN_", "SALLOC_", "SBATCH_"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                cmd.env_remove(key);
            }
        }
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// Runs a Slurm command to its end (30 s at most); its output.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<Output> {
        let mut cmd = self.command(program);
        cmd.args(args).stdin(Stdio::null());
        run_bounded(cmd, START_TIMEOUT, &format!("{program} {}", args.join(" ")))
    }

    /// `fixture` built for `mpi`, started by `srun` directly on both nodes,
    /// `per_node` ranks on each (ranks 0.. on nodea first), through the PMI
    /// the MPI speaks with Slurm: PMIx for Open MPI (`--mpi=pmix`), PMI-2's
    /// plugin for MPICH (`--mpi=pmi2`). A [`Job`] whose launcher is the
    /// `srun` (the one with the MPIR table; its ranks' pids are
    /// node-local).
    pub fn srun_job(&self, mpi: Mpi, fixture: &str, per_node: u32, args: &[&str]) -> Result<Job> {
        let exe = build_fixture(mpi, fixture)?;
        let nodes = SLURM_NODES.len() as u32;
        let cmd = self.srun_command(mpi, &exe, per_node, args);
        let options = LaunchOptions {
            node_local_pids: true,
            ..LaunchOptions::default()
        };
        Job::launch_command(
            mpi,
            fixture,
            exe,
            per_node * nodes,
            cmd,
            &Job::new_id(fixture),
            &options,
        )
    }

    /// The `srun` command of [`Slurm::srun_job`], for `exe` (a fixture
    /// built for `mpi`): run it in the fixture's directory.
    pub fn srun_command(&self, mpi: Mpi, exe: &Path, per_node: u32, args: &[&str]) -> Command {
        let nodes = SLURM_NODES.len() as u32;
        let mut cmd = self.command("srun");
        // The executable as a user types it, relative to the working
        // directory (srun's table says it so; each node resolves it).
        let dir = exe.parent().unwrap_or(Path::new("/"));
        let name = exe.file_name().unwrap_or(exe.as_os_str());
        cmd.current_dir(dir).arg(format!("--nodes={nodes}"));
        if per_node > SLURM_CPUS {
            // More tasks than CPUs (benches): Slurm refuses
            // --ntasks-per-node then, even with --overcommit; block
            // distribution still puts per_node on each node.
            cmd.arg(format!("--ntasks={}", per_node * nodes))
                .arg("--overcommit");
        } else {
            cmd.arg(format!("--ntasks-per-node={per_node}"));
        }
        cmd.arg("--distribution=block")
            .arg(match mpi.family() {
                Family::OpenMpi => "--mpi=pmix",
                Family::Mpich => "--mpi=pmi2",
            })
            .arg(Path::new(".").join(name))
            .args(args)
            .envs([
                // ob1 (the queues the DLLs read): shared memory in a node,
                // TCP between nodes.
                ("OMPI_MCA_pml", "ob1"),
                ("OMPI_MCA_btl", "self,vader,tcp"),
                ("OMPI_MCA_mpi_yield_when_idle", "1"),
                ("OMPI_MCA_btl_base_warn_component_unused", "0"),
            ]);
        cmd
    }

    /// `fixture` built for `mpi`, started by the MPI's own starter
    /// (`mpirun`, hydra's `mpiexec`) inside an allocation of both nodes
    /// (`salloc`), `per_node` ranks on each: the starter runs here, as on a
    /// login node, and reaches the nodes through srun (Open MPI's `orted`s,
    /// hydra's proxies, PRRTE's daemons). A [`Job`] whose launcher is
    /// `salloc`; the starter is its child ([`Slurm::starter_of`]).
    pub fn salloc_job(&self, mpi: Mpi, fixture: &str, per_node: u32, args: &[&str]) -> Result<Job> {
        let exe = build_fixture(mpi, fixture)?;
        let nodes = SLURM_NODES.len() as u32;
        let ranks = per_node * nodes;
        let mut cmd = self.command("salloc");
        cmd.arg(format!("--nodes={nodes}"))
            .arg(format!("--ntasks-per-node={per_node}"))
            .arg(mpi.launcher()?)
            .arg(if mpi.family() == Family::Mpich {
                "-n"
            } else {
                "-np"
            })
            .arg(ranks.to_string())
            .arg(&exe)
            .args(args)
            .envs([
                ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                ("PRTE_ALLOW_RUN_AS_ROOT", "1"),
                ("PRTE_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                ("OMPI_MCA_pml", "ob1"),
                ("OMPI_MCA_btl", "self,vader,tcp"),
                ("OMPI_MCA_mpi_yield_when_idle", "1"),
                ("OMPI_MCA_hwloc_base_binding_policy", "none"),
                ("OMPI_MCA_btl_base_warn_component_unused", "0"),
                ("OMPI_MPIR_DO_NOT_WARN", "1"),
            ]);
        if mpi.is_open_mpi_5() {
            // Open MPI 5 names vader sm.
            cmd.env("OMPI_MCA_btl", "self,sm,tcp");
        }
        let options = LaunchOptions {
            node_local_pids: true,
            ..LaunchOptions::default()
        };
        Job::launch_command(
            mpi,
            fixture,
            exe,
            ranks,
            cmd,
            &Job::new_id(fixture),
            &options,
        )
    }

    /// The MPI starter `salloc` (the job's launcher) runs: its child.
    pub fn starter_of(job: &Job) -> Option<u32> {
        procfs::descendants(job.launcher_pid())
            .into_iter()
            .find(|p| procfs::parent_pid(p.pid) == Some(job.launcher_pid()))
            .map(|p| p.pid)
    }

    /// The job's steps as `squeue -s` lists them: (step id, name).
    pub fn steps(&self) -> Result<Vec<(String, String)>> {
        let out = self.run("squeue", &["-h", "-s", "-o", "%i %j"])?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (id, name) = l.trim().split_once(' ')?;
                Some((id.to_string(), name.trim().to_string()))
            })
            .collect())
    }

    /// The ids of the jobs Slurm has running.
    pub fn jobs(&self) -> Result<Vec<String>> {
        let out = self.run("squeue", &["-h", "-t", "RUNNING", "-o", "%i"])?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect())
    }

    /// A command that runs `program` inside node `name` (its PID, mount and
    /// UTS namespaces), as a process of that node sees the machine.
    pub fn command_in(&self, name: &str, program: impl AsRef<Path>) -> Result<Command> {
        let node = self.node(name)?;
        let mut cmd = self.command("nsenter");
        cmd.arg("-t")
            .arg(node.init.pid.to_string())
            .args(["-p", "-m", "-u"])
            .arg(program.as_ref());
        Ok(cmd)
    }

    /// Every process in the nodes' namespaces: (node, our pid, its pid
    /// there).
    pub fn node_processes(&self) -> Vec<(String, u32, u32)> {
        self.nodes
            .iter()
            .flat_map(|n| {
                procfs::namespace_processes(n.init.pid)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(ours, theirs)| (n.name.clone(), ours, theirs))
            })
            .collect()
    }

    /// Our pid of the process with pid `local` in node `name`.
    pub fn global_pid(&self, name: &str, local: u32) -> Result<Option<u32>> {
        let node = self.node(name)?;
        procfs::pid_in_namespace_of(node.init.pid, local)
            .map_err(|e| Error::io(format!("reading node {name}'s namespace"), e))
    }

    /// The daemons it started (munged, slurmctld, each node's `unshare`
    /// and namespace init), for tests that check they are gone.
    pub fn daemons(&self) -> Vec<ProcessRecord> {
        let children = [&self.munged, &self.slurmctld]
            .into_iter()
            .flatten()
            .chain(self.nodes.iter().map(|n| &n.holder));
        children
            .filter_map(|c| procfs::record(c.id()))
            .chain(self.nodes.iter().map(|n| n.init))
            .collect()
    }

    fn node(&self, name: &str) -> Result<&SlurmNode> {
        self.nodes.iter().find(|n| n.name == name).ok_or_else(|| {
            Error::io(
                format!("Slurm node {name}"),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such node"),
            )
        })
    }

    fn make_dirs(&self) -> Result<()> {
        let mut dirs = vec![
            "etc".to_string(),
            "log".into(),
            "run".into(),
            "munge".into(),
            "state/ctld".into(),
        ];
        for n in SLURM_NODES {
            dirs.push(format!("state/d-{n}"));
            // mpi/pmix makes its directories in TmpFS: one per node.
            dirs.push(format!("tmp/{n}"));
        }
        for d in dirs {
            let path = self.dir.join(d);
            fs::create_dir_all(&path)
                .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        }
        // munged wants the way to its socket open to all, its key private.
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io(format!("chmod {}", self.dir.display()), e))
    }

    /// A munged of our own (its own key and socket): another cluster's, or
    /// the system's, is never used nor disturbed.
    fn start_munged(&mut self) -> Result<()> {
        let munge = self.dir.join("munge");
        let key = munge.join("munge.key");
        let out = run_bounded(
            {
                let mut c =
                    Command::new(find_program("mungekey").unwrap_or_else(|| "mungekey".into()));
                c.args(["-c", "-k"]).arg(&key).stdin(Stdio::null());
                c
            },
            START_TIMEOUT,
            "mungekey",
        )?;
        if !out.status.success() {
            return Err(self.failed(format!(
                "mungekey failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let socket = self.socket();
        let mut cmd = self.daemon("munged");
        cmd.arg("-F")
            // As root (the tests' user) munged wants to be told.
            .arg("--force")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!("--seed-file={}", munge.join("seed").display()))
            .arg(format!("--log-file={}", munge.join("munged.log").display()));
        self.munged = Some(self.spawn(cmd, "munged")?);
        let deadline = Instant::now() + START_TIMEOUT;
        while !socket.exists() {
            if Instant::now() > deadline {
                return Err(self.failed(format!(
                    "munged made no socket {} within {START_TIMEOUT:?}",
                    socket.display()
                )));
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("munge/socket")
    }

    fn write_conf(&self) -> Result<()> {
        let ports = free_ports(1 + SLURM_NODES.len())?;
        let host = short_hostname();
        let base = self.dir.display();
        let mut text = format!(
            "# A two-node test cluster of the mqs tests (tests/src/slurm.rs).\n\
             ClusterName=mqs\n\
             FirstJobId={first_job}\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={socket}\n\
             StateSaveLocation={base}/state/ctld\n\
             SlurmdSpoolDir={base}/state/d-%n\n\
             TmpFS={base}/tmp/%n\n\
             SlurmctldPidFile={base}/run/slurmctld.pid\n\
             SlurmdPidFile={base}/run/slurmd-%n.pid\n\
             SlurmctldLogFile={base}/log/slurmctld.log\n\
             SlurmdLogFile={base}/log/slurmd-%n.log\n\
             SlurmctldDebug=info\n\
             SlurmdDebug=info\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             SchedulerType=sched/backfill\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             MailProg=/bin/true\n\
             SlurmdParameters=config_overrides\n",
            ctld = ports[0],
            socket = self.socket().display(),
            first_job = first_job_id(),
        );
        for (i, name) in SLURM_NODES.iter().enumerate() {
            text.push_str(&format!(
                "NodeName={name} NodeHostname={name} NodeAddr={addr} Port={port} \
                 CPUs={SLURM_CPUS} RealMemory=4000 State=UNKNOWN\n",
                addr = NODE_ADDRS[i],
                port = ports[i + 1],
            ));
        }
        text.push_str("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
        fs::write(&self.conf, text)
            .map_err(|e| Error::io(format!("writing {}", self.conf.display()), e))
    }

    /// A node: `unshare` makes the namespaces; a shell is their init (it
    /// reaps orphans) and runs slurmd in the foreground.
    fn start_node(&mut self, name: &str) -> Result<()> {
        let script = format!(
            "hostname {name} || exit 1; slurmd -D -f '{conf}' -N {name} & wait",
            conf = self.conf.display()
        );
        let mut cmd = self.daemon("unshare");
        cmd.args([
            "--pid",
            "--uts",
            "--mount",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "sh",
            "-c",
            &script,
        ]);
        let mut holder = self.spawn(cmd, &format!("node {name}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let init = loop {
            if let Some(init) = procfs::descendants(holder.id()).into_iter().next() {
                break init;
            }
            if Instant::now() > deadline || holder.try_wait().ok().flatten().is_some() {
                let _ = holder.kill();
                let _ = holder.wait();
                return Err(self.failed(format!("node {name}'s namespace did not come up")));
            }
            std::thread::sleep(POLL);
        };
        self.nodes.push(SlurmNode {
            name: name.to_string(),
            holder,
            init,
        });
        Ok(())
    }

    fn await_idle_nodes(&self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let out = self.run("sinfo", &["-h", "-t", "idle", "-o", "%D"])?;
            if String::from_utf8_lossy(&out.stdout).trim() == SLURM_NODES.len().to_string() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(
                    self.failed(format!("the nodes were not idle within {START_TIMEOUT:?}"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A daemon's command (by its full path: daemons live in sbin, which
    /// a user's PATH may lack), its output to its log, its own process
    /// group.
    fn daemon(&self, program: &str) -> Command {
        let mut cmd = self.command(find_program(program).unwrap_or_else(|| program.into()));
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("log/{program}.out")));
        let (out, err) = match log.and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
            Err(_) => (Stdio::null(), Stdio::null()),
        };
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        cmd.process_group(0);
        cmd
    }

    /// Starts a daemon, tied to this thread: SIGKILL when it ends.
    fn spawn(&self, mut cmd: Command, what: &str) -> Result<Child> {
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
        cmd.spawn()
            .map_err(|e| Error::io(format!("starting {what}"), e))
    }

    /// An error that shows the daemons' logs.
    fn failed(&self, what: String) -> Error {
        let mut logs = String::new();
        if let Ok(entries) = fs::read_dir(self.dir.join("log")) {
            for entry in entries.flatten() {
                let text = fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                logs.push_str(&format!(
                    "\n--- {} ---\n{}",
                    entry.path().display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
        }
        Error::io(
            "bringing up the test Slurm",
            std::io::Error::other(format!("{what}{logs}")),
        )
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // The nodes first: everything of a job runs in their namespaces,
        // and the kernel kills it all with the namespace's init, which
        // reaps it all before it dies itself; `unshare` then reaps the
        // init and ends (killed after a grace, should it not).
        for node in &self.nodes {
            node.init.kill();
        }
        for node in &mut self.nodes {
            stop_within(&mut node.holder, STOP_GRACE);
        }
        for child in [self.slurmctld.as_mut(), self.munged.as_mut()]
            .into_iter()
            .flatten()
        {
            stop(child);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Waits for our child to end by itself, SIGKILLs it after `grace`; reaped
/// either way.
fn stop_within(child: &mut Child, grace: Duration) {
    let deadline = Instant::now() + grace;
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// SIGTERM our child, then SIGKILL after a grace; reaped either way.
fn stop(child: &mut Child) {
    if child.try_wait().ok().flatten().is_none() {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own child, not reaped yet, so the pid
            // is still its.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// Runs `cmd` to its end within `limit` (killed past it).
fn run_bounded(mut cmd: Command, limit: Duration, what: &str) -> Result<Output> {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("running {what}"), e))?;
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.map_err(|e| Error::io(format!("running {what}"), e)),
        Err(_) => {
            if let Ok(pid) = i32::try_from(id) {
                // SAFETY: kill(2) on our own child, which the waiting
                // thread has not reaped (it would have answered).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            Err(Error::io(
                format!("running {what}"),
                std::io::Error::other(format!("no end within {limit:?}")),
            ))
        }
    }
}

/// The first job id of a cluster: its own range, so that two clusters on
/// this machine never run jobs of the same id, whose MPI processes would
/// name their shared-memory files alike (Open MPI's vader segments in
/// /dev/shm carry the node name and the job's PMIx namespace, which has
/// the Slurm job id). Never below 1000: lower ids are never jobs.
fn first_job_id() -> u32 {
    static CLUSTERS: AtomicU64 = AtomicU64::new(0);
    let run = CLUSTERS.fetch_add(1, Ordering::Relaxed) % 100;
    // Slurm's job ids end at 0x3ffffff; leave each cluster 1000 jobs.
    1000 + ((std::process::id() % 600) * 100 + run as u32) * 1000
}

/// `n` distinct TCP ports free right now.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("0.0.0.0:0"))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io("finding free ports", e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io("finding free ports", e))
}

fn short_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".into()
    };
    name.split('.').next().unwrap_or("localhost").to_string()
}
