//! Messages in transit (`tests/fixtures/spin_ring.c`): every rank sends to
//! its neighbours, then leaves MPI for good. What arrived before it left is
//! in the MPI's queues; what arrived after waits in the shared-memory
//! transport (Open MPI's FIFO and fast boxes, in use and not yet known to
//! the receiver; MPICH nemesis' fast boxes and receive queue). Dumped
//! through its launcher with our DLL, every rank must show every message
//! sent to it, with source, tag, communicator and length: as a receive it
//! matched, in the MPI's unexpected queue, or after those, in transit (the
//! marker `mqs_abi::IN_TRANSIT` starting its first line), a rendezvous
//! message with its full length; on Debian's stock Open MPI too, through
//! the committed type packs, and on Open MPI's release build through the
//! packs of Debian's build, borrowed (`acquire::typepack::borrowed`).
//! Where the DLL cannot read the transport (the release build without any
//! pack, or with a vader pack that does not fit) it says so instead of an
//! empty queue.
//!
//! That a job whose messages MPI handled shows nothing in transit (no
//! duplicate of the MPI's own unexpected messages) is checked wherever the
//! `queues` fixture's contents are (`mqs_tests::contents::check_ours`
//! refuses the marker on any operation not expected in transit, and extra
//! operations): `dll_crosscheck`, `mpich_dll`, `analysis` and the DLL's
//! replays.

mod support;

use std::collections::BTreeMap;

use mqs_tests::contents::{self, SpinMpi};
use mqs_tests::{workspace_root, Job, Mpi};
use serde_json::Value;
use support::*;

/// (communicator, source, tag, length in bytes) of one message.
type Key = (String, i64, i64, i64);

fn ops(queue: &Value) -> Vec<Value> {
    queue["operations"].as_array().cloned().unwrap_or_default()
}

fn in_transit(op: &Value) -> bool {
    op["extra_text"][0]
        .as_str()
        .is_some_and(|l| l.starts_with(mqs_abi::IN_TRANSIT))
}

/// The messages a process shows as received: complete or matched receives
/// (what matched them) and unexpected messages, each with where it is.
fn shown(process: &Value) -> BTreeMap<Key, Vec<&'static str>> {
    let mut out: BTreeMap<Key, Vec<&'static str>> = BTreeMap::new();
    for c in process["communicators"]["list"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap().to_string();
        for op in ops(&c["receives"]) {
            if op["status"] != "pending" {
                let key = (
                    name.clone(),
                    op["actual_global_rank"].as_i64().unwrap(),
                    op["actual_tag"].as_i64().unwrap(),
                    op["actual_length"].as_i64().unwrap(),
                );
                out.entry(key).or_default().push("matched receive");
            }
        }
        for op in ops(&c["unexpected"]) {
            let key = (
                name.clone(),
                op["desired_global_rank"].as_i64().unwrap(),
                op["desired_tag"].as_i64().unwrap(),
                op["desired_length"].as_i64().unwrap(),
            );
            let place = if in_transit(&op) {
                "in transit"
            } else {
                "MPI's unexpected queue"
            };
            out.entry(key).or_default().push(place);
        }
    }
    out
}

/// Dumps a `spin_ring` job of `size` ranks on `mpi` and checks every rank.
fn check_spin(mpi: Mpi, size: u32, which: SpinMpi) {
    check_spin_env(mpi, size, which, &[]);
}

