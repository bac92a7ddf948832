//! The MPI-2 debugger interface (MPI2DD, the 2007 draft): every process of
//! an MPI-2 job, found through directory and metadirectory processes.
//!
//! A process that speaks it exports `MPI2DD_info`, a packed structure of
//! fixed layout (read without debug info):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `M P I 2 0x7f` (5 bytes), version (1), variant, debug_state |
//! | 8 | debugger_flags (u32: GATE 1, BEING_DEBUGGED 2, REQUEST_DIRECTORY_EVENTS 4) |
//! | 12 | mpi_flags (u32: I_AM_METADIR 1, I_AM_DIR 2, I_AM_STARTER 4, FORCE_TO_MAIN 8, IGNORE_QUEUE 0x10, ACQUIRED_PRE_MAIN 0x20, PARTIAL_ATTACH_OK 0x40) |
//! | 16, 24 | dll_name_32, dll_name_64 (addresses of strings) |
//! | 32, 40 | meta_host_name, meta_executable_name |
//! | 48 | abort_string |
//! | 56, 64, 72 | proctable, directory_table, metadirectory_table |
//! | 80, 84, 88, 92 | proctable_size, directory_size, metadirectory_size, meta_pid (i32) |
//! | 96 | padding (8 × i32): 128 bytes in all |
//!
//! A directory's `proctable` holds `MPI2DD_PROCDESC` entries (packed, 40
//! bytes: host_name, executable_name, spawn_desc, comm_world_id addresses,
//! then pid and rank as i32); `spawn_desc`, when set, points at an
//! `MPI2DD_SPAWNDESC` (parent_comm_world_id address, parent_rank,
//! sequence). A metadirectory's two tables hold `MPI2DD_DIRECTORYENTRY`
//! entries (packed, 20 bytes: host_name, executable_name, pid) naming other
//! directories and metadirectories. Addresses are target words (8 bytes on
//! x86-64).

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::hosts::is_local_host;
use crate::members::Member;
use crate::{Error, Result};
use mqs_core::interface::{read_c_string, read_word, ImageSymbols, Target};

pub const MAGIC: [u8; 5] = *b"MPI2\x7f";
pub const VERSION: u8 = 1;
const INFO_SIZE: usize = 128;

pub const FLAG_GATE: u32 = 0x01;
pub const FLAG_BEING_DEBUGGED: u32 = 0x02;
pub const MPIFLAG_I_AM_METADIR: u32 = 0x01;
pub const MPIFLAG_I_AM_DIR: u32 = 0x02;
pub const MPIFLAG_I_AM_STARTER: u32 = 0x04;
pub const MPIFLAG_IGNORE_QUEUE: u32 = 0x10;
pub const MPIFLAG_PARTIAL_ATTACH_OK: u32 = 0x40;

/// `debug_state` values.
pub const DEBUG_START: u8 = 1;
pub const DEBUG_SPAWN: u8 = 2;
pub const DEBUG_ABORT: u8 = 8;

/// Offset of `debugger_flags` in `MPI2DD_info`.
pub const DEBUGGER_FLAGS_OFFSET: u64 = 8;

/// Most entries believed in a table, and most processes visited.
const MAX_ENTRIES: i64 = 1 << 20;
const MAX_STRING: usize = 4096;

/// `MPI2DD_info` as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub addr: u64,
    pub debug_state: u8,
    pub debugger_flags: u32,
    pub mpi_flags: u32,
    pub dll_name_64: u64,
    pub abort_string: u64,
    proctable: u64,
    directory_table: u64,
    metadirectory_table: u64,
    proctable_size: i32,
    directory_size: i32,
    metadirectory_size: i32,
}

impl Info {
    pub fn is_directory(&self) -> bool {
        self.mpi_flags & MPIFLAG_I_AM_DIR != 0 || self.proctable_size > 0
    }

    pub fn is_metadirectory(&self) -> bool {
        self.mpi_flags & MPIFLAG_I_AM_METADIR != 0
    }

