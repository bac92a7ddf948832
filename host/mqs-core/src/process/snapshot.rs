//! A process recorded in memory: the pages a dump read, with the process's
//! facts. What `mqs-dump --snapshot` replays and what tests drive the host
//! with; the file format is [`crate::snapshot`]'s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::interface::{Environment, Liveness, MappedObject, OsState, Target, Thread, PAGE_SIZE};
use crate::{Error, Result};

/// One recorded page: `PAGE_SIZE` bytes at a page-aligned address.
pub type SnapshotPage = Arc<[u8]>;

/// A recorded process. Reads of pages it does not hold fail with the
/// address, never with made-up bytes.
#[derive(Debug, Clone, Default)]
pub struct SnapshotProcess {
    pub pid: i32,
    pub executable: PathBuf,
    pub environment: Environment,
    pub threads: Vec<Thread>,
    pub mapped_objects: Vec<MappedObject>,
    pub pointer_size: u32,
    /// By page number (address / PAGE_SIZE).
    pub pages: HashMap<u64, SnapshotPage>,
    /// What the OS said the process was doing when it was recorded.
    pub os_state: Option<OsState>,
}

impl SnapshotProcess {
    /// Adds `bytes` at `addr`, filling whole pages (the part of a page not
    /// covered reads as zeros): for building snapshots by hand in tests.
    pub fn insert(&mut self, addr: u64, bytes: &[u8]) {
        let mut done = 0;
        while done < bytes.len() {
            let at = addr + done as u64;
            let page = at / PAGE_SIZE;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(bytes.len() - done);
            let entry = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE_SIZE as usize].into());
            let mut copy = entry.to_vec();
            copy[in_page..in_page + n].copy_from_slice(&bytes[done..done + n]);
            *entry = copy.into();
            done += n;
        }
    }
}

impl Target for SnapshotProcess {
    fn pid(&self) -> i32 {
        self.pid
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.checked_add(done as u64).ok_or(Error::Read {
                pid: self.pid,
                addr,
                len: buf.len(),
                detail: "range wraps around".into(),
            })?;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(buf.len() - done);
            let Some(page) = self.pages.get(&(at / PAGE_SIZE)) else {
                return Err(Error::Read {
                    pid: self.pid,
                    addr,
                    len: buf.len(),
                    detail: format!(
                        "the snapshot does not hold the page at {:#x}",
                        at - in_page as u64
                    ),
                });
            };
            buf[done..done + n].copy_from_slice(&page[in_page..in_page + n]);
            done += n;
        }
        Ok(())
    }

    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        Ok(self.mapped_objects.clone())
    }

    fn executable(&self) -> Result<PathBuf> {
        Ok(self.executable.clone())
    }

    fn environment(&self) -> Result<Environment> {
        Ok(self.environment.clone())
    }

    fn threads(&self) -> Result<Vec<Thread>> {
        Ok(self.threads.clone())
    }

    fn liveness(&self) -> Liveness {
        Liveness::Offline
    }

    fn os_state(&self) -> Option<OsState> {
        self.os_state.clone()
    }

    fn pointer_size(&self) -> u32 {
        self.pointer_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_pages_and_names_the_missing_one() {
        let mut p = SnapshotProcess {
            pid: 7,
            ..Default::default()
        };
        p.insert(0x1ffe, &[1, 2, 3, 4]);
        let mut buf = [0u8; 4];
        p.read(0x1ffe, &mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4]);
        let err = p.read(0x2ffe, &mut buf).unwrap_err();
        assert!(err.to_string().contains("page at 0x3000"), "{err}");
        assert_eq!(p.read_prefix(0x2ffe, &mut buf).unwrap(), 2);
    }
}
