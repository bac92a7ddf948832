//! Just enough of /proc to find a job's processes and to kill them safely.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io;

/// A process as recorded while the job ran: the pid plus its start time
/// (clock ticks after boot), which tells the same process from a later one
/// that reused the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessRecord {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcessRecord {
    /// SIGKILL this process if it is still the one recorded (a reused pid is
    /// left alone). Returns whether the signal was sent.
    pub fn kill(&self) -> bool {
        signal_recorded(*self, libc::SIGKILL)
    }

    /// Whether this very process still runs (a zombie counts as gone).
    pub fn alive(&self) -> bool {
        record_alive(*self)
    }
}

/// The fields of /proc/PID/stat we use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub state: char,
    pub ppid: u32,
    pub start_time: u64,
}

/// Parse /proc/PID/stat. The command name (field 2) may hold spaces and
/// parentheses, so the fixed fields are counted from the last ')'.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state), fields[1] field 4 (ppid), fields[19]
    // field 22 (starttime).
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

pub(crate) fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The parent of `pid`, while it exists.
pub fn parent_pid(pid: u32) -> Option<u32> {
    stat(pid).map(|s| s.ppid)
}

/// Whether `pid` is a running process. A zombie counts as gone: it has
/// exited and only waits for its parent (which may be an init that never
/// reaps) to collect it.
pub fn process_alive(pid: u32) -> bool {
    matches!(stat(pid), Some(s) if s.state != 'Z' && s.state != 'X')
}

/// The argument vector of `pid` from /proc/PID/cmdline, or None if it is gone.
pub fn process_cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Record `pid` with its start time, if it exists now.
pub fn record(pid: u32) -> Option<ProcessRecord> {
    stat(pid).map(|s| ProcessRecord {
        pid,
        start_time: s.start_time,
    })
}

/// Every living descendant of `root` (not `root` itself), found by walking
/// the parent links of all processes in /proc.
pub fn descendants(root: u32) -> Vec<ProcessRecord> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<u32, Vec<ProcessRecord>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if let Some(s) = stat(pid) {
            children.entry(s.ppid).or_default().push(ProcessRecord {
                pid,
                start_time: s.start_time,
            });
        }
    }
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(p) = queue.pop_front() {
        for child in children.get(&p).into_iter().flatten() {
            if seen.insert(child.pid) {
                found.push(*child);
                queue.push_back(child.pid);
            }
        }
    }
    found
}

/// Every living process whose environment holds the entry `name=value`
/// exactly. A job's processes inherit a variable unique to that job, so this
/// finds them even after they were orphaned and lost their place in the
/// process tree.
pub fn processes_with_env(name: &str, value: &str) -> Vec<ProcessRecord> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let entry = format!("{name}={value}");
    let mut found = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Unreadable (another user's, or gone): not ours.
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == entry.as_bytes()) {
            if let Some(rec) = record(pid) {
                if process_alive(pid) {
                    found.push(rec);
                }
            }
        }
    }
    found
}

/// Send `signal` to the recorded process only if it is still that process
/// (same start time). Returns whether a signal was sent.
///
/// A pidfd pins the process between the start-time check and the signal, so
/// a pid reused in between can never be hit; where pidfds are unavailable
/// (kernels before 5.3) it falls back to a plain kill after the check.
pub(crate) fn signal_recorded(rec: ProcessRecord, signal: libc::c_int) -> bool {
    let Ok(pid) = libc::pid_t::try_from(rec.pid) else {
        return false;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ENOSYS) {
            return false; // ESRCH: already gone.
        }
        if stat(rec.pid).map(|s| s.start_time) != Some(rec.start_time) {
            return false;
        }
        // SAFETY: kill only takes integers.
        return unsafe { libc::kill(pid, signal) } == 0;
    }
    // pidfd_open returns an int-sized descriptor.
    let fd = fd as libc::c_int;
    let same = stat(rec.pid).map(|s| s.start_time) == Some(rec.start_time);
    let sent = same
        // SAFETY: the descriptor is ours and open; a null siginfo is allowed.
        && unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        } == 0;
    // SAFETY: closing the descriptor we opened above, once.
    unsafe { libc::close(fd) };
    sent
}

