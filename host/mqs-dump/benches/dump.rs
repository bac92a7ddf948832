//! Benchmark (not a test): dump a fixture rank with many pending receives
//! and unexpected messages through Open MPI's own DLL, and print the figures
//! the host issue sets goals for: the dump's wall time, fetch callbacks,
//! syscalls (goal: under 1 s, under one syscall per ten fetches) and the
//! cold start (symbol and DWARF indexing, DLL setup).
//!
//! The same stopped process is dumped through our DLL too, for the DLL
//! issue's comparison: time and fetch callbacks of each, in total and split
//! into what both DLLs list (communicators, pending sends, posted receives)
//! and the unexpected messages (which, of Open MPI's, only ours lists;
//! MPICH's DLL lists them too, with its defects). Each round dumps through
//! both DLLs (which goes first alternates), each with a cold page cache,
//! while every rank of the job is stopped. Each DLL starts each round with
//! a symbol index of its own, made for it (cold: its DWARF lookups pay for
//! the type indexing), and is then set up once more on that index (warm);
//! the dump follows on the warm session.
//!
//! First the whole `mqs-dump --pid PID --json --dll DLL > file` is run R
//! times with each DLL (alternating), the rest of the job stopped:
//! wall time and peak RSS of the whole process, as a user sees them. With
//! `--gdb`, the anchor: each DLL dumps the rank once more with every fetch
//! a round trip to gdb attached to it (`-data-read-memory-bytes` over gdb's
//! machine interface, no cache), as a debugger that answers the DLL's
//! callbacks through gdb does (padb); its symbols and types still come from
//! mqs's index, so the anchor is a lower bound for such a host. Open MPI's
//! DLL makes 24 fetches per operation: at N = 100,000 this takes minutes.
//!
//! `cargo build --release -p mqs-dll && cargo build --release -p mqs-dump
//! && cargo bench -p mqs-dump --bench dump [-- N] [--rounds
//! R] [--pid PID] [--mpi NAME] [--ucx] [--gdb]`: N pending receives and unexpected
//! messages (default 100000), R rounds (default 3); `--pid` dumps rank 0 of
//! a `queues` job already running instead of launching one (setting up N =
//! 100000 takes minutes: ob1 matches each of the N incoming messages
//! against the N posted receives); `--mpi` names the test MPI build
//! (default `openmpi-4.1.4-g`; `mpich-4.0.2-g` and `mpich-4.0.2-ch4`
//! compare with MPICH's `libtvmpich.so`, `openmpi-5.0.7-g` with Open MPI
//! 5's DLL); `--ucx` runs the job under pml ucx (with `--mpi
//! openmpi-4.1.4-ucx`: our DLL reads UCX's worker, Open MPI's lists
//! nothing). Needs that build (scripts/setup-mpis).

use std::path::PathBuf;
use std::time::Instant;

use mqs_acquire::inspect::index_symbols;
use mqs_core::dll::{Dll, Session};
use mqs_core::interface::Target;
use mqs_core::model::{CommunicatorList, DumpStats, Queue, Section};
use mqs_core::process::{LiveProcess, Mode, PageCache};
use mqs_tests::{Family, Job, LaunchOptions, Mpi};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench dump: {e}");
        std::process::exit(1);
    }
}

