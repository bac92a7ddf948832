//! Slurm: jobs and steps as Slurm knows them, and the overlapping step that
//! collectors run in.
//!
//! A Slurm job's processes are reached the way parallel debuggers reach
//! them: `srun` fills `MPIR_proctable` (and `totalview_jobid`) for every step
//! it launches, and a tool starts its daemons as one more step of the same
//! job, `srun --overlap`, which Slurm starts even while the job's steps use
//! every CPU. A tool step must take nothing from the job: `--mem=0` (on a
//! step: the job's memory, none of it withheld from other steps), no GRES,
//! no input, no MPI plugin. `--slurm JOBID[.STEP]` needs no starter at all:
//! each collector asks the slurmd of its node which processes belong to the
//! job (`scontrol listpids`), and the MPI processes among them are dumped.
//!
//! Only Slurm's own commands are run (`srun`, `scontrol`), with the
//! environment of an enclosing job removed, so that an `mqs-dump` started
//! inside an allocation does not shape the tool step after it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::SlurmRefusal;
use crate::{Error, Result};
use mqs_core::interface::{read_c_string, read_word, ImageSymbols, Target};

/// How long one Slurm command may take (a slurmctld that does not answer
/// makes `scontrol` retry for about as long).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The name the collectors' step has, for `squeue -s` and `sacct`.
pub const TOOL_STEP_NAME: &str = "mqs-dump-collectors";

/// A job and, optionally, one of its steps: `JOBID[.STEP]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSpec {
    pub job: String,
    pub step: Option<String>,
}

impl StepSpec {
    /// `1234`, `1234.0`, `1234.batch`; an array task (`1234_7`) or a
    /// heterogeneous component (`1234+1`) as Slurm writes them.
    pub fn parse(text: &str) -> Result<Self> {
        let usage = || {
            Error::Usage(format!(
                "--slurm {text:?}: give a Slurm job id, optionally with a step: 1234 or 1234.0"
            ))
        };
        let (job, step) = match text.split_once('.') {
            Some((job, step)) => (job, Some(step)),
            None => (text, None),
        };
        let job_ok = job.starts_with(|c: char| c.is_ascii_digit())
            && job
                .chars()
                .all(|c| c.is_ascii_digit() || c == '_' || c == '+');
        let step_ok = step.is_none_or(|s| {
            matches!(s, "batch" | "extern" | "interactive")
                || (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
        });
        if !job_ok || !step_ok {
            return Err(usage());
        }
        Ok(Self {
            job: job.to_string(),
            step: step.map(str::to_string),
        })
    }

    /// As Slurm's commands take it.
    pub fn text(&self) -> String {
        match &self.step {
            Some(step) => format!("{}.{step}", self.job),
            None => self.job.clone(),
        }
    }
}

/// Where a program is on `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// A regular file someone may execute.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `srun` and `scontrol` from `PATH`, or the error that names the fix.
#[derive(Debug, Clone)]
pub struct Tools {
    pub srun: PathBuf,
    pub scontrol: PathBuf,
}

impl Tools {
    pub fn find() -> Result<Self> {
        let find = |name: &str| {
            find_program(name).ok_or_else(|| {
                Error::slurm(
                    SlurmRefusal::NoSlurm,
                    format!(
                    "no {name} on PATH: mqs-dump reaches a Slurm job's nodes through a step of \
                     the job; run it where Slurm's commands are (a login or compute node), or \
                     add their directory to PATH"
                ),
                )
            })
        };
        Ok(Self {
            srun: find("srun")?,
            scontrol: find("scontrol")?,
        })
    }
}

/// Removes the variables through which an enclosing job (mqs-dump run in an
/// allocation or a batch script) would set the tool step's options: its
/// size, memory, CPUs per task, GRES... Only `SLURM_CONF` says where the
/// cluster is.
pub fn clean_environment(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let shaping = ["SLURM_", "SRUN_", "SALLOC_", "SBATCH_"]
            .iter()
            .any(|p| key.starts_with(p));
        if shaping && key != "SLURM_CONF" {
            cmd.env_remove(key);
        }
    }
}

