//! Embedding the host in a debugger of your own.
//!
//! A debugger already controls its processes and knows their memory and
//! symbols. To show their MPI message queues it needs no ptrace of ours:
//! it implements two traits for its own process model, [`Target`] (memory
//! and process facts) and [`ImageSymbols`] (symbol and type lookups), and
//! drives any message-queue DLL through a [`Session`], which returns the
//! owned model (communicators, queues, operations).
//!
//! This example is such a debugger in miniature: its "process model" reads
//! `/proc/PID/mem` with `pread` and parses `/proc/PID/maps` itself, and it
//! answers lookups with the host's symbol reader over the load addresses it
//! computed. It reads the process while it runs (a real debugger would
//! have it stopped).
//!
//! ```text
//! cargo run -p mqs-core --example embed -- PID DLL
//! ```
//! prints the process's communicators and queues as JSON.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use mqs_core::dll::{Dll, Session};
use mqs_core::interface::{
    Environment, ImageSymbols, Liveness, MappedObject, MappedRange, Perms, Target, Thread,
    TypeLayout,
};
use mqs_core::symbols::{load_bias, SymbolIndex};
use mqs_core::{Error, Result};

/// The debugger's own view of a process.
struct MyProcess {
    pid: i32,
    mem: File,
}

impl MyProcess {
    fn open(pid: i32) -> Result<Self> {
        let path = PathBuf::from(format!("/proc/{pid}/mem"));
        let mem = File::open(&path).map_err(|source| Error::Io { path, source })?;
        Ok(Self { pid, mem })
    }

    /// The lowest mapping of each file, from /proc/PID/maps.
    fn lowest_mappings(&self) -> Result<Vec<(PathBuf, u64, u64)>> {
        let path = PathBuf::from(format!("/proc/{}/maps", self.pid));
        let maps = std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })?;
        let mut seen: Vec<(PathBuf, u64, u64)> = Vec::new();
        for line in maps.lines() {
            let fields: Vec<&str> = line.splitn(6, ' ').collect();
            let (Some(range), Some(offset), Some(file)) = (
                fields.first(),
                fields.get(2),
                fields.get(5).map(|f| f.trim()),
            ) else {
                continue;
            };
            if !file.starts_with('/') || seen.iter().any(|(p, _, _)| p.as_os_str() == file) {
                continue;
            }
            let start = range.split('-').next().unwrap_or("0");
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
            seen.push((PathBuf::from(file), hex(start), hex(offset)));
        }
        Ok(seen)
    }
}

impl Target for MyProcess {
    fn pid(&self) -> i32 {
        self.pid
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let n = self.mem.read_at(buf, addr).unwrap_or(0);
        if n == buf.len() {
            return Ok(());
        }
        Err(Error::Read {
            pid: self.pid,
            addr,
            len: buf.len(),
            detail: "not readable".into(),
        })
    }

    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        // The session never asks: the symbols below already know where
        // every file is mapped.
        Ok(self
            .lowest_mappings()?
            .into_iter()
            .map(|(path, start, offset)| MappedObject {
                path,
                deleted: false,
                contents: None,
                inode: 0,
                base: start,
                base_offset: offset,
                file_offset_zero_start: (offset == 0).then_some(start),
                ranges: vec![MappedRange {
                    start,
                    end: start + 1,
                    offset,
                    perms: Perms::default(),
                }],
            })
            .collect())
    }

    fn executable(&self) -> Result<PathBuf> {
        let path = PathBuf::from(format!("/proc/{}/exe", self.pid));
        std::fs::read_link(&path).map_err(|source| Error::Io { path, source })
    }

    fn environment(&self) -> Result<Environment> {
        Ok(Environment::default())
    }

    fn threads(&self) -> Result<Vec<Thread>> {
        Ok(Vec::new())
    }

    fn liveness(&self) -> Liveness {
        Liveness::Running
    }
}

/// The debugger's symbol lookups: here the host's own reader, over the load
/// addresses the debugger worked out itself.
struct MySymbols(SymbolIndex);

impl ImageSymbols for MySymbols {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.0.find_symbol(name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.0.find_function(name)
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        let t = self.0.find_type(name)?;
        Some(TypeLayout {
            size: t.size,
            fields: t.fields.clone(),
            handle: None,
        })
    }
}

fn run(pid: i32, dll: &str) -> Result<String> {
    let process = MyProcess::open(pid)?;
    let mut objects = Vec::new();
    for (path, start, offset) in process.lowest_mappings()? {
        // Files that are not ELF (locale archives, shared memory) are skipped.
        if let Ok(bias) = load_bias(&path, start, offset) {
            objects.push((path, bias));
        }
    }
    let symbols = MySymbols(SymbolIndex::new(objects, Vec::new())?);
    let executable = process.executable()?.display().to_string();

    let dll = Dll::load(std::path::Path::new(dll))?;
    let mut session = Session::new(dll)?;
    let image = session.add_image(&executable, Box::new(symbols))?;
    // The rank is what the debugger knows; -1 if it does not.
    let id = session.add_process(image, Box::new(process), -1, 8)?;
    let (communicators, _stats) = session.dump(id);
    serde_json::to_string_pretty(&communicators).map_err(|e| Error::Io {
        path: "the dump as JSON".into(),
        source: e.into(),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(pid), Some(dll)) = (args.first().and_then(|p| p.parse().ok()), args.get(1)) else {
        eprintln!("usage: embed PID DLL");
        std::process::exit(2);
    };
    match run(pid, dll) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("embed: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
