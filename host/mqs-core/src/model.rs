//! The owned model of what a dump found: job -> processes -> communicators
//! -> queues. Rendering and analysis work on this, never on raw memory.
//!
//! It serialises to the `--json` output; the schema is documented in
//! `docs/json.md` and versioned by [`SCHEMA_VERSION`]. It reads back from
//! that JSON unchanged, which is how collectors on other hosts send their
//! share of a job (`collect`).

use mqs_abi::{Communicator, OpClass, PendingOperation};
use serde::{Deserialize, Serialize};

mod section;

/// Bumped on any incompatible change of the JSON output.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobDump {
    pub schema_version: u32,
    /// The MPI starter the ranks were found through, if one was given.
    pub launcher: Option<Launcher>,
    pub processes: Vec<ProcessDump>,
    /// Ranks of the job that could not be dumped, and why.
    pub failures: Vec<RankFailure>,
}

/// A [`JobDump`] serialized as expanded, one rank at a time
/// ([`JobDump::each_rank`]).
#[derive(Debug, Clone, Copy)]
pub struct EachRank<'a>(&'a JobDump);

impl Serialize for EachRank<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // JobDump's own fields, in its order (a unit test holds the two
        // alike).
        let job = self.0;
        let mut s = serializer.serialize_struct("JobDump", 4)?;
        s.serialize_field("schema_version", &job.schema_version)?;
        s.serialize_field("launcher", &job.launcher)?;
        s.serialize_field("processes", &RanksOf(&job.processes))?;
        s.serialize_field("failures", &job.failures)?;
        s.end()
    }
}

/// The dumps of every rank that `processes` (runs among them) stand for.
struct RanksOf<'a>(&'a [ProcessDump]);

impl Serialize for RanksOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use std::borrow::Cow;
        serializer.collect_seq(self.0.iter().flat_map(|p| {
            let single = (p.run_len <= 1).then(|| {
                if p.has_fixed_in_run() {
                    let mut one = p.clone();
                    one.clear_fixed_in_run();
                    Cow::Owned(one)
                } else {
                    Cow::Borrowed(p)
                }
            });
            let members = (p.run_len > 1).then(|| p.each_rank().map(Cow::Owned));
            single.into_iter().chain(members.into_iter().flatten())
        }))
    }
}

impl JobDump {
    /// How many ranks its dumps stand for.
    pub fn rank_count(&self) -> usize {
        self.processes
            .iter()
            .map(|p| p.run_len.max(1) as usize)
            .sum()
    }

    /// Whether some dump stands for several ranks.
    pub fn is_compact(&self) -> bool {
        self.processes.iter().any(|p| p.run_len > 1)
    }