/// Runs a Slurm command to its end (bounded): its stdout, or its stderr as
/// the error.
fn output(cmd: &mut Command) -> std::result::Result<String, String> {
    clean_environment(cmd);
    let program = Path::new(cmd.get_program()).display().to_string();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut readers = Vec::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        readers.push(std::thread::spawn(move || {
            let mut text = String::new();
            let _ = { pipe }.read_to_string(&mut text);
            text
        }));
    }
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} did not answer within {COMMAND_TIMEOUT:?}: is slurmctld up?"
                ));
            }
        }
    };
    let mut texts = readers.into_iter().map(|r| r.join().unwrap_or_default());
    let (out, err) = (
        texts.next().unwrap_or_default(),
        texts.next().unwrap_or_default(),
    );
    if status.success() {
        Ok(out)
    } else {
        // scontrol says some refusals ("Job step 5.7 not found") on stdout.
        let text = if err.trim().is_empty() { &out } else { &err };
        let said = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Err(if said.is_empty() {
            format!("{program} failed ({status})")
        } else {
            said
        })
    }
}

/// `Key=Value Key=Value...` of `scontrol show ... -o` (one record a line).
/// A value may hold blanks (a command line): words without `=` belong to
/// the value before them.
fn fields(line: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((key, value)) if !key.is_empty() && key.chars().all(char::is_alphanumeric) => {
                out.insert(key.to_string(), value.to_string());
                last = Some(key.to_string());
            }
            _ => {
                if let Some(value) = last.as_ref().and_then(|k| out.get_mut(k)) {
                    value.push(' ');
                    value.push_str(word);
                }
            }
        }
    }
    out
}

/// What `--slurm` reads: a running job (or one step of it), on its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub spec: StepSpec,
    /// The nodes of the step (of the whole job without one), by Slurm name.
    pub nodes: Vec<String>,
}

/// Asks Slurm about `spec`: it must exist, run, and be ours (or we root).
pub fn resolve(tools: &Tools, spec: &StepSpec) -> Result<Resolved> {
    let id = spec.text();
    let job_text = output(
        Command::new(&tools.scontrol)
            .args(["show", "job", "-o"])
            .arg(&spec.job),
    )
    .map_err(|said| not_found(spec, &said))?;
    // An array job lists every task; the one asked for is the first line.
    let job = fields(job_text.lines().next().unwrap_or_default());
    let state = job.get("JobState").cloned().unwrap_or_default();
    check_owner(spec, job.get("UserId").map(String::as_str).unwrap_or(""))?;
    match state.as_str() {
        "RUNNING" => {}
        "PENDING" | "CONFIGURING" | "REQUEUED" | "RESV_DEL_HOLD" => {
            return Err(Error::slurm(
                SlurmRefusal::NotRunning,
                format!(
                    "Slurm job {} is {state}: it runs no processes yet; try again once squeue \
                 shows it running (R)",
                    spec.job
                ),
            ))
        }
        "SUSPENDED" | "STOPPED" => {
            return Err(Error::slurm(
                SlurmRefusal::NotRunning,
                format!(
                    "Slurm job {} is {state}: its processes are held by Slurm; resume it first \
                 (scontrol resume {})",
                    spec.job, spec.job
                ),
            ))
        }
        other => {
            return Err(Error::slurm(
                SlurmRefusal::NotRunning,
                format!(
                    "Slurm job {} has ended ({}): there is nothing left to read; dump a job while \
                 it runs (squeue lists the running ones)",
                    spec.job,
                    if other.is_empty() { "no state" } else { other }
                ),
            ))
        }
    }
    let list = match &spec.step {
        None => job.get("NodeList").cloned().unwrap_or_default(),
        Some(_) => {
            let step_text = output(
                Command::new(&tools.scontrol)
                    .args(["show", "step", "-o"])
                    .arg(&id),
            )
            .map_err(|said| {
                Error::slurm(
                    SlurmRefusal::NoSuchJob,
                    format!(
                        "Slurm job {} has no step {id} running ({said}): give the job alone, or a \
                     step 'squeue -s -j {}' lists",
                        spec.job, spec.job
                    ),
                )
            })?;
            let step = fields(step_text.lines().next().unwrap_or_default());
            step.get("NodeList").cloned().unwrap_or_default()
        }
    };
    let nodes = hostnames(tools, &list)?;
    if nodes.is_empty() {
        return Err(Error::slurm(
            SlurmRefusal::Unanswered,
            format!("Slurm job {id} has no nodes (NodeList={list:?})"),
        ));
    }
    Ok(Resolved {
        spec: spec.clone(),
        nodes,
    })
}