/// [`check_spin`], mqs-dump run with `env` added.
/// The dump's `type_packs` lines.
fn type_packs(p: &Value) -> Vec<String> {
    p["type_packs"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The dump names the packs it read through: ob1's and vader's borrowed
/// ones in the release build, Debian's own in the stock one, none where
/// DWARF gave every type or no pack is installed.
fn check_type_packs(mpi: Mpi, which: SpinMpi, p: &Value) -> Result<(), String> {
    let lines = type_packs(p);
    let pack = |c: &str| format!("types from debian12-openmpi-4.1.4-3+b1-{c}.json, made for");
    let want: Vec<(String, String)> = match (mpi, which) {
        (Mpi::OpenMpiRelease, SpinMpi::OpenMpi(true)) => ["mca_pml_ob1", "mca_btl_vader"]
            .iter()
            .map(|c| (format!("{c}.so: "), pack(c) + " another build: "))
            .collect(),
        (Mpi::DebianOpenMpi, _) => [
            ("libmpi.so.40", "libmpi"),
            ("mca_pml_ob1.so", "mca_pml_ob1"),
            ("mca_btl_vader.so", "mca_btl_vader"),
        ]
        .iter()
        .map(|(lib, c)| (lib.to_string(), pack(c) + " this build"))
        .collect(),
        _ => Vec::new(),
    };
    let found = |(lib, text): &(String, String)| {
        lines
            .iter()
            .any(|l| l.starts_with(lib.as_str()) && l.contains(text.as_str()))
    };
    if want.is_empty() != lines.is_empty() || !want.iter().all(found) {
        return Err(format!("type packs: want {want:?}, got {lines:?}"));
    }
    Ok(())
}

fn check_spin_env(mpi: Mpi, size: u32, which: SpinMpi, env: &[(&str, &str)]) {
    let job = Job::launch(mpi, "spin_ring", size, &[]).expect("launch spin_ring");
    let dll = mqs_tests::our_dll(false).display().to_string();
    let pid = job.launcher_pid().to_string();
    let out = run_env(&["--pid", &pid, "--json", "--dll", &dll], env);
    let dump = succeeded(out, "mqs-dump of spin_ring");
    let processes = dump["processes"].as_array().cloned().unwrap_or_default();
    assert_eq!(processes.len(), size as usize, "{dump:#}");
    let expected = contents::spin_ring(i64::from(size), which);
    let messages = contents::spin_messages(i64::from(size));
    let mut errors = Vec::new();
    for p in &processes {
        let rank = p["global_rank"].as_i64().unwrap();
        if let Err(e) = check_type_packs(mpi, which, p) {
            errors.push(format!("rank {rank}: {e}"));
        }
        let want = &expected[usize::try_from(rank).unwrap()];
        if let Err(e) = contents::check_ours(want, &p["communicators"]) {
            errors.push(e);
        }
        for c in p["communicators"]["list"].as_array().unwrap() {
            let what = format!("rank {rank} {}", c["name"]);
            let unexpected = &c["unexpected"];
            if which == SpinMpi::OpenMpi(false) {
                // No debug information: said, never an empty list.
                let reason = unexpected["reason"].as_str().unwrap_or_default();
                if unexpected["status"] != "not_available"
                    || !reason.contains("messages in transit on vader not listed")
                {
                    errors.push(format!("{what}: unexpected {unexpected}"));
                }
                continue;
            }
            // The MPI's own first, then what waits in the transport.
            let list = ops(unexpected);
            if let Some(first) = list.iter().position(in_transit) {
                if list[first..].iter().any(|op| !in_transit(op)) {
                    errors.push(format!("{what}: MPI's own after transit: {unexpected}"));
                }
            }
        }
        if which == SpinMpi::OpenMpi(false) {
            continue;
        }
        // Every message sent to this rank, once, where the fixture says.
        // MPICH keeps no request of a complete receive on any queue: the
        // message that matched one is gone from sight.
        let got = shown(p);
        let mut want: BTreeMap<Key, Vec<&'static str>> = BTreeMap::new();
        for m in messages.iter().filter(|m| m.to == rank) {
            if m.matched && which == SpinMpi::Mpich {
                continue;
            }
            let key = (m.comm.to_string(), m.from, m.tag, 4 * m.count);
            let place = if m.matched {
                "matched receive"
            } else if m.in_transit {
                "in transit"
            } else {
                "MPI's unexpected queue"
            };
            want.entry(key).or_default().push(place);
        }
        if got != want {
            let missing: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(k, v)| want.get(*k) != Some(v))
                .collect();
            errors.push(format!(
                "rank {rank}: messages sent to it not shown as expected: {missing:?}; shown otherwise: {extra:?}"
            ));
        }
    }
    job.shutdown().expect("shutdown");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn open_mpi_4_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::OpenMpiG, 4, SpinMpi::OpenMpi(true));
}

#[test]
fn open_mpi_8_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::OpenMpiG, 8, SpinMpi::OpenMpi(true));
}

/// Open MPI's release build has no DWARF for vader: its layouts come from
/// the committed pack of Debian's build of the same Open MPI (configured
/// alike where vader is concerned), borrowed once the process's own DWARF
/// and vader's invariants agree with it.
#[test]
fn open_mpi_release_shows_every_message_through_a_borrowed_vader_pack() {
    check_spin(Mpi::OpenMpiRelease, 4, SpinMpi::OpenMpi(true));
}

#[test]
fn open_mpi_release_8_ranks_show_every_message_through_a_borrowed_vader_pack() {
    check_spin(Mpi::OpenMpiRelease, 8, SpinMpi::OpenMpi(true));
}

/// Without any pack: said, never an empty list.
#[test]
fn open_mpi_release_without_packs_says_messages_in_transit_are_not_listed() {
    let data = scratch_dir("transit-nopacks");
    std::fs::create_dir_all(data.join("typepacks")).unwrap();
    let data = data.display().to_string();
    check_spin_env(
        Mpi::OpenMpiRelease,
        4,
        SpinMpi::OpenMpi(false),
        &[("MQS_DATA_DIR", &data)],
    );
}