    /// The job as [`JobDump::expand`] would make it, to serialize: each
    /// rank's dump is made as it is written and dropped after, so a job
    /// of runs is written out in about the memory it takes itself. Its
    /// JSON is the expanded job's, byte for byte.
    pub fn each_rank(&self) -> EachRank<'_> {
        EachRank(self)
    }

    /// One dump per rank: what `--json`, the per-rank listing and anything
    /// that reads `processes` one by one need.
    pub fn expand(&mut self) {
        if !self.is_compact() {
            return;
        }
        let runs = std::mem::take(&mut self.processes);
        self.processes = runs.into_iter().flat_map(ProcessDump::split_run).collect();
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launcher {
    pub pid: i32,
    pub executable: String,
    /// How its ranks were found where not from its own table, and what
    /// that leaves out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// "pid 12 on node3", or "pid 12" for a process of this host (whose host
/// is recorded as "").
pub fn pid_on(pid: impl std::fmt::Display, host: &str) -> String {
    if host.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid} on {host}")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankFailure {
    /// Its number in the job, as `ProcessDump::global_rank`.
    pub rank: usize,
    pub pid: i32,
    pub host: String,
    pub message: String,
    /// The exit code mqs-dump would give for this error alone.
    pub exit_code: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DllInfo {
    pub path: String,
    pub version: String,
    pub compatibility: i32,
    /// The MPI the DLL recognised in the process, as its version string
    /// says after `detected: ` (mqs's DLL); absent if it does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<String>,
    /// The DLL's backend that read it, after `backend: ` (mqs's DLL:
    /// `openmpi`, `mpich-ch3`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// How the DLL was chosen, when the tool chose it (none was asked
    /// for): mqs's own, or the one the MPI names and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
}

impl DllInfo {
    /// The DLL's facts, with the MPI and backend its version string names.
    pub fn new(path: String, version: String, compatibility: i32) -> Self {
        let (mpi, backend) = recognised(&version);
        DllInfo {
            path,
            version,
            compatibility,
            mpi,
            backend,
            chosen: None,
        }
    }
}

/// `...; detected: WHAT; backend: NAME` (mqs's DLL writes no `;` inside
/// either part) -> (WHAT, NAME).
fn recognised(version: &str) -> (Option<String>, Option<String>) {
    let Some((_, rest)) = version.split_once("; detected: ") else {
        return (None, None);
    };
    let mut parts = rest.split("; ");
    let mpi = parts.next().map(str::trim).filter(|s| !s.is_empty());
    let backend = parts
        .find_map(|p| p.strip_prefix("backend: "))
        .map(str::trim)
        .filter(|s| !s.is_empty());
    (mpi.map(String::from), backend.map(String::from))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessDump {
    pub pid: i32,
    /// The process's number in the job: its MPI_COMM_WORLD rank (from MPIR
    /// or its environment), or for a spawned process the identity the host
    /// gave it after every world rank, which MPI-2 DLLs report as its global
    /// rank. -1 if unknown.
    pub global_rank: i32,
    /// The host it runs on, as the job's starter names it: set for processes
    /// read by a collector on that host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Set for a process started after the job (MPI_Comm_spawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned: Option<SpawnedJob>,
    pub executable: String,
    pub dll: DllInfo,
    /// The communicator list, or why there is none.
    pub communicators: Section<CommunicatorList>,
    /// MPI-2 DLLs only: processes the MPI created or connected to (spawned),
    /// where a debugger should attach next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_processes: Option<Section<NewProcessList>>,
    /// What the DLL printed by itself (kept off our stdout and stderr).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dll_output: Vec<String>,
    /// MPI-2 DLLs only: the function to stop in to learn about spawns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_breakpoint: Option<String>,
    /// The libraries whose types were read through type packs (no DWARF of
    /// their own), one line each: the library, the pack, and how the pack
    /// was checked against this process (a pack made for another build
    /// says so, or why it was not used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub type_packs: Vec<String>,
    /// Memory the DLL asked for and did not get (a core or snapshot that
    /// lacks it, an unmapped address), each as `LEN bytes at ADDR: why`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// The debugger (gdb, lldb) that held the process stopped: it was read
    /// as that debugger holds it, without being traced or let go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<crate::interface::HeldBy>,
    /// What the operating system said the process was doing before mqs
    /// stopped it (live processes): a rank stopped by a signal or held by
    /// another tracer makes no progress until it is let go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_state: Option<crate::interface::OsState>,
    /// With `--stacks`: each thread's call stack, read while the process
    /// was stopped, or why there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Section<ThreadList>>,
    pub stats: DumpStats,
    /// How many ranks this dump stands for: 1 for one process. More only
    /// in a compact job ([`JobDump::expand`]), where ranks in equal states
    /// stay one dump: global ranks `global_rank..global_rank + run_len`
    /// with pids `pid..pid + run_len` (pid 0: a collector tree's ranks by
    /// number, whose pids the job view never names), the same in all else but a
    /// communicator whose local rank is `global_rank`, on which each rank
    /// is its own global rank (MPI_COMM_WORLD and its copies).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub run_len: u32,
    /// In a run: each further rank's peers on those communicators are
    /// its place in the run further on, modulo the communicator's size
    /// (a ring: rank r receives from r-1), instead of the first rank's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_shifts_peers: bool,
}

/// A peer's rank (of an operation's `desired_*` or `actual_*` field) for
/// the rank `shift` places further on in a run whose peers shift, on a
/// communicator of `size`: ranks move along, `ANY_SOURCE` and unknown
/// ones (negative) stay.
pub fn shifted_peer(peer: i64, shift: i64, size: i64) -> i64 {
    if peer < 0 || shift == 0 || size <= 0 || peer >= size {
        return peer;
    }
    (peer + shift).rem_euclid(size)
}

/// Whether a peer that `named_by` of `ranks` ranks name is a hub (rank 0
/// that every rank of a ring also waits on): more than a quarter of them,
/// and more than 3. A hub keeps its own number where the others' peers
/// are told relative to each rank, in collectors' states and in the view.
pub fn is_hub(named_by: usize, ranks: usize) -> bool {
    named_by > 3usize.max(ranks / 4)
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl ProcessDump {
    /// The (pid, global rank) of each rank it stands for (pid 0 for each
    /// where the run's is 0: a run of ranks by number, whose pids were not
    /// kept).
    pub fn run_members(&self) -> impl Iterator<Item = (i32, i32)> + '_ {
        (0..self.run_len.max(1)).map(|i| {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            let pid = if self.pid == 0 {
                0
            } else {
                self.pid.saturating_add(i)
            };
            (pid, self.global_rank.saturating_add(i))
        })
    }

    /// The local rank on `comm` (one of its communicators) of the rank
    /// `offset` places into its run.
    pub fn local_rank_at(&self, comm: &CommunicatorDump, offset: i64) -> i64 {
        if offset != 0 && comm.local_rank == i64::from(self.global_rank) {
            comm.local_rank.saturating_add(offset)
        } else {
            comm.local_rank
        }
    }

    /// How many operations its queues list, over all its communicators.
    pub fn listed_operations(&self) -> usize {
        let Section::Ok { value } = &self.communicators else {
            return 0;
        };
        value
            .list
            .iter()
            .flat_map(|c| [&c.sends, &c.receives, &c.unexpected])
            .map(|q| match q {
                Section::Ok { value } => value.operations.len(),
                _ => 0,
            })
            .sum()
    }

    /// Forgets which operations a run keeps fixed ([`Queue::fixed_in_run`]):
    /// a dump of one rank has no run.
    /// Whether some queue of it lists operations fixed in its run.
    fn has_fixed_in_run(&self) -> bool {
        let Section::Ok { value } = &self.communicators else {
            return false;
        };
        value.list.iter().any(|c| {
            [&c.sends, &c.receives, &c.unexpected]
                .into_iter()
                .any(|q| matches!(q, Section::Ok { value } if !value.fixed_in_run.is_empty()))
        })
    }

    pub fn clear_fixed_in_run(&mut self) {
        if let Section::Ok { value } = &mut self.communicators {
            for c in &mut value.list {
                c.for_each_queue_mut(|q| q.fixed_in_run.clear());
            }
        }
    }

    /// The dump of each rank it stands for.
    pub fn split_run(mut self) -> Vec<ProcessDump> {
        if self.run_len <= 1 {
            self.clear_fixed_in_run();
            return vec![self];
        }
        self.each_rank().collect()
    }

    /// The dump of each rank it stands for, made one at a time: a run of
    /// 100,000 ranks is written out rank by rank without holding them all
    /// ([`JobDump::each_rank`]).
    pub fn each_rank(&self) -> impl Iterator<Item = ProcessDump> + '_ {
        self.run_members().map(|(pid, rank)| self.member(pid, rank))
    }

    /// The dump of the member `rank` (pid `pid`) of its run.
    fn member(&self, pid: i32, rank: i32) -> ProcessDump {
        let mut p = self.clone();
        p.pid = pid;
        p.global_rank = rank;
        p.run_len = 1;
        p.run_shifts_peers = false;
        let first = self.global_rank;
        let shift = i64::from(rank) - i64::from(first);
        if let Section::Ok { value } = &mut p.communicators {
            for c in &mut value.list {
                if c.local_rank == i64::from(first) {
                    c.local_rank = i64::from(rank);
                    if self.run_shifts_peers {
                        shift_queues(c, shift);
                    }
                }
                c.for_each_queue_mut(|q| q.fixed_in_run.clear());
            }
        }
        p
    }
}

/// The ranks an operation names (wanted and actual, local and global),
/// to change in place.
pub fn peers_mut(op: &mut Operation) -> [&mut i64; 4] {
    [
        &mut op.desired_local_rank,
        &mut op.desired_global_rank,
        &mut op.actual_local_rank,
        &mut op.actual_global_rank,
    ]
}

/// Moves every peer of `c`'s queues `shift` ranks on ([`shifted_peer`]),
/// but those of operations fixed in the run.
fn shift_queues(c: &mut CommunicatorDump, shift: i64) {
    let size = c.size;
    c.for_each_queue_mut(|q| {
        let Queue {
            operations,
            fixed_in_run,
            ..
        } = q;
        for (i, op) in operations.iter_mut().enumerate() {
            if u32::try_from(i).is_ok_and(|i| fixed_in_run.contains(&i)) {
                continue;
            }
            for peer in peers_mut(op) {
                *peer = shifted_peer(*peer, shift, size);
            }
        }
    });
}

/// The threads of a process with their call stacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadList {
    /// The main thread first, then the others by thread id.
    pub list: Vec<ThreadStack>,
}

/// One thread and its call stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStack {
    pub tid: i32,
    /// Its name (`comm`), where the source has it.
    pub name: Option<String>,
    /// Innermost first: the frame the thread is in, then its callers.
    pub frames: Vec<Frame>,
    /// Why the walk ended before the outermost frame, if it did (no
    /// registers, unreadable stack, no unwind information).
    pub truncated: Option<String>,
}

