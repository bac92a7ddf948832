//! A stopped process as the tests keep it: each thread's registers and
//! the frames the live walk found, the bytes of memory that walk and the
//! argument reads took, and the objects the frames are in (the program
//! whole, system libraries cut down by `trim`). As text, one fact a line:
//!
//! ```text
//! # comment
//! object NAME BIAS LENGTH PATH   the object's file as NAME, loaded at BIAS
//! bytes OFFSET HEX               its non-zero bytes, the rest zero
//! thread TID NAME                a thread (NAME `-` when it has none)
//! registers HEX...               its 27 registers, user_regs_struct order
//! frame ADDRESS FUNCTION         what the live walk found (`-`: unnamed)
//! memory ADDRESS HEX             bytes read while it was stopped
//! ```
//!
//! A replay writes the objects into a directory of its own and serves the
//! rest as mqs-core's `SnapshotProcess`: nothing of the machine it runs on
//! is read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use mqs_core::hex::{decode, hex};
use mqs_core::interface::{Registers, Thread};
use mqs_core::process::SnapshotProcess;
use mqs_core::symbols::SymbolIndex;

/// Bytes per `bytes` or `memory` line.
const LINE: usize = 64;
/// Zeros this long end a run of `bytes`.
const ZEROS: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedObject {
    /// Its file name in a replay.
    pub(crate) name: String,
    /// Where the process had it.
    pub(crate) path: String,
    pub(crate) bias: u64,
    pub(crate) bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedThread {
    pub(crate) tid: i32,
    pub(crate) name: Option<String>,
    pub(crate) registers: Registers,
    /// The live walk's frames: address, and the function there.
    pub(crate) frames: Vec<(u64, Option<String>)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recording {
    pub(crate) comment: Vec<String>,
    /// The executable first.
    pub(crate) objects: Vec<RecordedObject>,
    pub(crate) threads: Vec<RecordedThread>,
    /// Runs of memory, by address, none overlapping.
    pub(crate) memory: Vec<(u64, Vec<u8>)>,
}

/// Pushes `bytes` as lines of `word` followed by the address and hex.
fn lines_of(out: &mut String, word: &str, at: u64, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(LINE).enumerate() {
        let address = at + (i * LINE) as u64;
        out.push_str(&format!("{word} {address:#x} {}\n", hex(chunk)));
    }
}

/// The runs of `bytes` that are not long stretches of zeros.
fn non_zero_runs(bytes: &[u8]) -> Vec<(usize, &[u8])> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            i += 1;
            continue;
        }
        let start = i;
        let mut zeros = 0;
        while i < bytes.len() && zeros < ZEROS {
            zeros = if bytes[i] == 0 { zeros + 1 } else { 0 };
            i += 1;
        }
        runs.push((start, &bytes[start..i - zeros]));
    }
    runs
}

fn number(word: Option<&str>) -> u64 {
    let word = word.expect("a number");
    match word.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => word.parse(),
    }
    .unwrap_or_else(|e| panic!("{word}: {e}"))
}

fn name(word: Option<&str>) -> Option<String> {
    word.filter(|w| *w != "-").map(str::to_owned)
}

impl Recording {
    pub(crate) fn to_text(&self) -> String {
        let mut out = String::new();
        for line in &self.comment {
            out.push_str(&format!("# {line}\n"));
        }
        for o in &self.objects {
            let (name, bias, len) = (&o.name, o.bias, o.bytes.len());
            // A program built in a scratch directory is named by its file
            // alone: the directory is this machine's, of no use elsewhere.
            let path = if Path::new(&o.path).starts_with(std::env::temp_dir()) {
                format!("<build>/{name}")
            } else {
                o.path.clone()
            };
            out.push_str(&format!("object {name} {bias:#x} {len} {path}\n"));
            for (offset, run) in non_zero_runs(&o.bytes) {
                lines_of(&mut out, "bytes", offset as u64, run);
            }
        }
        for t in &self.threads {
            let name = t.name.as_deref().unwrap_or("-");
            out.push_str(&format!("thread {} {name}\nregisters", t.tid));
            for v in t.registers.values {
                out.push_str(&format!(" {v:#x}"));
            }
            out.push('\n');
            for (address, function) in &t.frames {
                let function = function.as_deref().unwrap_or("-");
                out.push_str(&format!("frame {address:#x} {function}\n"));
            }
        }
        for (at, bytes) in &self.memory {
            lines_of(&mut out, "memory", *at, bytes);
        }
        out
    }