    pub fn ignores_queues(&self) -> bool {
        self.mpi_flags & MPIFLAG_IGNORE_QUEUE != 0
    }
}

/// Whether the process exports `MPI2DD_info`, and where.
pub fn info_address(symbols: &dyn ImageSymbols) -> Option<u64> {
    symbols.find_symbol("MPI2DD_info")
}

/// `MPI2DD_info` at `addr`, if the process has filled it in yet (a
/// structure still all zeros is not the interface in use); an error when it
/// holds anything but the interface mqs reads.
pub fn published_info(target: &dyn Target, addr: u64) -> Result<Option<Info>> {
    let mut magic = [0u8; 5];
    target.read(addr, &mut magic)?;
    if magic == [0; 5] {
        return Ok(None);
    }
    read_info(target, addr).map(Some)
}

/// Reads and checks `MPI2DD_info` at `addr`.
pub fn read_info(target: &dyn Target, addr: u64) -> Result<Info> {
    let pid = target.pid();
    let mut raw = [0u8; INFO_SIZE];
    target.read(addr, &mut raw)?;
    if raw[..5] != MAGIC {
        return Err(Error::NotMpi {
            pid,
            detail: format!(
                "its MPI2DD_info has the magic {:02x?}, not MPI2 0x7f: not the MPI-2 debugger \
                 interface mqs-dump reads",
                &raw[..5]
            ),
        });
    }
    if raw[5] != VERSION {
        return Err(Error::NotMpi {
            pid,
            detail: format!(
                "its MPI2DD_info is of version {}; mqs-dump reads version {VERSION}",
                raw[5]
            ),
        });
    }
    let u32_at = |o: usize| u32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]]);
    let i32_at = |o: usize| u32_at(o) as i32;
    let u64_at = |o: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&raw[o..o + 8]);
        u64::from_le_bytes(w)
    };
    Ok(Info {
        addr,
        debug_state: raw[7],
        debugger_flags: u32_at(8),
        mpi_flags: u32_at(12),
        dll_name_64: u64_at(24),
        abort_string: u64_at(48),
        proctable: u64_at(56),
        directory_table: u64_at(64),
        metadirectory_table: u64_at(72),
        proctable_size: i32_at(80),
        directory_size: i32_at(84),
        metadirectory_size: i32_at(88),
    })
}

/// A string the structures point at; NULL or unreadable reads as empty.
fn string_at(target: &dyn Target, addr: u64) -> String {
    if addr == 0 {
        return String::new();
    }
    read_c_string(target, addr, MAX_STRING).unwrap_or_default()
}

/// The abort message of an `MPI2DD_DEBUG_ABORT` event.
pub fn abort_string(target: &dyn Target, info: &Info) -> String {
    string_at(target, info.abort_string)
}

/// The message-queue DLL the process names (`dll_name_64`), if any.
pub fn dll_name(target: &dyn Target, info: &Info) -> Option<String> {
    Some(string_at(target, info.dll_name_64)).filter(|s| !s.is_empty())
}

/// Who spawned a process: its parent's world, rank and spawn sequence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SpawnParent {
    pub comm_world: String,
    pub rank: i32,
    pub sequence: i32,
}

/// One entry of a directory's proctable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcEntry {
    pub host: String,
    pub executable: String,
    pub comm_world: String,
    pub spawned_by: Option<SpawnParent>,
    pub pid: i32,
    pub rank: i32,
}

/// A process named in a metadirectory's tables.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DirectoryEntry {
    pub host: String,
    pub executable: String,
    pub pid: i32,
}

fn count(pid: i32, what: &str, n: i32) -> Result<usize> {
    if !(0..=MAX_ENTRIES as i32).contains(&n) {
        return Err(Error::NotMpi {
            pid,
            detail: format!("its MPI2DD {what} claims {n} entries"),
        });
    }
    Ok(n as usize)
}