struct Args {
    n: usize,
    rounds: usize,
    pid: Option<i32>,
    mpi: Mpi,
    /// Also dump once with every fetch a gdb round trip.
    gdb: bool,
    /// Run the job under pml ucx (with `--mpi openmpi-4.1.4-ucx`).
    ucx: bool,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        n: 100_000,
        rounds: 3,
        pid: None,
        mpi: Mpi::OpenMpiG,
        gdb: false,
        ucx: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => args.rounds = it.next().ok_or("--rounds needs R")?.parse()?,
            "--pid" => args.pid = Some(it.next().ok_or("--pid needs PID")?.parse()?),
            "--gdb" => args.gdb = true,
            "--ucx" => args.ucx = true,
            "--mpi" => {
                let name = it.next().ok_or("--mpi needs a build's name")?;
                let built = || Mpi::all().into_iter().chain(Mpi::more());
                args.mpi = built().find(|m| m.name() == name).ok_or_else(|| {
                    let known: Vec<&str> = built().map(|m| m.name()).collect();
                    format!("--mpi {name}: not a test MPI ({})", known.join(", "))
                })?;
            }
            // cargo bench passes --bench.
            other if other.starts_with('-') => {}
            other => args.n = other.parse()?,
        }
    }
    args.rounds = args.rounds.max(1);
    Ok(args)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let mpi = args.mpi;
    // Whose own DLL ours is compared with, as the labels name it.
    let (who, installed) = match mpi.family() {
        Family::OpenMpi => ("Open MPI's", "lib/openmpi/libompi_dbg_msgq.so"),
        Family::Mpich => ("MPICH's", "lib/libtvmpich.so"),
    };
    let label = |indent: &str| [format!("{indent}{who:<10}"), format!("{indent}ours      ")];
    let mut job = None;
    let pid = match args.pid {
        Some(pid) => {
            println!("dumping pid {pid} (a running queues job's rank 0)");
            pid
        }
        None => {
            println!(
                "setting up: {} job with {} pending receives on rank 0",
                mpi.name(),
                args.n
            );
            let setup = Instant::now();
            // MPICH 4.0's ch4 remembers only the receives of its
            // active-message path: the bench forces it, as the tests do.
            let env = if mpi == Mpi::MpichCh4 {
                vec![("MPIR_CVAR_CH4_OFI_ENABLE_TAGGED".into(), "0".into())]
            } else if args.ucx {
                mqs_tests::pml_ucx_env()
            } else {
                Vec::new()
            };
            let options = LaunchOptions {
                timeout: std::time::Duration::from_secs(1800),
                env,
                ..LaunchOptions::default()
            };
            let j = Job::launch_with(mpi, "queues", 2, &[&args.n.to_string()], &options)?;
            println!("job ready in {:.1} s", setup.elapsed().as_secs_f64());
            let pid = j.rank_pid(0).ok_or("no rank 0")? as i32;
            job = Some(j);
            pid
        }
    };
    println!("load average: {}", load_average());

    // The job's other ranks poll while they wait. Stopped too, as mqs-dump
    // stops a whole job, they leave the cores to the dump and the figures
    // stop depending on where the scheduler put them.
    let mut others = Vec::new();
    let siblings = match &job {
        Some(job) => job
            .rank_pids()
            .into_iter()
            .map(|(_, p)| p as i32)
            .filter(|&p| p != pid)
            .collect(),
        None => sibling_ranks(pid),
    };
    for sibling in siblings {
        others.push(LiveProcess::attach(sibling, Mode::Stop)?);
    }
    println!("stopped {} other rank(s)", others.len());
    // The whole mqs-dump first, while this process is small: a child's
    // peak RSS as the kernel reports it is never below its parent's peak.
    let ours = mqs_tests::our_dll(false);
    // The MPI's DLL where its build installs it (the process names it
    // too, but finding that takes the symbol index, which is large).
    let installed = mpi.prefix()?.join(installed);
    let whole = whole_runs(pid, [&installed, &ours], args.rounds);
    let live = LiveProcess::attach(pid, Mode::Stop)?;
    // The cache mqs-dump reads through when it does not save the dump.
    let target = PageCache::with_limit(live, mqs_acquire::inspect::PAGE_CACHE_LIMIT);

    let cold = Instant::now();
    let symbols = index_symbols(&target, &[])?;
    let index_ms = cold.elapsed().as_secs_f64() * 1e3;
    let named = mqs_acquire::locate::named_by_target(&*symbols, &target)?;
    let theirs: PathBuf = mqs_acquire::locate::first_existing(&named)?;
    // Only to find the MPI's DLL; each DLL gets its own index below.
    drop(symbols);
    println!("symbol index (ELF, maps): {index_ms:.1} ms");
    // Same stopped process for all; each dump starts with a cold page cache.
    let mut rounds = Vec::new();
    for round in 0..args.rounds {
        // Which DLL goes first alternates, so neither always meets the
        // fresher caches.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut pair = [None, None];
        for i in order {
            target.invalidate();
            pair[i] = Some(run_dll([&theirs, &ours][i], &target, pid)?);
        }
        rounds.push(pair.into_iter().flatten().collect::<Vec<_>>());
    }
    let cache = target.stats();
    target.into_inner().detach()?;
    // The anchor: the same dump with memory read through gdb, after our
    // tracer has let go (a process has one tracer), the other ranks still
    // stopped.
    let through_gdb = if args.gdb {
        Some([&theirs, &ours].map(|dll| run_through_gdb(dll, pid)))
    } else {
        None
    };
    for other in others {
        other.detach()?;
    }
    let whole = whole?;
    if let Some(job) = job {
        job.shutdown()?;
    }

    for f in &rounds[0] {
        println!("DLL: {}", f.version);
        println!(
            "  listed: {} pending sends, {} posted receives, {} unexpected messages",
            f.sends, f.receives, f.unexpected
        );
        for note in &f.notes {
            println!("  note: {note}");
        }
        println!(
            "  setup, first round: {} fetches, {} syscalls",
            f.setup_fetches, f.setup_syscalls
        );
    }
    println!(
        "cold start, each DLL with a symbol index of its own (median of {} rounds; per round):",
        rounds.len()
    );
    for (i, who) in label("").iter().enumerate() {
        let pick = |f: &dyn Fn(&Figures) -> f64| {
            let v: Vec<f64> = rounds.iter().map(|p| f(&p[i])).collect();
            let list = v
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ");
            format!("{:.1} ms ({list})", median(v.clone()))
        };
        println!(
            "  {who} symbol index (ELF, maps) {}; setup with cold DWARF {}; setup again, warm {}",
            pick(&|f| f.index_ms),
            pick(&|f| f.cold_ms),
            pick(&|f| f.warm_ms)
        );
    }
    for (i, pair) in rounds.iter().enumerate() {
        println!("round {}:", i + 1);
        for (who, f) in label("  ").iter().zip(pair) {
            let [sends, receives, unexpected] = &f.per_class;
            println!(
                "{who} phases: DLL setup {:.1} ms, sends {:.1} ms, receives {:.1} ms, \
                 unexpected {:.1} ms (DLL and model), render JSON to a file {:.1} ms",
                f.cold_ms,
                sends.elapsed_ms,
                receives.elapsed_ms,
                unexpected.elapsed_ms,
                f.render_ms
            );
        }
        for (who, f) in label("  ").iter().zip(pair) {
            let total = &f.total;
            println!(
                "{who} dump {:7.1} ms, {:8} fetches, {:10} bytes, {:6} syscalls ({:.4} per fetch)",
                total.elapsed_ms,
                total.fetches,
                total.fetched_bytes,
                total.syscalls,
                total.syscalls as f64 / total.fetches.max(1) as f64
            );
            let (both, only) = (&f.both, &f.unexpected_stats);
            println!(
                "{who}   both list (comms, sends, receives): {:7.1} ms, {:8} fetches, {:10} bytes",
                both.elapsed_ms, both.fetches, both.fetched_bytes
            );
            println!(
                "{who}   unexpected messages:               {:7.1} ms, {:8} fetches, {:10} bytes",
                only.elapsed_ms, only.fetches, only.fetched_bytes
            );
        }
        let (t, o) = (&pair[0], &pair[1]);
        println!(
            "  ours/theirs on what both list: {:.2}x the time, {:.3}x the fetches; \
             whole dump: {:.2}x the time, {:.3}x the fetches",
            ratio(o.both.elapsed_ms, t.both.elapsed_ms),
            ratio(o.both.fetches as f64, t.both.fetches as f64),
            ratio(o.total.elapsed_ms, t.total.elapsed_ms),
            ratio(o.total.fetches as f64, t.total.fetches as f64),
        );
    }
    let range = |pick: &dyn Fn(&[Figures]) -> f64, digits: usize| {
        let v: Vec<f64> = rounds.iter().map(|p| pick(p)).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.digits$} to {hi:.digits$}")
    };
    println!("over {} rounds:", rounds.len());
    println!(
        "  both list:  {who} {} ms, ours {} ms",
        range(&|p| p[0].both.elapsed_ms, 1),
        range(&|p| p[1].both.elapsed_ms, 1)
    );
    println!(
        "  whole dump: {who} {} ms, ours {} ms",
        range(&|p| p[0].total.elapsed_ms, 1),
        range(&|p| p[1].total.elapsed_ms, 1)
    );
    println!(
        "  ours/theirs on what both list: {}x the time (goal: below 1), {}x the fetches (goal: at most 1)",
        range(&|p| ratio(p[1].both.elapsed_ms, p[0].both.elapsed_ms), 2),
        range(
            &|p| ratio(p[1].both.fetches as f64, p[0].both.fetches as f64),
            3
        ),
    );
    // One slow moment (a page fault storm, another process) swings a
    // single round; the sums over all rounds swing less.
    let sum = |which: usize| -> f64 { rounds.iter().map(|p| p[which].both.elapsed_ms).sum() };
    println!(
        "  ours/theirs on what both list, all rounds summed: {:.2}x the time",
        ratio(sum(1), sum(0))
    );
    print_callbacks(who, &rounds[0][0], &rounds[0][1]);
    // The DLL issue's goal per MPI: at most 4 fetches per operation listed.
    for (who, f) in label("").iter().zip(&rounds[0]) {
        let listed = f.sends + f.receives + f.unexpected;
        println!(
            "{who} fetches per listed operation, round 1: {:.2} ({} fetches, {listed} operations; goal for ours: at most 4)",
            f.total.fetches as f64 / listed.max(1) as f64,
            f.total.fetches
        );
    }
    let t = &rounds[0][0];
    println!(
        "host goals ({who} DLL, round 1): dump {:.2} s (< 1 s), {:.4} syscalls per fetch (< 0.1)",
        t.total.elapsed_ms / 1e3,
        t.total.syscalls as f64 / t.total.fetches.max(1) as f64
    );
    println!("page cache: {cache:?}");
    print_whole(&label("  "), &whole);
    match &through_gdb {
        Some(runs) => print_gdb(&label("  "), runs),
        None => println!("  gdb-driven host: not run (--gdb runs it)"),
    }
    println!("load average: {}", load_average());
    Ok(())
}