fn not_found(spec: &StepSpec, said: &str) -> Error {
    if said.contains("Invalid job id") {
        Error::slurm(
            SlurmRefusal::NoSuchJob,
            format!(
                "Slurm job {} does not exist (or ended a while ago): check the id with squeue",
                spec.job
            ),
        )
    } else {
        Error::slurm(
            SlurmRefusal::Unanswered,
            format!(
                "cannot ask Slurm about job {}: {said}; check that slurmctld answers (squeue) \
             and SLURM_CONF names the cluster",
                spec.job
            ),
        )
    }
}

/// `UserId=name(uid)`: another user's job is refused unless we are root
/// (Slurm lets root start steps in any job; ptrace then works too).
fn check_owner(spec: &StepSpec, user: &str) -> Result<()> {
    let uid = user
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.trim_end_matches(')').parse::<u32>().ok());
    let me = nix::unistd::geteuid().as_raw();
    match uid {
        Some(uid) if uid != me && me != 0 => Err(Error::slurm(
            SlurmRefusal::NotYours,
            format!(
                "Slurm job {} belongs to user {user}, not to you (uid {me}): run mqs-dump as that \
             user, or as root",
                spec.job
            ),
        )),
        _ => Ok(()),
    }
}

/// A Slurm host list (`node[01-04],login`) as names.
fn hostnames(tools: &Tools, list: &str) -> Result<Vec<String>> {
    if list.is_empty() || list == "(null)" {
        return Ok(Vec::new());
    }
    let text = output(
        Command::new(&tools.scontrol)
            .args(["show", "hostnames"])
            .arg(list),
    )
    .map_err(|said| {
        Error::slurm(
            SlurmRefusal::Unanswered,
            format!("cannot expand the node list {list:?}: {said}"),
        )
    })?;
    Ok(text.split_whitespace().map(str::to_string).collect())
}

/// The command line of the collectors' step: one task on each of `nodes`,
/// overlapping the job's steps and taking none of their resources.
pub fn tool_step_argv(
    srun: &Path,
    job: &str,
    nodes: &[String],
    program: &str,
    args: &[String],
) -> Vec<String> {
    let n = nodes.len().to_string();
    let mut argv = vec![
        srun.display().to_string(),
        format!("--jobid={job}"),
        "--overlap".into(),
        format!("--nodelist={}", nodes.join(",")),
        format!("--nodes={n}"),
        format!("--ntasks={n}"),
        "--ntasks-per-node=1".into(),
        // On a step: the job's memory, none of it withheld from its steps.
        "--mem=0".into(),
        "--gres=none".into(),
        "--input=none".into(),
        // A tool needs no PMI server, whatever MpiDefault says.
        "--mpi=none".into(),
        // A collector that fails must not take the others down.
        "--kill-on-bad-exit=0".into(),
        format!("--job-name={TOOL_STEP_NAME}"),
        "--quiet".into(),
        program.to_string(),
    ];
    argv.extend(args.iter().cloned());
    argv
}

/// A starter's Slurm job: srun's own (`totalview_jobid`, which srun and
/// sattach fill for every step), else the allocation it runs in (an
/// `mpirun` or `mpiexec` inside `salloc` or a batch script has
/// `SLURM_JOB_ID` in its environment), with the cluster it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StarterJob {
    pub job: String,
    /// `SLURM_CONF` as the starter has it, if it has one.
    pub conf: Option<OsString>,
    /// The starter's own executable, if it is `srun`: used when there is
    /// none on `PATH`.
    pub srun: Option<PathBuf>,
}

pub fn job_of_starter(target: &dyn Target, symbols: &dyn ImageSymbols) -> Option<StarterJob> {
    let env = target.environment().ok();
    let from_srun = symbols.find_symbol("totalview_jobid").and_then(|addr| {
        let text = read_word(target, addr, target.pointer_size()).ok()?;
        (text != 0).then_some(())?;
        read_c_string(target, text, 64).ok()
    });
    let job = from_srun
        .or_else(|| env.as_ref()?.get("SLURM_JOB_ID").map(str::to_string))
        .filter(|j| StepSpec::parse(j).is_ok_and(|s| s.step.is_none()))?;
    let srun = target
        .executable()
        .ok()
        .filter(|p| p.file_name().is_some_and(|n| n == "srun"));
    Some(StarterJob {
        job,
        conf: env
            .as_ref()
            .and_then(|e| e.get("SLURM_CONF"))
            .map(OsString::from),
        srun,
    })
}

