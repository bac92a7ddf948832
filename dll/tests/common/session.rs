//! The DLL under test in the real host's hands: this build's cdylib loaded
//! by `mqs_core::dll::Dll`, driven by a `mqs_core::dll::Session` over
//! processes recorded with `mqs-dump --save` (`mqs_core::process::
//! SnapshotProcess` targets answering from the recorded pages, symbols and
//! types answered from the recorded lookups alone).
//!
//! The recordings are `dll/tests/data/NAME.BUILD.snap.gz` (a snapshot
//! file, gzipped; BUILD is `mpi1` or `mpi2`, the DLL build that recorded
//! it) with `NAME.BUILD.json` (what the fixture is, and what the dump that
//! saved it printed); `scripts/record-snapshots` makes them with
//! `dll/tests/record.rs`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use mqs_acquire::members::Member;
use mqs_acquire::snapshot::{Snapshot, SymbolLog};
use mqs_core::dll::{Dll, Session};
use mqs_core::interface::{ImageSymbols, Target};
use mqs_core::model::{
    CommunicatorDump, CommunicatorList, NewProcess, NewProcessList, Operation, Queue, Section,
};
use mqs_core::process::SnapshotProcess;
use mqs_tests::{Family, Mpi};
use serde_json::Value;

/// The interface level of this build: 3 with the `mpi2` feature, else 2.
pub const COMPATIBILITY: i32 = if cfg!(feature = "mpi2") { 3 } else { 2 };

/// The cdylib of this very build, beside the test binary (checked to
/// exist and to be newer than the DLL's sources; [`our_dll`] checks its
/// interface level).
pub fn our_dll_path() -> PathBuf {
    mqs_tests::dll_beside_test_binary(BUILD)
}

/// The command that builds the DLL this test binary runs.
const BUILD: &str = if cfg!(feature = "mpi2") {
    "cargo test -p mqs-dll --features mpi2"
} else {
    "cargo test -p mqs-dll"
};

/// [`our_dll_path`], loaded once for the whole test binary.
pub fn our_dll() -> &'static Dll {
    static DLL: OnceLock<&'static Dll> = OnceLock::new();
    DLL.get_or_init(|| {
        let path = our_dll_path();
        let dll = Dll::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
        assert_eq!(
            dll.compatibility,
            COMPATIBILITY,
            "{} is not this build's DLL (compatibility {}, this test expects {COMPATIBILITY}): \
             rebuild with the same features as the test",
            path.display(),
            dll.compatibility
        );
        dll
    })
}

/// One recorded process.
#[derive(Debug)]
pub struct Recorded {
    pub member: Member,
    pub executable: String,
    pub target: SnapshotProcess,
    /// The lookups the DLLs made when it was recorded, with their answers.
    pub symbols: SymbolLog,
}

impl Recorded {
    /// What a session needs to dump this process (its memory borrowed).
    pub fn input(&self) -> Input<'_> {
        Input {
            image: self.executable.clone(),
            symbols: Box::new(self.symbols.clone()),
            target: Box::new(&self.target),
            identity: self.member.identity,
        }
    }
}

/// A recorded job: `dll/tests/data/NAME.BUILD.snap.gz` and `NAME.BUILD.json`.
#[derive(Debug)]
pub struct Recording {
    pub name: &'static str,
    pub processes: Vec<Recorded>,
    /// `NAME.BUILD.json`: the fixture (`fixture`, `mpi`, `args`, `ranks`)
    /// and, per process (`processes[i]`, by `global_rank`), what the
    /// recording dump printed with this build of our DLL
    /// (`communicators`, `new_processes`, `spawn_breakpoint` as in
    /// docs/json.md).
    pub about: Value,
}

impl Recording {
    /// What the live dump printed for the process of identity `identity`.
    pub fn expected(&self, identity: i32) -> &Value {
        self.about["processes"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|p| p["global_rank"].as_i64() == Some(i64::from(identity)))
            })
            .unwrap_or_else(|| panic!("{}: nothing recorded for {identity}", self.name))
    }

    /// The process whose MPI_COMM_WORLD rank (identity) is `rank`.
    pub fn rank(&self, rank: i32) -> &Recorded {
        self.processes
            .iter()
            .find(|p| p.member.identity == rank)
            .unwrap_or_else(|| panic!("{}: no rank {rank}", self.name))
    }
}

/// What a recording is: a fixture run as a job of one of the test MPIs.
#[derive(Debug)]
pub struct Plan {
    pub name: &'static str,
    pub fixture: &'static str,
    pub ranks: u32,
    pub args: &'static [&'static str],
    /// Open MPI 4.1.4 `-g` or release (no DWARF for ob1), Open MPI 5.0.7
    /// `-g`, or MPICH 4.0.2 ch3 or ch4 (`-g`).
    pub mpi: Mpi,
    /// Recorded for the MPI-2 build only.
    pub mpi2_only: bool,
    /// The job's environment, besides what the launch sets.
    pub env: &'static [(&'static str, &'static str)],
}

