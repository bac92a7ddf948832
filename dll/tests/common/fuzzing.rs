//! The fuzzing both MPIs' fuzz tests share (`fuzz.rs` for Open MPI,
//! `mpich_fuzz.rs` for MPICH): this build's DLL, in the real host's
//! session, over recorded processes whose memory is corrupted at random:
//! bit flips, words set to NULL, to huge or misaligned values or into other
//! recorded objects, pages removed, layouts misreported, and mutations aimed
//! at the list links each test finds (items made to point at themselves or
//! back, links moved into the middle of other objects). The process
//! refuses fetches past a budget drawn per case. Every case must return
//! within a time limit, never panic inside the DLL, keep its reads bounded
//! and its texts short.
//!
//! Each case comes from one seed. Failing seeds are appended to
//! `$CARGO_TARGET_TMPDIR/LABEL-failures.txt` (the path is printed) and
//! replayed with `MQS_FUZZ_SEEDS=SEED[,SEED...]`; `MQS_FUZZ_SEED` fixes the
//! first seed of a run, `MQS_FUZZ_CASES` the number of cases.

use std::cell::{Cell, RefCell};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mqs_acquire::snapshot::SymbolLog;
use mqs_core::interface::{
    Environment, Liveness, MappedObject, Target, Thread, TypeLayout, PAGE_SIZE,
};
use mqs_core::model::Section;
use mqs_core::process::SnapshotProcess;
use mqs_tests::Family;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::session::{our_dll, recording, recordings, run, Dumped, Input, Recorded};

/// Cases per run (MQS_FUZZ_CASES overrides).
const CASES_DEFAULT: u64 = 5000;
/// Most fetches one case may make: a walk that needs more is unbounded.
/// A clean session of the recordings needs at most a few hundred.
pub const MAX_FETCHES: u64 = 20_000;
/// Wall-clock limit of one case, generous for a loaded machine: a clean
/// case takes milliseconds.
const CASE_LIMIT: Duration = Duration::from_secs(30);

/// One link of a list in a recorded process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLink {
    /// Where the link (the item's `next`, or a list's head) is.
    pub at: u64,
    /// The item it belongs to.
    pub item: u64,
    /// The item before it on the list (`item` for the first).
    pub before: u64,
}

/// Finds the list links of a recorded process, given the regions a clean
/// session read.
pub type FindLinks = dyn Fn(&Recorded, &[(u64, usize)]) -> Vec<ListLink>;

/// A field of a transport the DLL reads in transit: a ring's read position
/// or sequence number, a queue's head or tail, an entry's size, tag or
/// link, a count of boxes or ranks. Set to edge values (a position inside
/// an entry, at or past a ring's end, a lap bit, a size past the end,
/// -2, all ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub at: u64,
    /// Its width in bytes (1, 2, 4 or 8).
    pub width: u8,
}

/// Finds the transport fields of a recorded process.
pub type FindPositions = dyn Fn(&Recorded) -> Vec<Position>;

/// One recorded process, ready to corrupt.
pub struct Base {
    pub name: &'static str,
    pub process: &'static Recorded,
    /// The byte ranges a clean session read (start, length), merged.
    pub regions: Vec<(u64, usize)>,
    /// The links of the lists the DLL walks.
    pub links: Vec<ListLink>,
    /// Addresses of pointer words whose value lies in `regions`.
    pub pointers: Vec<u64>,
    /// The transport fields the DLL reads messages in transit through.
    pub positions: Vec<Position>,
    /// Fetches of a clean session.
    pub clean_fetches: u64,
}

/// A target that reads from `inner`, writes down what was read, and
/// refuses every read past `budget`.
pub struct Fuzzed<'a> {
    pub inner: &'a SnapshotProcess,
    pub budget: u64,
    pub reads: &'a Cell<u64>,
    pub refused: &'a Cell<u64>,
    pub log: Option<&'a RefCell<Vec<(u64, usize)>>>,
}

