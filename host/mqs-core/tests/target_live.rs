//! `target` against real processes: a small C fixture compiled with `cc` at
//! test time, and this test binary re-executed as a helper (a tracer to kill,
//! an unprivileged prober). Every process started here is killed and reaped by
//! a guard, also when a test fails.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use mqs_core::interface::Target;
use mqs_core::process::{install_signal_cleanup, LiveProcess, Mode, PageCache};
use mqs_core::{Error, PermissionReason};

const FIXTURE_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Initialised, so it lives in the executable's file-backed data mapping. */
static unsigned char buffer[3 * 4096] = {1};
static volatile long rt_count;
static volatile long spins[64];

static void on_rt(int sig) { (void)sig; __atomic_fetch_add(&rt_count, 1, __ATOMIC_SEQ_CST); }
static void *spin(void *arg) { volatile long *n = arg; for (;;) (*n)++; return 0; }
static void *nothing(void *arg) { return arg; }
static void *churn(void *arg) {
    for (;;) { pthread_t t; if (pthread_create(&t, 0, nothing, 0) == 0) pthread_join(t, 0); }
    return arg;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    for (size_t i = 0; i < sizeof buffer; i++) buffer[i] = (unsigned char)(i * 7 + 3);
    size_t big_len = 1 << 20;
    unsigned char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++) big[i] = (unsigned char)(i * 13 + 5);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_rt;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGRTMIN, &sa, 0);
    pthread_t t;
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t, 0, spin, (void *)&spins[i]);
    if (argc > 2 && strcmp(argv[2], "churn") == 0) pthread_create(&t, 0, churn, 0);
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *edge = mmap(0, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(edge, 0xab, page);
    munmap(edge + page, page);
    printf("%p %zu %p %ld %p %p %p\n", (void *)buffer, sizeof buffer, (void *)edge, page,
           (void *)&rt_count, (void *)spins, (void *)big);
    fflush(stdout);
    for (;;) pause();
}
"#;

/// The fixture binary, compiled once per test run.
fn fixture_exe() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("target_live");
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("fixture.c");
        let exe = dir.join("fixture");
        std::fs::write(&src, FIXTURE_C).unwrap();
        let status = Command::new("cc")
            .args(["-O1", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(status.success(), "cc failed");
        exe
    })
}

/// A child process, killed (SIGKILL, by its pid) and reaped when dropped.
struct Guard(Child);

impl Guard {
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running fixture and the addresses it printed.
struct Fixture {
    proc: Guard,
    buffer: u64,
    buffer_len: usize,
    /// A page of 0xab followed by an unmapped page.
    edge: u64,
    page: u64,
    rt_count: u64,
    spins: u64,
    /// 1 MiB, byte i = i * 13 + 5.
    big: u64,
}

impl Fixture {
    fn start(spinners: u32, churn: bool) -> Fixture {
        let mut cmd = Command::new(fixture_exe());
        cmd.arg(spinners.to_string()).stdout(Stdio::piped());
        if churn {
            cmd.arg("churn");
        }
        let mut proc = Guard(cmd.spawn().unwrap());
        let mut line = String::new();
        BufReader::new(proc.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 7, "fixture said {line:?}");
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        Fixture {
            buffer: hex(f[0]),
            buffer_len: f[1].parse().unwrap(),
            edge: hex(f[2]),
            page: f[3].parse().unwrap(),
            rt_count: hex(f[4]),
            spins: hex(f[5]),
            big: hex(f[6]),
            proc,
        }
    }

    fn pid(&self) -> i32 {
        self.proc.pid()
    }

    fn expected_buffer(&self) -> Vec<u8> {
        (0..self.buffer_len).map(|i| (i * 7 + 3) as u8).collect()
    }