/// The proctable of a directory process.
pub fn proctable(target: &dyn Target, info: &Info) -> Result<Vec<ProcEntry>> {
    let n = count(target.pid(), "proctable", info.proctable_size)?;
    if info.proctable == 0 {
        return Ok(Vec::new());
    }
    let word = target.pointer_size();
    let w = u64::from(word);
    let entry_size = 4 * w + 8;
    let mut out = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let at = info.proctable + i * entry_size;
        let mut ints = [0u8; 8];
        target.read(at + 4 * w, &mut ints)?;
        let spawn = read_word(target, at + 2 * w, word)?;
        let spawned_by = if spawn == 0 {
            None
        } else {
            let mut tail = [0u8; 8];
            target.read(spawn + w, &mut tail)?;
            Some(SpawnParent {
                comm_world: string_at(target, read_word(target, spawn, word)?),
                rank: i32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]),
                sequence: i32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]),
            })
        };
        out.push(ProcEntry {
            host: string_at(target, read_word(target, at, word)?),
            executable: string_at(target, read_word(target, at + w, word)?),
            comm_world: string_at(target, read_word(target, at + 3 * w, word)?),
            spawned_by,
            pid: i32::from_le_bytes([ints[0], ints[1], ints[2], ints[3]]),
            rank: i32::from_le_bytes([ints[4], ints[5], ints[6], ints[7]]),
        });
    }
    Ok(out)
}

/// The directory and metadirectory tables of a metadirectory process.
pub fn directories(
    target: &dyn Target,
    info: &Info,
) -> Result<(Vec<DirectoryEntry>, Vec<DirectoryEntry>)> {
    let word = target.pointer_size();
    let w = u64::from(word);
    let entry_size = 2 * w + 4;
    let table = |addr: u64, n: i32, what: &str| -> Result<Vec<DirectoryEntry>> {
        let n = count(target.pid(), what, n)?;
        if addr == 0 {
            return Ok(Vec::new());
        }
        (0..n as u64)
            .map(|i| {
                let at = addr + i * entry_size;
                let mut pid = [0u8; 4];
                target.read(at + 2 * w, &mut pid)?;
                Ok(DirectoryEntry {
                    host: string_at(target, read_word(target, at, word)?),
                    executable: string_at(target, read_word(target, at + w, word)?),
                    pid: i32::from_le_bytes(pid),
                })
            })
            .collect()
    };
    Ok((
        table(info.directory_table, info.directory_size, "directory table")?,
        table(
            info.metadirectory_table,
            info.metadirectory_size,
            "metadirectory table",
        )?,
    ))
}

/// Opens another process to read its `MPI2DD_info` (never stopping it).
pub trait Opener {
    /// The process `pid` on this host, and its `MPI2DD_info` address.
    fn open(&mut self, pid: i32) -> Result<(Box<dyn Target>, u64)>;
}

/// What walking the directories found.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Every proctable entry, from every directory, without repeats.
    pub entries: Vec<ProcEntry>,
    /// Directory processes that could not be read, and why.
    pub unreachable: Vec<(DirectoryEntry, String)>,
}

/// Walks from the process `start` (a directory or metadirectory) through
/// every directory and metadirectory it leads to, each visited once (the
/// tables may name each other in a loop), and gathers the proctables.
pub fn walk(start: &dyn Target, info: &Info, opener: &mut dyn Opener) -> Result<Found> {
    let mut found = Found::default();
    let mut seen_entries: HashSet<(String, i32, String, i32)> = HashSet::new();
    let mut visited: HashSet<i32> = HashSet::from([start.pid()]);
    let mut queue: VecDeque<DirectoryEntry> = VecDeque::new();
    let mut gather = |target: &dyn Target,
                      info: &Info,
                      found: &mut Found,
                      queue: &mut VecDeque<DirectoryEntry>|
     -> Result<()> {
        if info.is_directory() {
            for e in proctable(target, info)? {
                let key = (e.host.clone(), e.pid, e.comm_world.clone(), e.rank);
                if seen_entries.insert(key) {
                    found.entries.push(e);
                }
            }
        }
        if info.is_metadirectory() {
            let (dirs, metas) = directories(target, info)?;
            queue.extend(dirs);
            queue.extend(metas);
        }
        Ok(())
    };
    gather(start, info, &mut found, &mut queue)?;
    while let Some(dir) = queue.pop_front() {
        if !is_local_host(&dir.host) {
            found.unreachable.push((
                dir.clone(),
                format!(
                    "it runs on host '{}': only local processes can be read",
                    dir.host
                ),
            ));
            continue;
        }
        if dir.pid <= 0 || !visited.insert(dir.pid) {
            continue;
        }
        let opened = opener
            .open(dir.pid)
            .and_then(|(target, addr)| Ok((read_info(&*target, addr)?, target)));
        match opened {
            Ok((info, target)) => {
                if let Err(e) = gather(&*target, &info, &mut found, &mut queue) {
                    found.unreachable.push((dir, e.to_string()));
                }
            }
            Err(e) => found.unreachable.push((dir, e.to_string())),
        }
    }
    Ok(found)
}