/// One run of the whole mqs-dump.
struct WholeRun {
    wall_ms: f64,
    peak_rss_kib: i64,
    json_bytes: u64,
}

/// Runs `mqs-dump --pid PID --json --dll DLL > file` `rounds` times with
/// each DLL, which one first alternating.
fn whole_runs(
    pid: i32,
    dlls: [&PathBuf; 2],
    rounds: usize,
) -> Result<[Vec<WholeRun>; 2], Box<dyn std::error::Error>> {
    let exe = mqs_tests::mqs_dump_binary();
    let out_path = std::env::temp_dir().join(format!("mqs-bench-dump-{}.json", std::process::id()));
    let mut runs: [Vec<WholeRun>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let out = std::fs::File::create(&out_path)?;
            let started = Instant::now();
            let child = std::process::Command::new(&exe)
                .args(["--pid", &pid.to_string(), "--json", "--dll"])
                .arg(dlls[i])
                .stdout(out)
                .spawn()?;
            let (status, peak_rss_kib) = wait_with_rss(child.id() as i32)?;
            let wall_ms = started.elapsed().as_secs_f64() * 1e3;
            if status != 0 {
                return Err(format!("{} failed (wait status {status})", exe.display()).into());
            }
            let json_bytes = std::fs::metadata(&out_path)?.len();
            runs[i].push(WholeRun {
                wall_ms,
                peak_rss_kib,
                json_bytes,
            });
        }
    }
    let _ = std::fs::remove_file(&out_path);
    Ok(runs)
}

