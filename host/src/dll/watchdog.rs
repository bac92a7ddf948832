//! A limit on each call into a DLL, for programs that own their process
//! (mqs-dump sets one; a debugger embedding the host need not). A DLL stuck
//! in a loop would otherwise keep the job's processes stopped for as long
//! as the tool waits. When one call passes the limit, the watchdog says
//! which call it was, on the stderr the program started with (a DLL's own
//! output is captured meanwhile), and ends this process at once with
//! `_exit`: the kernel then detaches every process it traced and they run
//! on (no breakpoint is planted while a DLL runs: launch mode's live in
//! its tracer process).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::exit_code;
use crate::sync::lock;

/// The limit in ms; 0: none.
static LIMIT_MS: AtomicU64 = AtomicU64::new(0);
/// When the call in progress must end, in ms since `epoch()`; 0: no call.
static DEADLINE_MS: AtomicU64 = AtomicU64::new(0);
/// The entry point the DLL is in.
static CALL: Mutex<&'static str> = Mutex::new("");
/// The watchdog thread, and the stderr it reports on.
static WATCHER: OnceLock<Option<OwnedFd>> = OnceLock::new();

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Sets the limit for every later call into a DLL in this process (None:
/// no limit). The first limit set starts the watchdog thread.
pub fn set_call_limit(limit: Option<Duration>) {
    let ms = limit.map_or(0, |l| {
        u64::try_from(l.as_millis()).unwrap_or(u64::MAX).max(1)
    });
    LIMIT_MS.store(ms, Ordering::SeqCst);
    if ms == 0 {
        return;
    }
    WATCHER.get_or_init(|| {
        // SAFETY: dup of our own stderr, before any capture redirects it.
        let fd = unsafe { libc::dup(2) };
        let err = (fd >= 0).then(|| {
            // SAFETY: a fresh descriptor we own.
            unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
        });
        let raw = err.as_ref().map(|f| f.as_raw_fd());
        let spawned = std::thread::Builder::new()
            .name("mqs-dll-watchdog".into())
            .spawn(move || watch(raw));
        spawned.ok().and(err)
    });
}

fn watch(err: Option<i32>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let deadline = DEADLINE_MS.load(Ordering::SeqCst);
        if deadline == 0 || now_ms() <= deadline {
            continue;
        }
        let call = *lock(&CALL);
        let secs = LIMIT_MS.load(Ordering::SeqCst) as f64 / 1e3;
        let text = format!(
            "mqs-dump: error: the message-queue DLL did not return from {call} within {secs} s \
             (--dll-timeout): it is stuck; mqs-dump ends, which lets the job's processes go. \
             Report it to the DLL's maker, or give --dll another DLL\n"
        );
        if let Some(fd) = err {
            // SAFETY: write(2) of our own buffer to our own descriptor.
            let _ = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
        }
        // SAFETY: _exit ends the process without running atexit handlers
        // or taking locks the stuck thread may hold.
        unsafe { libc::_exit(exit_code::DLL_HUNG) };
    }
}

/// Runs `f`, a call into the DLL entry point `call`, under the limit.
pub(crate) fn guarded<R>(call: &'static str, f: impl FnOnce() -> R) -> R {
    let limit = LIMIT_MS.load(Ordering::Relaxed);
    if limit == 0 {
        return f();
    }
    *lock(&CALL) = call;
    DEADLINE_MS.store(now_ms().saturating_add(limit), Ordering::SeqCst);
    // Cleared however `f` ends.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            DEADLINE_MS.store(0, Ordering::SeqCst);
        }
    }
    let _done = Done;
    f()
}
