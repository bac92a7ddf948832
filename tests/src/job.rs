//! A fixture running as a real MPI job, and its teardown.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, NotReady, Result};
use crate::mpi::{build_fixture, Family, Mpi};
use crate::procfs::{self, ProcessRecord};

/// How long the launcher gets to take its job down after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// How long killed processes get to disappear.
const KILL_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// Options for [`Job::launch_with`].
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// How long to wait for every rank's READY line. Default 60 s, or
    /// `MQS_READY_TIMEOUT` seconds when set.
    pub timeout: Duration,
    /// Extra environment for the launcher (and so the ranks), applied last.
    pub env: Vec<(OsString, OsString)>,
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
        }
    }
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
    let mut cmd = Command::new(mpi.launcher()?);
    match mpi.family() {
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
///
/// The launcher gets `PR_SET_PDEATHSIG(SIGTERM)`, which the kernel ties to
/// the *thread* that started it: keep a `Job` on the thread that launched it,
/// or the job is terminated when that thread ends.
#[derive(Debug)]
pub struct Job {
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
        let mut cmd = launcher_command(mpi, &exe, nprocs, args)?;
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)))
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
        };
        let mut eofs = 0;
        match job.wait_ready(&rx, opts.timeout, &mut eofs) {
            Ok(()) => {
                job.refresh_pids();
                Ok(job)
            }
            Err(mut reason) => {
                if let Err(e) = job.teardown() {
                    reason.push_str(&format!("; then teardown failed: {e}"));
                }
                let pids = job.recorded_pids();
                // Let the readers catch the last words of a dying job.
                drain_until_eof(&rx, eofs, Duration::from_secs(1));
                let (stdout, stderr) = job.output();
                Err(Error::NotReady(Box::new(NotReady {
                    mpi: mpi.name(),
                    fixture: fixture.to_string(),
                    reason,
                    stdout,
                    stderr,
                    pids,
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

    /// Each rank's (rank, pid), ordered by rank.
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

    /// Every process recorded as part of the job: the launcher, the ranks
    /// and all the launcher's descendants seen so far.
    pub fn recorded_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.recorded.iter().map(|r| r.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Look for new descendants of the launcher (e.g. tool daemons it started)
    /// so teardown covers them too. Launch already did this once.
    pub fn refresh_pids(&mut self) {
        if self.exit_status.is_some() {
            return; // Its pid may be reused: do not walk from it.
        }
        let ranks: Vec<ProcessRecord> = self
            .ranks
            .iter()
            .filter_map(|r| procfs::record(r.1))
            .collect();
        for rec in procfs::descendants(self.launcher.pid)
            .into_iter()
            .chain(ranks)
        {
            if !self.recorded.contains(&rec) {
                self.recorded.push(rec);
            }
        }
    }

    /// Tear the job down now and return every pid that belonged to it.
    /// Errors if some of them could not be made to go away.
    pub fn shutdown(mut self) -> Result<Vec<u32>> {
        self.teardown()
    }

    /// SIGTERM the launcher and reap it (SIGKILL after [`TERM_GRACE`]), then
    /// SIGKILL whatever recorded process is still that same process.
    fn teardown(&mut self) -> Result<Vec<u32>> {
        let all = self.recorded_pids();
        if self.torn_down {
            return Ok(all);
        }
        self.torn_down = true;
        self.refresh_pids();
        let all = self.recorded_pids();

        if self.exit_status.is_none() {
            // We are its parent and have not reaped it, so the pid is still
            // ours: a plain kill is safe.
            let pid = self.launcher.pid as libc::pid_t;
            // SAFETY: kill only takes integers.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = Instant::now() + TERM_GRACE;
            while self.exit_status.is_none() {
                match self.child.try_wait() {
                    Ok(Some(s)) => self.exit_status = Some(s),
                    Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
                    _ => {
                        let _ = self.child.kill();
                        self.exit_status = self.child.wait().ok();
                        break;
                    }
                }
            }
        }

        let others: Vec<ProcessRecord> = self
            .recorded
            .iter()
            .copied()
            .filter(|r| r.pid != self.launcher.pid)
            .collect();
        for rec in &others {
            procfs::signal_recorded(*rec, libc::SIGKILL);
        }
        let deadline = Instant::now() + KILL_GRACE;
        loop {
            let alive: Vec<u32> = others
                .iter()
                .filter(|r| procfs::record_alive(**r))
                .map(|r| r.pid)
                .collect();
            if alive.is_empty() {
                return Ok(all);
            }
            if Instant::now() >= deadline {
                return Err(Error::Survivors(alive));
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
