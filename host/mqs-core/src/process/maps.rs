//! /proc/PID/maps, grouped into one [`MappedObject`] per mapped file.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::{fs, io};

use super::{diagnose, procfs};
use crate::interface::{MappedObject, MappedRange, Perms};
use crate::{Error, Result};

const DELETED: &[u8] = b" (deleted)";

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapLine<'a> {
    pub range: MappedRange,
    /// The device of the file (as `st_dev`), where the field parses.
    pub dev: Option<u64>,
    pub inode: u64,
    /// Empty for anonymous memory; `[heap]`, `[vdso]`... for the kernel's own.
    pub path: &'a [u8],
}

/// Parses `start-end perms offset dev inode [path]`. The path is the rest of
/// the line and may contain spaces.
pub(crate) fn parse_line(line: &[u8]) -> Option<MapLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let start = rest.iter().position(|&b| b != b' ')?;
        let len = rest[start..]
            .iter()
            .position(|&b| b == b' ')
            .unwrap_or(rest.len() - start);
        let f = &rest[start..start + len];
        rest = &rest[start + len..];
        Some(f)
    };
    let (start, end) = std::str::from_utf8(field()?).ok()?.split_once('-')?;
    let perms = field()?;
    let offset = field()?;
    let dev = field()?;
    let inode = field()?;
    let hex = |b: &str| u64::from_str_radix(b, 16).ok();
    let flag = |i: usize, c: u8| perms.get(i) == Some(&c);
    let range = MappedRange {
        start: hex(start)?,
        end: hex(end)?,
        offset: hex(std::str::from_utf8(offset).ok()?)?,
        perms: Perms {
            read: flag(0, b'r'),
            write: flag(1, b'w'),
            execute: flag(2, b'x'),
            shared: flag(3, b's'),
        },
    };
    let inode = std::str::from_utf8(inode).ok()?.parse().ok()?;
    let dev = std::str::from_utf8(dev)
        .ok()
        .and_then(|d| d.split_once(':'))
        .and_then(|(major, minor)| Some(nix::sys::stat::makedev(hex(major)?, hex(minor)?)));
    let skip = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
    Some(MapLine {
        range,
        dev,
        inode,
        path: &rest[skip..],
    })
}

/// Splits a kernel path into the path and whether it carries the deleted mark.
fn strip_deleted(path: &[u8]) -> (&[u8], bool) {
    match path.strip_suffix(DELETED) {
        Some(p) => (p, true),
        None => (path, false),
    }
}

/// Groups the file-backed lines of a maps file per file: the executable
/// (named by `exe`) first, the others by lowest address.
pub(crate) fn group(maps: &[u8], exe: Option<&Path>) -> Vec<MappedObject> {
    let mut objects: Vec<MappedObject> = Vec::new();
    for line in maps.split(|&b| b == b'\n') {
        let Some(line) = parse_line(line) else {
            continue;
        };
        // Files have absolute paths; [heap], [vdso], [anon:...] and
        // anonymous memory do not.
        if !line.path.starts_with(b"/") {
            continue;
        }
        let (path, deleted) = strip_deleted(line.path);
        let path = Path::new(OsStr::from_bytes(path));
        let found = objects
            .iter_mut()
            .find(|o| o.inode == line.inode && o.deleted == deleted && o.path == path);
        match found {
            Some(object) => object.ranges.push(line.range),
            None => objects.push(MappedObject {
                path: path.to_owned(),
                deleted,
                contents: None,
                inode: line.inode,
                base: 0,
                base_offset: 0,
                file_offset_zero_start: None,
                ranges: vec![line.range],
            }),
        }
    }
    for object in &mut objects {
        object.ranges.sort_by_key(|r| r.start);
        let lowest = object.ranges[0];
        object.base = lowest.start;
        object.base_offset = lowest.offset;
        object.file_offset_zero_start = object
            .ranges
            .iter()
            .find(|r| r.offset == 0)
            .map(|r| r.start);
    }
    objects.sort_by_key(|o| (Some(o.path.as_path()) != exe, o.base));
    objects
}

/// The path of the process's executable, as /proc/PID/exe names it, without
/// a ` (deleted)` mark (to open a deleted executable, open /proc/PID/exe).
pub(crate) fn exe_path(pid: i32) -> Result<PathBuf> {
    let link = fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| proc_error(pid, e, false))?;
    let (path, _) = strip_deleted(link.as_os_str().as_bytes());
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