/// The recordings `dll/tests/data` holds, for each build of the DLL:
/// `NAME.BUILD.snap.gz` and `NAME.BUILD.json` (`scripts/record-snapshots`).
pub const RECORDINGS: &[Plan] = &[
    Plan {
        name: "queues",
        fixture: "queues",
        ranks: 2,
        args: &["3"],
        mpi: Mpi::OpenMpiG,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "queues-release",
        fixture: "queues",
        ranks: 2,
        args: &["3"],
        mpi: Mpi::OpenMpiRelease,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "intercomm",
        fixture: "intercomm",
        ranks: 4,
        args: &[],
        mpi: Mpi::OpenMpiG,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "progress",
        fixture: "progress",
        ranks: 2,
        args: &[],
        mpi: Mpi::OpenMpiG,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "spawn",
        fixture: "spawn",
        ranks: 2,
        args: &[],
        mpi: Mpi::OpenMpiG,
        mpi2_only: true,
        env: &[],
    },
    // MPICH 4.0.2 ch3 (dll/tests/mpich_fuzz.rs): the 2-rank job with two
    // extra operations, and the 8-rank one with derived datatypes.
    Plan {
        name: "mpich-queues2",
        fixture: "queues",
        ranks: 2,
        args: &["2"],
        mpi: Mpi::Mpich,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "mpich-queues8",
        fixture: "queues",
        ranks: 8,
        args: &[],
        mpi: Mpi::Mpich,
        mpi2_only: false,
        env: &[],
    },
    // Open MPI 5.0.7 (-g): the same fixture as "queues", found through
    // prterun's PMIx server.
    Plan {
        name: "ompi5-queues",
        fixture: "queues",
        ranks: 2,
        args: &["3"],
        mpi: Mpi::OpenMpi5G,
        mpi2_only: false,
        env: &[],
    },
    // Open MPI 4.1.4 under pml ucx: the queues are UCX's (the worker's
    // expected queues and unexpected descriptors, libucp's DWARF).
    Plan {
        name: "ucx-queues",
        fixture: "queues",
        ranks: 2,
        args: &["3"],
        mpi: Mpi::OpenMpiUcx,
        mpi2_only: false,
        env: &mqs_tests::PML_UCX_ENV,
    },
    // The same under Open MPI 5.0.7's pml ucx (the tag's context is the
    // communicator's c_index) and MPICH 4.0.2's ch4:ucx (its own tag
    // layout, every VCI's worker; the launcher sets UCX's transports).
    Plan {
        name: "ompi5-ucx-queues",
        fixture: "queues",
        ranks: 2,
        args: &["3"],
        mpi: Mpi::OpenMpi5Ucx,
        mpi2_only: false,
        env: &mqs_tests::PML_UCX_ENV,
    },
    Plan {
        name: "mpich-ucx-queues",
        fixture: "queues",
        ranks: 2,
        args: &[],
        mpi: Mpi::MpichUcx,
        mpi2_only: false,
        env: &[],
    },
    // MPICH 4.0.2 ch4:ofi with every message on its active-message path
    // (the only one whose receives it records): 3 ranks, rank 2's derived
    // datatypes, two extra operations.
    Plan {
        name: "mpich-ch4-queues3",
        fixture: "queues",
        ranks: 3,
        args: &["2"],
        mpi: Mpi::MpichCh4,
        mpi2_only: false,
        env: &[("MPIR_CVAR_CH4_OFI_ENABLE_TAGGED", "0")],
    },
    // Ranks that left MPI with messages waiting in the shared-memory
    // transport (tests/fixtures/spin_ring.c, 3 ranks: every kind of entry
    // the readers know): Open MPI 4.1.4's vader, 5.0.7's sm, MPICH 4.0.2's
    // nemesis.
    Plan {
        name: "spin-ring",
        fixture: "spin_ring",
        ranks: 3,
        args: &[],
        mpi: Mpi::OpenMpiG,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "ompi5-spin-ring",
        fixture: "spin_ring",
        ranks: 3,
        args: &[],
        mpi: Mpi::OpenMpi5G,
        mpi2_only: false,
        env: &[],
    },
    Plan {
        name: "mpich-spin-ring",
        fixture: "spin_ring",
        ranks: 3,
        args: &[],
        mpi: Mpi::Mpich,
        mpi2_only: false,
        env: &[],
    },
];

