//! Recording the test program live: compiled with `cc`, run until both its
//! threads block, stopped through mqs-core's `LiveProcess`, walked by the
//! code under test through a target that keeps every byte it reads, and
//! let go; the child is killed and reaped whatever happens.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_core::interface::{Environment, Liveness, MappedObject, Target, Thread};
use mqs_core::process::{LiveProcess, Mode};
use mqs_core::symbols::SymbolIndex;

use super::recording::{RecordedObject, RecordedThread, Recording, TempDir};
use super::{look, trim, Level, Seen, SOURCE};

/// The system calls the program's threads block in: read and pause.
const BLOCKED_IN: [&str; 2] = ["0", "34"];
/// How long the program may take to get there.
const START_LIMIT: Duration = Duration::from_secs(20);

/// `stacks.c` compiled at `level` into `dir`. The source is named
/// relative to `dir`, and `dir` mapped away in the DWARF, so that the
/// binary is the same wherever it is built.
pub(crate) fn compile(level: Level, dir: &Path) -> PathBuf {
    std::fs::write(dir.join("stacks.c"), SOURCE).unwrap();
    let exe = dir.join(level.name());
    let status = Command::new("cc")
        .current_dir(dir)
        .args(["-g", level.flag(), "-pthread", "-o"])
        .arg(&exe)
        .arg(format!("-fdebug-prefix-map={}=.", dir.display()))
        .arg("stacks.c")
        .status()
        .expect("run cc");
    assert!(status.success(), "cc {} failed", level.flag());
    exe
}

/// A child process, killed (SIGKILL, by its pid) and reaped when dropped.
pub(crate) struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until every thread of `pid` is blocked in the calls the program
/// ends in, one thread in each.
fn wait_blocked(pid: u32) {
    let started = Instant::now();
    loop {
        let mut calls: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .filter_map(|t| {
                        let path = t.ok()?.path().join("syscall");
                        let line = std::fs::read_to_string(path).ok()?;
                        Some(line.split(' ').next()?.trim().to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        calls.sort();
        if calls == BLOCKED_IN {
            return;
        }
        assert!(
            started.elapsed() < START_LIMIT,
            "the program did not block in read and pause: {calls:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A target that keeps a copy of every successful read.
struct Kept<'a> {
    inner: &'a dyn Target,
    reads: RefCell<Vec<(u64, Vec<u8>)>>,
}

impl Target for Kept<'_> {
    fn pid(&self) -> i32 {
        self.inner.pid()
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> mqs_core::Result<()> {
        self.inner.read(addr, buf)?;
        self.reads.borrow_mut().push((addr, buf.to_vec()));
        Ok(())
    }

    fn mapped_objects(&self) -> mqs_core::Result<Vec<MappedObject>> {
        self.inner.mapped_objects()
    }

    fn executable(&self) -> mqs_core::Result<PathBuf> {
        self.inner.executable()
    }

    fn environment(&self) -> mqs_core::Result<Environment> {
        self.inner.environment()
    }

    fn threads(&self) -> mqs_core::Result<Vec<Thread>> {
        self.inner.threads()
    }

    fn liveness(&self) -> Liveness {
        self.inner.liveness()
    }
}

/// Reads merged into runs, none overlapping.
fn runs(mut reads: Vec<(u64, Vec<u8>)>) -> Vec<(u64, Vec<u8>)> {
    reads.sort_by_key(|(at, _)| *at);
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    for (at, bytes) in reads {
        let end = at + bytes.len() as u64;
        match out.last_mut() {
            Some((start, run)) if *start + run.len() as u64 >= at => {
                let run_end = *start + run.len() as u64;
                if end > run_end {
                    run.extend_from_slice(&bytes[(run_end - at) as usize..]);
                }
            }
            _ => out.push((at, bytes)),
        }
    }
    out
}

/// The separate debug file of an object, by its build-id, where the
/// system has one (mqs-core names the object's functions from it too).
fn debug_file(build_id: Option<String>) -> Option<Vec<u8>> {
    let id = build_id?;
    let path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    std::fs::read(path).ok()
}

/// The program at `level`, run, stopped and walked: what the code under
/// test saw of it, and its recording.
pub(crate) fn record(level: Level) -> (Seen, Recording) {
    let dir = TempDir::new();
    let exe = compile(level, dir.path());
    let child = Command::new(&exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the program");
    let child = Child(child);
    wait_blocked(child.0.id());
    let process = LiveProcess::attach(child.0.id() as i32, Mode::Stop).expect("stop it");
    let kept = Kept {
        inner: &process,
        reads: RefCell::new(Vec::new()),
    };
    let index = SymbolIndex::from_mapped(&process.mapped_objects().unwrap(), Vec::new()).unwrap();
    let seen = look(&kept, &index);
    let threads = process.threads().unwrap();
    let reads = kept.reads.into_inner();
    // Detached first, the child is an ordinary child to kill and reap.
    drop(process);
    drop(child);

    let mut objects: Vec<RecordedObject> = Vec::new();
    // The executable comes first, kept whole (its DWARF is read).
    for (i, (object, bias)) in index.objects().into_iter().enumerate() {
        let path = object.path().to_owned();
        let mut addresses: Vec<u64> = seen
            .threads
            .iter()
            .flat_map(|t| t.frames.iter())
            .map(|f| f.lookup.wrapping_sub(bias))
            .filter(|svma| object.contains_code(*svma))
            .collect();
        addresses.sort();
        addresses.dedup();
        let bytes = std::fs::read(&path).unwrap();
        let bytes = if i == 0 {
            bytes
        } else if addresses.is_empty() {
            continue;
        } else {
            trim::trim(
                &bytes,
                &addresses,
                debug_file(object.build_id_hex()).as_deref(),
            )
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        objects.push(RecordedObject {
            name,
            path: path.display().to_string(),
            bias,
            bytes,
        });
    }
    let recording = Recording {
        comment: vec![format!(
            "{} ({}): the process of tests/data/stacks.c stopped; remade by `cargo test -p \
             mqs-stacks -- --ignored record_test_data`",
            level.name(),
            level.flag()
        )],
        objects,
        threads: threads
            .iter()
            .zip(&seen.threads)
            .map(|(t, s)| RecordedThread {
                tid: t.tid,
                name: t.name.clone(),
                registers: t.registers.expect("a stopped thread's registers"),
                frames: s
                    .frames
                    .iter()
                    .map(|f| (f.address, f.function.clone()))
                    .collect(),
            })
            .collect(),
        memory: runs(reads),
    };
    (seen, recording)
}
