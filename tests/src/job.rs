//! A fixture running as a real MPI job, and its teardown.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, NotReady, Result};
use crate::mpi::{build_fixture, Family, Mpi};
use crate::procfs::{self, ProcessRecord};

/// How long the launcher gets to take its job down after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// The same for a job torn down before every rank was READY.
const NOT_READY_TERM_GRACE: Duration = Duration::from_secs(1);
/// How long killed processes get to disappear.
const KILL_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);
/// The niceness of the jobs the tests start (19, the lowest priority):
/// mqs-dump and the tests run at the usual 0 beside them.
const JOB_NICENESS: libc::c_int = 19;
/// How often hydra's mpiexec gets SIGTERM again while it ignores it.
const HYDRA_TERM_REPEAT: Duration = Duration::from_millis(500);
/// How often to look for new processes while the launcher winds down (each
/// look reads all of /proc).
const TERM_POLL: Duration = Duration::from_millis(50);

/// The environment variable that marks every process of a job with the
/// job's id (inherited by the launcher's daemons and the ranks), so teardown
/// finds them even if they were orphaned.
pub const JOB_ENV: &str = "MQS_TESTS_JOB";

/// The environment that runs Open MPI's `pml ucx` on one machine without
/// InfiniBand (with [`crate::Mpi::OpenMpiUcx`], 4.1, or
/// [`crate::Mpi::OpenMpi5Ucx`], 5.0, where `pml_ucx_tls` and
/// `pml_ucx_devices` are synonyms of `opal_common_ucx_*`): pml ucx declines
/// itself unless told any transport and device will do, and UCX then uses
/// shared memory.
pub const PML_UCX_ENV: [(&str, &str); 4] = [
    ("OMPI_MCA_pml", "ucx"),
    ("OMPI_MCA_pml_ucx_tls", "any"),
    ("OMPI_MCA_pml_ucx_devices", "any"),
    ("UCX_TLS", "self,sm"),
];

/// The environment that runs MPICH's ch4:ucx ([`crate::Mpi::MpichUcx`])
/// on one machine without InfiniBand: UCX's loopback and shared-memory
/// transports only (set by the launcher for every job of that build).
pub const MPICH_UCX_ENV: [(&str, &str); 1] = [("UCX_TLS", "self,sm")];

/// Options for [`Job::launch_with`].
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// How long to wait for every rank's READY line. Default 60 s, or
    /// `MQS_READY_TIMEOUT` seconds when set.
    pub timeout: Duration,
    /// Extra environment for the launcher (and so the ranks), applied over
    /// ours; only [`JOB_ENV`] cannot be overridden.
    pub env: Vec<(OsString, OsString)>,
    /// The ranks run in other PID namespaces (nodes, see `Nodes`): the pids
    /// their READY lines give are node-local and never looked up here. Such
    /// a job's processes are found by ancestry and by [`JOB_ENV`] only.
    pub node_local_pids: bool,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        let secs = std::env::var("MQS_READY_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(60.0);
        LaunchOptions {
            timeout: Duration::from_secs_f64(secs),
            env: Vec::new(),
            node_local_pids: false,
        }
    }
}

impl LaunchOptions {
    /// The default options with [`PML_UCX_ENV`]: a job under pml ucx.
    pub fn pml_ucx() -> Self {
        LaunchOptions {
            env: pml_ucx_env(),
            ..LaunchOptions::default()
        }
    }
}

