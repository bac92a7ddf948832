//! The remote shell a starter reaches its job's nodes with, used to start
//! collectors there the same way: PRRTE's `prterun` (Open MPI 5's
//! `mpirun`) has no MPIR tool-daemon launch, but outside a resource
//! manager it starts its daemons with its `plm_ssh_agent` (`ssh : rsh`
//! unless set), so that command reaches every node of the job, and
//! `AGENT HOST COMMAND` is what it runs.
//!
//! The setting is looked for where PRRTE reads it, first found wins: the
//! starter's command line (`--prtemca`/`--mca NAME VALUE`), its
//! environment (`PRTE_MCA_*`, and the `OMPI_MCA_*` names Open MPI's
//! `mpirun` translates), the user's and then the installation's parameter
//! files. Under a resource manager whose own launcher PRRTE uses instead
//! (PBS, LSF, Grid Engine) no remote shell is assumed; Slurm is handled
//! before this ([`super::start::slurm_job_instead`]).

use std::path::{Path, PathBuf};

use mqs_core::interface::{Environment, Target};
use mqs_core::process::LiveProcess;

use crate::slurm::is_executable;

/// The exported symbol that tells a PRRTE starter: its ssh launcher's
/// component.
pub const PRRTE_SSH_COMPONENT: &str = "prte_mca_plm_ssh_component";

/// The parameter names of the agent, as PRRTE registers them (the
/// component's own name, then its deprecated synonyms) and as Open MPI's
/// `mpirun` users still give it.
const NAMES: [&str; 5] = [
    "plm_ssh_agent",
    "pls_ssh_agent",
    "prte_ssh_agent",
    "plm_rsh_agent",
    "orte_rsh_agent",
];

/// The environment prefixes of those parameters, PRRTE's first.
const ENV_PREFIXES: [&str; 2] = ["PRTE_MCA_", "OMPI_MCA_"];

/// Command-line options that take `NAME VALUE`.
const MCA_OPTIONS: [&str; 6] = ["--prtemca", "-prtemca", "--mca", "-mca", "--gmca", "-gmca"];

/// PRRTE's agent when none is set: the first of these found.
const DEFAULT_AGENT: &str = "ssh : rsh";

/// Variables of the resource managers whose own launcher PRRTE uses.
const OTHER_MANAGERS: [(&str, &str); 3] = [
    ("PBS_JOBID", "PBS"),
    ("LSB_JOBID", "LSF"),
    ("PE_HOSTFILE", "Grid Engine"),
];

/// A starter's remote shell: its command words and where the setting
/// came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub words: Vec<String>,
    pub from: String,
}

/// The agent of a PRRTE starter, or why none can be used.
pub fn of_starter(process: &LiveProcess) -> std::result::Result<Agent, String> {
    let env = process.environment().map_err(|e| e.to_string())?;
    if let Some((_, manager)) = OTHER_MANAGERS.iter().find(|(v, _)| env.get(v).is_some()) {
        return Err(format!(
            "the starter runs under {manager}, whose own launcher it uses"
        ));
    }
    let args = process.arguments().unwrap_or_default();
    let files = parameter_files(process, &env);
    let texts: Vec<(String, String)> = files
        .iter()
        .filter_map(|(shown, path)| Some((shown.clone(), std::fs::read_to_string(path).ok()?)))
        .collect();
    let (value, from) = setting(&args, &env, &texts);
    choose(&value, &from, &|name| find_on_path(process, &env, name))
}

/// The parameter files PRRTE reads, user's first, as (path shown, path
/// opened here).
fn parameter_files(process: &LiveProcess, env: &Environment) -> Vec<(String, PathBuf)> {
    let mut names: Vec<PathBuf> = Vec::new();
    if let Some(home) = env.get("HOME") {
        names.push(Path::new(home).join(".prte/mca-params.conf"));
        names.push(Path::new(home).join(".openmpi/mca-params.conf"));
    }
    // The installation's: <prefix>/etc beside <prefix>/bin/prterun.
    if let Some(prefix) = process
        .executable()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
    {
        names.push(prefix.join("etc/prte-mca-params.conf"));
        names.push(prefix.join("etc/openmpi-mca-params.conf"));
    }
    names
        .into_iter()
        .map(|p| (p.display().to_string(), process.path_in_root(&p)))
        .collect()
}

/// The agent's setting and where it came from; PRRTE's default when none
/// is set.
fn setting(args: &[String], env: &Environment, files: &[(String, String)]) -> (String, String) {
    for pair in args.windows(3) {
        if MCA_OPTIONS.contains(&pair[0].as_str()) && NAMES.contains(&pair[1].as_str()) {
            return (
                pair[2].clone(),
                format!("{} {} on its command line", pair[0], pair[1]),
            );
        }
    }
    for prefix in ENV_PREFIXES {
        for name in NAMES {
            let var = format!("{prefix}{name}");
            if let Some(value) = env.get(&var) {
                return (value.to_string(), format!("{var} in its environment"));
            }
        }
    }
    for (path, text) in files {
        if let Some(value) = text.lines().find_map(file_setting) {
            return (value, format!("set in {path}"));
        }
    }
    (DEFAULT_AGENT.to_string(), "PRRTE's default".to_string())
}

