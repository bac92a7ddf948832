//! A limit on each call into a DLL, for programs that own their process
//! (mqs-dump sets one; a debugger embedding the host need not). A DLL stuck
//! in a loop would otherwise keep the job's processes stopped for as long
//! as the tool waits. When one call passes the limit, the watchdog says
//! which call it was, on the stderr the program started with (a DLL's own
//! output is captured meanwhile), and ends this process at once with
//! `_exit`: the kernel then detaches every process it traced and they run
//! on (no breakpoint is planted while a DLL runs: launch mode's live in
//! its tracer process).

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::exit_code;
use crate::sync::lock;

/// The limit in ms; 0: none.
static LIMIT_MS: AtomicU64 = AtomicU64::new(0);
/// Calls begun and ended: odd while a call is in progress. The watchdog
/// times how long one odd value lasts, so a call costs two atomic adds
/// and no clock reading (the hot path makes one call per operation).
static CALLS: AtomicU64 = AtomicU64::new(0);
/// The entry point the DLL is in.
static CALL: Mutex<&'static str> = Mutex::new("");
/// The watchdog thread, and the stderr it reports on.
static WATCHER: OnceLock<Option<OwnedFd>> = OnceLock::new();

/// How often the watchdog looks.
const TICK: Duration = Duration::from_millis(100);

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
    // The call in progress when last looked, and since when.
    let mut seen: Option<(u64, Instant)> = None;
    loop {
        std::thread::sleep(TICK);
        let calls = CALLS.load(Ordering::SeqCst);
        if calls.is_multiple_of(2) {
            seen = None;
            continue;
        }
        let since = match seen {
            Some((c, since)) if c == calls => since,
            _ => {
                seen = Some((calls, Instant::now()));
                continue;
            }
        };
        let limit = Duration::from_millis(LIMIT_MS.load(Ordering::SeqCst));
        if since.elapsed() < limit {
            continue;
        }
        let call = *lock(&CALL);
        let text = format!(
            "mqs-dump: error: the message-queue DLL did not return from {call} within {} s \
             (--dll-timeout): it is stuck; mqs-dump ends, which lets the job's processes go. \
             Report it to the DLL's maker, or give --dll another DLL\n",
            limit.as_secs_f64()
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

/// Who hears which entry point the DLL is entered at, on this thread.
type Observer = Box<dyn FnMut(&'static str)>;

/// Whether any thread has an observer: each call into a DLL (one per
/// operation) then costs one load, not a thread-local lookup.
static OBSERVED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The observer, and the entry point it heard last.
    static OBSERVER: RefCell<Option<(Observer, &'static str)>> = const { RefCell::new(None) };
}

/// Tells `observer` the name of each entry point this thread's session
/// calls, when it differs from the one before (None: no one is told). An
/// embedding whose DLL runs in a helper process uses it to say where a DLL
/// that died or hung was (the helper sends each name to the debugger).
pub fn observe_calls(observer: Option<Observer>) {
    if observer.is_some() {
        OBSERVED.store(true, Ordering::Relaxed);
    }
    OBSERVER.with(|o| {
        if let Ok(mut slot) = o.try_borrow_mut() {
            *slot = observer.map(|f| (f, ""));
        }
    });
}

fn tell_observer(call: &'static str) {
    if !OBSERVED.load(Ordering::Relaxed) {
        return;
    }
    OBSERVER.with(|o| {
        // Not re-entered: an observer that calls into a DLL is not told.
        if let Ok(mut slot) = o.try_borrow_mut() {
            if let Some((observer, last)) = slot.as_mut() {
                if !std::ptr::eq(*last, call) {
                    *last = call;
                    observer(call);
                }
            }
        }
    });
}

/// Runs `f`, a call into the DLL entry point `call`, under the limit.
pub(crate) fn guarded<R>(call: &'static str, f: impl FnOnce() -> R) -> R {
    tell_observer(call);
    if LIMIT_MS.load(Ordering::Relaxed) == 0 {
        return f();
    }
    *lock(&CALL) = call;
    CALLS.fetch_add(1, Ordering::SeqCst);
    // Ended however `f` ends.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            CALLS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let _done = Done;
    f()
}