/// [`PML_UCX_ENV`] as a launch's environment.
pub fn pml_ucx_env() -> Vec<(OsString, OsString)> {
    PML_UCX_ENV
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// The command that runs `exe args...` as an `nprocs`-rank job of `mpi` on
/// this machine only, started quickly and quietly. Callers add stdio and the
/// rest; [`Job::launch`] is the usual way in.
pub fn launcher_command(
    mpi: Mpi,
    exe: &Path,
    nprocs: u32,
    args: &[impl AsRef<OsStr>],
) -> Result<Command> {
    let mut cmd = if mpi.in_debian13_root() {
        crate::debian13::command_in_root(mpi.launcher()?)?
    } else {
        Command::new(mpi.launcher()?)
    };
    match mpi.family() {
        Family::OpenMpi if mpi.is_open_mpi_5() => {
            // prterun (PRRTE): its own root switches and options; the BTL
            // once called vader is sm.
            cmd.arg("-np")
                .arg(nprocs.to_string())
                .args(["--oversubscribe", "--bind-to", "none"])
                .envs([
                    // mpirun runs prterun with Open MPI's personality,
                    // which reads OMPI_*; plain prterun reads PRTE_*.
                    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                    ("PRTE_ALLOW_RUN_AS_ROOT", "1"),
                    ("PRTE_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                    ("OMPI_MCA_btl", "self,sm"),
                    ("OMPI_MCA_pml", "ob1"),
                    ("OMPI_MCA_mpi_yield_when_idle", "1"),
                    ("OMPI_MCA_btl_base_warn_component_unused", "0"),
                ]);
        }
        Family::OpenMpi => {
            cmd.arg("-np")
                .arg(nprocs.to_string())
                .arg("--oversubscribe")
                .envs([
                    // The machines run the tests as root.
                    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                    // Shared memory only: no network probing, and the ob1
                    // PML whose queues the DLL reads.
                    ("OMPI_MCA_btl", "self,vader"),
                    ("OMPI_MCA_pml", "ob1"),
                    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                    // Hung ranks poll; let them give way to each other and
                    // to the tests on a machine with few cores.
                    ("OMPI_MCA_mpi_yield_when_idle", "1"),
                    ("OMPI_MCA_hwloc_base_binding_policy", "none"),
                    ("OMPI_MCA_btl_base_warn_component_unused", "0"),
                    // mpirun warns about MPIR being deprecated when a
                    // debugger attaches; tests attach on purpose.
                    ("OMPI_MPIR_DO_NOT_WARN", "1"),
                ]);
        }
        Family::Mpich => {
            cmd.arg("-n")
                .arg(nprocs.to_string())
                .arg("-launcher")
                .arg("fork");
            if mpi == Mpi::MpichCh4 {
                // libfabric's TCP provider: on any machine, no probing of
                // other networks.
                cmd.env("FI_PROVIDER", "tcp");
            }
            if mpi == Mpi::MpichUcx || mpi == Mpi::Debian13Mpich {
                // UCX on one machine without InfiniBand: loopback and
                // shared memory (MPICH_UCX_ENV).
                cmd.envs(MPICH_UCX_ENV);
            }
        }
    }
    cmd.arg(exe).args(args);
    Ok(cmd)
}

/// What the output reader threads report.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Ready { rank: u32, pid: u32, size: u32 },
    BadReady(String),
    Eof,
}

/// Everything the job printed, kept for error messages and for tests.
#[derive(Debug, Default)]
struct Captured {
    stdout: String,
    stderr: String,
}

/// A running MPI job of one fixture, every rank blocked inside MPI after
/// printing `READY rank=R pid=P size=N`.
///
/// Dropping it tears the job down (on success, failure and panic alike);
/// [`Job::shutdown`] does the same and reports the processes it had.
/// Teardown SIGTERMs the launcher, reaps it, then SIGKILLs every process of
/// the job still alive: those recorded by ancestry while it ran and those
/// carrying its [`JOB_ENV`] id, each checked by start time first.
///
/// The launcher gets `PR_SET_PDEATHSIG(SIGTERM)`, which the kernel ties to
/// the *thread* that started it: keep a `Job` on the thread that launched it,
/// or the job is terminated when that thread ends.
#[derive(Debug)]
pub struct Job {
    id: String,
    mpi: Mpi,
    fixture: String,
    exe: PathBuf,
    size: u32,
    child: Child,
    launcher: ProcessRecord,
    exit_status: Option<ExitStatus>,
    /// (rank, pid), ordered by rank.
    ranks: Vec<(u32, u32)>,
    recorded: Vec<ProcessRecord>,
    captured: Arc<Mutex<Captured>>,
    torn_down: bool,
    /// READY pids are node-local: never looked up here.
    node_local_pids: bool,
}

impl Job {
    /// Build `fixture` for `mpi`, run it with `nprocs` ranks and wait for all
    /// their READY lines, with [`LaunchOptions::default`].
    pub fn launch(mpi: Mpi, fixture: &str, nprocs: u32, args: &[&str]) -> Result<Job> {
        Job::launch_with(mpi, fixture, nprocs, args, &LaunchOptions::default())
    }

    /// [`Job::launch`] with explicit options.
    pub fn launch_with(
        mpi: Mpi,
        fixture: &str,
        nprocs: u32,
        args: &[&str],
        opts: &LaunchOptions,
    ) -> Result<Job> {
        let exe = build_fixture(mpi, fixture)?;
        let cmd = launcher_command(mpi, &exe, nprocs, args)?;
        Job::launch_command(mpi, fixture, exe, nprocs, cmd, &Job::new_id(fixture), opts)
    }

    /// A new job id for [`Job::launch_command`], unique in this machine's
    /// runs.
    pub fn new_id(fixture: &str) -> String {
        static JOBS: AtomicU64 = AtomicU64::new(0);
        format!(
            "{}-{}-{fixture}",
            std::process::id(),
            JOBS.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Runs `cmd`, a command that starts `nprocs` ranks of `fixture` (built
    /// at `exe` for `mpi`) some other way (`srun`, `salloc mpirun`...), as
    /// job `id`, and waits for every rank's READY line, as
    /// [`Job::launch_with`] does.
    pub fn launch_command(
        mpi: Mpi,
        fixture: &str,
        exe: PathBuf,
        nprocs: u32,
        mut cmd: Command,
        id: &str,
        opts: &LaunchOptions,
    ) -> Result<Job> {
        let id = id.to_string();
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)))
            .env(JOB_ENV, &id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so a terminal's ^C or a signal to the test's
            // group does not race our teardown.
            .process_group(0);
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (prctl, getppid); it allocates
        // nothing and takes no locks.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl: then nobody would
                // send the signal, so do not start at all.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            let program = Path::new(cmd.get_program()).display().to_string();
            Error::io(format!("starting {program}"), e)
        })?;

        let captured = Arc::new(Mutex::new(Captured::default()));
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            spawn_reader(out, true, Arc::clone(&captured), tx.clone());
        }
        if let Some(err) = child.stderr.take() {
            spawn_reader(err, false, Arc::clone(&captured), tx);
        }

        let launcher = procfs::record(child.id()).unwrap_or(ProcessRecord {
            pid: child.id(),
            start_time: 0,
        });
        let mut job = Job {
            id,
            mpi,
            fixture: fixture.to_string(),
            exe,
            size: nprocs,
            child,
            launcher,
            exit_status: None,
            ranks: Vec::new(),
            recorded: vec![launcher],
            captured,
            torn_down: false,
            node_local_pids: opts.node_local_pids,
        };
        let mut eofs = 0;
        match job.wait_ready(&rx, opts.timeout, &mut eofs) {
            Ok(()) => {
                job.refresh_pids();
                job.lower_ranks_priority();
                Ok(job)
            }
            Err(mut reason) => {
                if let Err(e) = job.teardown() {
                    reason.push_str(&format!("; then teardown failed: {e}"));
                }
                let pids = job.recorded_pids();
                let job_id = job.id.clone();
                // Let the readers catch the last words of a dying job (it
                // returns at their end of file; on a loaded machine the
                // readers may need more than a second to get there).
                drain_until_eof(&rx, eofs, Duration::from_secs(10));
                let (stdout, stderr) = job.output();
                Err(Error::NotReady(Box::new(NotReady {
                    mpi: mpi.name(),
                    fixture: fixture.to_string(),
                    reason,
                    stdout,
                    stderr,
                    pids,
                    job_id,
                })))
            }
        }
    }

    /// Collect READY lines until every rank has reported; any failure is
    /// described in the returned string. `eofs` counts the output streams
    /// that ended, for draining the rest later.
    fn wait_ready(
        &mut self,
        rx: &Receiver<Event>,
        timeout: Duration,
        eofs: &mut u32,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut ranks: Vec<Option<u32>> = vec![None; self.size as usize];
        loop {
            if ranks.iter().all(Option::is_some) {
                self.ranks = ranks
                    .iter()
                    .enumerate()
                    .filter_map(|(r, p)| Some((r as u32, (*p)?)))
                    .collect();
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit_status = Some(status);
                return Err(format!("the launcher exited early ({status})"));
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> =
                    (0..ranks.len()).filter(|r| ranks[*r].is_none()).collect();
                return Err(format!(
                    "timed out after {timeout:?}; no READY from ranks {missing:?}"
                ));
            }
            match rx.recv_timeout((deadline - now).min(Duration::from_millis(50))) {
                Ok(Event::Ready { rank, pid, size }) => {
                    if size != self.size {
                        return Err(format!(
                            "rank {rank} reports size {size}, launched {}",
                            self.size
                        ));
                    }
                    let Some(slot) = ranks.get_mut(rank as usize) else {
                        return Err(format!("READY from rank {rank} of {}", self.size));
                    };
                    if slot.is_some() {
                        return Err(format!("rank {rank} said READY twice"));
                    }
                    *slot = Some(pid);
                }
                Ok(Event::BadReady(line)) => return Err(format!("malformed READY line {line:?}")),
                Ok(Event::Eof) => *eofs += 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Readers gone; wait for the exit status without spinning.
                    thread::sleep(POLL);
                }
            }
        }
    }

    /// The ranks at the lowest priority: they busy-poll, and on a small
    /// machine mqs-dump (and the test's other work) would otherwise get a
    /// core's fraction per spinning rank. What is read does not depend on
    /// it; how long it takes does. The launcher and its daemons keep
    /// theirs: the collectors they start for mqs-dump would inherit it.
    fn lower_ranks_priority(&self) {
        let ranks: Vec<u32> = if self.node_local_pids {
            // Pids in the nodes' namespaces: the ranks are the processes
            // of the job that run the fixture.
            let comm: String = self.fixture.chars().take(15).collect();
            self.recorded
                .iter()
                .map(|r| r.pid)
                .filter(|&p| procfs::process_comm(p).as_deref() == Some(comm.as_str()))
                .collect()
        } else {
            self.ranks.iter().map(|&(_, pid)| pid).collect()
        };
        let shared: HashSet<String> = self
            .recorded
            .iter()
            .filter(|r| !ranks.contains(&r.pid))
            .filter_map(|r| procfs::autogroup(&r.pid.to_string()))
            .collect();
        for pid in ranks {
            procfs::lower_priority(pid, JOB_NICENESS, &shared);
        }
    }

    /// Which MPI runs the job.
    pub fn mpi(&self) -> Mpi {
        self.mpi
    }

    /// The fixture's name.
    pub fn fixture(&self) -> &str {
        &self.fixture
    }

    /// The fixture binary the ranks run.
    pub fn executable(&self) -> &Path {
        &self.exe
    }

    /// The pid of `mpirun` / `mpiexec`.
    pub fn launcher_pid(&self) -> u32 {
        self.launcher.pid
    }

    /// Each rank's (rank, pid), ordered by rank (node-local pids for a job
    /// on `Nodes`).
    pub fn rank_pids(&self) -> Vec<(u32, u32)> {
        self.ranks.clone()
    }

    /// The pid of `rank`.
    pub fn rank_pid(&self, rank: u32) -> Option<u32> {
        self.ranks.iter().find(|r| r.0 == rank).map(|r| r.1)
    }

    /// The number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// What the launcher printed so far: (stdout, stderr).
    pub fn output(&self) -> (String, String) {
        let c = self.captured.lock().unwrap_or_else(|p| p.into_inner());
        (c.stdout.clone(), c.stderr.clone())
    }

    /// The job's unique id, which all its processes carry in their
    /// environment as [`JOB_ENV`]`=<id>`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Every process recorded as part of the job: the launcher, the ranks,
    /// their descendants and every process carrying the job's id, as seen so
    /// far.
    pub fn recorded_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.recorded.iter().map(|r| r.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Record processes of the job that appeared since the last look (e.g.
    /// tool daemons the launcher started) so teardown covers them too.
    /// Launch does this once every rank is READY.
    pub fn refresh_pids(&mut self) {
        let mut roots: Vec<ProcessRecord> = self
            .recorded
            .iter()
            .copied()
            // A recorded pid that died may be reused: only walk from the
            // same process. The launcher stays ours until it is reaped.
            .filter(|r| procfs::record_alive(*r))
            .collect();
        if self.exit_status.is_none() && !roots.contains(&self.launcher) {
            roots.push(self.launcher);
        }
        // A node-local pid names some other process here.
        let mut found: Vec<ProcessRecord> = self
            .ranks
            .iter()
            .filter(|_| !self.node_local_pids)
            .filter_map(|r| procfs::record(r.1))
            .collect();
        for root in roots {
            found.extend(procfs::descendants(root.pid));
        }
        found.extend(procfs::processes_with_env(JOB_ENV, &self.id));
        for rec in found {
            if !self.recorded.contains(&rec) {
                self.recorded.push(rec);
            }
        }
    }

    /// Waits for a job that ends by itself (a fixture like `finish`) and
    /// returns the launcher's exit status, tearing the job down first if it
    /// has not ended within `timeout` (then the result is an error).
    pub fn wait_for_exit(mut self, timeout: Duration) -> Result<ExitStatus> {
        let start = Instant::now();
        while self.exit_status.is_none() && start.elapsed() < timeout {
            self.refresh_pids();
            match self.child.try_wait() {
                Ok(Some(status)) => self.exit_status = Some(status),
                Ok(None) => thread::sleep(POLL),
                Err(e) => return Err(Error::io("waiting for the launcher", e)),
            }
        }
        let status = self.exit_status;
        // Whatever is left of it goes, in either case.
        self.teardown()?;
        status.ok_or_else(|| Error::StillRunning {
            fixture: self.fixture.clone(),
            waited: timeout,
        })
    }

    /// Tear the job down now and return every pid that belonged to it.
    /// Errors if some of them could not be made to go away.
    pub fn shutdown(mut self) -> Result<Vec<u32>> {
        self.teardown()
    }

    /// SIGTERM the launcher and reap it (SIGKILL after a grace period), then
    /// SIGKILL whatever process of the job is left, until none is.
    fn teardown(&mut self) -> Result<Vec<u32>> {
        if self.torn_down {
            return Ok(self.recorded_pids());
        }
        self.torn_down = true;
        self.refresh_pids();

        if self.exit_status.is_none() {
            // We are its parent and have not reaped it, so the pid is still
            // ours: a plain kill is safe.
            let pid = self.launcher.pid as libc::pid_t;
            // SAFETY: kill only takes integers.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            // A job that never got READY has nothing worth an orderly exit,
            // and hydra caught mid-startup can hang in its own shutdown
            // (the proxy waits for ranks that wait for the proxy's PMI).
            let grace = if self.ranks.is_empty() {
                NOT_READY_TERM_GRACE
            } else {
                TERM_GRACE
            };
            let start = Instant::now();
            let mut last_term = start;
            while self.exit_status.is_none() {
                // Keep looking while it runs: a launcher still starting up
                // may spawn more processes before it notices the signal.
                self.refresh_pids();
                match self.child.try_wait() {
                    Ok(Some(s)) => self.exit_status = Some(s),
                    Ok(None) if start.elapsed() < grace => {
                        // Hydra only forwards SIGTERM to proxies already
                        // connected and otherwise drops it, so a job caught
                        // starting up needs it again. (Open MPI's mpirun takes
                        // a repeated signal as "abort harder": send it once.)
                        if self.mpi.family() == Family::Mpich
                            && last_term.elapsed() >= HYDRA_TERM_REPEAT
                        {
                            // SAFETY: as above.
                            unsafe { libc::kill(pid, libc::SIGTERM) };
                            last_term = Instant::now();
                        }
                        thread::sleep(TERM_POLL);
                    }
                    _ => {
                        let _ = self.child.kill();
                        self.exit_status = self.child.wait().ok();
                        break;
                    }
                }
            }
        }

        // Kill in rounds: a process that was still forking when the last
        // round looked has its children found (by ancestry or by the job id
        // in their environment) and killed in the next one.
        let deadline = Instant::now() + KILL_GRACE;
        loop {
            self.refresh_pids();
            let alive: Vec<ProcessRecord> = self
                .recorded
                .iter()
                .copied()
                .filter(|r| r.pid != self.launcher.pid && procfs::record_alive(*r))
                .collect();
            if alive.is_empty() {
                return Ok(self.recorded_pids());
            }
            if Instant::now() >= deadline {
                return Err(Error::Survivors(alive.iter().map(|r| r.pid).collect()));
            }
            for rec in &alive {
                procfs::signal_recorded(*rec, libc::SIGKILL);
            }
            thread::sleep(POLL);
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!(
                "mqs-tests: tearing down {} under {}: {e}",
                self.fixture, self.mpi
            );
        }
    }
}

/// Parse `READY rank=R pid=P size=N` into an [`Event::Ready`].
fn parse_ready(line: &str) -> Option<Event> {
    let mut it = line.split_whitespace();
    if it.next()? != "READY" {
        return None;
    }
    let mut field = |name: &str| -> Option<u32> { it.next()?.strip_prefix(name)?.parse().ok() };
    let rank = field("rank=")?;
    let pid = field("pid=")?;
    let size = field("size=")?;
    if it.next().is_some() {
        return None;
    }
    Some(Event::Ready { rank, pid, size })
}

/// Copy one of the launcher's output streams into `captured`, reporting READY
/// lines (stdout only) and the end of the stream.
fn spawn_reader(
    stream: impl Read + Send + 'static,
    is_stdout: bool,
    captured: Arc<Mutex<Captured>>,
    tx: Sender<Event>,
) {
    // Detached on purpose: a stray process holding the pipe must not block
    // teardown; the thread ends at end of file.
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf);
            {
                let mut c = captured.lock().unwrap_or_else(|p| p.into_inner());
                let dest = if is_stdout {
                    &mut c.stdout
                } else {
                    &mut c.stderr
                };
                dest.push_str(&line);
                if !line.ends_with('\n') {
                    dest.push('\n');
                }
            }
            if is_stdout && line.starts_with("READY") {
                let event = parse_ready(line.trim_end())
                    .unwrap_or_else(|| Event::BadReady(line.trim_end().to_string()));
                let _ = tx.send(event);
            }
        }
        let _ = tx.send(Event::Eof);
    });
}

/// Wait (bounded) until both reader threads reached end of file.
fn drain_until_eof(rx: &Receiver<Event>, mut eofs: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while eofs < 2 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        match rx.recv_timeout(deadline - now) {
            Ok(Event::Eof) => eofs += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_lines() {
        assert_eq!(
            parse_ready("READY rank=1 pid=4242 size=2"),
            Some(Event::Ready {
                rank: 1,
                pid: 4242,
                size: 2
            })
        );
        assert_eq!(parse_ready("READY rank=1 pid=4242"), None);
        assert_eq!(parse_ready("READY rank=x pid=4242 size=2"), None);
        assert_eq!(parse_ready("READY rank=1 pid=4242 size=2 extra"), None);
        assert_eq!(parse_ready("NOT READY"), None);
    }
}
