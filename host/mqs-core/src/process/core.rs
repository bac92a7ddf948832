//! An ELF core file as a [`Target`]: from gdb's `gcore` or from the
//! kernel (`core_pattern`).
//!
//! - Memory: the `PT_LOAD` segments. A core leaves out pages it can get
//!   back from files (the kernel's default `coredump_filter` skips private
//!   file-backed pages that were never written, such as code and read-only
//!   data); those are read from the mapped file, found through the
//!   `NT_FILE` note, as are mappings with no segment at all (gdb's gcore
//!   leaves read-only file mappings out whole). Other pages past a
//!   segment's file size were never touched and read as zeros.
//! - Mapped objects: `NT_FILE` (path and file offset of every mapping), with
//!   permissions from the segment covering each mapping.
//! - Threads and registers: one `NT_PRSTATUS` per thread.
//! - Environment: the process's initial stack, found through the auxiliary
//!   vector (`NT_AUXV`), which the kernel places right after `envp`.
//!
//! Only x86-64 cores are read (the registers are `user_regs_struct`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

use crate::interface::{
    read_c_string, Environment, Liveness, MappedObject, MappedRange, Perms, Registers, Target,
    Thread, PAGE_SIZE,
};
use crate::{Error, Result};

/// Where to find the files a core names, when they are not where the
/// process saw them.
#[derive(Debug, Clone, Default)]
pub struct CoreOptions {
    /// The program, if it is not at the path the core names.
    pub executable: Option<PathBuf>,
    /// A directory that holds the process's files under their original
    /// paths (a copy of the machine's root, say).
    pub sysroot: Option<PathBuf>,
}

/// One `PT_LOAD` segment.
#[derive(Debug, Clone, Copy)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
    perms: Perms,
}

/// One entry of `NT_FILE`.
#[derive(Debug, Clone)]
struct FileMapping {
    start: u64,
    end: u64,
    /// Byte offset in the file.
    offset: u64,
    path: PathBuf,
}

/// Most entries believed of a note (a corrupt count must not allocate
/// gigabytes), and most environment strings walked.
const MAX_ENTRIES: u64 = 1 << 20;
const MAX_ENV: usize = 1 << 16;
const MAX_ENV_STRING: usize = 1 << 17;

const AT_NULL: u64 = 0;
const AT_PHDR: u64 = 3;
const AT_ENTRY: u64 = 9;
const AT_EXECFN: u64 = 31;

/// An opened core file.
pub struct CoreFile {
    path: PathBuf,
    map: Mmap,
    pid: i32,
    segments: Vec<Segment>,
    files: Vec<FileMapping>,
    threads: Vec<Thread>,
    auxv: Vec<(u64, u64)>,
    options: CoreOptions,
    /// The mapped files opened so far, by path (None: could not be opened).
    opened: RefCell<HashMap<PathBuf, Option<File>>>,
}

