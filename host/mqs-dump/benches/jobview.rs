//! Benchmark (not a test): the job at a glance for growing jobs. For 8,
//! 16, 32 and 64 ranks of the `split_ring` fixture under Open MPI 4.1.4
//! (-g build, oversubscribed on this machine), each round times: the plain
//! dump of the whole job through mpirun, the dump with stacks (and the part
//! of it spent unwinding while the ranks were stopped), the wait-for
//! analysis, and the job view with the merged call tree.
//!
//! `cargo bench -p mqs-dump --bench jobview [-- SIZES] [--rounds R]`:
//! SIZES like `8,16,32,64` (the default), R rounds per size (default 3).

use std::time::{Duration, Instant};

use mqs_acquire::inspect::{self, Options};
use mqs_analysis::view::{self, ViewOptions};
use mqs_analysis::{Analysis, Job};
use mqs_tests::{Job as MpiJob, LaunchOptions, Mpi};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench jobview: {e}");
        std::process::exit(1);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:8.1} to {hi:8.1}")
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut sizes = vec![8u32, 16, 32, 64];
    let mut rounds = 3usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().ok_or("--rounds needs R")?.parse()?,
            other if other.starts_with('-') => {}
            other => {
                sizes = other.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
        }
    }
    let rounds = rounds.max(1);
    println!("load average: {}", load_average());
    println!(
        "{:>5} | {:>21} | {:>21} | {:>21} | {:>19} | {:>19} | ratio",
        "ranks",
        "plain dump ms",
        "dump + stacks ms",
        "unwinding ms (sum)",
        "wait-for ms",
        "job view ms"
    );
    for &n in &sizes {
        let options = LaunchOptions {
            timeout: Duration::from_secs(600),
            ..LaunchOptions::default()
        };
        let job = MpiJob::launch_with(Mpi::OpenMpiG, "split_ring", n, &[], &options)?;
        let pid = job.launcher_pid() as i32;
        // Every rank's receive is posted after READY: wait for the cycle.
        let with_stacks = Options {
            stacks: true,
            ..Options::default()
        };
        let start = Instant::now();
        loop {
            let dump = inspect::dump(pid, &with_stacks, &mut |_, _| {})?;
            let j = Job::new(&dump);
            if Analysis::new(&j).deadlocked.len() == n as usize {
                break;
            }
            if start.elapsed() > Duration::from_secs(300) {
                return Err(format!("{n} ranks never all deadlocked").into());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let (mut plain, mut stacked, mut unwind, mut waitfor, mut viewing) =
            (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let t = Instant::now();
            let dump = inspect::dump(pid, &Options::default(), &mut |_, _| {})?;
            plain.push(ms(t.elapsed()));
            assert_eq!(dump.processes.len(), n as usize);

            let t = Instant::now();
            let dump = inspect::dump(pid, &with_stacks, &mut |_, _| {})?;
            stacked.push(ms(t.elapsed()));
            unwind.push(
                dump.processes
                    .iter()
                    .filter_map(|p| p.stats.stacks_ms)
                    .sum::<f64>(),
            );

            let t = Instant::now();
            let j = Job::new(&dump);
            let a = Analysis::new(&j);
            let words = a.words();
            waitfor.push(ms(t.elapsed()));
            assert!(a.has_deadlock(), "{words}");

            let t = Instant::now();
            let text = view::job_view(&dump, &ViewOptions::default());
            viewing.push(ms(t.elapsed()));
            assert!(text.contains("main > MPI_Recv"), "{text}");
        }
        let sum = |v: &[f64]| v.iter().sum::<f64>();
        println!(
            "{n:>5} | {} | {} | {} | {} | {} | {:.2}x",
            range(&plain),
            range(&stacked),
            range(&unwind),
            range(&waitfor),
            range(&viewing),
            (sum(&stacked) + sum(&waitfor) + sum(&viewing)) / sum(&plain).max(1e-9)
        );
        job.shutdown()?;
    }
    println!("ratio: (dump with stacks + wait-for + job view) / plain dump, all rounds summed");
    println!("load average: {}", load_average());
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