impl ThreadStack {
    /// The function names, outermost first (`main`, `MPI_Recv`, ...), as
    /// call trees show them; `??` where no name is known.
    pub fn call_path(&self) -> impl Iterator<Item = &str> {
        self.frames
            .iter()
            .rev()
            .map(|f| f.function.as_deref().unwrap_or("??"))
    }
}

/// One frame of a call stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The instruction pointer (innermost frame) or the return address.
    pub address: u64,
    /// The function: its symbol name, or for an inlined frame its DWARF
    /// name; None where neither is known.
    pub function: Option<String>,
    /// The offset of the address into the function's symbol (not set for
    /// inlined frames).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A function inlined into the frame below it (same address).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub inlined: bool,
    /// The object file the address lies in.
    pub object: Option<String>,
    /// Source file and line, where DWARF has them.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The communicator the function's `comm` argument names, where DWARF
    /// places it in this frame (debug builds of the MPI).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub comm: Option<FrameComm>,
    /// The arguments of the MPI call this frame is (its outermost
    /// `MPI_`/`PMPI_` frame), where DWARF places them: what a blocking call
    /// waits for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call: Option<CallArgs>,
}

/// The arguments of an MPI call, read from its frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallArgs {
    /// Which MPI's constants the values are in: `openmpi` or `mpich`
    /// (`MPI_ANY_SOURCE` is -1 in one, -2 in the other).
    pub mpi: String,
    /// The integer arguments read, by their names in the MPI's source:
    /// `source`, `dest`, `tag`, `sendtag`, `recvtag`, `count`, `incount`.
    pub ints: Vec<(String, i64)>,
    /// The requests the call waits on (`MPI_Wait*`), as the process holds
    /// them: the request object's address (Open MPI) or its handle (MPICH).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub requests: Vec<u64>,
}

