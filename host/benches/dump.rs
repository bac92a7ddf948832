//! Benchmark (not a test): dump a fixture rank with many pending receives
//! and unexpected messages through Open MPI's own DLL, and print the figures
//! the host issue sets goals for: the dump's wall time, fetch callbacks,
//! syscalls (goal: under 1 s, under one syscall per ten fetches) and the
//! cold start (symbol and DWARF indexing).
//!
//! The same stopped process is then dumped through our DLL too, for the
//! DLL issue's comparison: time and fetch callbacks of each.
//!
//! `cargo build --release -p mqs-dll && cargo bench -p mqs-host --bench dump
//! [-- N]` (N pending receives and unexpected messages, default 100000).
//! Needs the Open MPI 4.1.4 -g build (scripts/setup-mpis).

use std::path::PathBuf;
use std::time::Instant;

use mqs_host::dll::{Dll, Session};
use mqs_host::dump::Section;
use mqs_host::inspect::{index_symbols, IndexSymbols};
use mqs_host::target::{exe_path, LiveProcess, Mode, PageCache, Target};
use mqs_tests::{Job, LaunchOptions, Mpi};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench dump: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let mpi = Mpi::OpenMpiG;
    println!(
        "setting up: {} job with {n} pending receives on rank 0",
        mpi.name()
    );
    let setup = Instant::now();
    let options = LaunchOptions {
        timeout: std::time::Duration::from_secs(600),
        ..LaunchOptions::default()
    };
    let job = Job::launch_with(mpi, "queues", 2, &[&n.to_string()], &options)?;
    println!("job ready in {:.1} s", setup.elapsed().as_secs_f64());
    let pid = job.rank_pid(0).ok_or("no rank 0")? as i32;

    let live = LiveProcess::attach(pid, Mode::Stop)?;
    let target = PageCache::new(live);

    let cold = Instant::now();
    let symbols = index_symbols(&target, &[])?;
    let index_ms = cold.elapsed().as_secs_f64() * 1e3;
    let named =
        mqs_host::dll::locate::named_by_target(&IndexSymbols::new(symbols.clone()), &target)?;
    let theirs: PathBuf = mqs_host::dll::locate::first_existing(&named)?;
    let ours = mqs_tests::target_dir().join("release/libmqs_dll.so");
    if !ours.exists() {
        return Err(format!(
            "{} missing: cargo build --release -p mqs-dll",
            ours.display()
        )
        .into());
    }
    println!("symbol index (ELF, maps): {index_ms:.1} ms");
    let mut figures = Vec::new();
    // Same stopped process for both; each starts with a cold page cache.
    for dll_path in [&theirs, &ours] {
        target.invalidate();
        figures.push(run_dll(dll_path, &symbols, &target, pid)?);
    }
    let cache = target.stats();
    target.into_inner().detach()?;
    job.shutdown()?;

    for f in &figures {
        println!("DLL: {}", f.version);
        println!(
            "  listed: {} posted receives, {} unexpected messages",
            f.receives, f.unexpected
        );
        println!(
            "  cold start (DWARF, DLL setup): {:.1} ms, {} fetches, {} syscalls",
            f.cold_ms, f.setup_fetches, f.setup_syscalls
        );
        println!(
            "  dump: {:.1} ms, {} fetch callbacks, {} bytes, {} syscalls ({:.4} per fetch)",
            f.stats.elapsed_ms,
            f.stats.fetches,
            f.stats.fetched_bytes,
            f.stats.syscalls,
            f.stats.syscalls as f64 / f.stats.fetches.max(1) as f64
        );
    }
    let (t, o) = (&figures[0], &figures[1]);
    println!(
        "ours vs Open MPI's: {:.2}x the time, {:.3}x the fetches (goal: faster, at most as many)",
        o.stats.elapsed_ms / t.stats.elapsed_ms.max(1e-9),
        o.stats.fetches as f64 / t.stats.fetches.max(1) as f64
    );
    println!(
        "host goals (Open MPI's DLL): dump {:.2} s (< 1 s), {:.4} syscalls per fetch (< 0.1)",
        t.stats.elapsed_ms / 1e3,
        t.stats.syscalls as f64 / t.stats.fetches.max(1) as f64
    );
    println!("page cache: {cache:?}");
    Ok(())
}

struct Figures {
    version: String,
    cold_ms: f64,
    setup_fetches: u64,
    setup_syscalls: u64,
    stats: mqs_host::dump::DumpStats,
    receives: usize,
    unexpected: usize,
}

fn run_dll(
    dll_path: &std::path::Path,
    symbols: &std::sync::Arc<mqs_host::symbols::SymbolIndex>,
    target: &PageCache<LiveProcess>,
    pid: i32,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let cold = Instant::now();
    let syscalls_before = target.syscalls();
    let dll = Dll::load(dll_path)?;
    let mut session = Session::new(dll)?;
    let exe = exe_path(pid)?.display().to_string();
    let image = session.add_image(&exe, Box::new(IndexSymbols::new(symbols.clone())))?;
    let process = session.add_process(image, Box::new(target), 0, 8)?;
    let cold_ms = cold.elapsed().as_secs_f64() * 1e3;
    let setup_fetches = session.fetches(process);
    let setup_syscalls = target.syscalls() - syscalls_before;
    let (comms, stats) = session.dump(process);
    let mut receives = 0;
    let mut unexpected = 0;
    if let Section::Ok { value } = &comms {
        for comm in &value.list {
            if let Section::Ok { value } = &comm.receives {
                receives += value.operations.len();
            }
            if let Section::Ok { value } = &comm.unexpected {
                unexpected += value.operations.len();
            }
        }
    }
    Ok(Figures {
        version: dll.version.clone(),
        cold_ms,
        setup_fetches,
        setup_syscalls,
        stats,
        receives,
        unexpected,
    })
}