/// The recordings of this build, of one MPI family.
pub fn recordings(family: Family) -> impl Iterator<Item = &'static Plan> {
    RECORDINGS
        .iter()
        .filter(move |p| p.mpi.family() == family)
        .filter(|p| cfg!(feature = "mpi2") || !p.mpi2_only)
}

/// This build's name in the recordings' file names.
pub fn build_name() -> &'static str {
    if cfg!(feature = "mpi2") {
        "mpi2"
    } else {
        "mpi1"
    }
}

/// A recording, loaded once per test binary.
pub fn recording(name: &'static str) -> &'static Recording {
    static LOADED: Mutex<Option<HashMap<&'static str, &'static Recording>>> = Mutex::new(None);
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    let map = loaded.get_or_insert_with(HashMap::new);
    if let Some(r) = map.get(name) {
        return r;
    }
    let r: &'static Recording = Box::leak(Box::new(load(name)));
    map.insert(name, r);
    r
}

fn load(name: &'static str) -> Recording {
    let data = super::data("");
    let build = build_name();
    let about_path = data.join(format!("{name}.{build}.json"));
    let about: Value = std::fs::read_to_string(&about_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .unwrap_or_else(|e| panic!("{}: {e}", about_path.display()));
    let snap = unpacked(&data.join(format!("{name}.{build}.snap.gz")));
    let snapshot = Snapshot::load(&snap, &[]).unwrap_or_else(|e| panic!("{}: {e}", snap.display()));
    let processes = snapshot
        .processes
        .into_iter()
        .map(|e| Recorded {
            executable: e.target.executable.display().to_string(),
            symbols: e.symbols.log().clone(),
            member: e.member,
            target: e.target,
        })
        .collect();
    Recording {
        name,
        processes,
        about,
    }
}

/// The snapshot file inside `gz`, unpacked once into the target directory
/// (written under a temporary name, then renamed: test binaries running at
/// once never see half a file).
pub fn unpacked(gz: &Path) -> PathBuf {
    let dir = option_env!("CARGO_TARGET_TMPDIR")
        .map_or_else(std::env::temp_dir, PathBuf::from)
        .join("mqs-dll-snapshots");
    std::fs::create_dir_all(&dir).expect("snapshot directory");
    let name = gz
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = dir.join(&name);
    let mut bytes = Vec::new();
    let file = std::fs::File::open(gz).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/record-snapshots records it)",
            gz.display()
        )
    });
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", gz.display()));
    if std::fs::read(&out).ok().as_deref() != Some(&bytes[..]) {
        let tmp = dir.join(format!("{name}.{}.partial", std::process::id()));
        std::fs::write(&tmp, &bytes).expect("write snapshot");
        std::fs::rename(&tmp, &out).expect("rename snapshot");
    }
    out
}

/// One process to hand to a session.
pub struct Input<'t> {
    /// The image's name (the executable).
    pub image: String,
    pub symbols: Box<dyn ImageSymbols>,
    pub target: Box<dyn Target + 't>,
    /// Its MPI_COMM_WORLD rank, or the host's number for it (MPI-2).
    pub identity: i32,
}

/// What the session got from the DLL for one process.
#[derive(Debug, Clone)]
pub struct Dumped {
    /// Handing the image and process to the DLL (has_queues included).
    pub added: Result<(), String>,
    pub communicators: Section<CommunicatorList>,
    /// MPI-2 only, as in `mqs-dump --json`.
    pub new_processes: Option<Section<NewProcessList>>,
    pub spawn_breakpoint: Option<String>,
    /// Fetch callbacks over the whole session (setup included).
    pub fetches: u64,
    /// Reads the DLL asked for and did not get.
    pub unreadable: Vec<String>,
}

impl Dumped {
    /// The communicators; panics if the DLL listed none.
    pub fn comms(&self) -> &[CommunicatorDump] {
        match &self.communicators {
            Section::Ok { value } => &value.list,
            other => panic!("no communicators: {other:?} ({:?})", self.added),
        }
    }

    pub fn comm(&self, name: &str) -> &CommunicatorDump {
        self.comms()
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no communicator {name}"))
    }

    /// The communicators as `mqs-dump --json` prints them.
    pub fn json(&self) -> Value {
        serde_json::to_value(&self.communicators).unwrap_or_default()
    }
}

/// The operations of a queue the DLL read (panics if it could not, or cut
/// it short).
pub fn ops(queue: &Section<Queue>) -> &[Operation] {
    match queue {
        Section::Ok { value } => {
            assert_eq!(value.truncated, None, "a truncated queue");
            &value.operations
        }
        other => panic!("queue not read: {other:?}"),
    }
}

