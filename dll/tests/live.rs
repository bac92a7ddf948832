//! End to end: the fixtures run as real Open MPI 4.1.4 and 5.0.7 jobs (hung
//! in their documented states), dumped by the mqs host through *this* DLL
//! (the cdylib cargo built next to this test), checked against the
//! fixtures' header comments as `mqs_tests::contents` writes them down.
//! Both builds of each: `-g` everywhere, and "release" (no debug info for
//! ob1). Open MPI 4.1.4's release build reads ob1 through the type pack
//! borrowed from Debian's build of the same version, so it shows the
//! unexpected queue like `-g`; 5.0.7's has no pack to borrow: no unexpected
//! queue, free-list receives.

mod common;

use mqs_acquire::inspect::{dump, dump_pids, Options};
use mqs_tests::{contents, Job, Mpi};
use serde_json::Value;

/// Dumps every rank of the job through its launcher, as JSON, once the
/// state has settled: ranks post their blocking receive just after READY,
/// so a dump taken at once may precede it. Two equal dumps in a row (apart
/// from timings) are the settled state.
fn dump_job(job: &Job) -> Result<Vec<Value>, String> {
    let mut last = dump_once(job)?;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let next = dump_once(job)?;
        if strip(&next) == strip(&last) {
            return Ok(next);
        }
        last = next;
    }
    Err(format!("{}: the queues never settled", job.fixture()))
}

/// A dump without what changes between two dumps of a still process.
fn strip(procs: &[Value]) -> Vec<Value> {
    procs
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if let Some(o) = p.as_object_mut() {
                o.remove("stats");
            }
            p
        })
        .collect()
}

/// Dumps the job through its launcher (MPIR), or, where the launcher has
/// no MPIR (Open MPI 5's prterun), its ranks all at once as
/// `mqs-dump --pid R0 --pid R1 ...` does.
fn dump_once(job: &Job) -> Result<Vec<Value>, String> {
    let options = Options {
        dll: mqs_acquire::inspect::DllChoice::Given(common::session::our_dll_path()),
        ..Options::default()
    };
    let pids: Vec<i32> = if job.mpi().is_open_mpi_5() {
        job.rank_pids()
            .into_iter()
            .map(|(_, pid)| i32::try_from(pid).unwrap_or(-1))
            .collect()
    } else {
        vec![i32::try_from(job.launcher_pid()).unwrap_or(-1)]
    };
    let what = format!("dump of {}", job.fixture());
    let d = mqs_tests::within(mqs_tests::DUMP_LIMIT, &what, move || {
        match pids.as_slice() {
            [starter] => dump(*starter, &options, &mut |_, _| {}),
            ranks => dump_pids(ranks, &options, &mut |_, _| {}),
        }
        .map_err(|e| e.to_string())
    })?
    .map_err(|e| format!("{what}: {e}"))?;
    let json = serde_json::to_value(&d).map_err(|e| e.to_string())?;
    let mut procs: Vec<Value> = json["processes"].as_array().cloned().unwrap_or_default();
    procs.sort_by_key(|p| p["global_rank"].as_i64());
    assert_eq!(procs.len(), job.size() as usize, "{json}");
    Ok(procs)
}

fn launch(mpi: Mpi, fixture: &str, n: u32, args: &[&str]) -> Result<Job, String> {
    Job::launch(mpi, fixture, n, args).map_err(|e| format!("{fixture} on {mpi:?}: {e}"))
}

/// Checks every process of the job against the fixture's known contents
/// (`mqs_tests::contents`): every communicator, every queue exactly, in
/// order; a queue expected empty must be read and empty.
fn check(job: &Job, procs: &[Value], expected: &[contents::Process]) -> Result<(), String> {
    assert_eq!(procs.len(), expected.len(), "{}: processes", job.fixture());
    let mut errors = Vec::new();
    for want in expected {
        let got = procs
            .iter()
            .find(|p| p["global_rank"].as_i64() == Some(want.rank))
            .ok_or_else(|| format!("{}: no rank {}", job.fixture(), want.rank))?;
        if let Err(e) = contents::check_ours(want, &got["communicators"]) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} on {:?}:\n{}",
            job.fixture(),
            job.mpi(),
            errors.join("\n")
        ))
    }
}

fn check_queues(mpi: Mpi) -> Result<(), String> {
    let job = launch(mpi, "queues", 2, &["2"])?;
    let procs = dump_job(&job)?;
    let with_ob1_types = matches!(mpi, Mpi::OpenMpiG | Mpi::OpenMpi5G | Mpi::OpenMpiRelease);
    check(&job, &procs, &contents::queues(2, with_ob1_types))
}

#[test]
fn queues_on_open_mpi_with_debug_info() -> Result<(), String> {
    check_queues(Mpi::OpenMpiG)
}

#[test]
fn queues_on_open_mpi_release_build() -> Result<(), String> {
    check_queues(Mpi::OpenMpiRelease)
}

#[test]
fn queues_on_open_mpi_5_with_debug_info() -> Result<(), String> {
    check_queues(Mpi::OpenMpi5G)
}

#[test]
fn queues_on_open_mpi_5_release_build() -> Result<(), String> {
    check_queues(Mpi::OpenMpi5Release)
}

#[test]
fn ring_shows_who_waits_for_whom() -> Result<(), String> {
    let job = launch(Mpi::OpenMpiG, "ring", 3, &[])?;
    let procs = dump_job(&job)?;
    check(&job, &procs, &contents::ring(3))
}

fn check_intercomm(mpi: Mpi, expected: &[contents::Process]) -> Result<(), String> {
    let job = launch(mpi, "intercomm", 4, &[])?;
    let procs = dump_job(&job)?;
    check(&job, &procs, expected)
}

#[test]
fn intercommunicator_peers_are_in_the_remote_group() -> Result<(), String> {
    check_intercomm(Mpi::OpenMpiG, &contents::intercomm())
}

/// Open MPI 5 moved the groups within `ompi_communicator_t`: the remote
/// group is read through its type too.
#[test]
fn intercommunicator_peers_on_open_mpi_5() -> Result<(), String> {
    check_intercomm(Mpi::OpenMpi5G, &contents::intercomm_open_mpi_5())
}

/// A matched rendezvous receive whose data has not all arrived, and a
/// complete receive nobody waited for: statuses `matched` and `complete`
/// with their actual_* fields, on a live job.
#[test]
fn receives_part_way_through_their_life() -> Result<(), String> {
    let job = launch(Mpi::OpenMpiG, "progress", 2, &[])?;
    let procs = dump_job(&job)?;
    check(&job, &procs, &contents::progress())
}