/// Waits for a child, returning its wait status and peak resident size.
fn wait_with_rss(pid: i32) -> std::io::Result<(i32, i64)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be written over.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with valid out-pointers; std's Child
    // is not waited on afterwards.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((status, usage.ru_maxrss))
}

fn print_whole(labels: &[String; 2], whole: &[Vec<WholeRun>; 2]) {
    println!("whole process, mqs-dump --pid PID --json --dll DLL > file (other ranks stopped):");
    for (who, runs) in labels.iter().zip(whole) {
        let walls: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.wall_ms)).collect();
        let rss = runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0);
        println!(
            "{who} {} ms (median {:.0} ms), peak RSS {:.1} MiB, JSON {} bytes",
            walls.join(", "),
            median(runs.iter().map(|r| r.wall_ms).collect()),
            rss as f64 / 1024.0,
            runs.first().map_or(0, |r| r.json_bytes)
        );
    }
    let ratios: Vec<String> = whole[0]
        .iter()
        .zip(&whole[1])
        .map(|(t, o)| format!("{:.2}", ratio(o.wall_ms, t.wall_ms)))
        .collect();
    println!(
        "  ours/theirs, whole process per round: {}{}",
        ratios.join(", "),
        if labels[0].contains("Open MPI") {
            " (ours lists the unexpected messages too)"
        } else {
            ""
        }
    );
}

