//! Our DLL against Open MPI's own, both loaded by our host on the same
//! stopped process of live Open MPI 4.1.4 and 5.0.7 jobs.
//!
//! Ours must hold exactly what the fixture left (`mqs_tests::contents`:
//! every operation, in order, unexpected messages included), and the two
//! must agree, operation by operation and in order, on every field and
//! `extra_text` line both give, but for the deliberate differences of
//! [`Difference`]: each a named defect of Open MPI's DLL (where ours must
//! give the right value, and theirs the wrong value the defect predicts) or
//! an extra of ours. Each test also says which differences its fixture
//! shows, so a listed one that no longer occurs fails too. The operations
//! compared are counted against the fixture's, so agreeing on nothing
//! fails.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mqs_abi::OpStatus;
use mqs_acquire::inspect::{dump_with_each_dll, Options};
use mqs_core::model::{CommunicatorDump, Operation, ProcessDump, Queue, Section};
use mqs_tests::contents::{self, Process};
use mqs_tests::{Job, Mpi};

/// Open MPI 4.1.4's DLL reads these -1 values as 32-bit unsigned.
const U32_MINUS_1: i64 = 4_294_967_295;

/// Every way the two DLLs deliberately differ on the fixtures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Difference {
    /// Theirs: MPI_ANY_SOURCE as 4294967295 (an int read as unsigned); ours -1.
    AnySourceUnsigned,
    /// Theirs lists MPI_COMM_NULL (size 0, rank 4294967294); ours omits it.
    CommNullListed,
    /// Theirs fills a pending receive's actual_* from its status, which is
    /// unset (MPI_TAG still MPI_ANY_TAG); ours leaves them -1.
    PendingActualFromUnsetStatus,
    /// Theirs translates an intercommunicator peer's global rank through
    /// the local group; ours through the remote group.
    InterPeerThroughLocalGroup,
    /// Theirs: "Data: N instances of MPI datatype" with N the datatype's
    /// size in bytes, not the count; ours "COUNT x NAME".
    InstancesAreTheSize,
    /// Theirs cuts the datatype's name to 4 characters ("MPI_").
    DatatypeNameCut,
    /// Theirs replaces the "Data:" line with "Data transfer completed" once
    /// the PML completed a request; ours keeps the count and says
    /// "complete, not yet waited for or freed".
    DataLineReplacedWhenComplete,
    /// Theirs reports a complete receive as matched (a set MPI_TAG
    /// overrides req_complete); ours as complete.
    CompleteReceiveAsMatched,
    /// Theirs reads a matched receive's actual_length from the status,
    /// which ob1 fills only at completion (0 while data still arrives);
    /// ours the length it was matched with.
    MatchedActualLengthZero,
    /// Theirs lists requests in the free lists' memory order (by request
    /// address); ours in MPI matching order, then matched and complete
    /// ones by posting sequence.
    FreeListOrder,
    /// Theirs has no unexpected messages (mqs_no_information); ours lists
    /// them.
    NoUnexpected,
}

/// Lines of ours' `extra_text` that theirs has no counterpart for (the
/// extras of ours: send mode, progress, matching order; dll/README.md).
const OUR_EXTRA_LINES: &[&str] = &[
    "mode: ",
    "waiting for the receiver",
    "matched",
    "complete, not yet waited for or freed",
    "posted #",
    "not in ob1's posted queues",
    "order: ",
];

fn our_dll() -> PathBuf {
    mqs_tests::our_dll(false)
}

fn their_dll(mpi: Mpi) -> PathBuf {
    mpi.prefix()
        .expect("Open MPI")
        .join("lib/openmpi/libompi_dbg_msgq.so")
}

fn communicators(dump: &ProcessDump) -> &[CommunicatorDump] {
    match &dump.communicators {
        Section::Ok { value } => &value.list,
        other => panic!("no communicators from {}: {other:?}", dump.dll.path),
    }
}

