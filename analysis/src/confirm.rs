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

/// `second`, keeping only what `first` has too: processes (by pid),
/// operations (same communicator, queue and identity) and stacks (same
/// MPI entry point; a stack that moved is marked not available).
pub fn persistent(first: &JobDump, second: &JobDump) -> JobDump {
    let mut out = second.clone();
    out.processes
        .retain(|p| first.processes.iter().any(|f| f.pid == p.pid));
    for p in &mut out.processes {
        let Some(before) = first.processes.iter().find(|f| f.pid == p.pid) else {
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

/// What watching a job looks for, in two snapshots taken apart: a deadlock,
/// or a wait chain that ends in a rank outside MPI, in what both share. The
/// finding in words, if there is one.
pub fn persistent_finding(first: &JobDump, second: &JobDump) -> Option<String> {
    let kept = persistent(first, second);
    let job = super::Job::new(&kept);
    let analysis = super::Analysis::new(&job);
    let stuck = analysis.chains.iter().any(|c| analysis.sink_outside_mpi(c));
    (analysis.has_deadlock() || stuck).then(|| analysis.words())
}