/// A dump of one rank through a DLL with every fetch a gdb round trip.
struct GdbRun {
    /// gdb attaching and loading the process's symbols.
    attach_ms: f64,
    /// The DLL's setup and the dump, with their fetches.
    dump_ms: f64,
    fetches: u64,
    listed: usize,
}

fn print_gdb(labels: &[String; 2], runs: &[Result<GdbRun, String>; 2]) {
    println!(
        "gdb-driven host (every fetch is one -data-read-memory-bytes round trip to gdb, \
         no cache; symbols and types still from mqs's index, which a padb-like host \
         would ask gdb for too):"
    );
    for (who, run) in labels.iter().zip(runs) {
        match run {
            Ok(r) => println!(
                "{who} gdb attach {:.0} ms, then setup and dump {:.0} ms: {} fetches ({:.1} us each), {} operations",
                r.attach_ms,
                r.dump_ms,
                r.fetches,
                r.dump_ms * 1e3 / r.fetches.max(1) as f64,
                r.listed
            ),
            Err(e) => println!("{who} failed: {e}"),
        }
    }
}

fn run_through_gdb(dll_path: &std::path::Path, pid: i32) -> Result<GdbRun, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let attach = Instant::now();
    let target = gdb::GdbMemory::attach(pid).map_err(|e| err(&e))?;
    let attach_ms = attach.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let symbols = index_symbols(&target, &[]).map_err(|e| err(&e))?;
    let exe = target.executable().map_err(|e| err(&e))?;
    let dll = Dll::load(dll_path).map_err(|e| err(&e))?;
    let mut session = Session::new(dll).map_err(|e| err(&e))?;
    let image = session
        .add_image(&exe.display().to_string(), Box::new(symbols))
        .map_err(|e| err(&e))?;
    let process = session
        .add_process(image, Box::new(&target), 0, target.pointer_size() as i32)
        .map_err(|e| err(&e))?;
    let (comms, _, _) = session.dump_by_class(process);
    let dump_ms = started.elapsed().as_secs_f64() * 1e3;
    let (sends, receives, unexpected, _) = count(&comms);
    let fetches = target.reads();
    drop(session);
    target.detach().map_err(|e| err(&e))?;
    Ok(GdbRun {
        attach_ms,
        dump_ms,
        fetches,
        listed: sends + receives + unexpected,
    })
}

