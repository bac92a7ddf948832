//! The few /proc files we need, parsed from their text so that tests can
//! feed fixed strings.

use std::fs;
use std::io;
use std::path::PathBuf;

/// What we use from /proc/PID/status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub state: char,
    pub ppid: i32,
    pub tracer_pid: i32,
    /// Real, effective, saved and filesystem uid.
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    /// Effective capabilities, bit n = capability n.
    pub cap_eff: u64,
}

pub(crate) const CAP_SYS_PTRACE: u32 = 19;

pub(crate) fn parse_status(text: &str) -> Option<Status> {
    let mut state = None;
    let mut ppid = None;
    let mut tracer_pid = None;
    let mut uids = None;
    let mut gids = None;
    let mut cap_eff = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "State" => state = value.chars().next(),
            "PPid" => ppid = value.parse().ok(),
            "TracerPid" => tracer_pid = value.parse().ok(),
            "Uid" => uids = parse_ids(value),
            "Gid" => gids = parse_ids(value),
            "CapEff" => cap_eff = u64::from_str_radix(value, 16).ok(),
            _ => {}
        }
    }
    Some(Status {
        state: state?,
        ppid: ppid?,
        tracer_pid: tracer_pid?,
        uids: uids?,
        gids: gids?,
        cap_eff: cap_eff?,
    })
}

fn parse_ids(value: &str) -> Option<[u32; 4]> {
    let mut ids = [0; 4];
    let mut fields = value.split_whitespace();
    for id in &mut ids {
        *id = fields.next()?.parse().ok()?;
    }
    Some(ids)
}

/// What we use from /proc/PID/stat (or /proc/PID/task/TID/stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub state: char,
    pub ppid: i32,
    /// Clock ticks after boot: tells a process from a later one with its pid.
    pub start_time: u64,
}

pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may itself contain ") ", so the
    // fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    // starttime is field 22 of the line; fields 3 and 4 were just taken.
    let start_time = fields.nth(22 - 5)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        start_time,
    })
}

fn invalid(path: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{path}: unexpected format"),
    )
}

pub(crate) fn status(pid: i32) -> io::Result<Status> {
    let path = format!("/proc/{pid}/status");
    parse_status(&fs::read_to_string(&path)?).ok_or_else(|| invalid(&path))
}

pub(crate) fn stat(pid: i32) -> io::Result<Stat> {
    read_stat(format!("/proc/{pid}/stat"))
}

/// Every process id in /proc (processes appear and vanish meanwhile).
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

pub(crate) fn thread_stat(pid: i32, tid: i32) -> io::Result<Stat> {
    read_stat(format!("/proc/{pid}/task/{tid}/stat"))
}

fn read_stat(path: String) -> io::Result<Stat> {
    parse_stat(&fs::read_to_string(&path)?).ok_or_else(|| invalid(&path))
}

/// The thread ids of a process, as listed now.
pub(crate) fn tasks(pid: i32) -> io::Result<Vec<i32>> {
    let mut tids = Vec::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) {
            tids.push(tid);
        }
    }
    Ok(tids)
}

