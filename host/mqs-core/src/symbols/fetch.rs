//! Separate debug files from elsewhere: a remote source (a debuginfod
//! server, in `mqs-acquire`) asked by build-id when nothing on this machine
//! has an object's DWARF. An interface here, so that the core needs no
//! network client.

use std::path::PathBuf;

/// Fetches debug files by build-id.
pub trait DebugFileFetcher: Send + Sync + std::fmt::Debug {
    /// The debug file with this build-id (downloaded or cached), if any
    /// source has it. `what` names the file for progress shown to a user.
    fn debuginfo(&self, build_id: &[u8], what: &str) -> Option<PathBuf>;
    /// The servers asked, for messages.
    fn servers(&self) -> Vec<String>;
    /// What went wrong so far, one line each.
    fn notes(&self) -> Vec<String>;
}