/// Target memory read through gdb's machine interface, one round trip per
/// read, as a debugger host that drives gdb answers a DLL (padb); maps,
/// files and the environment from /proc.
mod gdb {
    use std::cell::{Cell, RefCell};
    use std::io::{BufRead, BufReader, Write};
    use std::path::PathBuf;
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

    use mqs_core::hex::decode;
    use mqs_core::interface::{Environment, Liveness, MappedObject, Target, Thread};
    use mqs_core::process::{LiveProcess, Mode};
    use mqs_core::{Error, Result};

    pub struct GdbMemory {
        proc_fs: LiveProcess,
        gdb: RefCell<Mi>,
        reads: Cell<u64>,
    }

    struct Mi {
        child: Child,
        input: ChildStdin,
        output: BufReader<ChildStdout>,
    }

    impl Mi {
        /// Sends one command; the lines up to the next prompt.
        fn command(&mut self, line: &str) -> std::io::Result<Vec<String>> {
            writeln!(self.input, "{line}")?;
            self.input.flush()?;
            self.until_prompt()
        }

        fn until_prompt(&mut self) -> std::io::Result<Vec<String>> {
            let mut lines = Vec::new();
            loop {
                let mut l = String::new();
                if self.output.read_line(&mut l)? == 0 {
                    return Err(std::io::Error::other("gdb ended"));
                }
                let l = l.trim_end();
                if l == "(gdb)" {
                    return Ok(lines);
                }
                lines.push(l.to_owned());
            }
        }
    }

    impl GdbMemory {
        /// gdb attached to `pid` (which stops it) and ready for commands.
        pub fn attach(pid: i32) -> std::io::Result<Self> {
            let mut child = Command::new("gdb")
                .args(["-nx", "-q", "--interpreter=mi2", "-p", &pid.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let input = child
                .stdin
                .take()
                .ok_or_else(|| std::io::Error::other("stdin"))?;
            let output = BufReader::new(
                child
                    .stdout
                    .take()
                    .ok_or_else(|| std::io::Error::other("stdout"))?,
            );
            let mut mi = Mi {
                child,
                input,
                output,
            };
            mi.until_prompt()?;
            // Reading memory only: never let gdb ask anything.
            mi.command("-gdb-set confirm off")?;
            let proc_fs = LiveProcess::attach(pid, Mode::NoStop)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok(GdbMemory {
                proc_fs,
                gdb: RefCell::new(mi),
                reads: Cell::new(0),
            })
        }

        pub fn reads(&self) -> u64 {
            self.reads.get()
        }

        /// Detaches (the process runs again) and ends gdb.
        pub fn detach(self) -> std::io::Result<()> {
            let mut mi = self.gdb.into_inner();
            mi.command("-target-detach")?;
            writeln!(mi.input, "-gdb-exit")?;
            mi.child.wait()?;
            Ok(())
        }
    }

    impl Target for GdbMemory {
        fn pid(&self) -> i32 {
            self.proc_fs.pid()
        }

        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
            self.reads.set(self.reads.get() + 1);
            let fail = |detail: String| Error::Read {
                pid: self.pid(),
                addr,
                len: buf.len(),
                detail,
            };
            let lines = self
                .gdb
                .borrow_mut()
                .command(&format!("-data-read-memory-bytes {addr:#x} {}", buf.len()))
                .map_err(|e| fail(e.to_string()))?;
            let done = lines
                .iter()
                .find(|l| l.starts_with("^done"))
                .ok_or_else(|| fail(lines.join(" ")))?;
            // One block per readable run: all of it, or the read failed.
            let mut bytes = Vec::with_capacity(buf.len());
            for part in done.split("contents=\"").skip(1) {
                let hex = part.split('"').next().unwrap_or("");
                bytes.extend(decode(hex).ok_or_else(|| fail("bad contents".into()))?);
            }
            if bytes.len() != buf.len() {
                return Err(fail(format!("{} of {} bytes", bytes.len(), buf.len())));
            }
            buf.copy_from_slice(&bytes);
            Ok(())
        }

        fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
            self.proc_fs.mapped_objects()
        }