/// Hands every input to one session of `dll` (so that an MPI-2 DLL knows
/// every identity), then dumps each: the calling sequence mqs-dump uses.
pub fn run(dll: &'static Dll, inputs: Vec<Input<'_>>) -> Result<Vec<Dumped>, String> {
    // One session at a time, as mqs-dump runs them: the DLL keeps global
    // state (the reason of its last mqs_no_information), and a test binary
    // runs its tests on several threads.
    let _one_session_at_a_time = mqs_core::dll::exclusive();
    let mut session = Session::new(dll).map_err(|e| e.to_string())?;
    let mut added = Vec::new();
    for input in inputs {
        let pointer_size = input.target.pointer_size() as i32;
        let result = session
            .add_image(&input.image, input.symbols)
            .and_then(|image| {
                session.add_process(image, input.target, input.identity, pointer_size)
            });
        added.push(result.map_err(|e| e.to_string()));
    }
    Ok(added
        .into_iter()
        .map(|result| match result {
            Ok(id) => {
                let (communicators, _) = session.dump(id);
                let new_processes = session.new_processes(id).map(|s| match s {
                    Section::Ok { value } => Section::Ok {
                        value: NewProcessList {
                            list: value.into_iter().map(NewProcess::from).collect(),
                        },
                    },
                    Section::NotAvailable { reason } => Section::NotAvailable { reason },
                    Section::Error { message } => Section::Error { message },
                });
                Dumped {
                    added: Ok(()),
                    communicators,
                    new_processes,
                    spawn_breakpoint: session.spawn_breakpoint_name(id),
                    fetches: session.fetches(id),
                    unreadable: session.unreadable(id),
                }
            }
            Err(e) => Dumped {
                added: Err(e.clone()),
                communicators: Section::Error { message: e },
                new_processes: None,
                spawn_breakpoint: None,
                fetches: 0,
                unreadable: Vec::new(),
            },
        })
        .collect())
}

/// Every process of a recording through our DLL, in one session.
pub fn replay(rec: &'static Recording) -> Vec<Dumped> {
    // Under a time limit: a walk that never ends fails the test.
    mqs_tests::within(mqs_tests::DUMP_LIMIT, rec.name, move || {
        run(
            our_dll(),
            rec.processes.iter().map(Recorded::input).collect(),
        )
    })
    .and_then(|r| r)
    .unwrap_or_else(|e| panic!("{}: {e}", rec.name))
}

/// Replays a recording and checks each process against what the dump that
/// recorded it printed (communicators, new processes, spawn breakpoint),
/// every read answered, and fewer than `max_fetches` fetches per process.
/// Returns the most fetches one process needed.
pub fn check_replay(name: &'static str, max_fetches: u64) -> u64 {
    let rec = recording(name);
    assert!(!rec.processes.is_empty(), "{name}: no processes");
    let mut most = 0;
    for (p, d) in rec.processes.iter().zip(replay(rec)) {
        let identity = p.member.identity;
        let what = format!("{name} process {identity}");
        assert_eq!(d.added, Ok(()), "{what}");
        assert!(d.unreadable.is_empty(), "{what}: {:?}", d.unreadable);
        let live = rec.expected(identity);
        assert_eq!(d.json(), live["communicators"], "{what}");
        let new = d
            .new_processes
            .as_ref()
            .map(|n| serde_json::to_value(n).unwrap_or_default());
        assert_eq!(new.unwrap_or(Value::Null), live["new_processes"], "{what}");
        assert_eq!(
            d.spawn_breakpoint.clone().map_or(Value::Null, Value::from),
            live["spawn_breakpoint"],
            "{what}"
        );
        assert!(d.fetches < max_fetches, "{what}: {} fetches", d.fetches);
        most = most.max(d.fetches);
    }
    most
}

/// Replays a recording and checks every process of `expected` (each must
/// be recorded, and nothing else) against it with
/// `mqs_tests::contents::check_ours`. Returns the operations checked.
pub fn check_known(name: &'static str, expected: &[mqs_tests::contents::Process]) -> usize {
    let rec = recording(name);
    let got: Vec<(i32, Dumped)> = rec
        .processes
        .iter()
        .map(|p| p.member.identity)
        .zip(replay(rec))
        .collect();
    assert_eq!(got.len(), expected.len(), "{name}: processes");
    let mut checked = 0;
    for process in expected {
        let d = got
            .iter()
            .find(|(id, _)| i64::from(*id) == process.rank)
            .map(|(_, d)| d)
            .unwrap_or_else(|| panic!("{name}: no rank {}", process.rank));
        if let Err(e) = mqs_tests::contents::check_ours(process, &d.json()) {
            panic!("{name} ({}):\n{e}", rec.about["fixture"]);
        }
        checked += process.operations();
    }
    checked
}