/// `NAME = VALUE` of the agent in a parameter file line.
fn file_setting(line: &str) -> Option<String> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (name, value) = line.split_once('=')?;
    NAMES
        .contains(&name.trim())
        .then(|| value.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The first of the `:`-separated alternatives whose program is found, as
/// PRRTE picks it.
fn choose(
    value: &str,
    from: &str,
    find: &dyn Fn(&str) -> Option<PathBuf>,
) -> std::result::Result<Agent, String> {
    for alternative in value.split(':') {
        let words: Vec<String> = alternative.split_whitespace().map(str::to_string).collect();
        let Some(first) = words.first() else {
            continue;
        };
        if let Some(path) = find(first) {
            let mut words = words;
            words[0] = path.display().to_string();
            return Ok(Agent {
                words,
                from: from.to_string(),
            });
        }
    }
    Err(format!(
        "its remote shell '{value}' ({from}) is not found here"
    ))
}

/// A program as the starter would find it: a path as given, else on the
/// starter's PATH, else on ours; the path returned is one this machine
/// can run.
fn find_on_path(process: &LiveProcess, env: &Environment, name: &str) -> Option<PathBuf> {
    let runnable = |p: &Path| is_executable(&process.path_in_root(p)) && is_executable(p);
    if name.contains('/') {
        let p = PathBuf::from(name);
        return runnable(&p).then_some(p);
    }
    let theirs = env.get("PATH").map(std::ffi::OsString::from);
    let ours = std::env::var_os("PATH");
    [theirs, ours]
        .into_iter()
        .flatten()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| runnable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        let strings: Vec<String> = vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
        Environment::from_strings(strings.iter().map(|s| s.as_bytes()))
    }

    fn words(args: &str) -> Vec<String> {
        args.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_command_line_comes_first_then_the_environment_then_the_files() {
        let files = vec![(
            "/home/u/.prte/mca-params.conf".to_string(),
            "# ours\nplm_ssh_agent = /opt/bin/myrsh -q\n".to_string(),
        )];
        let e = env(&[("OMPI_MCA_plm_rsh_agent", "rsh")]);
        assert_eq!(
            setting(
                &words("prterun --prtemca plm_ssh_agent qssh -n 4 a.out"),
                &e,
                &files
            ),
            (
                "qssh".to_string(),
                "--prtemca plm_ssh_agent on its command line".to_string()
            )
        );
        assert_eq!(
            setting(&words("prterun -n 4 a.out"), &e, &files),
            (
                "rsh".to_string(),
                "OMPI_MCA_plm_rsh_agent in its environment".to_string()
            )
        );
        // PRRTE's own name wins over Open MPI's.
        let both = env(&[
            ("OMPI_MCA_plm_rsh_agent", "rsh"),
            ("PRTE_MCA_plm_ssh_agent", "/x/agent"),
        ]);
        assert_eq!(setting(&[], &both, &files).0, "/x/agent");
        assert_eq!(
            setting(&[], &env(&[]), &files),
            (
                "/opt/bin/myrsh -q".to_string(),
                "set in /home/u/.prte/mca-params.conf".to_string()
            )
        );
        assert_eq!(
            setting(&[], &env(&[]), &[]),
            ("ssh : rsh".to_string(), "PRRTE's default".to_string())
        );
    }

    #[test]
    fn the_first_alternative_found_is_taken_with_its_arguments() {
        let find = |name: &str| (name == "rsh").then(|| PathBuf::from("/usr/bin/rsh"));
        let agent = choose("ssh -p 22 : rsh -l me", "PRRTE's default", &find).unwrap();
        assert_eq!(agent.words, ["/usr/bin/rsh", "-l", "me"]);
        let none = choose("ssh : rsh", "PRRTE's default", &|_| None).unwrap_err();
        assert_eq!(
            none,
            "its remote shell 'ssh : rsh' (PRRTE's default) is not found here"
        );
    }

    #[test]
    fn file_lines_name_the_agent_or_not() {
        assert_eq!(file_setting("plm_ssh_agent=ssh"), Some("ssh".into()));
        assert_eq!(
            file_setting("  plm_rsh_agent = rsh -x "),
            Some("rsh -x".into())
        );
        assert_eq!(file_setting("#plm_ssh_agent = ssh"), None);
        assert_eq!(file_setting("plm_ssh_args = -x"), None);
        assert_eq!(file_setting("plm_ssh_agent ="), None);
    }
}