        fn executable(&self) -> Result<PathBuf> {
            self.proc_fs.executable()
        }

        fn environment(&self) -> Result<Environment> {
            self.proc_fs.environment()
        }

        fn threads(&self) -> Result<Vec<Thread>> {
            self.proc_fs.threads()
        }

        fn liveness(&self) -> Liveness {
            self.proc_fs.liveness()
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The callbacks of each DLL by kind, for the whole session of the first
/// round (setup and dump), and for what both list (the whole session less
/// the unexpected-message queues, which only ours reads). Each is a round
/// trip in a debugger that answers through gdb (padb): the goal is fewer
/// of every kind than Open MPI's DLL.
fn print_callbacks(who: &str, theirs: &Figures, ours: &Figures) {
    println!("callbacks by kind, round 1 (setup and dump; each a gdb round trip in padb):");
    println!(
        "  {:<16} {:>12} {:>12} {:>14} {:>14}",
        "kind", who, "ours", "ours, what", "ours below"
    );
    println!(
        "  {:<16} {:>12} {:>12} {:>14} {:>14}",
        "", "", "(all)", "both list", "on both list?"
    );
    let (t, o, ob) = (
        theirs.total.callbacks,
        ours.total.callbacks,
        ours.both.callbacks,
    );
    for ((kind, tn), ((_, on), (_, obn))) in t
        .kinds()
        .into_iter()
        .zip(o.kinds().into_iter().zip(ob.kinds()))
    {
        let below = match (obn, tn) {
            (0, 0) => "-",
            (a, b) if a < b => "yes",
            _ => "NO",
        };
        println!("  {kind:<16} {tn:>12} {on:>12} {obn:>14} {below:>14}");
    }
    println!(
        "  {:<16} {:>12} {:>12} {:>14}",
        "total",
        t.total(),
        o.total(),
        ob.total()
    );
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(1e-9)
}

/// The first three fields of /proc/loadavg.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

struct Figures {
    version: String,
    /// The DLL's own symbol index of the process (ELF symbols, maps).
    index_ms: f64,
    /// Loading and setting up the DLL on that index, cold: its DWARF
    /// lookups index the types.
    cold_ms: f64,
    /// The same again on the same index, warm.
    warm_ms: f64,
    setup_fetches: u64,
    setup_syscalls: u64,
    total: DumpStats,
    /// Communicators, pending sends and posted receives: the whole dump
    /// less the unexpected-message queues.
    both: DumpStats,
    unexpected_stats: DumpStats,
    /// Sends, receives, unexpected: setting up each iterator and taking
    /// every operation into the model, summed over communicators.
    per_class: [DumpStats; 3],
    /// Writing the communicators as mqs-dump's JSON into a file.
    render_ms: f64,
    sends: usize,
    receives: usize,
    unexpected: usize,
    /// Truncations and "list cut" notes, per communicator and queue.
    notes: Vec<String>,
}

fn run_dll(
    dll_path: &std::path::Path,
    target: &PageCache<LiveProcess>,
    _pid: i32,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let symbols = index_symbols(target, &[])?;
    let index_ms = started.elapsed().as_secs_f64() * 1e3;
    let exe = target.executable()?.display().to_string();
    let dll = Dll::load(dll_path)?;
    // Cold: the first lookups in this index build its type indexes.
    let cold = Instant::now();
    {
        let mut session = Session::new(dll)?;
        let image = session.add_image(&exe, Box::new(symbols.clone()))?;
        session.add_process(image, Box::new(target), 0, target.pointer_size() as i32)?;
    }
    let cold_ms = cold.elapsed().as_secs_f64() * 1e3;
    // Warm: the same index; the memory the setup reads from a cold page
    // cache again.
    target.invalidate();
    let warm = Instant::now();
    let syscalls_before = target.syscalls();
    let mut session = Session::new(dll)?;
    let image = session.add_image(&exe, Box::new(symbols.clone()))?;
    let process = session.add_process(image, Box::new(target), 0, target.pointer_size() as i32)?;
    let warm_ms = warm.elapsed().as_secs_f64() * 1e3;
    let setup_fetches = session.fetches(process);
    let setup_syscalls = target.syscalls() - syscalls_before;
    let (comms, total, per_class) = session.dump_by_class(process);
    let unexpected_stats = per_class[2].clone();
    let render = Instant::now();
    let path = std::env::temp_dir().join(format!("mqs-bench-render-{}.json", std::process::id()));
    let file = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&path)?);
    mqs_analysis::render::write_json(&comms, file)?;
    let render_ms = render.elapsed().as_secs_f64() * 1e3;
    let _ = std::fs::remove_file(&path);
    let both = DumpStats {
        fetches: total.fetches - unexpected_stats.fetches,
        fetched_bytes: total.fetched_bytes - unexpected_stats.fetched_bytes,
        syscalls: total.syscalls - unexpected_stats.syscalls,
        elapsed_ms: total.elapsed_ms - unexpected_stats.elapsed_ms,
        stacks_ms: None,
        callbacks: total.callbacks.since(&unexpected_stats.callbacks),
    };
    let (sends, receives, unexpected, notes) = count(&comms);
    Ok(Figures {
        version: dll.version.clone(),
        index_ms,
        cold_ms,
        warm_ms,
        setup_fetches,
        setup_syscalls,
        total,
        both,
        unexpected_stats,
        per_class,
        render_ms,
        sends,
        receives,
        unexpected,
        notes,
    })
}

/// Operations listed per class, and every sign that a list was cut.
fn count(comms: &Section<CommunicatorList>) -> (usize, usize, usize, Vec<String>) {
    let mut n = [0usize; 3];
    let mut notes = Vec::new();
    let Section::Ok { value } = comms else {
        notes.push("no communicator list".into());
        return (0, 0, 0, notes);
    };
    for comm in &value.list {
        let queues: [(&str, &Section<Queue>); 3] = [
            ("sends", &comm.sends),
            ("receives", &comm.receives),
            ("unexpected", &comm.unexpected),
        ];
        for (i, (what, queue)) in queues.into_iter().enumerate() {
            let Section::Ok { value } = queue else {
                continue;
            };
            n[i] += value.operations.len();
            if let Some(t) = &value.truncated {
                notes.push(format!("{} {what}: truncated: {t}", comm.name));
            }
            for op in &value.operations {
                for line in op.extra_text.iter().filter(|l| l.contains("list cut")) {
                    notes.push(format!("{} {what}: {line}", comm.name));
                }
            }
        }
    }
    (n[0], n[1], n[2], notes)
}

/// The other ranks of `pid`'s job on this machine: the processes with the
/// same parent (the launcher) running the same executable.
fn sibling_ranks(pid: i32) -> Vec<i32> {
    let exe = |p: u32| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    let (Some(parent), Some(ours)) = (mqs_tests::parent_pid(pid as u32), exe(pid as u32)) else {
        return Vec::new();
    };
    mqs_tests::descendants(parent)
        .into_iter()
        .map(|r| r.pid)
        .filter(|&p| p != pid as u32 && mqs_tests::parent_pid(p) == Some(parent))
        .filter(|&p| exe(p).as_ref() == Some(&ours))
        .map(|p| p as i32)
        .collect()
}
