//! Open MPI 4.1 and 5.0 under `pml ucx` (the `openmpi-4.1.4-ucx` and
//! `openmpi-5.0.7-ucx` builds, UCX 1.13.1 with `-g`): pml ucx keeps no
//! queues, so our DLL reads UCX's worker (whose tags carry the
//! communicator's `c_contextid` in 4.1, its `c_index` in 5.0). Each test
//! runs on both. The `queues` fixture's posted receives (specific, ANY_SOURCE,
//! ANY_TAG, the blocking `MPI_Recv`) and unexpected messages (eager, and
//! the 400,000-byte rendezvous) must be listed exactly, per communicator,
//! with global peers, tags and lengths in bytes, and be the same as the
//! same job's under ob1; sends come from UCX's request pool: the pending
//! rendezvous `MPI_Isend` (and `mprobe.c`'s `MPI_Issend`) exactly, with its
//! destination found from its endpoint, the same as ob1's pending sends;
//! every other send queue "cannot tell" with the reason (eager sends
//! completed locally), never an empty list. Open MPI's own DLL lists
//! nothing on the same job. A ring deadlock under pml ucx must be found by
//! `mqs-dump --deadlock`.
//!
//! MPICH 4.0.2 ch4:ucx (the `mpich-4.0.2-ucx` build, the same UCX): its
//! ucx netmod keeps no queues either; our DLL reads every VCI's worker and
//! decodes the netmod's own tag layout (context id 16 | rank 16 | tag 32).
//! The same `queues` fixture's receives and unexpected messages must be
//! listed exactly; sends come from MPICH's own send queue, which holds the
//! pending rendezvous send only (its length from its UCP request), and say
//! that sends completed locally are not listed.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// How long the job may take to reach the fixture's state after READY
/// (the blocking receives come after it) on a loaded 2-core machine.
const SETTLE: Duration = Duration::from_secs(90);

/// `fixture` on `mpi` (a build with UCX), under pml ucx or, without
/// `ucx`, ob1 (the launcher's default). MPICH ch4:ucx has no other
/// netmod: the launcher gives its jobs UCX's environment.
fn launch(mpi: Mpi, fixture: &str, size: u32, ucx: bool) -> Job {
    let open_mpi = mpi.family() == mqs_tests::Family::OpenMpi;
    let options = LaunchOptions {
        env: if ucx && open_mpi {
            mqs_tests::pml_ucx_env()
        } else {
            Vec::new()
        },
        ..LaunchOptions::default()
    };
    Job::launch_with(mpi, fixture, size, &[], &options)
        .unwrap_or_else(|e| panic!("launch {fixture} on {mpi}: {e}"))
}

/// The version line's words for `mpi` under pml ucx.
fn version_line(mpi: Mpi) -> &'static str {
    match mpi {
        Mpi::OpenMpi5Ucx => "Open MPI 5.0.7, pml ucx, UCX 1.13.1",
        _ => "Open MPI 4.1.4, pml ucx, UCX 1.13.1",
    }
}

/// One listed operation: status, peer (in the communicator, and global),
/// tag (None: ANY_TAG) and length in bytes.
type Row = (String, i64, i64, Option<i64>, i64);

/// A queue of a communicator of a rank: its rows, or why it cannot tell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listed {
    Rows(Vec<Row>),
    NotAvailable(String),
}

