//! Benchmark (not a test): dump a fixture rank with many pending receives
//! and unexpected messages through Open MPI's own DLL, and print the figures
//! the host issue sets goals for: the dump's wall time, fetch callbacks,
//! syscalls (goal: under 1 s, under one syscall per ten fetches) and the
//! cold start (symbol and DWARF indexing).
//!
//! `cargo bench -p mqs-host --bench dump [-- N]` (N pending receives,
//! default 100000). Needs the Open MPI 4.1.4 -g build (scripts/setup-mpis).

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
    let named =
        mqs_host::dll::locate::named_by_target(&IndexSymbols::new(symbols.clone()), &target)?;
    let dll_path: PathBuf = mqs_host::dll::locate::first_existing(&named)?;
    let dll = Dll::load(&dll_path)?;
    let mut session = Session::new(dll)?;
    let exe = exe_path(pid)?.display().to_string();
    let image = session.add_image(&exe, Box::new(IndexSymbols::new(symbols)))?;
    let process = session.add_process(image, Box::new(&target), 0, 8)?;
    let cold_ms = cold.elapsed().as_secs_f64() * 1e3;
    let setup_fetches = session.fetches(process);
    let setup_syscalls = target.syscalls();

    let (comms, stats) = session.dump(process);
    drop(session);
    let cache = target.stats();
    target.into_inner().detach()?;
    job.shutdown()?;

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
    println!("DLL: {}", dll.version);
    println!("operations listed: {receives} posted receives, {unexpected} unexpected messages");
    println!(
        "cold start (symbols, DWARF, DLL setup): {cold_ms:.1} ms, {setup_fetches} fetches, {setup_syscalls} syscalls"
    );
    println!(
        "dump: {:.1} ms, {} fetch callbacks, {} bytes, {} syscalls",
        stats.elapsed_ms, stats.fetches, stats.fetched_bytes, stats.syscalls
    );
    let ratio = stats.syscalls as f64 / stats.fetches.max(1) as f64;
    println!(
        "ratios: {ratio:.4} syscalls per fetch (goal < 0.1), dump {:.2} s (goal < 1 s)",
        stats.elapsed_ms / 1e3
    );
    println!("page cache: {cache:?}");
    Ok(())
}