impl CallArgs {
    /// The integer argument `name`, if it was read.
    pub fn int(&self, name: &str) -> Option<i64> {
        self.ints.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Whether `MPI_ANY_SOURCE` is this value in this MPI.
    pub fn is_any_source(&self, value: i64) -> bool {
        value == if self.mpi == "mpich" { -2 } else { -1 }
    }

    /// Whether `MPI_PROC_NULL` is this value in this MPI.
    pub fn is_proc_null(&self, value: i64) -> bool {
        value == if self.mpi == "mpich" { -1 } else { -2 }
    }
}

/// A communicator named by a frame's argument: its id as the MPI's DLLs
/// give it (`unique_id` of the communicator in this process), and the
/// address of the MPI's object for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameComm {
    pub unique_id: u64,
    pub address: u64,
}

/// Where a spawned process sits in the job the MPI made for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnedJob {
    /// The launcher's name for that job.
    pub job: String,
    /// Rank in that job's MPI_COMM_WORLD.
    pub rank: usize,
    /// Who spawned it, where the tables say (MPI2DD's spawn descriptors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<SpawnParent>,
}

/// The process that spawned a job: its world's name and rank there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnParent {
    pub job: String,
    pub rank: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewProcessList {
    pub list: Vec<NewProcess>,
}