/// Reads and groups the process's maps.
pub(crate) fn mapped_objects(pid: i32) -> Result<Vec<MappedObject>> {
    let path = format!("/proc/{pid}/maps");
    let maps = fs::read(&path).map_err(|e| proc_error(pid, e, true))?;
    // A kernel thread or a zombie has no executable; list the rest anyway.
    let exe = exe_path(pid).ok();
    let mut objects = group(&maps, exe.as_deref());
    // The device of each file, read once, where the process's root is
    // not ours (the only place it is compared).
    let foreign = root_is_foreign(pid);
    let devices: HashMap<(u64, &[u8]), u64> = if foreign {
        maps.split(|&b| b == b'\n')
            .filter_map(parse_line)
            .filter_map(|l| Some(((l.inode, l.path), l.dev?)))
            .collect()
    } else {
        HashMap::new()
    };
    for object in objects.iter_mut() {
        object.contents = if object.deleted {
            mapping_link(pid, object)
        } else if foreign {
            let key = (object.inode, object.path.as_os_str().as_bytes());
            foreign_file(pid, object, devices.get(&key).copied())
        } else {
            None
        };
    }
    Ok(objects)
}

/// The kernel's link to the mapping of `object` (opening it needs
/// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
fn mapping_link(pid: i32, object: &MappedObject) -> Option<PathBuf> {
    object
        .ranges
        .first()
        .map(|r| PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", r.start, r.end)))
}

/// Whether process `pid` has a root directory other than ours (a chroot, a
/// container's mount namespace). Where that cannot be told, it is taken for
/// ours.
pub(crate) fn root_is_foreign(pid: i32) -> bool {
    let id = |p: &str| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    match (id(&format!("/proc/{pid}/root")), id("/")) {
        (Some(theirs), Some(ours)) => theirs != ours,
        _ => false,
    }
}

/// `path` as process `pid` names it (in its own root, as its memory holds
/// paths), as we reach it: through /proc/PID/root where its root is not ours
/// and the file is there; else `path` itself.
pub fn in_process_root(pid: i32, path: &Path) -> PathBuf {
    if !path.is_absolute() || !root_is_foreign(pid) {
        return path.to_path_buf();
    }
    let rooted = rooted(pid, path);
    if fs::symlink_metadata(&rooted).is_ok() {
        rooted
    } else {
        path.to_path_buf()
    }
}

/// `path` with its links resolved, except where it goes through /proc (a
/// process's root, a mapping's link): resolving those would leave the
/// process's root, or name a file that is gone.
pub(crate) fn canonical(path: &Path) -> io::Result<PathBuf> {
    if path.starts_with("/proc") {
        fs::metadata(path).map(|_| path.to_path_buf())
    } else {
        path.canonicalize()
    }
}

fn rooted(pid: i32, path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    Path::new(&format!("/proc/{pid}/root")).join(relative)
}

/// Where a file mapped by a process with a root of its own is read from
/// here. The kernel names a mapped file relative to our root where our root
/// reaches it (a chroot below ours: the path is the file), else relative to
/// the root of the process's mount namespace (a container: the path is the
/// process's own, and a file at the same path here is another one, another
/// libc say). So each place is taken only where it holds the mapped file
/// (its device and inode): the path itself, then the path through
/// /proc/PID/root, then the kernel's link to the mapping; last the path
/// through the process's root even so (an overlay file system reports the
/// device of its layer in the maps, its own to stat).
fn foreign_file(pid: i32, object: &MappedObject, dev: Option<u64>) -> Option<PathBuf> {
    let holds = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.ino() == object.inode && dev.is_none_or(|d| m.dev() == d))
    };
    if holds(&object.path) {
        return None;
    }
    let rooted = rooted(pid, &object.path);
    if holds(&rooted) {
        return Some(rooted);
    }
    if let Some(link) = mapping_link(pid, object).filter(|l| fs::metadata(l).is_ok()) {
        return Some(link);
    }
    fs::metadata(&rooted).is_ok().then_some(rooted)
}

/// Where the kernel's vDSO is mapped in process `pid`.
pub(crate) fn vdso(pid: i32) -> Option<std::ops::Range<u64>> {
    let maps = fs::read(format!("/proc/{pid}/maps")).ok()?;
    maps.split(|&b| b == b'\n')
        .filter_map(parse_line)
        .find(|line| line.path == b"[vdso]")
        .map(|line| line.range.start..line.range.end)
}