/// The command name of a process or thread, if it still exists.
/// The PID namespace `pid` is in, as the kernel names it (`pid:[4026531836]`).
pub(crate) fn pid_namespace(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

pub(crate) fn comm(pid: i32) -> Option<String> {
    let name = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(name.trim_end_matches('\n').to_owned())
}

/// The file name of the program a process runs (its command name, which
/// the kernel cuts to 15 bytes, where the link cannot be read).
pub(crate) fn program_name(pid: i32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .or_else(|| comm(pid))
}

/// The thread group (process) a task belongs to.
pub(crate) fn tgid(tid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The stack and instruction pointers of a thread that is not running,
/// from /proc/PID/task/TID/syscall (`NR args... SP PC`, or `-1 SP PC`
/// outside a system call); None for a running thread.
pub(crate) fn thread_sp_pc(pid: i32, tid: i32) -> Option<(u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    parse_syscall(&text)
}

pub(crate) fn parse_syscall(text: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() < 3 || fields[0] == "running" {
        return None;
    }
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    Some((
        hex(fields[fields.len() - 2])?,
        hex(fields[fields.len() - 1])?,
    ))
}

/// The name of a thread, if it still exists.
pub(crate) fn thread_comm(pid: i32, tid: i32) -> Option<String> {
    let name = fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(name.trim_end_matches('\n').to_owned())
}

/// Yama's ptrace_scope, if the Yama LSM is present.
pub(crate) fn yama_scope() -> Option<u32> {
    fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub(crate) fn mem_path(pid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/mem"))
}

/// A /proc error that means the process (or thread) no longer exists.
pub(crate) fn is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

fn is_dead(state: char) -> bool {
    matches!(state, 'Z' | 'X')
}

/// Whether the process that started at `start_time` still runs code: its
/// /proc entry exists, is not a later process with the same pid, and not every
/// thread is a zombie. (A leader that called pthread_exit is a zombie while
/// its other threads run on.)
pub(crate) fn is_alive(pid: i32, start_time: u64) -> bool {
    let Ok(stat) = stat(pid) else {
        return false;
    };
    if stat.start_time != start_time {
        return false;
    }
    if !is_dead(stat.state) {
        return true;
    }
    tasks(pid).is_ok_and(|tids| {
        tids.iter()
            .any(|&tid| thread_stat(pid, tid).is_ok_and(|s| !is_dead(s.state)))
    })
}

/// Whether thread `tid` is gone or a zombie (it cannot be traced then).
pub(crate) fn thread_is_dead(pid: i32, tid: i32) -> bool {
    thread_stat(pid, tid).map_or(true, |s| is_dead(s.state))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
        Ngid:\t0\nPid:\t4242\nPPid:\t17\nTracerPid:\t99\nUid:\t1000\t1001\t1002\t1003\n\
        Gid:\t100\t100\t100\t100\nFDSize:\t64\nCapInh:\t0000000000000000\n\
        CapPrm:\t0000000000000000\nCapEff:\t000001fffeffffff\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn status_fields() {
        let s = parse_status(STATUS).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 17);
        assert_eq!(s.tracer_pid, 99);
        assert_eq!(s.uids, [1000, 1001, 1002, 1003]);
        assert_eq!(s.gids, [100; 4]);
        assert_eq!(s.cap_eff, 0x1fffeffffff);
        assert_ne!(s.cap_eff & (1 << CAP_SYS_PTRACE), 0);
    }

    #[test]
    fn status_missing_field_is_none() {
        assert_eq!(parse_status("Name:\tx\nState:\tR (running)\n"), None);
    }

    #[test]
    fn stat_with_odd_command_name() {
        // A command name with spaces and a ") " inside.
        let line = "4242 (a) b (c) t 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 \
                    123456 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 't',
                ppid: 1,
                start_time: 123456
            })
        );
    }

    #[test]
    fn syscall_gives_sp_and_pc() {
        let in_call = "24 0x56484166ab10 0x20 0xbb78916 0x7f6e20afa428 0x1 0x1 \
                       0x7fff24b790a8 0x7f6e20d3e017\n";
        assert_eq!(
            parse_syscall(in_call),
            Some((0x7fff_24b7_90a8, 0x7f6e_20d3_e017))
        );
        assert_eq!(
            parse_syscall("-1 0x7ffd1000 0x401000\n"),
            Some((0x7ffd1000, 0x401000))
        );
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(parse_syscall(""), None);
    }

    #[test]
    fn stat_truncated_is_none() {
        assert_eq!(parse_stat("1 (init) S 0 1"), None);
    }

    #[test]
    fn own_process_is_alive() {
        let pid = std::process::id() as i32;
        let start = stat(pid).unwrap().start_time;
        assert!(is_alive(pid, start));
        assert!(!is_alive(pid, start + 1));
        assert!(tasks(pid).unwrap().contains(&pid));
    }
}