/// Whether the recorded process still runs (same pid, same start time, not a
/// zombie).
pub(crate) fn record_alive(rec: ProcessRecord) -> bool {
    matches!(stat(rec.pid), Some(s)
        if s.start_time == rec.start_time && s.state != 'Z' && s.state != 'X')
}

/// The processes in the PID namespace of `member` (a process inside it, as
/// we see it), with their pids inside the namespace: (ours, theirs).
pub fn namespace_processes(member: u32) -> io::Result<Vec<(u32, u32)>> {
    let ns = fs::read_link(format!("/proc/{member}/ns/pid"))?;
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_ref() != Some(&ns) {
            continue;
        }
        // NSpid: our pid first, the innermost (namespace-local) one last.
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(inner) = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|l| l.split_whitespace().last()?.parse::<u32>().ok())
        {
            out.push((pid, inner));
        }
    }
    Ok(out)
}

/// Our pid of the process whose pid is `local` in the PID namespace of
/// `member`.
pub fn pid_in_namespace_of(member: u32, local: u32) -> io::Result<Option<u32>> {
    Ok(namespace_processes(member)?
        .into_iter()
        .find(|&(_, inner)| inner == local)
        .map(|(ours, _)| ours))
}

/// The scheduler's autogroup of `pid` (`/proc/PID/autogroup` names it as
/// "/autogroup-N nice K"), or None without autogroups.
pub fn autogroup(pid: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    text.split_whitespace().next().map(str::to_owned)
}

/// `pid`'s short name (`/proc/PID/comm`), or None if it is gone.
pub fn process_comm(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_owned())
}

/// Gives every thread of `pid` the niceness `nice`, and its autogroup too
/// when that is neither the caller's nor one of `shared` (the groups of
/// processes left at their priority). The kernel shares the CPU among
/// autogroups (a session each) before a thread's niceness counts, and
/// hydra starts each rank in a session of its own. Best effort.
pub fn lower_priority(pid: u32, nice: libc::c_int, shared: &HashSet<String>) {
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for tid in tasks.flatten() {
            let Some(tid) = tid
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<libc::id_t>().ok())
            else {
                continue;
            };
            // SAFETY: setpriority reads its three integers and touches no
            // memory of ours; a thread that is gone makes it fail (ESRCH).
            let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
        }
    }
    let Some(theirs) = autogroup(&pid.to_string()) else {
        return;
    };
    if autogroup("self").as_deref() != Some(theirs.as_str()) && !shared.contains(&theirs) {
        let _ = fs::write(format!("/proc/{pid}/autogroup"), nice.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_awkward_command_name() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 100 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.start_time, 987654);
    }

    #[test]
    fn own_process_is_alive_and_found() {
        let me = std::process::id();
        assert!(process_alive(me));
        assert!(record(me).is_some());
        assert!(!process_alive(u32::MAX));
        let args = process_cmdline(me).unwrap();
        assert!(!args.is_empty());
    }

    #[test]
    fn descendants_and_safe_kill() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let found = descendants(std::process::id());
        let rec = *found.iter().find(|r| r.pid == pid).unwrap();
        assert!(record_alive(rec));
        // A wrong start time stands for a reused pid: it must not be hit.
        let stale = ProcessRecord {
            pid,
            start_time: rec.start_time + 1,
        };
        assert!(!signal_recorded(stale, libc::SIGKILL));
        assert!(process_alive(pid));
        assert!(signal_recorded(rec, libc::SIGKILL));
        child.wait().unwrap();
        assert!(!process_alive(pid));
        assert!(!signal_recorded(rec, libc::SIGKILL));
    }

    #[test]
    fn found_by_environment() {
        let value = format!("probe-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("MQS_TESTS_PROBE", &value)
            .spawn()
            .unwrap();
        // spawn() may return before the kernel set up the new program's
        // environment (a vfork parent resumes early in execve): poll.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let found = processes_with_env("MQS_TESTS_PROBE", &value);
            if !found.is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(
            found.iter().map(|r| r.pid).collect::<Vec<_>>(),
            [child.id()]
        );
        assert!(processes_with_env("MQS_TESTS_PROBE", "probe").is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(processes_with_env("MQS_TESTS_PROBE", &value).is_empty());
    }
}