/// One line of `scontrol listpids`: a process of a job's step on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub pid: i32,
    pub step: String,
    /// Its task number in the step, for the processes Slurm started (not
    /// for their children).
    pub task: Option<u32>,
}

/// `PID JOBID STEPID LOCALID GLOBALID` lines after a header; `-` for the
/// children of tasks.
pub fn parse_listpids(text: &str) -> Vec<Listed> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let pid = words.first()?.parse::<i32>().ok().filter(|&p| p > 0)?;
            Some(Listed {
                pid,
                step: words.get(2)?.to_string(),
                task: words.get(4).and_then(|w| w.parse().ok()),
            })
        })
        .collect()
}

/// The processes of `spec` on this node, as its slurmd knows them
/// (`node`: the node's Slurm name, for hosts running several slurmds).
pub fn listpids(spec: &StepSpec, node: Option<&str>) -> std::result::Result<Vec<Listed>, String> {
    let scontrol = find_program("scontrol")
        .ok_or_else(|| "no scontrol on PATH on this node: cannot ask slurmd".to_string())?;
    let mut cmd = Command::new(scontrol);
    cmd.arg("listpids").arg(spec.text());
    if let Some(node) = node {
        cmd.arg(node);
    }
    output(&mut cmd).map(|text| parse_listpids(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_and_step_ids() {
        let spec = StepSpec::parse("1234.0").unwrap();
        assert_eq!(
            (spec.job.as_str(), spec.step.as_deref()),
            ("1234", Some("0"))
        );
        assert_eq!(spec.text(), "1234.0");
        assert_eq!(StepSpec::parse("77").unwrap().step, None);
        assert_eq!(
            StepSpec::parse("77.batch").unwrap().step.as_deref(),
            Some("batch")
        );
        assert!(StepSpec::parse("77_3").is_ok());
        for bad in ["", "x", "12.", "12.x", ".0", "-1", "12 3", "12;rm"] {
            assert!(
                matches!(StepSpec::parse(bad), Err(Error::Usage(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn scontrol_records_keep_values_with_blanks() {
        let f = fields(
            "JobId=5 JobName=a b UserId=alice(1000) JobState=RUNNING Command=/x/y --z 1 \
             NodeList=node[1-2]",
        );
        assert_eq!(f["JobName"], "a b");
        assert_eq!(f["UserId"], "alice(1000)");
        assert_eq!(f["Command"], "/x/y --z 1");
        assert_eq!(f["NodeList"], "node[1-2]");
    }

    #[test]
    fn listpids_lines() {
        let text = "PID      JOBID    STEPID   LOCALID GLOBALID\n\
                    13       1        0        0       2\n\
                    94       1        8        -       -\n\
                    junk\n";
        assert_eq!(
            parse_listpids(text),
            [
                Listed {
                    pid: 13,
                    step: "0".into(),
                    task: Some(2)
                },
                Listed {
                    pid: 94,
                    step: "8".into(),
                    task: None
                },
            ]
        );
    }

    #[test]
    fn the_tool_step_takes_nothing_from_the_job() {
        let argv = tool_step_argv(
            Path::new("/usr/bin/srun"),
            "12",
            &["nodea".into(), "nodeb".into()],
            "/opt/mqs-dump",
            &["__collector".into()],
        );
        for word in [
            "--jobid=12",
            "--overlap",
            "--nodelist=nodea,nodeb",
            "--ntasks=2",
            "--ntasks-per-node=1",
            "--mem=0",
            "--gres=none",
            "--input=none",
            "--mpi=none",
        ] {
            assert!(argv.iter().any(|w| w == word), "{word} in {argv:?}");
        }
        assert_eq!(&argv[argv.len() - 2..], ["/opt/mqs-dump", "__collector"]);
    }

    #[test]
    fn only_root_reads_another_users_job() {
        let spec = StepSpec::parse("5").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert!(check_owner(&spec, &format!("me({me})")).is_ok());
        let other = check_owner(&spec, &format!("bob({})", me + 1));
        assert_eq!(other.is_err(), me != 0, "{other:?}");
    }
}