impl Target for Fuzzed<'_> {
    fn pid(&self) -> i32 {
        self.inner.pid
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> mqs_core::Result<()> {
        self.reads.set(self.reads.get() + 1);
        if self.reads.get() > self.budget {
            self.refused.set(self.refused.get() + 1);
            return Err(mqs_core::Error::Read {
                pid: self.inner.pid,
                addr,
                len: buf.len(),
                detail: "the fuzz budget is spent".into(),
            });
        }
        let r = self.inner.read(addr, buf);
        if let (Some(log), Ok(())) = (self.log, &r) {
            log.borrow_mut().push((addr, buf.len()));
        }
        r
    }
    fn mapped_objects(&self) -> mqs_core::Result<Vec<MappedObject>> {
        self.inner.mapped_objects()
    }
    fn executable(&self) -> mqs_core::Result<PathBuf> {
        self.inner.executable()
    }
    fn environment(&self) -> mqs_core::Result<Environment> {
        self.inner.environment()
    }
    fn threads(&self) -> mqs_core::Result<Vec<Thread>> {
        self.inner.threads()
    }
    fn liveness(&self) -> Liveness {
        Liveness::Offline
    }
    fn pointer_size(&self) -> u32 {
        self.inner.pointer_size
    }
}

/// The little-endian word at `addr`.
pub fn read_u64(p: &SnapshotProcess, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    p.read(addr, &mut b).ok()?;
    Some(u64::from_le_bytes(b))
}

/// A recorded field offset.
pub fn field(log: &SymbolLog, ty: &str, name: &str) -> Option<u64> {
    log.types.get(ty)?.as_ref()?.field_offset(name)
}

/// A recorded symbol's address.
pub fn symbol(log: &SymbolLog, name: &str) -> Option<u64> {
    log.symbols.get(name).copied().flatten()
}

/// A clean session of `process` (it must succeed), what it read, and the
/// links `find_links` finds in it (given the process and the merged
/// regions read).
pub fn base(
    name: &'static str,
    process: &'static Recorded,
    find_links: &FindLinks,
    find_positions: &FindPositions,
) -> Base {
    let (regions, clean_fetches) = clean_regions(name, process);
    let pointers = pointers_in(process, &regions);
    let links = find_links(process, &regions);
    let positions = find_positions(process);
    Base {
        name,
        process,
        regions,
        links,
        pointers,
        positions,
        clean_fetches,
    }
}

/// [`base`] of every process of every recording of `family`.
pub fn bases(family: Family, find_links: &FindLinks, find_positions: &FindPositions) -> Vec<Base> {
    recordings(family)
        .flat_map(|plan| {
            recording(plan.name)
                .processes
                .iter()
                .map(|p| base(plan.name, p, find_links, find_positions))
        })
        .collect()
}

/// The `next` links of Open MPI's list items: a word of a region read
/// whose value is another item whose `prev` leads back.
pub fn opal_links(process: &Recorded, regions: &[(u64, usize)]) -> Vec<ListLink> {
    let log = &process.symbols;
    let next = field(log, "opal_list_item_t", "opal_list_next").unwrap_or(16);
    let prev = field(log, "opal_list_item_t", "opal_list_prev").unwrap_or(24);
    let inside = |v: u64| regions.iter().any(|&(a, n)| v >= a && v < a + n as u64);
    let mut links = Vec::new();
    for &(start, n) in regions {
        let mut a = start.div_ceil(8) * 8;
        while a + 8 <= start + n as u64 {
            if let Some(v) = read_u64(&process.target, a).filter(|&v| v % 8 == 0 && inside(v)) {
                let item = a.wrapping_sub(next);
                if read_u64(&process.target, v.wrapping_add(prev)) == Some(item) {
                    let before = read_u64(&process.target, item.wrapping_add(prev));
                    links.push(ListLink {
                        at: a,
                        item,
                        before: before.unwrap_or(item),
                    });
                }
            }
            a += 8;
        }
    }
    links
}