/// Maps an error from a /proc/PID file to the user-facing category.
/// `known`: the process existed when we started with it.
pub(crate) fn proc_error(pid: i32, err: io::Error, known: bool) -> Error {
    match err.raw_os_error() {
        _ if procfs::is_gone(&err) && known => Error::ProcessGone { pid },
        _ if procfs::is_gone(&err) => Error::NoSuchProcess { pid },
        Some(code @ (libc::EACCES | libc::EPERM)) => {
            diagnose::permission_error(pid, nix::errno::Errno::from_raw(code))
        }
        _ => Error::Io {
            path: PathBuf::from(format!("/proc/{pid}")),
            source: err,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &[u8] = b"\
5581a0a00000-5581a0a02000 r--p 00000000 08:01 1311 /usr/bin/my prog
5581a0a02000-5581a0a06000 r-xp 00002000 08:01 1311 /usr/bin/my prog
5581a0a06000-5581a0a08000 rw-p 00005000 08:01 1311 /usr/bin/my prog
5581a1000000-5581a1021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 r--p 00000000 08:01 2222                       /usr/lib/libc.so.6
7f0000001000-7f0000100000 r-xp 00001000 08:01 2222                       /usr/lib/libc.so.6
7f0000100000-7f0000101000 rw-p 00000000 00:00 0 
7f0000200000-7f0000201000 rw-s 00000000 00:05 3333                       /dev/shm/seg (deleted)
7f0000300000-7f0000301000 r--p 00000000 08:01 4444                       /opt/lib/old.so (deleted)
7f0000301000-7f0000302000 r--p 00000000 08:01 5555                       /opt/lib/old.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn line_fields() {
        let l = parse_line(b"7f0000200000-7f0000201000 rw-s 00001000 00:05 3333   /a b").unwrap();
        assert_eq!(l.range.start, 0x7f0000200000);
        assert_eq!(l.range.end, 0x7f0000201000);
        assert_eq!(l.range.offset, 0x1000);
        assert_eq!(
            l.range.perms,
            Perms {
                read: true,
                write: true,
                execute: false,
                shared: true
            }
        );
        assert_eq!(l.inode, 3333);
        assert_eq!(l.dev, Some(nix::sys::stat::makedev(0, 5)));
        assert_eq!(l.path, b"/a b");
        let l = parse_line(b"1000-2000 r--p 00000000 fd:1a 7 /lib/x.so").unwrap();
        assert_eq!(l.dev, Some(nix::sys::stat::makedev(0xfd, 0x1a)));
        let anon = parse_line(b"7f0000100000-7f0000101000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.path, b"");
        assert_eq!(parse_line(b""), None);
        assert_eq!(parse_line(b"garbage"), None);
    }

    #[test]
    fn our_own_root_keeps_paths_as_they_are() {
        let me = std::process::id() as i32;
        assert!(!root_is_foreign(me));
        let libc = Path::new("/proc/self/exe");
        assert_eq!(in_process_root(me, libc), libc);
        // Every file we map is read at its own path.
        let objects = mapped_objects(me).unwrap();
        assert!(objects.iter().all(|o| o.deleted || o.contents.is_none()));
    }

    #[test]
    fn grouped_with_exe_first() {
        // A library mapped below the executable: the executable still comes first.
        let mut maps = b"1000-2000 r--p 00000000 08:01 7 /lib/low.so\n".to_vec();
        maps.extend_from_slice(MAPS);
        let objects = group(&maps, Some(Path::new("/usr/bin/my prog")));
        let names: Vec<_> = objects
            .iter()
            .map(|o| (o.path.to_str().unwrap(), o.deleted))
            .collect();
        assert_eq!(
            names,
            [
                ("/usr/bin/my prog", false),
                ("/lib/low.so", false),
                ("/usr/lib/libc.so.6", false),
                ("/dev/shm/seg", true),
                ("/opt/lib/old.so", true),
                ("/opt/lib/old.so", false),
            ]
        );
        let exe = &objects[0];
        assert_eq!(exe.base, 0x5581a0a00000);
        assert_eq!(exe.base_offset, 0);
        assert_eq!(exe.file_offset_zero_start, Some(0x5581a0a00000));
        assert_eq!(exe.ranges.len(), 3);
        assert_eq!(exe.address_of_offset(0x2010), Some(0x5581a0a02010));
        assert_eq!(exe.address_of_offset(0x9000), None);
        assert!(exe.contains(0x5581a0a07fff));
        assert!(!exe.contains(0x5581a0a08000));
        let libc = &objects[2];
        assert_eq!(libc.ranges.len(), 2, "the anonymous bss line is not libc's");
    }

    #[test]
    fn lowest_mapping_without_offset_zero() {
        let maps =
            b"3000-4000 r-xp 00002000 08:01 9 /x.so\n5000-6000 r--p 00004000 08:01 9 /x.so\n";
        let objects = group(maps, None);
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].base, 0x3000);
        assert_eq!(objects[0].base_offset, 0x2000);
        assert_eq!(objects[0].file_offset_zero_start, None);
        assert_eq!(objects[0].address_of_offset(0x4800), Some(0x5800));
    }

    #[test]
    fn our_own_maps() {
        let pid = std::process::id() as i32;
        let objects = mapped_objects(pid).unwrap();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(objects[0].path, exe);
        assert_eq!(exe_path(pid).unwrap(), exe);
        assert!(objects[0].file_offset_zero_start.is_some());
        assert!(matches!(
            exe_path(i32::MAX),
            Err(Error::NoSuchProcess { pid: i32::MAX })
        ));
    }
}