fn operations<'a>(queue: &'a Section<Queue>, what: &str) -> &'a [Operation] {
    match queue {
        Section::Ok { value } => {
            assert!(
                value.truncated.is_none(),
                "{what}: truncated: {:?}",
                value.truncated
            );
            &value.operations
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// The request address a first `extra_text` line names: ours
/// "send request 0x…"/"receive request 0x…", theirs "Send: 0x…"/"Receive: 0x…".
fn request(op: &Operation, theirs: bool) -> (bool, u64) {
    let line = op.extra_text.first().unwrap_or("");
    let (send, hex) = if theirs {
        match line.split_once(": 0x") {
            Some(("Send", hex)) => (true, hex),
            Some(("Receive", hex)) => (false, hex),
            _ => panic!("theirs: no request in {op:?}"),
        }
    } else {
        match line.split_once(" request 0x") {
            Some(("send", hex)) => (true, hex),
            Some(("receive", hex)) => (false, hex),
            _ => panic!("ours: no request in {op:?}"),
        }
    };
    let addr = u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{line}: {e}"));
    (send, addr)
}

/// Compares one queue, theirs against ours, operation by operation in
/// theirs' order; records the differences seen.
fn compare_queue(
    what: &str,
    theirs: &[Operation],
    ours: &[Operation],
    group: &[i64],
    seen: &mut BTreeSet<Difference>,
) {
    assert_eq!(
        theirs.len(),
        ours.len(),
        "{what}: theirs {theirs:#?}\nours {ours:#?}"
    );
    // Order: theirs by request address (the free list walked in memory
    // order, its slabs ascending); the same requests as ours.
    let their_requests: Vec<u64> = theirs.iter().map(|t| request(t, true).1).collect();
    assert!(
        their_requests.windows(2).all(|w| w[0] < w[1]),
        "{what}: theirs not in the free lists' memory order: {their_requests:x?}"
    );
    let mut by_address: Vec<&Operation> = ours.iter().collect();
    by_address.sort_by_key(|o| request(o, false).1);
    if by_address
        .iter()
        .zip(ours)
        .any(|(a, b)| !std::ptr::eq(*a, b))
    {
        seen.insert(Difference::FreeListOrder);
    }
    for (t, o) in theirs.iter().zip(by_address) {
        let what = format!("{what} request {:#x}", request(t, true).1);
        assert_eq!(
            request(t, true),
            request(o, false),
            "{what}: the same request"
        );
        compare_operation(&what, t, o, group, seen);
    }
}

fn compare_operation(
    what: &str,
    t: &Operation,
    o: &Operation,
    group: &[i64],
    seen: &mut BTreeSet<Difference>,
) {
    let (is_send, _) = request(o, false);
    let mut t = t.clone();
    // Ranks.
    if t.desired_local_rank == U32_MINUS_1 && o.desired_local_rank == -1 {
        seen.insert(Difference::AnySourceUnsigned);
        assert_eq!(t.desired_global_rank, -1, "{what}: theirs ANY_SOURCE");
        t.desired_local_rank = -1;
    }
    if t.desired_global_rank != o.desired_global_rank {
        let local = usize::try_from(t.desired_local_rank)
            .ok()
            .and_then(|r| group.get(r));
        assert_eq!(
            local,
            Some(&t.desired_global_rank),
            "{what}: theirs' global rank is not the local group's either"
        );
        seen.insert(Difference::InterPeerThroughLocalGroup);
        t.desired_global_rank = o.desired_global_rank;
        if is_send && t.actual_global_rank == t.actual_local_rank {
            t.actual_global_rank = o.actual_global_rank;
        }
    }
    // Status.
    if !is_send && o.status == OpStatus::Complete && t.status == OpStatus::Matched {
        seen.insert(Difference::CompleteReceiveAsMatched);
        t.status = OpStatus::Complete;
    }
    // Actual fields: a pending receive's mean nothing in theirs.
    if !is_send && o.status == OpStatus::Pending {
        assert_eq!(
            (
                o.actual_local_rank,
                o.actual_global_rank,
                o.actual_tag,
                o.actual_length
            ),
            (-1, -1, -1, -1),
            "{what}: ours leaves a pending receive's actual fields unset"
        );
        assert_eq!(
            t.actual_tag, U32_MINUS_1,
            "{what}: theirs read an unset status (MPI_TAG is MPI_ANY_TAG)"
        );
        seen.insert(Difference::PendingActualFromUnsetStatus);
        (
            t.actual_local_rank,
            t.actual_global_rank,
            t.actual_tag,
            t.actual_length,
        ) = (-1, -1, -1, -1);
    }
    if !is_send && o.status == OpStatus::Matched && t.actual_length != o.actual_length {
        assert_eq!(t.actual_length, 0, "{what}: theirs' actual_length");
        assert_eq!(o.actual_length, o.desired_length, "{what}: ours");
        seen.insert(Difference::MatchedActualLengthZero);
        t.actual_length = o.actual_length;
    }
    let fields = |op: &Operation| {
        (
            op.status,
            op.desired_local_rank,
            op.desired_global_rank,
            op.desired_tag,
            op.desired_length,
            op.system_buffer,
            op.buffer,
            op.actual_local_rank,
            op.actual_global_rank,
            op.actual_tag,
            op.actual_length,
        )
    };
    assert_eq!(fields(&t), fields(o), "{what}: theirs (corrected), ours");
    let theirs: Vec<&str> = t.extra_text.iter().collect();
    compare_text(what, &theirs, o, seen);
}

/// extra_text: theirs is [request, "Data: …" or "Data transfer completed",
/// the datatype's name cut]; ours [request, count, then our extras].
fn compare_text(what: &str, theirs: &[&str], o: &Operation, seen: &mut BTreeSet<Difference>) {
    assert_eq!(theirs.len(), 3, "{what}: theirs' extra_text {theirs:?}");
    let count_of = |line: &str| {
        line.split_once(" x ")
            .and_then(|(n, name)| Some((n.parse::<i64>().ok()?, name.to_string())))
    };
    let (at, count_line, (count, name)) = o
        .extra_text
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(i, l)| Some((i, l, count_of(l)?)))
        .unwrap_or_else(|| panic!("{what}: ours has no count line: {:?}", o.extra_text));
    let size = o.desired_length / count.max(1);
    if theirs[1] == "Data transfer completed" {
        assert_eq!(o.status, OpStatus::Complete, "{what}: theirs says complete");
        seen.insert(Difference::DataLineReplacedWhenComplete);
    } else {
        assert_eq!(
            theirs[1],
            format!("Data: {size} instances of MPI datatype"),
            "{what}: theirs' data line (ours: {count_line})"
        );
        if size != count {
            seen.insert(Difference::InstancesAreTheSize);
        }
        assert_ne!(
            o.status,
            OpStatus::Complete,
            "{what}: theirs misses complete"
        );
    }
    assert!(
        name.starts_with(theirs[2]) && !theirs[2].is_empty(),
        "{what}: theirs' datatype {:?}, ours {name}",
        theirs[2]
    );
    if theirs[2].len() < name.len() {
        seen.insert(Difference::DatatypeNameCut);
    }
    let others = o.extra_text.iter().enumerate().skip(1);
    for line in others.filter(|(i, _)| *i != at).map(|(_, l)| l) {
        assert!(
            OUR_EXTRA_LINES.iter().any(|p| line.starts_with(p)),
            "{what}: ours' line {line:?} is neither in theirs nor a listed extra"
        );
    }
}

/// One dump of the process through both DLLs, compared; returns ours and
/// the differences seen, or why ours does not hold the fixture's contents
/// (yet: a rank may still be on its way into its blocking call).
/// What one rank's cross-check gave: the differences seen, the sends and
/// receives compared, and the round trips each DLL cost a debugger that
/// answers through another process (theirs, ours).
struct Checked {
    ours: ProcessDump,
    seen: BTreeSet<Difference>,
    compared: usize,
    round_trips: (u64, u64),
}

fn compare_once(mpi: Mpi, pid: u32, expected: &Process) -> Result<Checked, String> {
    let dlls = [their_dll(mpi), our_dll()];
    let dumps = mqs_tests::within(mqs_tests::DUMP_LIMIT, &format!("pid {pid}"), move || {
        dump_with_each_dll(pid as i32, &dlls, &Options::default()).map_err(|e| e.to_string())
    })
    .and_then(|d| d)
    .unwrap_or_else(|e| panic!("both DLLs dump the same stopped process: {e}"));
    let (theirs, ours) = (&dumps[0], &dumps[1]);
    let json = serde_json::to_value(&ours.communicators).expect("JSON");
    contents::check_ours(expected, &json)?;
    // Ours names itself and, once it has seen the image, the MPI it found.
    assert!(
        ours.dll.version.contains("mqs") && ours.dll.version.contains("detected: Open MPI"),
        "{}",
        ours.dll.version
    );
    let mut seen = BTreeSet::new();
    let mut compared = 0;
    let ours_comms = communicators(ours);
    for t in communicators(theirs) {
        if t.name == "MPI_COMM_NULL" {
            assert_eq!(
                (t.size, t.local_rank),
                (0, U32_MINUS_1 - 1),
                "their MPI_COMM_NULL"
            );
            assert!(!ours_comms.iter().any(|o| o.name == "MPI_COMM_NULL"));
            seen.insert(Difference::CommNullListed);
            continue;
        }
        let what = format!("pid {pid} {} (id {})", t.name, t.unique_id);
        let o = ours_comms
            .iter()
            .find(|o| o.unique_id == t.unique_id)
            .unwrap_or_else(|| panic!("{what}: missing from ours"));
        assert_eq!(
            (&o.name, o.size, o.local_rank, &o.group),
            (&t.name, t.size, t.local_rank, &t.group),
            "{what}"
        );
        let group = o.group.clone().unwrap_or_default();
        for (class, tq, oq) in [
            ("sends", &t.sends, &o.sends),
            ("receives", &t.receives, &o.receives),
        ] {
            let what = format!("{what} {class}");
            let (tq, oq) = (operations(tq, &what), operations(oq, &what));
            compare_queue(&what, tq, oq, &group, &mut seen);
            compared += oq.len();
        }
        assert!(
            matches!(t.unexpected, Section::NotAvailable { .. }),
            "{what}: theirs now has unexpected messages? {:?}",
            t.unexpected
        );
        if matches!(o.unexpected, Section::Ok { .. }) {
            seen.insert(Difference::NoUnexpected);
        }
    }
    // Ours lists nothing theirs does not (but MPI_COMM_NULL).
    for o in ours_comms {
        assert!(
            communicators(theirs)
                .iter()
                .any(|t| t.unique_id == o.unique_id),
            "ours lists {} (id {}) that theirs does not",
            o.name,
            o.unique_id
        );
    }
    // Every send and receive the fixture left was compared.
    let fixture: usize = expected
        .comms
        .iter()
        .map(|c| c.sends.ops().len() + c.receives.ops().len())
        .sum();
    assert_eq!(
        compared, fixture,
        "pid {pid}: operations compared against the fixture's"
    );
    Ok(Checked {
        ours: ours.clone(),
        seen,
        compared,
        round_trips: (
            theirs.stats.callbacks.round_trips(),
            ours.stats.callbacks.round_trips(),
        ),
    })
}

/// Cross-checks one rank, retrying for a while until ours holds the
/// fixture's contents; returns the differences seen and the sends and
/// receives compared.
fn cross_check(mpi: Mpi, job: &Job, expected: &Process) -> Checked {
    let rank = u32::try_from(expected.rank).expect("rank");
    let pid = job.rank_pid(rank).expect("rank pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match compare_once(mpi, pid, expected) {
            Ok(checked) => return checked,
            Err(e) if Instant::now() >= deadline => {
                panic!("{} rank {rank}: {e}", job.fixture())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// Cross-checks every rank of a fixture's job; asserts the differences
/// seen, that operations were compared at all, and that on every rank ours
/// costs a debugger that answers through another process (padb's `minfo`
/// asking gdb: a round trip per lookup and per 256 bytes fetched) fewer
/// round trips than theirs, though it reads more.
fn check_job(mpi: Mpi, job: &Job, expected: &[Process], differences: &[Difference]) {
    let mut seen = BTreeSet::new();
    let mut compared = 0;
    for process in expected {
        let checked = cross_check(mpi, job, process);
        let (theirs, ours) = checked.round_trips;
        eprintln!(
            "{} rank {}: round trips: theirs {theirs}, ours {ours}",
            job.fixture(),
            process.rank
        );
        assert!(
            ours < theirs,
            "{} rank {}: ours costs {ours} round trips, theirs {theirs}",
            job.fixture(),
            process.rank
        );
        seen.extend(checked.seen);
        compared += checked.compared;
    }
    eprintln!(
        "{}: {compared} sends and receives agree; differences: {seen:?}",
        job.fixture()
    );
    assert!(compared > 0, "nothing compared");
    let wanted: BTreeSet<Difference> = differences.iter().copied().collect();
    assert_eq!(seen, wanted, "{}: the differences seen", job.fixture());
}

use Difference::*;

/// What every fixture shows on Open MPI 4.1.4 with ob1's debug info.
const ALWAYS: &[Difference] = &[
    CommNullListed,
    PendingActualFromUnsetStatus,
    InstancesAreTheSize,
    DatatypeNameCut,
    NoUnexpected,
];

fn with(more: &[Difference]) -> Vec<Difference> {
    ALWAYS.iter().chain(more).copied().collect()
}

#[test]
fn queues_fixture_agrees_and_shows_unexpected_messages() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &["3"]).expect("launch");
    check_job(
        Mpi::OpenMpiG,
        &job,
        &contents::queues(3, true),
        &with(&[AnySourceUnsigned, FreeListOrder]),
    );
    job.shutdown().unwrap();
}

#[test]
fn intercomm_fixture_agrees_and_translates_remote_ranks() {
    let job = Job::launch(Mpi::OpenMpiG, "intercomm", 4, &[]).expect("launch");
    check_job(
        Mpi::OpenMpiG,
        &job,
        &contents::intercomm(),
        &with(&[AnySourceUnsigned, InterPeerThroughLocalGroup]),
    );
    job.shutdown().unwrap();
}

#[test]
fn ring_fixture_agrees() {
    let job = Job::launch(Mpi::OpenMpiG, "ring", 3, &[]).expect("launch");
    check_job(Mpi::OpenMpiG, &job, &contents::ring(3), ALWAYS);
    job.shutdown().unwrap();
}

/// A matched rendezvous receive whose data has not all arrived and a
/// complete receive nobody waited for: theirs calls both matched, gives
/// the first an actual_length of 0 and the second "Data transfer
/// completed"; ours as the fixture says.
#[test]
fn progress_fixture_agrees_on_matched_and_complete_receives() {
    let job = Job::launch(Mpi::OpenMpiG, "progress", 2, &[]).expect("launch");
    check_job(
        Mpi::OpenMpiG,
        &job,
        &contents::progress(),
        &with(&[
            AnySourceUnsigned,
            FreeListOrder,
            CompleteReceiveAsMatched,
            MatchedActualLengthZero,
            DataLineReplacedWhenComplete,
        ]),
    );
    job.shutdown().unwrap();
}

/// Without ob1's debug info neither DLL lists unexpected messages; ours
/// says why (contents' `Unavailable` queues), and takes its receives from
/// the free lists sorted by posting sequence. Open MPI 4.1.4's release
/// build is read by ours through ob1's pack of Debian's build of the same
/// Open MPI (`borrowed`: see `acquire::typepack::borrowed`), as the -g
/// build is; theirs still lists no unexpected message.
fn release_build_agrees(mpi: Mpi, borrowed: bool) {
    let job = Job::launch(mpi, "queues", 2, &[]).expect("launch");
    let expected = contents::queues(0, borrowed);
    let mut differences = vec![
        CommNullListed,
        PendingActualFromUnsetStatus,
        InstancesAreTheSize,
        DatatypeNameCut,
        AnySourceUnsigned,
    ];
    if borrowed {
        differences.push(NoUnexpected);
    }
    check_job(mpi, &job, &expected, &differences);
    let pid = job.rank_pid(0).unwrap();
    let ours = compare_once(mpi, pid, &expected[0]).expect("settled").ours;
    for comm in communicators(&ours) {
        match &comm.unexpected {
            Section::NotAvailable { reason } if !borrowed => {
                assert!(reason.contains("debug"), "{}: {reason}", comm.name)
            }
            Section::Ok { .. } if borrowed => {}
            other => panic!(
                "{}: unexpected queue (ob1's layouts {}): {other:?}",
                comm.name,
                if borrowed { "borrowed" } else { "unknown" }
            ),
        }
    }
    job.shutdown().unwrap();
}

#[test]
fn release_build_agrees_and_shows_unexpected_through_a_borrowed_pack() {
    release_build_agrees(Mpi::OpenMpiRelease, true);
}

/// Open MPI 5.0.7: the same defects in its own DLL; both take the unique
/// id from `c_index`.
#[test]
fn open_mpi_5_queues_fixture_agrees_and_shows_unexpected_messages() {
    let job = Job::launch(Mpi::OpenMpi5G, "queues", 2, &["3"]).expect("launch");
    check_job(
        Mpi::OpenMpi5G,
        &job,
        &contents::queues(3, true),
        &with(&[AnySourceUnsigned, FreeListOrder]),
    );
    job.shutdown().unwrap();
}

#[test]
fn open_mpi_5_release_build_agrees_and_says_why_unexpected_is_unavailable() {
    release_build_agrees(Mpi::OpenMpi5Release, false);
}
