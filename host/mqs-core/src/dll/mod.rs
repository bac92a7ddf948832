//! The message-queue DLL driver: loading and checking a DLL (`library`),
//! the callbacks it calls (`callbacks`, over the handle objects in
//! `handles`), and driving it through a dump (`session`). Which DLL a
//! process names is acquisition's business (`mqs-acquire`'s `locate`).

mod callbacks;
pub mod capture;
mod handles;
pub mod library;
pub mod session;
mod trust;
pub mod watchdog;

pub use callbacks::{codes as host_codes, is_verbose, set_verbose, VERBOSE_PREFIX};
pub use library::Dll;
pub use session::{ImageId, ProcessId, Session};
pub use trust::check_trusted;

/// DLLs keep global state (Open MPI's does) and the output capture moves the
/// process's stdout and stderr: one session at a time in a process. Held
/// for a whole dump; a poisoned lock is still a lock.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    crate::sync::lock(&LOCK)
}
