//! Directories under the system temporary directory that other users can
//! read: tests that run a program as another user copy it there, since the
//! checkout may sit where only root can enter.
//!
//! Each test process has its own (`<prefix>-<pid>`); test binaries have no
//! teardown hook, so every call first removes the ones left by test
//! processes that have ended.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::procfs::process_alive;

/// `<tmp>/<prefix>-<our pid>`, created world-readable, after removing the
/// `<prefix>-<pid>` directories of processes that no longer exist.
pub fn shared_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let tmp = std::env::temp_dir();
    remove_stale(&tmp, prefix);
    let dir = tmp.join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

fn remove_stale(tmp: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let ours = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| {
            n.strip_prefix(prefix)?
                .strip_prefix('-')?
                .parse::<u32>()
                .ok()
        }) else {
            continue;
        };
        // Only directories we made: ours by name and owner.
        let mine = entry
            .metadata()
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.is_dir() && m.uid() == effective_uid()
            })
            .unwrap_or(false);
        if pid != ours && mine && !process_alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn effective_uid() -> u32 {
    // /proc/self/status says it without libc.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}
