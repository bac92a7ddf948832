//! What the end-to-end tests of mqs-dump share: running the tool, reading
//! its JSON, checking that a target was left running, and building the
//! small C support programs of `tests/support/`.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod stock;
pub mod stop;

/// The mqs-dump binary of this build; a stale or missing one fails the
/// test (it would test something else than the checkout).
pub fn mqs_dump() -> PathBuf {
    mqs_tests::mqs_dump_binary()
}

/// Runs mqs-dump with `args`.
pub fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

/// How long one run of mqs-dump may take in a test (`MQS_DUMP_TIMEOUT`
/// seconds, default 180): a hang fails the test with a message instead of
/// stalling the suite.
fn dump_timeout() -> Duration {
    let secs = std::env::var("MQS_DUMP_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(180);
    Duration::from_secs(secs)
}

pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(mqs_dump());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("run mqs-dump");
    finish_within(
        child,
        dump_timeout(),
        &format!("mqs-dump {}", args.join(" ")),
    )
}

/// Collects a child's output, killing it (and failing) past `limit`.
pub fn finish_within(mut child: Child, limit: Duration, what: &str) -> Output {
    use std::io::Read;
    // Read both pipes on threads so a chatty child never blocks on them.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: killed (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `mqs-dump --pid PID --json`, which must succeed.
pub fn dump_json(pid: u32, extra: &[&str]) -> Value {
    let pid = pid.to_string();
    let mut args = vec!["--pid", pid.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "mqs-dump {args:?} failed ({}): {}",
        out.status,
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("mqs-dump --json prints JSON")
}

/// Asserts the exit code and that the error is one line containing each of
/// `needles`.
pub fn assert_error(out: &Output, code: i32, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status {} (stderr: {err})",
        out.status
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line of error expected, got: {err}");
    assert!(lines[0].starts_with("mqs-dump: error: "), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "'{needle}' missing from: {err}");
    }
}

/// A field of /proc/PID/status.
fn status_field(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// Asserts that the process and every one of its threads is alive, not
/// stopped and not traced: what mqs-dump must leave behind on every path.
pub fn assert_running_untraced(pid: u32) {
    // A thread leaving a stop is not instantaneous: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let problems = thread_problems(pid);
        if problems.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            panic!("pid {pid} was left in a bad state: {}", problems.join("; "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn thread_problems(pid: u32) -> Vec<String> {
    let mut problems = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![format!("pid {pid} is gone")];
    };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let get = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let state = get("State");
        if state.starts_with('T') || state.starts_with('t') || state.starts_with('Z') {
            problems.push(format!("thread {tid} state {state}"));
        }
        if get("TracerPid") != "0" {
            problems.push(format!("thread {tid} traced by {}", get("TracerPid")));
        }
    }
    problems
}

pub fn tracer_of(pid: u32) -> Option<u32> {
    status_field(pid, "TracerPid")?
        .parse()
        .ok()
        .filter(|&t| t != 0)
}

/// Compiles `tests/support/<name>.c` with the system C compiler and the
/// given flags, once per distinct flag set and test process, into the
/// target directory. Once: replacing a program that a running test target
/// was started from would make its maps say "(deleted)".
pub fn support_program(name: &str, flags: &[&str], shared: bool) -> PathBuf {
    static BUILT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let root = mqs_tests::workspace_root();
    let src = root.join("tests/support").join(format!("{name}.c"));
    let tag: String = flags
        .iter()
        .map(|f| f.trim_start_matches('-').replace(['=', '/'], "_"))
        .collect::<Vec<_>>()
        .join("-");
    let dir = mqs_tests::target_dir().join("mqs-support");
    std::fs::create_dir_all(&dir).expect("support dir");
    let file = if shared {
        format!("lib{name}{}{tag}.so", if tag.is_empty() { "" } else { "-" })
    } else {
        format!("{name}{}{tag}", if tag.is_empty() { "" } else { "-" })
    };
    let out = dir.join(file);
    if built.contains(&out) {
        return out;
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}.{}",
        out.file_name().unwrap().to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut cmd = Command::new("cc");
    cmd.args(["-g", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root.join("include").display()))
        .args(flags);
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    let status = cmd.arg("-o").arg(&tmp).arg(&src).status().expect("run cc");
    assert!(status.success(), "compiling {} failed", src.display());
    std::fs::rename(&tmp, &out).expect("rename support program");
    built.push(out.clone());
    out
}

/// A copy of `exe` that another user can run: the checkout (and so the
/// target directory) may sit in a directory only root can enter.
pub fn world_executable(exe: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = mqs_tests::shared_dir("mqs-e2e").expect("shared dir");
    let copy = dir.join(exe.file_name().expect("a file"));
    if !copy.exists() {
        std::fs::copy(exe, &copy).expect("copy executable");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

/// A support process started by a test, killed and reaped on drop.
pub struct Spawned {
    child: Child,
}

impl Spawned {
    /// Starts `exe args...` and waits for its "READY pid=N" line.
    pub fn start(exe: &Path, args: &[&str]) -> Spawned {
        Self::start_cmd(Command::new(exe).args(args))
    }

    /// Like `start`, running as another user.
    pub fn start_as(exe: &Path, args: &[&str], uid: u32) -> Spawned {
        use std::os::unix::process::CommandExt;
        Self::start_cmd(Command::new(exe).args(args).uid(uid).gid(uid))
    }

    fn start_cmd(cmd: &mut Command) -> Spawned {
        use std::io::{BufRead, BufReader};
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start support program");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("READY line");
        assert!(line.starts_with("READY pid="), "unexpected output: {line}");
        Spawned { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A dump as if our DLL had read `transport` and found nothing waiting in
/// it: where it could not (no debug information for it, or its memory left
/// out of a core file), an empty unexpected queue is "not available" with
/// a reason saying "messages in transit on TRANSPORT not listed", and a
/// full one's last line says so; those become an empty queue, and the
/// line goes. Gives how many queues said so, and each reason.
pub fn as_if_transport_read(dump: &mut Value, transport: &str) -> (usize, Vec<String>) {
    let note = format!("messages in transit on {transport} not listed");
    let mut said = Vec::new();
    for p in dump["processes"].as_array_mut().into_iter().flatten() {
        for c in p["communicators"]["list"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let queue = &mut c["unexpected"];
            if queue["status"] == "not_available" {
                let reason = queue["reason"].as_str().unwrap_or_default().to_owned();
                if reason.contains(&note) {
                    *queue =
                        serde_json::json!({"status": "ok", "operations": [], "truncated": null});
                    said.push(reason);
                }
            } else if let Some(lines) = queue["operations"]
                .as_array_mut()
                .and_then(|ops| ops.last_mut())
                .and_then(|op| op["extra_text"].as_array_mut())
            {
                let last = lines.last().and_then(Value::as_str).unwrap_or_default();
                if last.starts_with(&note) {
                    said.push(last.to_owned());
                    lines.pop();
                }
            }
        }
    }
    (said.len(), said)
}

// Dumps of a job read in several places (collectors, nodes), compared.

/// Runs mqs-dump; its output, and how long it took.
pub fn timed(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = run(args);
    (out, start.elapsed())
}

pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(out), stderr(out)))
}

pub fn succeeded(out: Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}\n{}",
        out.status,
        stderr(&out),
        stdout(&out)
    );
    json(&out)
}

/// A process as read, less what differs from one reading to the next
/// (counters, times) and where it was read from (`host`).
pub fn comparable(process: &Value) -> Value {
    let mut p = process.clone();
    let map = p.as_object_mut().expect("a process object");
    map.remove("stats");
    map.remove("host");
    p
}

/// The processes of a dump by global rank.
pub fn by_rank(dump: &Value) -> BTreeMap<i64, Value> {
    dump["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| (p["global_rank"].as_i64().expect("global_rank"), p.clone()))
        .collect()
}

/// Every rank of `merged` equals the same rank of `direct`.
pub fn assert_same_ranks(merged: &Value, direct: &BTreeMap<i64, Value>, what: &str) {
    let merged = by_rank(merged);
    assert_eq!(
        merged.keys().collect::<Vec<_>>(),
        direct.keys().collect::<Vec<_>>(),
        "{what}: not the same ranks"
    );
    for (rank, process) in &merged {
        assert_eq!(
            comparable(process),
            comparable(&direct[rank]),
            "{what}: rank {rank} differs"
        );
    }
}

/// Each process's `host`, by rank.
pub fn hosts_of(dump: &Value) -> BTreeMap<i64, String> {
    by_rank(dump)
        .into_iter()
        .map(|(r, p)| (r, p["host"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// An empty directory of this test process under the target directory.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = mqs_tests::target_dir().join(format!("mqs-scratch/{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