/// A process the MPI created, as an MPI-2 DLL reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewProcess {
    pub pid: i64,
    pub executable: String,
    pub host: String,
}

impl From<mqs_abi::ProcessLocation> for NewProcess {
    fn from(loc: mqs_abi::ProcessLocation) -> Self {
        Self {
            pid: loc.pid,
            executable: loc.image_name,
            host: loc.host_name,
        }
    }
}

/// Counters of one process's dump.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DumpStats {
    /// fetch_data callbacks the DLL made.
    pub fetches: u64,
    pub fetched_bytes: u64,
    /// Reading system calls the host made on the target (0 for sources
    /// without system calls).
    pub syscalls: u64,
    pub elapsed_ms: f64,
    /// With `--stacks`: the time taken to unwind every thread while the
    /// process was stopped (symbol and line lookups come after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks_ms: Option<f64>,
    /// The callbacks the DLL made for this process, by kind: from its
    /// setup (its image's and its own) to the end of the dump.
    #[serde(default)]
    pub callbacks: CallbackCounts,
}

/// Callbacks a DLL made, by kind. Each is a round trip in debuggers that
/// answer through another process (padb asks gdb): what makes a DLL slow
/// or fast there. The basic callbacks without a handle (malloc, free,
/// dprints, errorstring) are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackCounts {
    pub find_type: u64,
    pub field_offset: u64,
    pub sizeof: u64,
    pub find_symbol: u64,
    pub find_function: u64,
    pub get_type_sizes: u64,
    pub fetch: u64,
    pub target_to_host: u64,
    pub get_global_rank: u64,
    pub get_image: u64,
    /// put/get of the DLL's image and process info.
    pub info: u64,
    /// MPI-2: get_process_job and get_process_identity.
    pub job: u64,
    /// The fetches as a debugger that answers through another process
    /// asks for them: in [`FETCH_PIECE`]-byte pieces, none for address 0
    /// (padb's `minfo` asks gdb so). Not a kind of its own: the same
    /// fetches as `fetch`, counted otherwise.
    #[serde(default)]
    pub fetch_pieces: u64,
}

/// The largest piece of memory padb's `minfo` asks gdb for at a time.
pub const FETCH_PIECE: u64 = 256;

impl CallbackCounts {
    /// Every counted callback.
    pub fn total(&self) -> u64 {
        self.kinds().iter().map(|&(_, n)| n).sum()
    }