    pub(crate) fn parse(text: &str) -> Recording {
        let mut r = Recording::default();
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                r.comment.push(comment.to_owned());
                continue;
            }
            let mut words = line.split(' ');
            let what = words.next().unwrap_or_default();
            match what {
                "object" => {
                    let name = words.next().expect("a name").to_owned();
                    let bias = number(words.next());
                    let len = number(words.next()) as usize;
                    let path = words.collect::<Vec<_>>().join(" ");
                    let bytes = vec![0; len];
                    r.objects.push(RecordedObject {
                        name,
                        path,
                        bias,
                        bytes,
                    });
                }
                "bytes" => {
                    let at = number(words.next()) as usize;
                    let data = decode(words.next().unwrap_or_default()).expect("hex");
                    let o = r.objects.last_mut().expect("bytes of an object");
                    o.bytes[at..at + data.len()].copy_from_slice(&data);
                }
                "thread" => r.threads.push(RecordedThread {
                    tid: number(words.next()) as i32,
                    name: name(words.next()),
                    registers: Registers {
                        values: [0; Registers::COUNT],
                    },
                    frames: Vec::new(),
                }),
                "registers" => {
                    let t = r.threads.last_mut().expect("registers of a thread");
                    for (slot, word) in t.registers.values.iter_mut().zip(words) {
                        *slot = number(Some(word));
                    }
                }
                "frame" => {
                    let t = r.threads.last_mut().expect("frames of a thread");
                    t.frames.push((number(words.next()), name(words.next())));
                }
                "memory" => {
                    let at = number(words.next());
                    let data = decode(words.next().unwrap_or_default()).expect("hex");
                    match r.memory.last_mut() {
                        Some((start, run)) if *start + run.len() as u64 == at => {
                            run.extend_from_slice(&data)
                        }
                        _ => r.memory.push((at, data)),
                    }
                }
                "" => {}
                other => panic!("a recording has no {other:?} lines"),
            }
        }
        r
    }

    /// The recording as a process to walk.
    pub(crate) fn replay(&self) -> Replay {
        let dir = TempDir::new();
        let mut objects = Vec::new();
        for o in &self.objects {
            let path = dir.0.join(&o.name);
            std::fs::write(&path, &o.bytes).unwrap();
            objects.push((path, o.bias));
        }
        let mut target = SnapshotProcess {
            pid: 1,
            executable: objects[0].0.clone(),
            threads: self
                .threads
                .iter()
                .map(|t| Thread {
                    tid: t.tid,
                    name: t.name.clone(),
                    state: None,
                    registers: Some(t.registers),
                })
                .collect(),
            pointer_size: 8,
            ..Default::default()
        };
        for (at, bytes) in &self.memory {
            target.insert(*at, bytes);
        }
        let index = SymbolIndex::new(objects, Vec::new()).expect("the recorded objects load");
        Replay {
            target,
            index,
            _dir: dir,
        }
    }
}

/// A recording made a process again: memory and threads, and the index of
/// its objects' symbols.
#[derive(Debug)]
pub(crate) struct Replay {
    pub(crate) target: SnapshotProcess,
    pub(crate) index: SymbolIndex,
    _dir: TempDir,
}

/// A directory of this test process's own, removed when dropped.
#[derive(Debug)]
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mqs-stacks-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
