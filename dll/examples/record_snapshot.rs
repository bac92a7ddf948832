//! Records a snapshot of a live, hung Open MPI or MPICH rank for the replay
//! and fuzz tests:
//! the memory the DLL reads while dumping it, with the types and symbols a
//! debugger reports, and the dump itself.
//!
//! ```text
//! gdb -batch -nx -p PID -x dll/tests/data/dump_types.py   (MQS_TYPES_OUT=types.json)
//!   (MPICH: dll/tests/data/mpich/dump_types.py)
//! cargo run -p mqs-dll --example record_snapshot -- PID types.json out.json "description"
//! ```
//! The rank is stopped (ptrace) while it is read, and let go afterwards.

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::rc::Rc;

use common::host::{self, Image, Process};
use common::snapshot::Snapshot;
use mqs_dll::access::ProcessAccess;
use nix::sys::ptrace;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// Live memory through /proc/PID/mem, remembering every successful read.
struct LiveMemory {
    file: File,
    reads: RefCell<BTreeMap<u64, Vec<u8>>>,
}

#[derive(Clone)]
struct Shared(Rc<LiveMemory>);

impl ProcessAccess for Shared {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> bool {
        if self.0.file.read_exact_at(buf, addr).is_err() {
            return false;
        }
        let mut reads = self.0.reads.borrow_mut();
        let slot = reads.entry(addr).or_default();
        if buf.len() > slot.len() {
            *slot = buf.to_vec();
        }
        true
    }

    fn target_to_host(&self, input: &[u8], output: &mut [u8]) {
        let n = input.len().min(output.len());
        output[..n].copy_from_slice(&input[..n]);
    }
}

fn rank_of(pid: i32) -> i32 {
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    env.split(|&b| b == 0)
        .find_map(|v| {
            // Open MPI's, else MPICH's (hydra's PMI).
            v.strip_prefix(b"OMPI_COMM_WORLD_RANK=")
                .or_else(|| v.strip_prefix(b"PMI_RANK="))
        })
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, pid, types, out, rest @ ..] = args.as_slice() else {
        return Err("usage: record_snapshot PID TYPES.json OUT.json [DESCRIPTION]".into());
    };
    let pid: i32 = pid.parse().map_err(|e| format!("bad pid: {e}"))?;
    let mut snapshot = Snapshot::load(Path::new(types))?;
    snapshot.description = rest.join(" ");
    snapshot.global_rank = rank_of(pid);

    ptrace::attach(Pid::from_raw(pid)).map_err(|e| format!("attach {pid}: {e}"))?;
    waitpid(Pid::from_raw(pid), None).map_err(|e| format!("waitpid {pid}: {e}"))?;
    let file = File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("/proc/{pid}/mem: {e}"));
    let result = file.map(|file| {
        let memory = Shared(Rc::new(LiveMemory {
            file,
            reads: RefCell::new(BTreeMap::new()),
        }));
        let mut image = Image::new(snapshot.fake_image());
        let (image_rc, message) = host::setup_image(&mut image);
        let mut process = Process::new(
            Box::new(memory.clone()),
            &mut image,
            snapshot.type_sizes,
            snapshot.global_rank,
        );
        let mut dump = host::dump(&mut process);
        dump.image_rc = image_rc;
        dump.image_message = message;
        host::destroy_image(&mut image);
        let reads = memory.0.reads.borrow().clone();
        (dump, reads)
    });
    let _ = ptrace::detach(Pid::from_raw(pid), None);
    let (dump, reads) = result?;
    snapshot.set_memory(&reads);
    snapshot.expected = Some(dump.to_json());
    snapshot.save(Path::new(out))?;
    eprintln!(
        "recorded {} regions ({} bytes) and {} communicators",
        snapshot.memory.len(),
        reads.values().map(Vec::len).sum::<usize>(),
        dump.comms.len()
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("record_snapshot: {e}");
        std::process::exit(1);
    }
}