    /// (name, count) of each kind, in a fixed order.
    pub fn kinds(&self) -> [(&'static str, u64); 12] {
        [
            ("find_type", self.find_type),
            ("field_offset", self.field_offset),
            ("sizeof", self.sizeof),
            ("find_symbol", self.find_symbol),
            ("find_function", self.find_function),
            ("get_type_sizes", self.get_type_sizes),
            ("fetch", self.fetch),
            ("target_to_host", self.target_to_host),
            ("get_global_rank", self.get_global_rank),
            ("get_image", self.get_image),
            ("info", self.info),
            ("job", self.job),
        ]
    }

    /// The round trips a debugger that answers through another process
    /// (padb's `minfo` asking gdb) makes for these callbacks: one per
    /// type, offset, symbol and function looked up, one per piece of a
    /// fetch; sizes, byte order, images and info stay in the debugger.
    pub fn round_trips(&self) -> u64 {
        self.find_type
            + self.field_offset
            + self.find_symbol
            + self.find_function
            + self.fetch_pieces
    }

    /// The sum, kind by kind.
    pub fn plus(&self, other: &CallbackCounts) -> CallbackCounts {
        self.zip(other, u64::saturating_add)
    }

    /// What `self` has more than `earlier`, kind by kind.
    pub fn since(&self, earlier: &CallbackCounts) -> CallbackCounts {
        self.zip(earlier, u64::saturating_sub)
    }

    fn zip(&self, o: &CallbackCounts, f: impl Fn(u64, u64) -> u64) -> CallbackCounts {
        CallbackCounts {
            find_type: f(self.find_type, o.find_type),
            field_offset: f(self.field_offset, o.field_offset),
            sizeof: f(self.sizeof, o.sizeof),
            find_symbol: f(self.find_symbol, o.find_symbol),
            find_function: f(self.find_function, o.find_function),
            get_type_sizes: f(self.get_type_sizes, o.get_type_sizes),
            fetch: f(self.fetch, o.fetch),
            target_to_host: f(self.target_to_host, o.target_to_host),
            get_global_rank: f(self.get_global_rank, o.get_global_rank),
            get_image: f(self.get_image, o.get_image),
            info: f(self.info, o.info),
            job: f(self.job, o.job),
            fetch_pieces: f(self.fetch_pieces, o.fetch_pieces),
        }
    }
}

/// Something the DLL may or may not be able to say. Written as an object
/// tagged by `status`, first; read back by [`section`]'s own code.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Section<T> {
    /// The DLL answered (possibly with a truncated list, see `error`).
    Ok {
        #[serde(flatten)]
        value: T,
    },
    /// The DLL answered mqs_no_information: it cannot tell (not "empty").
    NotAvailable { reason: String },
    /// The DLL failed.
    Error { message: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommunicatorList {
    pub list: Vec<CommunicatorDump>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommunicatorDump {
    pub unique_id: u64,
    pub name: String,
    pub size: i64,
    pub local_rank: i64,
    /// Global rank of each member, when the DLL can tell (mqs_get_comm_group).
    pub group: Option<Vec<i64>>,
    /// Its Cartesian grid, when the DLL can tell (mqs's extension
    /// `mqs_get_comm_cartesian`); each member's coordinates follow from
    /// its `local_rank`, row-major.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cartesian: Option<mqs_abi::Cartesian>,
    pub sends: Section<Queue>,
    pub receives: Section<Queue>,
    pub unexpected: Section<Queue>,
}

impl CommunicatorDump {
    /// Each rank its queues' operations name (wanted and actual, local and
    /// global), to change in place.
    pub fn for_each_peer_mut(&mut self, mut each: impl FnMut(&mut i64)) {
        self.for_each_queue_mut(|q| {
            for op in &mut q.operations {
                peers_mut(op).into_iter().for_each(&mut each);
            }
        });
    }

    /// Each of its queues that was read, to change in place.
    pub fn for_each_queue_mut(&mut self, mut each: impl FnMut(&mut Queue)) {
        for queue in [&mut self.sends, &mut self.receives, &mut self.unexpected] {
            if let Section::Ok { value } = queue {
                each(value);
            }
        }
    }

    pub fn new(comm: Communicator) -> Self {
        let pending = || Section::NotAvailable {
            reason: "not asked".into(),
        };
        Self {
            unique_id: comm.unique_id,
            name: comm.name,
            size: comm.size,
            local_rank: comm.local_rank,
            group: None,
            cartesian: None,
            sends: pending(),
            receives: pending(),
            unexpected: pending(),
        }
    }

    pub fn queue(&self, class: OpClass) -> &Section<Queue> {
        match class {
            OpClass::PendingSends => &self.sends,
            OpClass::PendingReceives => &self.receives,
            OpClass::UnexpectedMessages => &self.unexpected,
        }
    }

    pub fn queue_mut(&mut self, class: OpClass) -> &mut Section<Queue> {
        match class {
            OpClass::PendingSends => &mut self.sends,
            OpClass::PendingReceives => &mut self.receives,
            OpClass::UnexpectedMessages => &mut self.unexpected,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    pub operations: Vec<Operation>,
    /// Set when the DLL stopped with an error (or the host's bound was hit)
    /// after producing `operations`.
    pub truncated: Option<String>,
    /// In a run whose peers shift ([`ProcessDump::run_shifts_peers`]): the
    /// operations, by index, whose peers stay the same for every rank of
    /// the run (a hub: rank 0, that every rank of a ring also waits on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixed_in_run: Vec<u32>,
}

impl Queue {
    /// Whether operation `index`'s peers stay put in a run that shifts.
    pub fn is_fixed_in_run(&self, index: usize) -> bool {
        u32::try_from(index).is_ok_and(|i| self.fixed_in_run.contains(&i))
    }
}

/// One pending operation, exactly as the DLL reported it.
pub type Operation = PendingOperation;

/// Which frames are the MPI library's: the names of its entry points
/// (`MPI_`/`PMPI_`) and of the layers below them in Open MPI and MPICH.
/// A thread with such a frame is inside MPI.
pub fn is_mpi_function(name: &str) -> bool {
    const PREFIXES: [&str; 15] = [
        "MPI_", "PMPI_", "MPIX_", "PMPIX_", "MPIR_", "MPID_", "MPIDI_", "MPIDU_", "MPIC_", "MPII_",
        "MPIU_", "MPL_", "ompi_", "mca_", "opal_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The MPI entry point a thread is in: its outermost `MPI_`/`PMPI_`
/// frame, named without the profiling `P` (`MPI_Recv`).
pub fn mpi_entry<'a>(outermost_first: impl IntoIterator<Item = &'a str>) -> Option<String> {
    outermost_first.into_iter().find_map(|name| {
        let name = name.strip_prefix('P').unwrap_or(name);
        name.starts_with("MPI_").then(|| name.to_owned())
    })
}

#[cfg(test)]
mod dll_info_tests {
    use super::{is_mpi_function, mpi_entry, recognised};

    #[test]
    fn the_mpi_and_backend_come_from_our_version_string() {
        let v = "mqs message-queue DLL 0.1.0 (MPI-1 interface, compatibility 2) for Open MPI 4.1 (ob1 PML) and MPICH 4.0 (ch3); detected: MPICH 4.0.2, device ch3:nemesis, device queues; backend: mpich-ch3";
        assert_eq!(
            recognised(v),
            (
                Some("MPICH 4.0.2, device ch3:nemesis, device queues".into()),
                Some("mpich-ch3".into())
            )
        );
        assert_eq!(
            recognised("mqs message-queue DLL 0.1.0 (...); no MPI detected yet"),
            (None, None)
        );
        assert_eq!(
            recognised("MPICH message queue support for MPICH 4.0.2"),
            (None, None)
        );
    }

    #[test]
    fn mpi_frames_and_entries() {
        assert!(is_mpi_function("PMPI_Recv"));
        assert!(is_mpi_function("mca_pml_ob1_recv"));
        assert!(is_mpi_function("MPIR_Barrier_impl"));
        assert!(!is_mpi_function("main"));
        assert!(!is_mpi_function("poll"));
        assert_eq!(
            mpi_entry(["main", "PMPI_Recv", "mca_pml_ob1_recv"]),
            Some("MPI_Recv".into())
        );
        assert_eq!(
            mpi_entry(["main", "MPI_Barrier", "PMPI_Barrier"]),
            Some("MPI_Barrier".into())
        );
        assert_eq!(mpi_entry(["main", "usleep", "nanosleep"]), None);
    }
}