impl std::fmt::Debug for CoreFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreFile")
            .field("path", &self.path)
            .field("pid", &self.pid)
            .field("segments", &self.segments.len())
            .field("files", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl CoreFile {
    /// Opens and indexes `path`. Fails with [`Error::BadInput`] for a file
    /// that is not an x86-64 ELF core.
    pub fn open(path: &Path, options: CoreOptions) -> Result<Self> {
        let bad = |detail: &str| Error::BadInput {
            path: path.to_path_buf(),
            detail: detail.to_string(),
        };
        let file = File::open(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        // SAFETY: the core is mapped read-only; a file truncated under us
        // would fault, as for every reader of a mapped file.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let data: &[u8] = &map;
        let header = elf::FileHeader64::<object::Endianness>::parse(data)
            .map_err(|_| bad("not a 64-bit ELF file"))?;
        let endian = header.endian().map_err(|_| bad("not a 64-bit ELF file"))?;
        if header.e_type(endian) != elf::ET_CORE {
            return Err(bad("an ELF file, but not a core file"));
        }
        if header.e_machine(endian) != elf::EM_X86_64 {
            return Err(bad(&format!(
                "a core of machine type {}; only x86-64 cores can be read",
                header.e_machine(endian)
            )));
        }
        let phdrs = header
            .program_headers(endian, data)
            .map_err(|_| bad("its program headers are corrupt"))?;
        let mut segments = Vec::new();
        let mut files = Vec::new();
        let mut threads = Vec::new();
        let mut auxv = Vec::new();
        let mut process_pid = None;
        let mut process_name = None;
        for phdr in phdrs {
            match phdr.p_type(endian) {
                elf::PT_LOAD => {
                    let flags = phdr.p_flags(endian);
                    segments.push(Segment {
                        vaddr: phdr.p_vaddr(endian),
                        memsz: phdr.p_memsz(endian),
                        offset: phdr.p_offset(endian),
                        filesz: phdr.p_filesz(endian),
                        perms: Perms {
                            read: flags.0 & elf::PF_R.0 != 0,
                            write: flags.0 & elf::PF_W.0 != 0,
                            execute: flags.0 & elf::PF_X.0 != 0,
                            shared: false,
                        },
                    });
                }
                elf::PT_NOTE => {
                    let Ok(Some(mut notes)) = phdr.notes(endian, data) else {
                        return Err(bad("its notes are corrupt"));
                    };
                    while let Ok(Some(note)) = notes.next() {
                        let desc = note.desc();
                        match note.n_type(endian) {
                            elf::NT_PRSTATUS => {
                                if let Some(thread) = prstatus(desc) {
                                    threads.push(thread);
                                }
                            }
                            elf::NT_PRPSINFO => {
                                // pr_pid at 24, pr_fname[16] at 40 (x86-64).
                                process_pid = read_i32(desc, 24);
                                process_name = desc.get(40..56).map(c_str);
                            }
                            elf::NT_FILE => {
                                files = nt_file(desc).ok_or_else(|| {
                                    bad("its NT_FILE note (the mapped files) is corrupt")
                                })?
                            }
                            elf::NT_AUXV => auxv = pairs(desc),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if segments.is_empty() {
            return Err(bad("it holds no memory (no PT_LOAD segment)"));
        }
        segments.sort_by_key(|s| s.vaddr);
        let pid = process_pid
            .or_else(|| threads.first().map(|t| t.tid))
            .unwrap_or(0);
        if let (Some(name), Some(main)) = (process_name, threads.iter_mut().find(|t| t.tid == pid))
        {
            main.name = Some(name);
        }
        Ok(Self {
            path: path.to_path_buf(),
            map,
            pid,
            segments,
            files,
            threads,
            auxv,
            options,
            opened: RefCell::new(HashMap::new()),
        })
    }

    /// The core file's own path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the bytes of a file the process had mapped are read from here.
    fn local_path(&self, original: &Path) -> PathBuf {
        if let Some(exe) = &self.options.executable {
            if Some(original) == self.executable_mapping().map(|m| m.path.as_path()) {
                return exe.clone();
            }
        }
        match &self.options.sysroot {
            Some(root) => root.join(original.strip_prefix("/").unwrap_or(original)),
            None => original.to_path_buf(),
        }
    }

    fn aux(&self, key: u64) -> Option<u64> {
        self.auxv.iter().find(|&&(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The NT_FILE entry of the program: the one holding its entry point
    /// (or its program headers).
    fn executable_mapping(&self) -> Option<&FileMapping> {
        [AT_ENTRY, AT_PHDR]
            .iter()
            .filter_map(|&k| self.aux(k))
            .find_map(|addr| self.files.iter().find(|f| f.start <= addr && addr < f.end))
    }

    fn segment_at(&self, addr: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.vaddr <= addr);
        let s = self.segments.get(i.checked_sub(1)?)?;
        (addr - s.vaddr < s.memsz).then_some(s)
    }

    /// Reads from a mapped file, the part of `buf` the file has; the rest
    /// (a mapping past the end of its file) reads as zeros.
    fn read_mapped_file(&self, mapping: &FileMapping, addr: u64, buf: &mut [u8]) -> Result<()> {
        let local = self.local_path(&mapping.path);
        let mut opened = self.opened.borrow_mut();
        let file = opened
            .entry(local.clone())
            .or_insert_with(|| File::open(&local).ok());
        let Some(file) = file else {
            return Err(self.read_error(
                addr,
                buf.len(),
                format!(
                    "the core left this page out and its file {} cannot be opened \
                     (give --sysroot or --exe)",
                    local.display()
                ),
            ));
        };
        let at = mapping.offset + (addr - mapping.start);
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(self.read_error(
                        addr,
                        buf.len(),
                        format!("{}: {e}", local.display()),
                    ))
                }
            }
        }
        buf[done..].fill(0);
        Ok(())
    }

    fn read_error(&self, addr: u64, len: usize, detail: String) -> Error {
        Error::Read {
            pid: self.pid,
            addr,
            len,
            detail,
        }
    }

    /// The initial stack's environment: the auxiliary vector sits right
    /// after `envp`'s NULL, and `envp` right after `argv`'s NULL.
    fn initial_environment(&self) -> Option<Environment> {
        let execfn = self.aux(AT_EXECFN)?;
        let stack = *self.segment_at(execfn)?;
        let image: Vec<u8> = self
            .auxv
            .iter()
            .take(4)
            .flat_map(|&(k, v)| k.to_le_bytes().into_iter().chain(v.to_le_bytes()))
            .collect();
        let start = usize::try_from(stack.offset).ok()?;
        let len = usize::try_from(stack.filesz.min(stack.memsz)).ok()?;
        let bytes = self.map.get(start..start.checked_add(len)?)?;
        // The vector is 8-aligned and lies below AT_EXECFN's string.
        let limit = usize::try_from(execfn - stack.vaddr).ok()?.min(bytes.len());
        let found = (0..limit.saturating_sub(image.len()))
            .step_by(8)
            .rev()
            .find(|&i| bytes[i..].starts_with(&image))?;
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?))
        };
        // Walk back over envp from its NULL.
        let mut at = found.checked_sub(8)?;
        if word(at)? != 0 {
            return None;
        }
        let mut pointers = Vec::new();
        while pointers.len() < MAX_ENV {
            at = at.checked_sub(8)?;
            match word(at)? {
                0 => break,
                p => pointers.push(p),
            }
        }
        pointers.reverse();
        let strings: Vec<Vec<u8>> = pointers
            .into_iter()
            .filter_map(|p| read_c_string(self, p, MAX_ENV_STRING).ok())
            .map(String::into_bytes)
            .collect();
        Some(Environment::from_strings(strings.iter().map(Vec::as_slice)))
    }
}

/// The auxiliary vector's key for the vDSO's ELF header.
const AT_SYSINFO_EHDR: u64 = 33;

impl Target for CoreFile {
    fn pid(&self) -> i32 {
        self.pid
    }

    fn vdso(&self) -> Option<std::ops::Range<u64>> {
        // The kernel writes the vDSO into the core: the segment holding
        // the header the auxiliary vector names.
        let start = self.aux(AT_SYSINFO_EHDR)?;
        self.segments
            .iter()
            .find(|s| s.vaddr == start && s.filesz > 0)
            .map(|s| s.vaddr..s.vaddr + s.filesz)
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr
                .checked_add(done as u64)
                .ok_or_else(|| self.read_error(addr, buf.len(), "range wraps around".into()))?;
            let Some(seg) = self.segment_at(at) else {
                // gdb's gcore leaves read-only file mappings out whole (no
                // segment at all, where the kernel writes an empty one):
                // NT_FILE still names the file that holds them.
                let Some(mapping) = self.files.iter().find(|f| f.start <= at && at < f.end) else {
                    return Err(self.read_error(
                        addr,
                        buf.len(),
                        format!("no memory at {at:#x} in the core"),
                    ));
                };
                let next = self.segments[self.segments.partition_point(|s| s.vaddr <= at)..]
                    .first()
                    .map_or(u64::MAX, |s| s.vaddr);
                let piece = usize::try_from(mapping.end.min(next) - at)
                    .unwrap_or(usize::MAX)
                    .min(buf.len() - done);
                self.read_mapped_file(mapping, at, &mut buf[done..done + piece])?;
                done += piece;
                continue;
            };
            let into_seg = at - seg.vaddr;
            // Stop at the end of the segment and at the end of the file part.
            let seg_left = seg.memsz - into_seg;
            let piece = if into_seg < seg.filesz {
                (seg.filesz - into_seg).min(seg_left)
            } else {
                // Page by page beyond the file part: mappings change at pages.
                (PAGE_SIZE - at % PAGE_SIZE).min(seg_left)
            };
            let piece = usize::try_from(piece)
                .unwrap_or(usize::MAX)
                .min(buf.len() - done);
            let out = &mut buf[done..done + piece];
            if into_seg < seg.filesz {
                let from = usize::try_from(seg.offset + into_seg).ok();
                match from.and_then(|f| self.map.get(f..f + piece)) {
                    Some(bytes) => out.copy_from_slice(bytes),
                    None => {
                        return Err(self.read_error(
                            addr,
                            buf.len(),
                            "the core file is truncated".into(),
                        ))
                    }
                }
            } else if let Some(mapping) = self.files.iter().find(|f| f.start <= at && at < f.end) {
                self.read_mapped_file(mapping, at, out)?;
            } else {
                // Anonymous memory the process never wrote.
                out.fill(0);
            }
            done += piece;
        }
        Ok(())
    }

    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        let exe = self.executable_mapping().map(|m| m.path.clone());
        let mut objects: Vec<MappedObject> = Vec::new();
        for f in &self.files {
            let perms = self
                .segment_at(f.start)
                .map(|s| s.perms)
                .unwrap_or_default();
            let range = MappedRange {
                start: f.start,
                end: f.end,
                offset: f.offset,
                perms,
            };
            match objects.iter_mut().find(|o| o.path == f.path) {
                Some(o) => o.ranges.push(range),
                None => {
                    let local = self.local_path(&f.path);
                    objects.push(MappedObject {
                        path: f.path.clone(),
                        deleted: false,
                        contents: (local != f.path).then_some(local),
                        inode: 0,
                        base: 0,
                        base_offset: 0,
                        file_offset_zero_start: None,
                        ranges: vec![range],
                    })
                }
            }
        }
        for o in &mut objects {
            o.ranges.sort_by_key(|r| r.start);
            o.base = o.ranges[0].start;
            o.base_offset = o.ranges[0].offset;
            o.file_offset_zero_start = o.ranges.iter().find(|r| r.offset == 0).map(|r| r.start);
        }
        objects.sort_by_key(|o| (Some(&o.path) != exe.as_ref(), o.base));
        Ok(objects)
    }

    fn executable(&self) -> Result<PathBuf> {
        if let Some(exe) = &self.options.executable {
            return Ok(exe.clone());
        }
        self.executable_mapping()
            .map(|m| m.path.clone())
            .ok_or_else(|| Error::BadInput {
                path: self.path.clone(),
                detail: "the core does not say which file is the program (give --exe)".into(),
            })
    }

    fn environment(&self) -> Result<Environment> {
        Ok(self.initial_environment().unwrap_or_default())
    }

    fn threads(&self) -> Result<Vec<Thread>> {
        Ok(self.threads.clone())
    }

    fn liveness(&self) -> Liveness {
        Liveness::Offline
    }
}

/// A thread from an x86-64 `elf_prstatus`: pr_pid at 32, pr_reg at 112.
fn prstatus(desc: &[u8]) -> Option<Thread> {
    Some(Thread {
        tid: read_i32(desc, 32)?,
        name: None,
        state: None,
        registers: Registers::from_le_bytes(desc.get(112..112 + Registers::COUNT * 8)?),
    })
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
}

fn pairs(bytes: &[u8]) -> Vec<(u64, u64)> {
    let w: Vec<u64> = words(bytes).collect();
    w.chunks_exact(2)
        .map(|p| (p[0], p[1]))
        .take_while(|&(k, _)| k != AT_NULL)
        .collect()
}

fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `NT_FILE`: count, page size, count × (start, end, page offset), then
/// count NUL-terminated paths.
fn nt_file(desc: &[u8]) -> Option<Vec<FileMapping>> {
    let mut w = words(desc);
    let count = w.next()?;
    let page_size = w.next()?;
    if count > MAX_ENTRIES {
        return None;
    }
    let count = usize::try_from(count).ok()?;
    let mut ranges = Vec::with_capacity(count);
    for _ in 0..count {
        let (start, end, pages) = (w.next()?, w.next()?, w.next()?);
        ranges.push((start, end, pages.checked_mul(page_size)?));
    }
    let names_at = 16 + count * 24;
    let mut names = desc.get(names_at..)?.split(|&b| b == 0);
    ranges
        .into_iter()
        .map(|(start, end, offset)| {
            let name = names.next()?;
            Some(FileMapping {
                start,
                end,
                offset,
                path: PathBuf::from(std::ffi::OsStr::from_bytes(name)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_file_entries() {
        let mut desc = Vec::new();
        for w in [2u64, 4096, 0x1000, 0x3000, 0, 0x5000, 0x6000, 2] {
            desc.extend_from_slice(&w.to_le_bytes());
        }
        desc.extend_from_slice(b"/bin/a\0/lib/b.so\0");
        let files = nt_file(&desc).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[1].path, PathBuf::from("/lib/b.so"));
        assert_eq!(files[1].offset, 2 * 4096);
        assert_eq!((files[0].start, files[0].end), (0x1000, 0x3000));
        // A count larger than the note is refused, not believed.
        desc[0] = 9;
        assert!(nt_file(&desc).is_none());
    }

    #[test]
    fn auxv_pairs_stop_at_null() {
        let mut desc = Vec::new();
        for w in [AT_ENTRY, 0x401000, AT_EXECFN, 0x7ff0, AT_NULL, 0, 77, 77] {
            desc.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(
            pairs(&desc),
            vec![(AT_ENTRY, 0x401000), (AT_EXECFN, 0x7ff0)]
        );
    }

    #[test]
    fn not_a_core() {
        let exe = std::env::current_exe().unwrap();
        let err = CoreFile::open(&exe, CoreOptions::default()).unwrap_err();
        assert!(matches!(err, Error::BadInput { .. }), "{err}");
        assert!(err.to_string().contains("not a core file"), "{err}");
    }
}