    /// The spinners' counters, read without stopping anything.
    fn spin_counts(&self, n: usize) -> Vec<u64> {
        let p = LiveProcess::attach(self.pid(), Mode::NoStop).unwrap();
        let mut raw = vec![0; n * 8];
        p.read(self.spins, &mut raw).unwrap();
        raw.chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn rt_count(&self) -> u64 {
        let p = LiveProcess::attach(self.pid(), Mode::NoStop).unwrap();
        let mut raw = [0; 8];
        p.read(self.rt_count, &mut raw).unwrap();
        u64::from_ne_bytes(raw)
    }
}

fn tasks(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort();
    tids
}

/// A thread's state letter, None if it is gone.
fn thread_state(pid: i32, tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

fn thread_tracer(pid: i32, tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("TracerPid:"))?;
    line["TracerPid:".len()..].trim().parse().ok()
}

/// Every live thread: (tid, state, tracer).
fn threads(pid: i32) -> Vec<(i32, char, i32)> {
    tasks(pid)
        .into_iter()
        .filter_map(|tid| {
            let state = thread_state(pid, tid)?;
            let tracer = thread_tracer(pid, tid)?;
            (!matches!(state, 'Z' | 'X')).then_some((tid, state, tracer))
        })
        .collect()
}

fn assert_all_stopped_by(pid: i32, tracer: i32) {
    for (tid, state, traced_by) in threads(pid) {
        assert_eq!(state, 't', "thread {tid} not in a tracing stop");
        assert_eq!(traced_by, tracer, "thread {tid}");
    }
}

/// Waits (a few seconds at most) until no thread is traced or in a tracing stop.
fn assert_all_running(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let threads = threads(pid);
        if threads.iter().all(|&(_, s, t)| s != 't' && t == 0) {
            return;
        }
        assert!(Instant::now() < deadline, "still held: {threads:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (a few seconds at most: other tests' spinners compete for the CPUs)
/// until every spinner's counter has moved.
fn assert_spinners_advance(f: &Fixture, n: usize) {
    let before = f.spin_counts(n);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = f.spin_counts(n);
        if now.iter().zip(&before).all(|(a, b)| a > b) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "a spinner did not run: {before:?} -> {now:?}"
        );
    }
}

fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

// ---- helpers: this binary re-executed ----

const HELPER_ENV: &str = "MQS_TARGET_TEST_HELPER";

/// Not a test: when re-executed with `HELPER_ENV` set this binary becomes
/// the helper process named there (the tests start it with --ignored).
#[test]
#[ignore = "not a test: the helper process other tests of this file start"]
fn helper() {
    let Ok(task) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (what, pid) = task.split_once(':').unwrap();
    let pid: i32 = pid.parse().unwrap();
    match what {
        // A tracer that holds the target stopped until it is killed.
        "hold" | "hold-cleanup" => {
            if what == "hold-cleanup" {
                extern "C" fn ignore(_: libc::c_int) {}
                // SAFETY: the handler does nothing, so it is async-signal-safe.
                unsafe {
                    libc::signal(libc::SIGTERM, ignore as *const () as libc::sighandler_t);
                }
                install_signal_cleanup();
            }
            let _held = LiveProcess::attach(pid, Mode::Stop).unwrap();
            println!("MQS:stopped {}", gettid());
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        // A tracer that stops and resumes the target until it is killed.
        "cycle" => {
            println!("MQS:cycling {}", gettid());
            loop {
                LiveProcess::attach(pid, Mode::Stop)
                    .unwrap()
                    .detach()
                    .unwrap();
            }
        }
        // Runs unprivileged: reports what attaching says.
        "probe" => {
            for mode in [Mode::Stop, Mode::NoStop] {
                println!("MQS:{:?}", LiveProcess::attach(pid, mode).err());
            }
            println!(
                "MQS:{:?}",
                LiveProcess::attach(pid, Mode::NoStop)
                    .and_then(|p| p.executable())
                    .err()
            );
            println!("MQS:done");
        }
        _ => panic!("unknown helper {task}"),
    }
}

/// The test binary, where another user can run it: the checkout may sit in
/// a directory only root can enter (mktemp -d makes them 0700).
fn exe_for(uid: Option<u32>) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    if uid.is_none() {
        return exe;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = mqs_tests::shared_dir("mqs-target-live").unwrap();
    let copy = dir.join("target_live");
    if !copy.exists() {
        std::fs::copy(&exe, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

fn spawn_helper(task: &str, uid: Option<u32>) -> (Guard, impl Iterator<Item = String>) {
    let mut cmd = Command::new(exe_for(uid));
    cmd.args([
        "--exact",
        "helper",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER_ENV, task)
    .current_dir("/")
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let mut proc = Guard(cmd.spawn().unwrap());
    let out: ChildStdout = proc.0.stdout.take().unwrap();
    let lines = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        // libtest may print "test helper ... " on the same line first.
        .filter_map(|l| l.split_once("MQS:").map(|(_, ours)| ours.to_owned()));
    (proc, lines)
}

// ---- tests ----

#[test]
fn reads_known_bytes_in_both_modes() {
    let f = Fixture::start(2, false);
    for mode in [Mode::NoStop, Mode::Stop] {
        let p = LiveProcess::attach(f.pid(), mode).unwrap();
        assert_eq!(p.pid(), f.pid());
        let mut buf = vec![0; f.buffer_len];
        p.read(f.buffer, &mut buf).unwrap();
        assert_eq!(buf, f.expected_buffer(), "{mode:?}");
        let mut word = [0; 8];
        p.read(f.buffer + 4093, &mut word).unwrap();
        assert_eq!(word.to_vec(), f.expected_buffer()[4093..4101]);

        let objects = p.mapped_objects().unwrap();
        assert_eq!(&objects[0].path, fixture_exe());
        assert_eq!(p.executable().unwrap(), *fixture_exe());
        assert!(objects[0].contains(f.buffer), "{:?}", objects[0]);
        let header = objects[0].file_offset_zero_start.unwrap();
        p.read(header, &mut word[..4]).unwrap();
        assert_eq!(&word[..4], b"\x7fELF");
        assert!(objects[1..].windows(2).all(|w| w[0].base < w[1].base));
        assert!(objects
            .iter()
            .any(|o| o.path.to_string_lossy().contains("libc")));
        p.detach().unwrap();
    }
}

#[test]
fn read_into_unmapped_page_fails() {
    let f = Fixture::start(0, false);
    let hole = f.edge + f.page;
    for mode in [Mode::NoStop, Mode::Stop] {
        let p = LiveProcess::attach(f.pid(), mode).unwrap();
        let mut buf = [0; 8];
        p.read(hole - 4, &mut buf[..4]).unwrap();
        assert_eq!(buf[..4], [0xab; 4]);
        let err = p.read(hole - 4, &mut buf).unwrap_err();
        assert!(
            matches!(err, Error::Read { addr, len: 8, .. } if addr == hole - 4),
            "{err}"
        );
        assert!(matches!(p.read(hole, &mut buf), Err(Error::Read { .. })));
        assert_eq!(p.read_prefix(hole - 4, &mut buf).unwrap(), 4);

        // Through the cache: the bad page fails, its neighbour does not.
        let cache = PageCache::new(&p);
        assert!(matches!(
            cache.read(hole - 4, &mut buf),
            Err(Error::Read { .. })
        ));
        cache.read(hole - 8, &mut buf).unwrap();
        assert_eq!(buf, [0xab; 8]);
        assert!(cache.read(hole + 100, &mut buf).is_err());
    }
}

#[test]
fn stop_mode_stops_every_thread_and_detach_resumes_them() {
    let f = Fixture::start(4, false);
    assert_spinners_advance(&f, 4);
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    let mut held = p.stopped_threads().to_vec();
    held.sort();
    assert_eq!(held, tasks(f.pid()));
    assert_eq!(held.len(), 5);
    assert_all_stopped_by(f.pid(), gettid());
    // Stopped means the spinners' counters stand still.
    let before = f.spin_counts(4);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(f.spin_counts(4), before);
    p.detach().unwrap();
    assert_all_running(f.pid());
    assert_spinners_advance(&f, 4);

    // Drop does the same as detach.
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    assert_all_stopped_by(f.pid(), gettid());
    drop(p);
    assert_all_running(f.pid());
}

#[test]
fn threads_created_during_attach_are_stopped_too() {
    let f = Fixture::start(2, true);
    for _ in 0..30 {
        let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
        let held = p.stopped_threads();
        for (tid, state, tracer) in threads(f.pid()) {
            assert!(held.contains(&tid), "thread {tid} escaped");
            assert_eq!((state, tracer), ('t', gettid()), "thread {tid}");
        }
        drop(p);
    }
    assert_all_running(f.pid());
    assert_spinners_advance(&f, 2);
}

#[test]
fn target_already_stopped_by_sigstop_stays_stopped() {
    let f = Fixture::start(1, false);
    let pid = nix::unistd::Pid::from_raw(f.pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !threads(f.pid()).iter().all(|t| t.1 == 'T') {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    assert_all_stopped_by(f.pid(), gettid());
    p.detach().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    for (tid, state, tracer) in threads(f.pid()) {
        assert_eq!((state, tracer), ('T', 0), "thread {tid}");
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_spinners_advance(&f, 1);
}

#[test]
fn signals_arriving_during_attach_are_delivered() {
    const SIGNALS: u64 = 3000;
    let f = Fixture::start(2, false);
    let pid = f.pid();
    let sender = std::thread::spawn(move || {
        for _ in 0..SIGNALS {
            // SAFETY: kill takes no pointers; the pid is our own child.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGRTMIN()) }, 0);
            std::thread::sleep(Duration::from_micros(20));
        }
    });
    while !sender.is_finished() {
        LiveProcess::attach(pid, Mode::Stop)
            .unwrap()
            .detach()
            .unwrap();
    }
    sender.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.rt_count() != SIGNALS {
        assert!(
            Instant::now() < deadline,
            "{} of {SIGNALS} signals delivered",
            f.rt_count()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_all_running(pid);
}

#[test]
fn no_such_process() {
    // A pid that existed and is reaped: free unless reused at once.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id() as i32;
    gone.wait().unwrap();
    for mode in [Mode::Stop, Mode::NoStop] {
        let err = LiveProcess::attach(pid, mode).unwrap_err();
        assert!(
            matches!(err, Error::NoSuchProcess { pid: p } if p == pid),
            "{err}"
        );
    }
}

#[test]
fn process_gone_mid_snapshot() {
    let mut f = Fixture::start(1, false);
    let p = LiveProcess::attach(f.pid(), Mode::NoStop).unwrap();
    let cache = PageCache::new(&p);
    let mut buf = [0; 8];
    cache.read(f.buffer, &mut buf).unwrap();
    f.proc.0.kill().unwrap();
    f.proc.0.wait().unwrap();
    assert!(!p.is_alive());
    for result in [
        p.read(f.buffer, &mut buf),
        p.read(f.big, &mut buf),
        cache.read(f.big, &mut buf),
    ] {
        assert!(
            matches!(result, Err(Error::ProcessGone { .. })),
            "{result:?}"
        );
    }
    assert!(matches!(p.mapped_objects(), Err(Error::ProcessGone { .. })));
    drop(cache);
    p.detach().unwrap();

    // Killed while we hold it stopped: reads say gone, detach copes.
    let f = Fixture::start(2, false);
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(f.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match p.read(f.buffer, &mut buf) {
            Err(Error::ProcessGone { .. }) => break,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    p.detach().unwrap();
}

#[test]
fn already_traced_names_the_tracer() {
    let f = Fixture::start(1, false);
    let pid = f.pid();
    let (tell, told) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let tracer = std::thread::spawn(move || {
        let p = LiveProcess::attach(pid, Mode::Stop).unwrap();
        tell.send(gettid()).unwrap();
        let _ = released.recv();
        p.detach().unwrap();
    });
    let tracer_tid = told.recv().unwrap();
    let err = LiveProcess::attach(pid, Mode::Stop).unwrap_err();
    match &err {
        Error::PermissionDenied {
            reason: PermissionReason::AlreadyTraced { tracer_pid, .. },
            ..
        } => assert_eq!(*tracer_pid, tracer_tid),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains(&tracer_tid.to_string()), "{err}");
    // Reading without stopping still works meanwhile.
    let p = LiveProcess::attach(pid, Mode::NoStop).unwrap();
    let mut buf = vec![0; f.buffer_len];
    p.read(f.buffer, &mut buf).unwrap();
    assert_eq!(buf, f.expected_buffer());

    release.send(()).unwrap();
    tracer.join().unwrap();
    assert_all_running(pid);
    LiveProcess::attach(pid, Mode::Stop)
        .unwrap()
        .detach()
        .unwrap();
}

#[test]
fn not_root_is_reported() {
    // /proc/self belongs to our effective uid.
    // Failing, not skipping: a skipped test would count as passed.
    assert_eq!(
        std::fs::metadata("/proc/self").unwrap().uid(),
        0,
        "this test drops to uid 65534, which needs root: run the suite as root"
    );
    let f = Fixture::start(0, false);
    let (_helper, lines) = spawn_helper(&format!("probe:{}", f.pid()), Some(65534));
    let mut lines: Vec<String> = lines.collect();
    assert_eq!(lines.pop().as_deref(), Some("done"));
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        assert!(
            line.contains("PermissionDenied") && line.contains("NotRoot { target_uid: 0 }"),
            "{line}"
        );
    }
}

#[test]
fn target_runs_again_after_the_tracer_is_killed() {
    let f = Fixture::start(3, false);
    let (mut helper, mut lines) = spawn_helper(&format!("hold:{}", f.pid()), None);
    let line = lines.next().expect("helper said nothing");
    let tracer: i32 = line.strip_prefix("stopped ").unwrap().parse().unwrap();
    assert_all_stopped_by(f.pid(), tracer);
    helper.0.kill().unwrap();
    helper.0.wait().unwrap();
    assert_all_running(f.pid());
    assert_spinners_advance(&f, 3);
}

#[test]
fn no_signal_is_lost_when_the_tracer_dies_mid_attach() {
    let f = Fixture::start(2, false);
    let pid = f.pid();
    let (mut helper, mut lines) = spawn_helper(&format!("cycle:{pid}"), None);
    lines.next().expect("helper said nothing");
    let sender = std::thread::spawn(move || {
        let mut sent = 0;
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            // SAFETY: kill takes no pointers; the pid is our own child.
            if unsafe { libc::kill(pid, libc::SIGRTMIN()) } == 0 {
                sent += 1;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
        sent
    });
    // Killed at some point of a stop or a detach, with signals in flight.
    std::thread::sleep(Duration::from_millis(150));
    helper.0.kill().unwrap();
    helper.0.wait().unwrap();
    let sent = sender.join().unwrap();
    assert_all_running(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.rt_count() != sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} signals delivered",
            f.rt_count()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_ends_a_tracer_with_signal_cleanup() {
    let f = Fixture::start(1, false);
    let (mut helper, mut lines) = spawn_helper(&format!("hold-cleanup:{}", f.pid()), None);
    let line = lines.next().expect("helper said nothing");
    let tracer: i32 = line.strip_prefix("stopped ").unwrap().parse().unwrap();
    assert_all_stopped_by(f.pid(), tracer);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(helper.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = helper.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "SIGTERM did not end the helper");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert_all_running(f.pid());
}

#[test]
fn page_cache_scattered_reads() {
    const READS: usize = 100_000;
    const SPAN: u64 = 1 << 20;
    let f = Fixture::start(0, false);
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    // Offsets from a fixed xorshift sequence, 8-byte reads anywhere in 1 MiB.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let offsets: Vec<u64> = (0..READS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % (SPAN - 8)
        })
        .collect();
    let expect = |o: u64| -> [u8; 8] { std::array::from_fn(|i| ((o + i as u64) * 13 + 5) as u8) };

    let cache = PageCache::new(&p);
    let start = Instant::now();
    let mut buf = [0; 8];
    for &o in &offsets {
        cache.read(f.big + o, &mut buf).unwrap();
        assert_eq!(buf, expect(o));
    }
    let cached = start.elapsed();
    let stats = cache.stats();

    let before = p.syscalls();
    let start = Instant::now();
    for &o in &offsets {
        p.read(f.big + o, &mut buf).unwrap();
    }
    let direct = start.elapsed();
    let direct_calls = p.syscalls() - before;

    eprintln!(
        "{READS} 8-byte reads over 1 MiB: cached {cached:?}, {} syscalls, {} pages; \
         uncached {direct:?}, {direct_calls} syscalls",
        stats.syscalls, stats.pages_cached
    );
    assert_eq!(stats.reads, READS as u64);
    assert_eq!(stats.bytes, 8 * READS as u64);
    // The range touches 257 pages at most (it need not be page aligned).
    assert!(
        stats.pages_cached <= 257 && stats.syscalls <= 257,
        "{stats:?}"
    );
    assert_eq!(direct_calls, READS as u64);
}

#[test]
fn threads_registers_environment_and_liveness() {
    let f = Fixture::start(2, false);
    // Until both spinners have counted, one may still be starting (in libc).
    {
        let watch = LiveProcess::attach(f.pid(), Mode::NoStop).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut counts = [0u8; 16];
            watch.read(f.spins, &mut counts).unwrap();
            if counts[..8] != [0; 8] && counts[8..] != [0; 8] {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the spinners never ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let p = LiveProcess::attach(f.pid(), Mode::Stop).unwrap();
    let threads = p.threads().unwrap();
    assert_eq!(threads.len(), 3, "{threads:?}");
    assert_eq!(threads[0].tid, f.pid(), "the main thread comes first");
    let objects = p.mapped_objects().unwrap();
    let exe = &objects[0];
    let code = |ip: u64| {
        exe.ranges
            .iter()
            .any(|r| r.perms.execute && r.start <= ip && ip < r.end)
    };
    // The two spinners run `spin`, in the program's own code.
    let spinning = threads
        .iter()
        .filter(|t| t.registers.is_some_and(|r| code(r.ip())))
        .count();
    assert_eq!(spinning, 2, "{threads:?}");
    for t in &threads {
        let regs = t.registers.expect("a stopped thread has registers");
        assert!(regs.sp() != 0 && regs.ip() != 0, "{t:?}");
        assert_eq!(t.state, Some('t'), "{t:?}");
    }
    assert_eq!(p.pointer_size(), 8);
    assert!(p.environment().unwrap().get("PATH").is_some());
    assert_eq!(p.liveness(), mqs_core::interface::Liveness::Running);
    let identity = p.identity();
    p.detach().unwrap();
    // Running and not stopped: no registers then.
    let q = LiveProcess::attach(f.pid(), Mode::NoStop).unwrap();
    assert!(q.threads().unwrap().iter().all(|t| t.registers.is_none()));
    drop(q);
    drop(f);
    assert!(!identity.is_alive());
}