/// A vader pack whose endpoint size is one word off reads the endpoints
/// wrong: it is dropped, the dump goes on (ob1's borrowed pack still
/// reads the MPI's own queues) and says that what is in transit on vader
/// is not listed. A file beside the packs that is no pack is named as
/// skipped.
#[test]
fn open_mpi_release_drops_a_vader_pack_that_does_not_fit() {
    let data = scratch_dir("transit-badpack");
    let packs = data.join("typepacks");
    std::fs::create_dir_all(&packs).unwrap();
    for entry in std::fs::read_dir(workspace_root().join("typepacks")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") {
            let mut pack: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            if let Some(size) = pack
                .get_mut("types")
                .and_then(|t| t.get_mut("mca_btl_vader_endpoint_t"))
                .and_then(|t| t.get_mut("size"))
            {
                *size = Value::from(size.as_u64().unwrap() + 8);
            }
            std::fs::write(
                packs.join(path.file_name().unwrap()),
                serde_json::to_vec_pretty(&pack).unwrap(),
            )
            .unwrap();
        }
    }
    // A file that is no pack at all stands for no library: every rank's
    // dump says it was skipped, and why.
    std::fs::write(packs.join("broken-pack.json"), b"{ \"format\": ").unwrap();
    let data = data.display().to_string();
    let job = Job::launch(Mpi::OpenMpiRelease, "spin_ring", 4, &[]).expect("launch spin_ring");
    let dll = mqs_tests::our_dll(false).display().to_string();
    let pid = job.launcher_pid().to_string();
    let out = run_env(
        &["--pid", &pid, "--json", "--dll", &dll],
        &[("MQS_DATA_DIR", &data)],
    );
    let dump = succeeded(out, "mqs-dump of spin_ring with a bad vader pack");
    job.shutdown().expect("shutdown");
    let processes = dump["processes"].as_array().cloned().unwrap_or_default();
    assert_eq!(processes.len(), 4, "{dump:#}");
    for p in &processes {
        let rank = &p["global_rank"];
        let lines = type_packs(p);
        assert!(
            lines.iter().any(|l| l.starts_with(
                "mca_btl_vader.so: the type pack debian12-openmpi-4.1.4-3+b1-mca_btl_vader.json, \
                 made for another build, does not fit this one: "
            )),
            "rank {rank}: the dropped pack is not named: {lines:?}"
        );
        assert!(
            lines.iter().any(
                |l| l.starts_with("mca_pml_ob1.so: types from ") && l.contains("another build")
            ),
            "rank {rank}: ob1's pack is not named: {lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("not a type pack, skipped: ")
                    && l.contains("broken-pack.json: not JSON")),
            "rank {rank}: the broken pack file is not named: {lines:?}"
        );
        for c in p["communicators"]["list"].as_array().unwrap() {
            if c["name"] == "MPI_COMM_SELF" {
                continue;
            }
            let unexpected = &c["unexpected"];
            assert!(
                !ops(unexpected).iter().any(in_transit),
                "rank {rank} {}: in transit through a refused pack: {unexpected}",
                c["name"]
            );
            assert!(
                unexpected
                    .to_string()
                    .contains("messages in transit on vader not listed"),
                "rank {rank} {}: not said: {unexpected}",
                c["name"]
            );
        }
    }
}

#[test]
fn open_mpi_5_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::OpenMpi5G, 4, SpinMpi::OpenMpi(true));
}

#[test]
fn open_mpi_5_8_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::OpenMpi5G, 8, SpinMpi::OpenMpi(true));
}

/// Debian's own Open MPI, its types from the committed type packs (the
/// vader BTL's among them): as the -g build.
#[test]
fn stock_open_mpi_shows_every_message_in_queues_or_transport() {
    check_spin(Mpi::DebianOpenMpi, 4, SpinMpi::OpenMpi(true));
}

#[test]
fn mpich_4_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::Mpich, 4, SpinMpi::Mpich);
}

#[test]
fn mpich_8_ranks_show_every_message_in_queues_or_transport() {
    check_spin(Mpi::Mpich, 8, SpinMpi::Mpich);
}

/// The job view of the spinning ring names every rank that is outside MPI
/// with messages waiting in its transport, with how many and from whom.
fn check_view_names_ranks_outside_mpi(mpi: Mpi) {
    let size = 4;
    let job = Job::launch(mpi, "spin_ring", size, &[]).expect("launch spin_ring");
    let messages = contents::spin_messages(i64::from(size));
    let out = run(&["--pid", &job.launcher_pid().to_string(), "--stacks"]);
    let view = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for rank in 0..i64::from(size) {
        let n = messages
            .iter()
            .filter(|m| m.to == rank && m.in_transit)
            .count();
        assert!(
            n > 0,
            "the fixture leaves messages in transit to rank {rank}"
        );
        let named = format!(
            "rank {rank} is not calling MPI: {n} message{} wait{} in its transport: ",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" }
        );
        assert!(view.contains(&named), "{named} missing from {view}");
    }
    job.shutdown().expect("shutdown");
}

#[test]
fn the_job_view_names_the_ranks_outside_mpi_with_messages_waiting_open_mpi() {
    check_view_names_ranks_outside_mpi(Mpi::OpenMpiG);
}

#[test]
fn the_job_view_names_the_ranks_outside_mpi_with_messages_waiting_mpich() {
    check_view_names_ranks_outside_mpi(Mpi::Mpich);
}

/// The release build, its transport read through the borrowed vader pack.
#[test]
fn the_job_view_names_the_ranks_outside_mpi_with_messages_waiting_open_mpi_release() {
    check_view_names_ranks_outside_mpi(Mpi::OpenMpiRelease);
}