/// The job's members from the proctables: the worlds a starter made
/// (no spawn descriptor) first, in order of their names' first
/// appearance, ranks in order; then spawned worlds in the order of their
/// parents (world, rank, sequence). Identities count up in that order.
pub fn members(entries: &[ProcEntry]) -> Vec<Member> {
    let mut worlds: BTreeMap<(u8, Option<SpawnParent>, usize), Vec<&ProcEntry>> = BTreeMap::new();
    let mut first_seen: Vec<&str> = Vec::new();
    for e in entries {
        if !first_seen.contains(&e.comm_world.as_str()) {
            first_seen.push(&e.comm_world);
        }
        let order = first_seen
            .iter()
            .position(|w| *w == e.comm_world)
            .unwrap_or(0);
        // A spawned world is keyed by its parent; its own entries share it.
        let key = match &e.spawned_by {
            None => (0, None, order),
            Some(p) => (1, Some(p.clone()), order),
        };
        worlds.entry(key).or_default().push(e);
    }
    let mut members = Vec::new();
    let mut identity = 0i32;
    for ((_, parent, _), mut world) in worlds {
        world.sort_by_key(|e| e.rank);
        for e in world {
            members.push(Member {
                pid: e.pid,
                host: e.host.clone(),
                rank: usize::try_from(e.rank).unwrap_or(0),
                identity,
                spawned_job: parent.as_ref().map(|_| e.comm_world.clone()),
                spawned_by: parent.as_ref().map(|p| mqs_core::model::SpawnParent {
                    job: p.comm_world.clone(),
                    rank: p.rank,
                }),
            });
            identity += 1;
        }
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(world: &str, rank: i32, pid: i32, parent: Option<(&str, i32, i32)>) -> ProcEntry {
        ProcEntry {
            host: "localhost".into(),
            executable: "/app".into(),
            comm_world: world.into(),
            spawned_by: parent.map(|(w, r, s)| SpawnParent {
                comm_world: w.into(),
                rank: r,
                sequence: s,
            }),
            pid,
            rank,
        }
    }

    #[test]
    fn worlds_first_then_spawned_under_their_parents() {
        let entries = [
            entry("kids-b", 0, 40, Some(("world", 1, 0))),
            entry("world", 1, 11, None),
            entry("kids-a", 1, 31, Some(("world", 0, 0))),
            entry("world", 0, 10, None),
            entry("kids-a", 0, 30, Some(("world", 0, 0))),
        ];
        let members = members(&entries);
        let m: Vec<(i32, usize, i32, Option<&str>)> = members
            .iter()
            .map(|m| (m.pid, m.rank, m.identity, m.spawned_job.as_deref()))
            .collect();
        assert_eq!(
            m,
            [
                (10, 0, 0, None),
                (11, 1, 1, None),
                (30, 0, 2, Some("kids-a")),
                (31, 1, 3, Some("kids-a")),
                (40, 0, 4, Some("kids-b")),
            ]
        );
        assert_eq!(
            members[4]
                .spawned_by
                .as_ref()
                .map(|p| (p.job.as_str(), p.rank)),
            Some(("world", 1))
        );
    }
}