/// What a clean session of `process` (it must succeed) read: the byte
/// ranges, merged (start, length), and how many fetches it made.
pub fn clean_regions(name: &str, process: &Recorded) -> (Vec<(u64, usize)>, u64) {
    let (reads, refused) = (Cell::new(0), Cell::new(0));
    let log = RefCell::new(Vec::new());
    let target = Fuzzed {
        inner: &process.target,
        budget: u64::MAX,
        reads: &reads,
        refused: &refused,
        log: Some(&log),
    };
    let d = one(process, Box::new(target), process.symbols.clone());
    assert!(
        d.added.is_ok(),
        "{name}: a clean session fails: {:?}",
        d.added
    );
    let mut ranges = log.into_inner();
    ranges.sort_unstable();
    let mut regions: Vec<(u64, usize)> = Vec::new();
    for (addr, len) in ranges {
        match regions.last_mut() {
            Some((start, n)) if addr <= *start + *n as u64 => {
                *n = (*n).max((addr + len as u64 - *start) as usize);
            }
            _ => regions.push((addr, len)),
        }
    }
    (regions, reads.get())
}

/// Addresses of the aligned words in `regions` whose value is an aligned
/// address inside `regions`: the pointers a session followed or may.
pub fn pointers_in(process: &Recorded, regions: &[(u64, usize)]) -> Vec<u64> {
    let inside = |v: u64| regions.iter().any(|&(a, n)| v >= a && v < a + n as u64);
    let mut pointers = Vec::new();
    for &(start, n) in regions {
        let mut a = start.div_ceil(8) * 8;
        while a + 8 <= start + n as u64 {
            if read_u64(&process.target, a).is_some_and(|v| v % 8 == 0 && inside(v)) {
                pointers.push(a);
            }
            a += 8;
        }
    }
    pointers
}

/// One session of our DLL over one process.
pub fn one(process: &Recorded, target: Box<dyn Target + '_>, symbols: SymbolLog) -> Dumped {
    let input = Input {
        image: process.executable.clone(),
        symbols: Box::new(symbols),
        target,
        identity: process.member.identity,
    };
    run(our_dll(), vec![input])
        .expect("a session")
        .pop()
        .expect("one process")
}

/// One session of our DLL over `process` as recorded but for `symbols`,
/// with at most [`MAX_FETCHES`] fetches.
pub fn with_symbols(process: &Recorded, symbols: SymbolLog) -> Dumped {
    let (reads, refused) = (Cell::new(0), Cell::new(0));
    let target = Fuzzed {
        inner: &process.target,
        budget: MAX_FETCHES,
        reads: &reads,
        refused: &refused,
        log: None,
    };
    one(process, Box::new(target), symbols)
}

#[derive(Debug, Clone)]
enum Value {
    Zero,
    Raw(u64),
    /// Somewhere in a region read (possibly making a cycle).
    Into(usize, usize),
    /// A region's address plus a small misalignment.
    Misaligned(usize, u8),
    Huge,
}

#[derive(Debug, Clone)]
enum Bend {
    /// The item's next is itself.
    ToItself,
    /// The item's next is the item before it: a cycle of two.
    Back,
    /// The item's next points `8 * n` bytes into the next item.
    IntoMiddle(u8),
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, usize, u8),
    Word(usize, usize, Value),
    Int(usize, usize, u32),
    /// The page under a region's byte removed.
    Unmap(usize, usize),
    /// A type's field offset (or, for `usize::MAX`, its size) misreported.
    Layout(usize, usize, u64),
    /// A list link, bent.
    Link(usize, Bend),
    /// A pointer moved `8 * n` bytes into the object it points to.
    Pointer(usize, u8),
    /// A transport field set to an edge value.
    Edge(usize, u64),
}