/// (global rank, communicator, queue) -> what is listed.
type Queues = BTreeMap<(i64, String, &'static str), Listed>;

fn queues(dump: &Value) -> Queues {
    let mut out = Queues::new();
    for p in dump["processes"].as_array().expect("processes") {
        let rank = p["global_rank"].as_i64().expect("global rank");
        for c in p["communicators"]["list"]
            .as_array()
            .expect("communicators")
        {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            for queue in ["sends", "receives", "unexpected"] {
                let section = &c[queue];
                let listed = match section["status"].as_str() {
                    Some("ok") => Listed::Rows(
                        section["operations"]
                            .as_array()
                            .expect("operations")
                            .iter()
                            .map(|op| {
                                (
                                    op["status"].as_str().unwrap_or_default().to_string(),
                                    op["desired_local_rank"].as_i64().unwrap(),
                                    op["desired_global_rank"].as_i64().unwrap(),
                                    op["desired_tag"].as_i64(),
                                    op["desired_length"].as_i64().unwrap(),
                                )
                            })
                            .collect(),
                    ),
                    Some("not_available") => Listed::NotAvailable(
                        section["reason"].as_str().unwrap_or_default().to_string(),
                    ),
                    other => panic!("rank {rank} {name} {queue}: {other:?} in {section}"),
                };
                out.insert((rank, name.clone(), queue), listed);
            }
        }
    }
    out
}

fn pending(peer: i64, global: i64, tag: Option<i64>, length: i64) -> Row {
    ("pending".to_string(), peer, global, tag, length)
}

/// The `queues` fixture's receives and unexpected messages on 2 ranks
/// (its header comment): (rank, communicator, queue) -> rows, in order.
/// Every queue not named here is empty.
fn fixture_contents() -> BTreeMap<(i64, &'static str, &'static str), Vec<Row>> {
    BTreeMap::from([
        ((0, "mqs-dup", "receives"), vec![pending(1, 1, Some(7), 16)]),
        (
            (0, "MPI_COMM_WORLD", "receives"),
            vec![pending(-1, -1, Some(8), 32)],
        ),
        // World rank 1 is split rank 0.
        ((0, "mqs-split", "receives"), vec![pending(0, 1, None, 8)]),
        (
            (0, "mqs-wait", "receives"),
            vec![pending(-1, -1, Some(1000), 4)],
        ),
        (
            (0, "MPI_COMM_WORLD", "unexpected"),
            vec![pending(1, 1, Some(99), 64), pending(1, 1, Some(5), 400_000)],
        ),
        (
            (1, "mqs-dup", "receives"),
            vec![pending(0, 0, Some(11), 32)],
        ),
        (
            (1, "mqs-wait", "receives"),
            vec![pending(-1, -1, Some(1000), 4)],
        ),
    ])
}

/// The sends UCX holds in the `queues` fixture: the rendezvous `MPI_Isend`
/// only (the eager one completed at once and left no request).
fn fixture_sends() -> BTreeMap<(i64, &'static str), Vec<Row>> {
    BTreeMap::from([((1, "MPI_COMM_WORLD"), vec![pending(0, 0, Some(5), 400_000)])])
}

/// The fixture's eager `MPI_Isend` (world rank 1 to 0, tag 99, 64 bytes),
/// held complete and not yet waited for.
fn eager_send_complete() -> Row {
    ("complete".to_string(), 0, 0, Some(99), 64)
}

/// The sentence every send queue under UCX says, as its reason when empty
/// and as its last line otherwise.
const SENDS_NOT_LISTED: &str = "sends completed locally under UCX are not listed";

/// `rows` without those complete: ob1 keeps an eager send's request,
/// complete, until it is waited for; UCX has none for it.
fn not_complete(listed: Option<&Listed>) -> Vec<Row> {
    match listed {
        Some(Listed::Rows(rows)) => rows.iter().filter(|r| r.0 != "complete").cloned().collect(),
        _ => Vec::new(),
    }
}

/// The `extra_text` lines of the operations of `queue` on `comm` of world
/// rank `rank`.
fn lines(dump: &Value, rank: i64, comm: &str, queue: &str) -> Vec<Vec<String>> {
    dump["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["global_rank"] == rank)
        .flat_map(|p| {
            p["communicators"]["list"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|c| c["name"] == comm)
        .flat_map(|c| {
            c[queue]["operations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|op| {
            op["extra_text"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|l| l.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .collect()
}

/// Dumps `job` with our DLL until both ranks wait in their blocking
/// receive on `comm` (posted after READY).
fn settled(job: &Job, comm: &str) -> Value {
    let dll = mqs_tests::our_dll(false).display().to_string();
    let start = Instant::now();
    loop {
        let dump = dump_json(job.launcher_pid(), &["--dll", &dll]);
        let q = queues(&dump);
        let waiting = (0..2).all(|r| {
            matches!(q.get(&(r, comm.to_string(), "receives")),
                     Some(Listed::Rows(rows)) if rows.iter().any(|row| row.3 == Some(1000)))
        });
        if waiting {
            return dump;
        }
        assert!(start.elapsed() < SETTLE, "never settled: {dump:#}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn queues_under_pml_ucx_are_listed_exactly_and_as_under_ob1() {
    queues_exactly_and_as_under_ob1(Mpi::OpenMpiUcx);
}

/// Open MPI 5.0.7: the tags carry `c_index`; the job comes from prterun's
/// PMIx server.
#[test]
fn open_mpi_5_queues_under_pml_ucx_are_listed_exactly_and_as_under_ob1() {
    queues_exactly_and_as_under_ob1(Mpi::OpenMpi5Ucx);
}

fn queues_exactly_and_as_under_ob1(mpi: Mpi) {
    let (ucx_dump, theirs) = {
        let job = launch(mpi, "queues", 2, true);
        let dump = settled(&job, "mqs-wait");
        (dump, dump_json(job.launcher_pid(), &["--dll", "mpi"]))
    };
    // Open MPI's own DLL walks ob1's lists, which pml ucx never fills: it
    // lists nothing at all.
    let listed: usize = queues(&theirs)
        .values()
        .map(|l| match l {
            Listed::Rows(rows) => rows.len(),
            Listed::NotAvailable(_) => 0,
        })
        .sum();
    assert_eq!(listed, 0, "Open MPI's DLL under pml ucx: {theirs:#}");
    let text = ucx_dump.to_string();
    assert!(text.contains(version_line(mpi)), "{ucx_dump:#}");
    let ucx = queues(&ucx_dump);
    assert!(
        ucx.keys().filter(|k| k.2 == "sends").count() >= 5,
        "{ucx_dump:#}"
    );

    // Exactly the fixture's receives, unexpected messages and the sends
    // UCX holds; every other send queue says why it cannot tell.
    let want = fixture_contents();
    let sends = fixture_sends();
    let mut errors = Vec::new();
    for ((rank, comm, queue), listed) in &ucx {
        let expected = if *queue == "sends" {
            sends.get(&(*rank, comm.as_str())).cloned()
        } else {
            want.get(&(*rank, comm.as_str(), *queue)).cloned()
        }
        .unwrap_or_default();
        match (*queue, listed) {
            ("sends", Listed::NotAvailable(why)) => {
                if !why.contains(SENDS_NOT_LISTED) || sends.contains_key(&(*rank, comm.as_str())) {
                    errors.push(format!("rank {rank} {comm} sends: {why}"));
                }
            }
            // An eager send that did not complete at once (its endpoint
            // still connecting) is held complete until waited for: only
            // the fixture's eager one may be there besides.
            ("sends", Listed::Rows(rows))
                if not_complete(Some(listed)) == expected
                    && rows
                        .iter()
                        .all(|r| r.0 != "complete" || *r == eager_send_complete()) => {}
            (_, Listed::Rows(rows)) if *queue != "sends" && *rows == expected => {}
            _ => errors.push(format!(
                "rank {rank} {comm} {queue}: {listed:?}, expected {expected:?}"
            )),
        }
    }
    for (rank, comm, queue) in want.keys() {
        if !ucx.contains_key(&(*rank, comm.to_string(), *queue)) {
            errors.push(format!("rank {rank}: no communicator {comm}"));
        }
    }
    assert!(errors.is_empty(), "{}\n{ucx_dump:#}", errors.join("\n"));
    // The send names the MPI request MPI_Isend returned, then UCX's, and
    // says what it does not list as its last line.
    let send = lines(&ucx_dump, 1, "MPI_COMM_WORLD", "sends");
    let named = |op: &Vec<String>| {
        op[0].starts_with("send request 0x") && op[1].starts_with("UCX 1.13.1 send 0x")
    };
    let last = send.last().and_then(|op| op.last());
    assert!(
        !send.is_empty() && send.iter().all(named) && last.is_some_and(|l| l == SENDS_NOT_LISTED),
        "{send:?}"
    );

    // The same job under ob1 shows the same receives and unexpected
    // messages, and the same sends but the eager ones ob1 holds complete.
    let ob1_dump = {
        let job = launch(mpi, "queues", 2, false);
        settled(&job, "mqs-wait")
    };
    let ob1 = queues(&ob1_dump);
    for (key, listed) in &ucx {
        if key.2 == "sends" {
            assert_eq!(
                not_complete(Some(listed)),
                not_complete(ob1.get(key)),
                "{key:?}: ucx {listed:?}\n{ob1_dump:#}"
            );
            continue;
        }
        let theirs = ob1.get(key);
        assert_eq!(
            theirs,
            Some(listed),
            "{key:?}: ucx {listed:?}, ob1 {theirs:?}\n{ob1_dump:#}"
        );
    }
    assert_eq!(
        ucx.keys().collect::<Vec<_>>(),
        ob1.keys().collect::<Vec<_>>(),
        "the same communicators"
    );
}

#[test]
fn a_ring_deadlock_under_pml_ucx_is_found() {
    ring_deadlock_is_found(Mpi::OpenMpiUcx);
}

#[test]
fn a_ring_deadlock_under_open_mpi_5_pml_ucx_is_found() {
    ring_deadlock_is_found(Mpi::OpenMpi5Ucx);
}

#[test]
fn a_ring_deadlock_under_mpich_ch4_ucx_is_found() {
    ring_deadlock_is_found(Mpi::MpichUcx);
}

fn ring_deadlock_is_found(mpi: Mpi) {
    let job = launch(mpi, "ring", 3, true);
    let pid = job.launcher_pid().to_string();
    let words = [
        "rank 0 waits for rank 2 (recv tag 42 on MPI_COMM_WORLD)",
        "rank 1 waits for rank 0 (recv tag 42 on MPI_COMM_WORLD)",
        "rank 2 waits for rank 1 (recv tag 42 on MPI_COMM_WORLD)",
        // UCX lists no sends completed locally: that is said, once.
        "  undecided: the sends of ranks 0-2 were not read",
    ];
    let start = Instant::now();
    loop {
        let out = run(&["--pid", &pid, "--deadlock"]);
        let text = stdout(&out);
        if out.status.code() == Some(12) && words.iter().all(|w| text.contains(w)) {
            assert!(text.contains("deadlocked: ranks 0-2 in 1 cycle"), "{text}");
            break;
        }
        assert!(
            start.elapsed() < SETTLE,
            "no deadlock found: exit {}\n{text}\n{}",
            out.status,
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `mprobe.c` under pml ucx: the started persistent receive, the blocking
/// receives, the message taken by `MPI_Mprobe` (held in Open MPI's
/// `ompi_message_t`, out of UCX's lists), the 400,000-byte synchronous
/// rendezvous message from `MPI_Issend` and, on the sender's side, the
/// `MPI_Issend` itself (from UCX's request pool, to world rank 0), exactly;
/// the same as under ob1 but for the Mprobe'd message's length (ob1's
/// request for it counts 0 bytes; the message has 16).
#[test]
fn persistent_mprobe_and_issend_under_pml_ucx() {
    persistent_mprobe_and_issend(Mpi::OpenMpiUcx);
}

#[test]
fn persistent_mprobe_and_issend_under_open_mpi_5_pml_ucx() {
    persistent_mprobe_and_issend(Mpi::OpenMpi5Ucx);
}

fn persistent_mprobe_and_issend(mpi: Mpi) {
    let world = "MPI_COMM_WORLD".to_string();
    let ucx_dump = {
        let job = launch(mpi, "mprobe", 2, true);
        settled(&job, &world)
    };
    let ucx = queues(&ucx_dump);
    // The persistent receive is named by its handle (the request MPI_Start
    // started points back at it), the blocking one as the call's.
    let firsts: Vec<String> = ucx_dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["global_rank"] == 0)
        .flat_map(|p| p["communicators"]["list"].as_array().unwrap().clone())
        .filter(|c| c["name"] == "MPI_COMM_WORLD")
        .flat_map(|c| c["receives"]["operations"].as_array().unwrap().clone())
        .map(|op| op["extra_text"][0].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        firsts[0].starts_with("persistent receive request 0x")
            && firsts[1].starts_with(mqs_abi::BLOCKING_RECEIVE)
            && firsts[2].starts_with("message taken by MPI_Mprobe"),
        "{firsts:?}"
    );
    let rows =
        |q: &Queues, rank: i64, queue: &'static str| match q.get(&(rank, world.clone(), queue)) {
            Some(Listed::Rows(rows)) => rows.clone(),
            other => panic!("rank {rank} {queue}: {other:?}"),
        };
    let mprobed = |length| ("complete".to_string(), 1, 1, Some(77), length);
    assert_eq!(
        rows(&ucx, 0, "receives"),
        [
            pending(1, 1, Some(78), 8),
            pending(-1, -1, Some(1000), 4),
            mprobed(16)
        ]
    );
    assert_eq!(
        rows(&ucx, 0, "unexpected"),
        [pending(1, 1, Some(79), 400_000)]
    );
    assert_eq!(rows(&ucx, 1, "receives"), [pending(-1, -1, Some(1000), 4)]);
    assert_eq!(rows(&ucx, 1, "unexpected"), []);
    // The sender's MPI_Issend, waiting for its receiver: to world rank 0,
    // tag 79, 400,000 bytes, named by the request MPI_Issend returned.
    assert_eq!(rows(&ucx, 1, "sends"), [pending(0, 0, Some(79), 400_000)]);
    let issend = lines(&ucx_dump, 1, "MPI_COMM_WORLD", "sends");
    assert!(
        issend[0][0].starts_with("send request 0x")
            && issend[0][1].starts_with("UCX 1.13.1 send 0x")
            && issend[0].contains(&"synchronous: waits for its receiver to match it".to_string())
            && issend[0].last().map(String::as_str) == Some(SENDS_NOT_LISTED),
        "{issend:?}"
    );
    match ucx.get(&(0, world.clone(), "sends")) {
        Some(Listed::NotAvailable(why)) => assert!(why.contains(SENDS_NOT_LISTED), "{why}"),
        other => panic!("rank 0 sends: {other:?}"),
    }

    let ob1 = {
        let job = launch(mpi, "mprobe", 2, false);
        queues(&settled(&job, &world))
    };
    assert_eq!(
        rows(&ob1, 0, "receives"),
        [
            pending(1, 1, Some(78), 8),
            pending(-1, -1, Some(1000), 4),
            mprobed(0)
        ]
    );
    for (rank, queue) in [
        (0, "unexpected"),
        (1, "receives"),
        (1, "unexpected"),
        (1, "sends"),
    ] {
        assert_eq!(
            rows(&ob1, rank, queue),
            rows(&ucx, rank, queue),
            "rank {rank} {queue}"
        );
    }
}

/// MPICH 4.0.2 ch4:ucx: the `queues` fixture's posted receives (specific,
/// ANY_SOURCE, ANY_TAG, the blocking `MPI_Recv`) and unexpected messages
/// (eager, and the 400,000-byte rendezvous) read from UCX's worker, exactly,
/// on every communicator, with global peers, tags and lengths in bytes;
/// the sends MPICH remembers (the rendezvous `MPI_Isend`, its length from
/// its UCP request), and for every other communicator that sends completed
/// locally are not listed.
#[test]
fn mpich_ch4_ucx_queues_are_listed_exactly() {
    let mpi = Mpi::MpichUcx;
    let dump = {
        // The launcher sets UCX_TLS for this build (MPICH_UCX_ENV).
        let job = launch(mpi, "queues", 2, false);
        settled(&job, "mqs-wait")
    };
    let text = dump.to_string();
    assert!(
        text.contains("MPICH 4.0.2, device ch4:ucx, device queues, UCX 1.13.1"),
        "{dump:#}"
    );
    let got = queues(&dump);
    let comms = [
        "MPI_COMM_SELF",
        "MPI_COMM_WORLD",
        "mqs-dup",
        "mqs-split",
        "mqs-wait",
    ];
    for rank in 0..2 {
        let mut names: Vec<&str> = got
            .keys()
            .filter(|k| k.0 == rank && k.2 == "receives")
            .map(|k| k.1.as_str())
            .collect();
        names.sort_unstable();
        assert_eq!(names, comms, "rank {rank}");
    }
    let want = fixture_contents();
    // The send MPICH keeps a request for: the rendezvous one, waiting for
    // its receiver, its length from its UCP request (the eager one was
    // handed back complete and is in no list).
    let sends = BTreeMap::from([((1, "MPI_COMM_WORLD"), vec![pending(0, 0, Some(5), 400_000)])]);
    let mut errors = Vec::new();
    for ((rank, comm, queue), listed) in &got {
        let key = (*rank, comm.as_str());
        let ok = match (*queue, listed) {
            ("sends", Listed::Rows(rows)) => sends.get(&key) == Some(rows),
            ("sends", Listed::NotAvailable(why)) => !sends.contains_key(&key)
                && why.contains(
                    "MPICH ch4:ucx (UCX 1.13.1): sends completed locally under UCX are not listed",
                ),
            (_, Listed::Rows(rows)) => {
                *rows
                    == want
                        .get(&(*rank, comm.as_str(), *queue))
                        .cloned()
                        .unwrap_or_default()
            }
            _ => false,
        };
        if !ok {
            errors.push(format!("rank {rank} {comm} {queue}: {listed:?}"));
        }
    }
    assert!(errors.is_empty(), "{}\n{dump:#}", errors.join("\n"));

    // The same job on ch4:ofi with every message on the active-message
    // path, whose receives and unexpected messages MPICH's own queues
    // hold: the same receives and unexpected messages (an empty
    // unexpected queue there says that messages in transit are not read).
    let am_dump = {
        let options = LaunchOptions {
            env: vec![("MPIR_CVAR_CH4_OFI_ENABLE_TAGGED".into(), "0".into())],
            ..LaunchOptions::default()
        };
        let job = Job::launch_with(Mpi::MpichCh4, "queues", 2, &[], &options)
            .expect("launch queues on ch4:ofi");
        settled(&job, "mqs-wait")
    };
    let am = queues(&am_dump);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        am.keys().collect::<Vec<_>>(),
        "the same communicators"
    );
    for (key, listed) in got.iter().filter(|(k, _)| k.2 != "sends") {
        match (key.2, am.get(key)) {
            ("unexpected", Some(Listed::NotAvailable(_))) if *listed == Listed::Rows(vec![]) => {}
            (_, theirs) => assert_eq!(
                theirs,
                Some(listed),
                "{key:?}: ucx {listed:?}, ch4:ofi active messages {theirs:?}\n{am_dump:#}"
            ),
        }
    }
}

/// `mprobe.c` on MPICH ch4:ucx: the started persistent receive and the
/// blocking receives from UCX's worker, the message `MPI_Mprobe` took
/// (out of UCX's lists, held by an MPICH request of kind mprobe, found
/// among MPICH's request objects), the 400,000-byte synchronous rendezvous
/// message, and the pending `MPI_Issend` from MPICH's send queue with its
/// length from its UCP request, exactly: the same as Open MPI's under pml
/// ucx.
#[test]
fn persistent_mprobe_and_issend_under_mpich_ch4_ucx() {
    let world = "MPI_COMM_WORLD".to_string();
    let dump = {
        let job = launch(Mpi::MpichUcx, "mprobe", 2, true);
        settled(&job, &world)
    };
    let got = queues(&dump);
    let rows = |rank: i64, queue: &'static str| match got.get(&(rank, world.clone(), queue)) {
        Some(Listed::Rows(rows)) => rows.clone(),
        other => panic!("rank {rank} {queue}: {other:?}\n{dump:#}"),
    };
    let mprobed = ("complete".to_string(), 1, 1, Some(77), 16);
    assert_eq!(
        rows(0, "receives"),
        [
            pending(1, 1, Some(78), 8),
            pending(-1, -1, Some(1000), 4),
            mprobed
        ]
    );
    assert_eq!(rows(0, "unexpected"), [pending(1, 1, Some(79), 400_000)]);
    assert_eq!(rows(1, "receives"), [pending(-1, -1, Some(1000), 4)]);
    assert_eq!(rows(1, "unexpected"), []);
    // MPICH's send queue: the Issend, its length from its UCP request.
    assert_eq!(rows(1, "sends"), [pending(0, 0, Some(79), 400_000)]);
    match got.get(&(0, world.clone(), "sends")) {
        Some(Listed::NotAvailable(why)) => assert!(
            why.contains("sends completed locally under UCX are not listed"),
            "{why}"
        ),
        other => panic!("rank 0 sends: {other:?}"),
    }
    let firsts: Vec<String> = dump["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["global_rank"] == 0)
        .flat_map(|p| p["communicators"]["list"].as_array().unwrap().clone())
        .filter(|c| c["name"] == "MPI_COMM_WORLD")
        .flat_map(|c| c["receives"]["operations"].as_array().unwrap().clone())
        .map(|op| op["extra_text"][0].as_str().unwrap_or_default().to_string())
        .collect();
    // The receives name their MPICH requests (the persistent one's the
    // request MPI_Start made), the probed message its holder.
    assert!(
        firsts[0].starts_with("receive request 0x")
            && firsts[1].starts_with("receive request 0x")
            && firsts[2].starts_with("message taken by MPI_Mprobe: 0x"),
        "{firsts:?}"
    );
}

/// MPICH without debugger support keeps no communicator list: our DLL then
/// finds the communicators among MPICH's communicator objects in use
/// (`MPIR_Comm_builtin`, `MPIR_Comm_mem`) and ch4's active-message queues
/// in `MPIDI_global` (Debian's stock MPICH, `tests/e2e/stock.rs`). Here the
/// same reading (`MQS_MPICH_COMMS=pool`) on the `-g` builds, whose list
/// and queue pointers MPICH does keep, must give exactly what they give:
/// the `queues` job on ch4:ucx (queues in UCX) and on ch4:ofi with every
/// message on the active-message path (queues in `MPIDI_global`).
#[test]
fn mpich_communicators_from_the_pools_are_those_of_the_list() {
    let dll = mqs_tests::our_dll(false).display().to_string();
    let am = LaunchOptions {
        env: vec![("MPIR_CVAR_CH4_OFI_ENABLE_TAGGED".into(), "0".into())],
        ..LaunchOptions::default()
    };
    for (mpi, options) in [
        (Mpi::MpichUcx, LaunchOptions::default()),
        (Mpi::MpichCh4, am),
    ] {
        let job = Job::launch_with(mpi, "queues", 2, &[], &options)
            .unwrap_or_else(|e| panic!("launch queues on {mpi}: {e}"));
        let listed = settled(&job, "mqs-wait");
        let pid = job.launcher_pid().to_string();
        let out = run_env(
            &["--pid", &pid, "--json", "--dll", &dll],
            &[("MQS_MPICH_COMMS", "pool")],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let pooled: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(
            pooled
                .to_string()
                .contains("communicators from MPICH's object pools"),
            "{mpi}: {pooled:#}"
        );
        assert_eq!(
            queues(&pooled),
            queues(&listed),
            "{mpi}: from the pools\n{pooled:#}\nfrom the list\n{listed:#}"
        );
    }
}
