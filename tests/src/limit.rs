//! A time limit for work done in the test's own process (a dump through a
//! DLL loaded in-process): a DLL whose walk never ends must fail the test
//! with a clear message, not hang it.

use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::sync::mpsc;
use std::time::Duration;

/// How long one in-process dump of a fixture's rank may take: generous for
/// a loaded machine, where one takes well under a second.
pub const DUMP_LIMIT: Duration = Duration::from_secs(120);

/// Runs `work` on a thread of its own and returns its result, or an error
/// naming `what` if it is not done within `limit` (the thread is then left
/// behind: it cannot be stopped, and ends with the test process). A panic
/// in `work` is passed on. The error is also written at once to the
/// stderr the test had before `work` began: the host sends fds 1 and 2 to a
/// file while a DLL runs, so a DLL call that never returns would swallow
/// the test harness's report.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from);
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => Ok(value),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => Err(format!("{what}: ended without a result")),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let message = format!(
                "{what}: not done after {} s: a walk in the DLL that never ends?",
                limit.as_secs()
            );
            if let Ok(mut f) = stderr {
                let _ = writeln!(f, "{message}");
            }
            Err(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_past_its_limit_is_an_error_and_work_within_it_a_value() {
        assert_eq!(within(Duration::from_secs(10), "quick", || 7), Ok(7));
        let slow = within(Duration::from_millis(50), "slow", || {
            std::thread::sleep(Duration::from_secs(2))
        });
        assert!(slow.unwrap_err().contains("slow: not done after"));
    }
}