/// Values that put a ring position, size, sequence or link at an edge: in
/// an entry, at and past a 4 KiB ring's end (Open MPI's default), with
/// the lap bit, an empty FIFO's -2, all ones, or anything.
fn edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(31),
        Just(32),
        Just(33),
        Just(4064),
        Just(4096),
        Just(4128),
        Just(0x7fff_ffff),
        Just(0x8000_0000),
        Just(0x8000_0020),
        Just(0xffff),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX - 1),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Zero),
        any::<u64>().prop_map(Value::Raw),
        (any::<usize>(), any::<usize>()).prop_map(|(r, o)| Value::Into(r, o)),
        (any::<usize>(), 1u8..8).prop_map(|(r, d)| Value::Misaligned(r, d)),
        Just(Value::Huge),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<usize>(), any::<usize>(), 0u8..8).prop_map(|(r, o, b)| Mutation::Flip(r, o, b)),
        2 => (any::<usize>(), any::<usize>(), value()).prop_map(|(r, o, v)| Mutation::Word(r, o, v)),
        1 => (
            any::<usize>(),
            any::<usize>(),
            prop_oneof![Just(u32::MAX), Just(0x7fff_ffff), Just(0), any::<u32>()]
        )
            .prop_map(|(r, o, v)| Mutation::Int(r, o, v)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(r, o)| Mutation::Unmap(r, o)),
        1 => (
            any::<usize>(),
            prop_oneof![Just(usize::MAX), any::<usize>()],
            prop_oneof![0u64..4096, Just(0x7fff_ffff), Just(0)]
        )
            .prop_map(|(t, f, v)| Mutation::Layout(t, f, v)),
        3 => (
            any::<usize>(),
            prop_oneof![
                Just(Bend::ToItself),
                Just(Bend::Back),
                (1u8..8).prop_map(Bend::IntoMiddle)
            ]
        )
            .prop_map(|(l, k)| Mutation::Link(l, k)),
        2 => (any::<usize>(), 1u8..8).prop_map(|(p, d)| Mutation::Pointer(p, d)),
        3 => (any::<usize>(), edge()).prop_map(|(p, v)| Mutation::Edge(p, v)),
    ]
}

/// One case: which process, what to corrupt, and the fetch budget (a
/// share of a clean session's fetches, in percent; 0: no budget but
/// [`MAX_FETCHES`]).
#[derive(Debug, Clone)]
struct Case {
    which: usize,
    mutations: Vec<Mutation>,
    budget_percent: u8,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<usize>(),
        prop::collection::vec(mutation(), 1..16),
        prop_oneof![4 => Just(0u8), 1 => 1u8..100],
    )
        .prop_map(|(which, mutations, budget_percent)| Case {
            which,
            mutations,
            budget_percent,
        })
}

fn case_of(seed: u64) -> Case {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    case()
        .new_tree(&mut runner)
        .map(|t| t.current())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
}

fn write(p: &mut SnapshotProcess, addr: u64, bytes: &[u8]) {
    // Only where the process has memory: a write never maps a page.
    let page = addr / PAGE_SIZE;
    let last = (addr + bytes.len() as u64 - 1) / PAGE_SIZE;
    if p.pages.contains_key(&page) && p.pages.contains_key(&last) {
        p.insert(addr, bytes);
    }
}

fn apply(base: &Base, p: &mut SnapshotProcess, log: &mut SymbolLog, m: &Mutation) {
    let regions = &base.regions;
    let at = |region: usize, offset: usize, align: usize| {
        let (addr, len) = regions[region % regions.len()];
        addr + ((offset % len) / align * align) as u64
    };
    match m {
        Mutation::Flip(r, o, bit) => {
            let a = at(*r, *o, 1);
            let mut b = [0u8; 1];
            if p.read(a, &mut b).is_ok() {
                write(p, a, &[b[0] ^ (1 << bit)]);
            }
        }
        Mutation::Word(r, o, v) => {
            let v = match v {
                Value::Zero => 0,
                Value::Raw(v) => *v,
                Value::Into(r, o) => at(*r, *o, 8),
                Value::Misaligned(r, d) => at(*r, 0, 1) + u64::from(*d),
                Value::Huge => u64::MAX / 3,
            };
            write(p, at(*r, *o, 8), &v.to_le_bytes());
        }
        Mutation::Int(r, o, v) => write(p, at(*r, *o, 4), &v.to_le_bytes()),
        Mutation::Unmap(r, o) => {
            p.pages.remove(&(at(*r, *o, 1) / PAGE_SIZE));
        }
        Mutation::Layout(t, f, v) => {
            let n = log.types.len().max(1);
            if let Some(Some(ty)) = log.types.values_mut().nth(t % n) {
                mislay(ty, *f, *v);
            }
        }
        Mutation::Link(l, bend) => {
            if base.links.is_empty() {
                return;
            }
            let link = base.links[l % base.links.len()];
            let to = match bend {
                Bend::ToItself => link.item,
                Bend::Back => link.before,
                Bend::IntoMiddle(n) => read_u64(p, link.at).unwrap_or(0) + 8 * u64::from(*n),
            };
            write(p, link.at, &to.to_le_bytes());
        }
        Mutation::Pointer(w, n) => {
            if base.pointers.is_empty() {
                return;
            }
            let addr = base.pointers[w % base.pointers.len()];
            let to = read_u64(p, addr).unwrap_or(0) + 8 * u64::from(*n);
            write(p, addr, &to.to_le_bytes());
        }
        Mutation::Edge(w, v) => {
            if base.positions.is_empty() {
                return;
            }
            let pos = base.positions[w % base.positions.len()];
            let width = usize::from(pos.width.clamp(1, 8));
            write(p, pos.at, &v.to_le_bytes()[..width]);
        }
    }
}

