//! What two snapshots of a job share: the same operations (by buffer and
//! the request addresses the DLL gives), and the same place in MPI, so
//! that an analysis of it reports only what did not move in between.

use mqs_core::model::{JobDump, Operation, ProcessDump, Queue, Section};

fn identity(op: &Operation) -> (mqs_abi::OpStatus, i64, Option<i64>, i64, u64, Vec<String>) {
    let mut ids: Vec<String> = op
        .extra_text
        .iter()
        .flat_map(|l| l.split(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| w.len() > 2 && w.starts_with("0x"))
        .map(str::to_owned)
        .collect();
    ids.sort();
    (
        op.status,
        op.desired_local_rank,
        op.desired_tag,
        op.desired_length,
        op.buffer,
        ids,
    )
}

/// The MPI entry point the main thread is in, the one thing of a stack
/// compared between snapshots.
fn place(p: &ProcessDump) -> Option<(Option<String>, bool)> {
    let Some(Section::Ok { value }) = &p.stacks else {
        return None;
    };
    let main = value
        .list
        .iter()
        .find(|t| t.tid == p.pid)
        .or(value.list.first())?;
    Some((
        mqs_core::model::mpi_entry(main.call_path()),
        main.call_path().any(mqs_core::model::is_mpi_function),
    ))
}

/// Whether two snapshots' processes are the same: a pid means something on
/// its host only (ranks on two nodes often have the same pid).
fn same_process(a: &ProcessDump, b: &ProcessDump) -> bool {
    a.pid == b.pid && a.host == b.host
}

/// `second`, keeping only what `first` has too: processes (by host and pid),
/// operations (same communicator, queue and identity) and stacks (same
/// MPI entry point; a stack that moved is marked not available).
pub fn persistent(first: &JobDump, second: &JobDump) -> JobDump {
    let mut out = second.clone();
    out.processes
        .retain(|p| first.processes.iter().any(|f| same_process(f, p)));
    for p in &mut out.processes {
        let Some(before) = first.processes.iter().find(|f| same_process(f, p)) else {
            continue;
        };
        if let (Section::Ok { value: now }, Section::Ok { value: then }) =
            (&mut p.communicators, &before.communicators)
        {
            for comm in &mut now.list {
                let old = then
                    .list
                    .iter()
                    .find(|c| c.unique_id == comm.unique_id && c.name == comm.name);
                for class in mqs_abi::OpClass::ALL {
                    let old_ops: Vec<_> = match old.map(|c| c.queue(class)) {
                        Some(Section::Ok { value }) => {
                            value.operations.iter().map(identity).collect()
                        }
                        _ => Vec::new(),
                    };
                    if let Section::Ok { value } = comm.queue_mut(class) {
                        let Queue { operations, .. } = value;
                        operations.retain(|op| old_ops.contains(&identity(op)));
                    }
                }
            }
        }
        if p.stacks.is_some() && place(p) != place(before) {
            p.stacks = Some(Section::NotAvailable {
                reason: "the stack moved between the snapshots".into(),
            });
        }
    }
    out
}

/// What watching a job found in two snapshots in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The analysis in words.
    pub words: String,
    /// Not a deadlock: the same ranks could not be judged in both, and
    /// the others hold no cycle.
    pub cannot_tell: bool,
}

impl Finding {
    /// The exit code a watch that ends on it gives.
    pub fn exit_code(&self) -> i32 {
        if self.cannot_tell {
            mqs_core::exit_code::CANNOT_TELL
        } else {
            mqs_core::exit_code::DEADLOCK
        }
    }
}

/// What watching a job looks for, in two snapshots taken apart: a deadlock,
/// or a wait chain that ends in a rank outside MPI, in what both share;
/// else the same ranks that cannot be judged in both (a job whose queues
/// cannot be read is never reported as fine).
pub fn persistent_finding(first: &JobDump, second: &JobDump) -> Option<Finding> {
    let kept = persistent(first, second);
    let job = super::Job::new(&kept);
    let analysis = super::Analysis::new(&job);
    let stuck = analysis.chains.iter().any(|c| analysis.sink_outside_mpi(c));
    if analysis.has_deadlock() || stuck {
        return Some(Finding {
            words: analysis.words(),
            cannot_tell: false,
        });
    }
    let (before, now) = (super::Job::new(first), super::Job::new(second));
    let (before, now) = (super::Analysis::new(&before), super::Analysis::new(&now));
    (before.cannot_tell() && now.cannot_tell() && before.unjudged_ranks() == now.unjudged_ranks())
        .then(|| Finding {
            words: now.words(),
            cannot_tell: true,
        })
}
