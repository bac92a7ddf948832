//! Finding the DLL a target names, and deciding whether to trust it.
//!
//! An MPI process names its message-queue DLL in `char MPIR_dll_name[]`
//! (Open MPI also has `char **mpimsgq_dll_locations`, a NULL-terminated list,
//! NULL in 4.1.x). Loading a DLL runs its code in our (often root) process,
//! so a file the *target* named is checked first: a regular file owned by
//! root or by us, writable by nobody else.

use std::path::PathBuf;

use crate::{Error, Result};
use mqs_core::interface::{read_c_string, read_word, ImageSymbols, Target};
use mqs_core::Error as CoreError;

/// Longest path we read from the target.
const MAX_PATH: usize = 4096;
/// Most entries we read from `mpimsgq_dll_locations`.
const MAX_LOCATIONS: usize = 64;

/// The DLL paths the target names, best first, as reached from here (a
/// process in a root of its own names them in its root).
pub fn named_by_target(symbols: &dyn ImageSymbols, target: &dyn Target) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    // The MPI-2 debugger interface names it in MPI2DD_info, and may say the
    // MPI has no queues to show.
    let published = match crate::mpi2dd::info_address(symbols) {
        Some(addr) => crate::mpi2dd::published_info(target, addr)?,
        None => None,
    };
    if let Some(info) = published {
        if info.ignores_queues() {
            return Err(Error::QueuesNotImplemented { pid: target.pid() });
        }
        if let Some(name) = crate::mpi2dd::dll_name(target, &info) {
            paths.push(PathBuf::from(name));
        }
    }
    if let Some(addr) = symbols.find_symbol("mpimsgq_dll_locations") {
        let word = target.pointer_size();
        let mut list = read_word(target, addr, word)?;
        if list != 0 {
            for _ in 0..MAX_LOCATIONS {
                let entry = read_word(target, list, word)?;
                if entry == 0 {
                    break;
                }
                let path = read_c_string(target, entry, MAX_PATH)?;
                if !path.is_empty() {
                    paths.push(PathBuf::from(path));
                }
                list += u64::from(word);
            }
        }
    }
    match symbols.find_symbol("MPIR_dll_name") {
        Some(addr) => {
            let path = read_c_string(target, addr, MAX_PATH)?;
            if !path.is_empty() && !paths.iter().any(|p| p.as_os_str() == path.as_str()) {
                paths.push(PathBuf::from(path));
            }
        }
        None if paths.is_empty() => {
            return Err(Error::NotMpi {
                pid: target.pid(),
                detail: "it has no MPIR_dll_name symbol (not linked with an MPI library \
                         that supports message-queue debugging)"
                    .into(),
            })
        }
        None => {}
    }
    if paths.is_empty() {
        return Err(Error::NotMpi {
            pid: target.pid(),
            detail: "its MPIR_dll_name is empty: the MPI names no message-queue DLL".into(),
        });
    }
    Ok(paths.iter().map(|p| target.path_in_root(p)).collect())
}

/// The DLL the target names that mqs may load: the first that exists,
/// refused unless only root or the user could have written it (unless
/// `trust_dll`: the user vouches for it).
pub fn usable_named(
    symbols: &dyn ImageSymbols,
    target: &dyn Target,
    trust_dll: bool,
) -> Result<PathBuf> {
    let path = first_existing(&named_by_target(symbols, target)?)?;
    if !trust_dll {
        mqs_core::dll::check_trusted(&path)?;
    }
    Ok(path)
}

/// The first named DLL that exists.
pub fn first_existing(paths: &[PathBuf]) -> Result<PathBuf> {
    paths
        .iter()
        .find(|p| p.exists())
        .cloned()
        .ok_or_else(|| Error::from(CoreError::DllMissing {
            path: paths.first().cloned().unwrap_or_default(),
            detail: format!(
                "no such file (the target names {}); install the MPI's debugger support or pass --dll",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_existing_reports_every_candidate() {
        let err = first_existing(&[
            PathBuf::from("/nonexistent/a.so"),
            PathBuf::from("/nonexistent/b.so"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/nonexistent/a.so, /nonexistent/b.so"),
            "{err}"
        );
    }
}