fn mislay(ty: &mut TypeLayout, field: usize, value: u64) {
    if field == usize::MAX || ty.fields.is_empty() {
        ty.size = Some(value);
    } else {
        let n = ty.fields.len();
        ty.fields[field % n].1 = value;
    }
}

/// What one case showed.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    fetches: u64,
    cycle: bool,
    bad_pointer: bool,
    refused: bool,
}

/// Runs one case; an error says what went wrong.
fn run_case(bases: &[Base], seed: u64) -> Result<Seen, String> {
    let case = case_of(seed);
    let base = &bases[case.which % bases.len()];
    let mut process = base.process.target.clone();
    let mut log = base.process.symbols.clone();
    for m in &case.mutations {
        apply(base, &mut process, &mut log, m);
    }
    let budget = match case.budget_percent {
        0 => MAX_FETCHES,
        pct => base.clean_fetches * u64::from(pct) / 100,
    };
    let (reads, refused) = (Cell::new(0), Cell::new(0));
    let target = Fuzzed {
        inner: &process,
        budget,
        reads: &reads,
        refused: &refused,
        log: None,
    };
    let d = one(base.process, Box::new(target), log);
    let what = || {
        format!(
            "{} process {}: {case:?}",
            base.name, base.process.member.identity
        )
    };
    let mut seen = Seen {
        fetches: d.fetches,
        refused: refused.get() > 0,
        ..Seen::default()
    };
    if case.budget_percent == 0 && reads.get() >= MAX_FETCHES {
        return Err(format!("{} reads, unbounded: {}", reads.get(), what()));
    }
    let internal = "internal error";
    if let Err(e) = &d.added {
        if e.contains(internal) {
            return Err(format!("a panic was caught in the DLL ({e}): {}", what()));
        }
        return Ok(seen);
    }
    let mut texts = Vec::new();
    if let Section::Error { message } = &d.communicators {
        texts.push(message.clone());
    }
    if let Section::Ok { value } = &d.communicators {
        for c in &value.list {
            if c.name.len() >= 64 {
                return Err(format!(
                    "communicator name too long {:?}: {}",
                    c.name,
                    what()
                ));
            }
            for q in [&c.sends, &c.receives, &c.unexpected] {
                match q {
                    Section::Error { message } => texts.push(message.clone()),
                    Section::Ok { value } => {
                        texts.extend(value.truncated.clone());
                        for op in &value.operations {
                            if op.extra_text.len() > 5
                                || op.extra_text.iter().any(|l| l.len() >= 64)
                            {
                                return Err(format!("extra_text too long {op:?}: {}", what()));
                            }
                            for l in &op.extra_text {
                                seen.cycle |= l.starts_with("list cut: cycle");
                                seen.bad_pointer |= l.starts_with("list cut: bad pointer");
                            }
                        }
                    }
                    Section::NotAvailable { .. } => {}
                }
            }
        }
    }
    if let Some(t) = texts.iter().find(|t| t.contains(internal)) {
        return Err(format!("a panic was caught in the DLL ({t}): {}", what()));
    }
    if let Some(t) = texts.iter().find(|t| t.contains("stopped after")) {
        return Err(format!("an endless iteration ({t}): {}", what()));
    }
    Ok(seen)
}

fn failures_file(label: &str) -> PathBuf {
    PathBuf::from(option_env!("CARGO_TARGET_TMPDIR").unwrap_or("/tmp"))
        .join(format!("{label}-failures.txt"))
}

fn keep_failure(label: &str, seed: u64, why: &str) -> String {
    let path = failures_file(label);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = writeln!(f, "{seed}");
    }
    format!(
        "{label} seed {seed} failed: {why}\n(seed kept in {}; replay with MQS_FUZZ_SEEDS={seed})",
        path.display()
    )
}

fn seeds() -> Vec<u64> {
    if let Ok(list) = std::env::var("MQS_FUZZ_SEEDS") {
        return list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    let cases = std::env::var("MQS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES_DEFAULT);
    let first = std::env::var("MQS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs() << 20)
        });
    (first..first + cases).collect()
}

enum Report {
    Start(u64),
    Done(u64, Result<Seen, String>),
}

/// Runs the cases of this run's seeds over `bases` (`label` names the test
/// in what it prints and in its failures file); fails with every failing
/// seed, or if a case outlives its time limit, or (unless seeds were given)
/// if no case stopped a walk at a cycle, at a bad pointer, or ran past its
/// fetch budget.
pub fn fuzz(label: &'static str, bases: &'static [Base]) {
    let seeds = seeds();
    eprintln!(
        "{label}: seeds {}..{} ({} cases)",
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0),
        seeds.len()
    );
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let list = seeds.clone();
    // The cases run on a worker; this thread is the watchdog, so that a
    // walk that never ends fails the test instead of hanging it.
    std::thread::spawn(move || {
        for seed in list {
            if tx.send(Report::Start(seed)).is_err() {
                return;
            }
            let r = std::panic::catch_unwind(|| run_case(bases, seed))
                .unwrap_or_else(|_| Err("the case panicked".to_string()));
            if tx.send(Report::Done(seed, r)).is_err() {
                return;
            }
        }
    });
    let mut total = Seen::default();
    let (mut cases, mut max_fetches) = (0u64, 0u64);
    let mut current = None;
    let mut failures = Vec::new();
    while cases < seeds.len() as u64 {
        match rx.recv_timeout(CASE_LIMIT) {
            Ok(Report::Start(seed)) => current = Some(seed),
            Ok(Report::Done(seed, r)) => {
                cases += 1;
                current = None;
                match r {
                    Ok(s) => {
                        max_fetches = max_fetches.max(s.fetches);
                        total.cycle |= s.cycle;
                        total.bad_pointer |= s.bad_pointer;
                        total.refused |= s.refused;
                    }
                    Err(e) => failures.push(keep_failure(label, seed, &e)),
                }
            }
            Err(_) => {
                let seed = current.unwrap_or(0);
                panic!(
                    "{}",
                    keep_failure(
                        label,
                        seed,
                        &format!(
                            "the case ran longer than {} s: a walk that never ends? {:?}",
                            CASE_LIMIT.as_secs(),
                            case_of(seed)
                        )
                    )
                );
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let links: usize = bases.iter().map(|b| b.links.len()).sum();
    let positions: usize = bases.iter().map(|b| b.positions.len()).sum();
    let clean = bases.iter().map(|b| b.clean_fetches).max().unwrap_or(0);
    eprintln!(
        "{label}: {cases} corrupted sessions over {} recorded processes ({links} list links \
         and {positions} transport fields found) in {secs:.1} s ({:.0} cases/s), at most \
         {max_fetches} fetches in one (a clean one: at most {clean}); stops seen: cycle {}, \
         bad pointer {}, budget {}",
        bases.len(),
        cases as f64 / secs,
        total.cycle,
        total.bad_pointer,
        total.refused
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if std::env::var("MQS_FUZZ_SEEDS").is_err() {
        assert!(total.cycle, "no case made a walk stop at a cycle");
        assert!(
            total.bad_pointer,
            "no case made a walk stop at a bad pointer"
        );
        assert!(total.refused, "no case ran past its fetch budget");
    }
}
