//! Who waits for whom, from what each rank is blocked in, on jobs that do
//! what real codes do:
//!
//! - `halo`: a halo exchange that runs for ever (`MPI_Irecv` from the left
//!   neighbour, `MPI_Send` to the right one, `MPI_Wait`; messages below and
//!   above the eager limit). One rank is stopped with SIGSTOP at a random
//!   moment, many times over: `--deadlock` must never claim a cycle, must
//!   name that rank as stopped and as the one the others wait for, and must
//!   leave it stopped.
//! - `send_to_spinner`: a rank blocked in `MPI_Send` to a rank spinning
//!   outside MPI, with nonblocking receives pending from another: it waits
//!   for the rank its send targets, not for the sources of its receives.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mqs_tests::{Job, LaunchOptions, Mpi};
use support::stop::*;
use support::*;

/// A small generator of random numbers (xorshift), seeded from the clock;
/// the seed is printed so that a failing run can be repeated with
/// `MQS_TEST_SEED`.
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::env::var("MQS_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        eprintln!("blocked: MQS_TEST_SEED={seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `trials` times: one random rank of a running halo exchange of `ranks`
/// ranks stopped at a random moment, the job dumped with `--deadlock`.
fn halo_with_a_stopped_rank(mpi: Mpi, ranks: u32, trials: usize) {
    halo_with_a_stopped_rank_with(mpi, ranks, trials, LaunchOptions::default());
}

fn halo_with_a_stopped_rank_with(mpi: Mpi, ranks: u32, trials: usize, options: LaunchOptions) {
    let job = Job::launch_with(mpi, "halo", ranks, &[], &options).unwrap_or_else(|e| panic!("{e}"));
    let launcher = job.launcher_pid().to_string();
    let mut random = Random::new();
    let mut resume = Resume(None);
    for trial in 0..trials {
        let rank = random.below(u64::from(ranks)) as u32;
        let pid = job.rank_pid(rank).expect("the rank's pid");
        // A random moment of the exchange: in MPI_Send, in MPI_Wait, or
        // computing.
        std::thread::sleep(Duration::from_millis(random.below(250)));
        signal(pid, libc::SIGSTOP);
        resume.0 = Some(pid);
        until_stopped(pid, true);
        // Time for the others to block on it.
        std::thread::sleep(Duration::from_millis(400 + random.below(300)));
        let out = run(&["--pid", &launcher, "--deadlock"]);
        let text = stdout(&out);
        let what = format!(
            "trial {trial}: rank {rank} (pid {pid}) stopped; exit {:?}\n{text}\n{}",
            out.status.code(),
            stderr(&out)
        );
        assert_ne!(out.status.code(), Some(12), "a claimed deadlock: {what}");
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("deadlock") || l.starts_with("possible deadlock")),
            "{what}"
        );
        assert!(
            text.contains(&format!(
                "stopped: rank {rank} (pid {pid}) is stopped by a signal (SIGSTOP), not by mqs: \
                 the ranks waiting for it go on when it resumes (kill -CONT {pid})"
            )),
            "{what}"
        );
        assert!(
            text.contains(&format!("the chain waits for rank {rank}")),
            "{what}"
        );
        // Left as found: still stopped, and by nobody's tracing.
        assert_eq!(state(pid), Some('T'), "{what}");
        assert_eq!(tracer_of(pid), None, "{what}");
        signal(pid, libc::SIGCONT);
        resume.0 = None;
        until_stopped(pid, false);
    }
}

#[test]
fn halo_with_a_stopped_rank_on_open_mpi_is_never_a_deadlock() {
    halo_with_a_stopped_rank(Mpi::OpenMpiG, 4, 20);
}

/// Over TCP (as between nodes) a rank stopped in a rendezvous send leaves
/// its neighbour's receive matched with its data still to come: that
/// neighbour waits for it too.
#[test]
fn halo_with_a_stopped_rank_on_open_mpi_over_tcp_is_never_a_deadlock() {
    let options = LaunchOptions {
        env: vec![("OMPI_MCA_btl".into(), "self,tcp".into())],
        ..LaunchOptions::default()
    };
    halo_with_a_stopped_rank_with(Mpi::OpenMpiG, 6, 6, options);
}

#[test]
fn halo_with_a_stopped_rank_on_stock_open_mpi_is_never_a_deadlock() {
    halo_with_a_stopped_rank(Mpi::DebianOpenMpi, 6, 20);
}

#[test]
fn halo_with_a_stopped_rank_on_mpich_is_never_a_deadlock() {
    halo_with_a_stopped_rank(Mpi::Mpich, 5, 10);
}

/// `send_to_spinner` on `mpi`: rank 1 waits for rank 0, the target of its
/// blocking send, and not for rank 2, the source of its nonblocking
/// receives.
fn send_to_a_spinner(mpi: Mpi) {
    let job = Job::launch(mpi, "send_to_spinner", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    let launcher = job.launcher_pid().to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    let wanted = "rank 1 waits for rank 0 (send tag 9 on MPI_COMM_WORLD";
    loop {
        let out = run(&["--pid", &launcher, "--deadlock"]);
        let text = stdout(&out);
        let what = format!("exit {:?}\n{text}\n{}", out.status.code(), stderr(&out));
        let rank2 = text.contains("rank 2 waits for rank 0")
            || text.contains("the chain waits for rank 0 (ranks 1-2 wait for it in all)");
        if text.contains(wanted) && rank2 {
            assert_eq!(out.status.code(), Some(0), "{what}");
            // Its nonblocking receives from rank 2 are no waits.
            assert!(!text.contains("rank 1 waits for rank 2"), "{what}");
            assert!(
                text.contains("rank 0 has nothing pending and is not inside MPI")
                    || text.contains("rank 0 is not calling MPI"),
                "{what}"
            );
            assert!(text.contains("\nno deadlock: "), "{what}");
            // Rank 1's one wait, in the JSON of the analysis' source: its
            // stack is in MPI_Send.
            let view = run(&["--pid", &launcher, "--stacks"]);
            assert!(
                stdout(&view).contains("MPI_Send"),
                "{}\n{}",
                stdout(&view),
                stderr(&view)
            );
            return;
        }
        assert!(Instant::now() < deadline, "never settled: {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_rank_blocked_in_send_waits_for_its_destination_on_mpich_ch4() {
    send_to_a_spinner(Mpi::MpichCh4);
}

#[test]
fn a_rank_blocked_in_send_waits_for_its_destination_on_open_mpi() {
    send_to_a_spinner(Mpi::OpenMpiG);
}

/// C++ frames are named as they are written, in the job view's stacks and
/// in `--deadlock`: `work::Solver::iterate()`, not
/// `_ZN4work6Solver7iterateEv`.
#[test]
fn cxx_frames_are_demangled_in_the_view_and_the_analysis() {
    let job = Job::launch(Mpi::OpenMpiG, "cxx_chain", 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    let launcher = job.launcher_pid().to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = run(&["--pid", &launcher, "--deadlock"]);
        let text = stdout(&out);
        let what = format!("exit {:?}\n{text}\n{}", out.status.code(), stderr(&out));
        if text.contains("rank 1 waits for rank 0") && text.contains("rank 2 waits for rank 1") {
            assert!(
                text.contains(
                    "rank 0 has nothing pending and is not inside MPI (in main > \
                     work::Solver::run() > work::Solver::iterate())"
                ),
                "{what}"
            );
            assert!(!text.contains("_ZN"), "{what}");
            break;
        }
        assert!(Instant::now() < deadline, "never settled: {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = run(&["--pid", &launcher, "--stacks"]);
    let text = stdout(&out);
    assert!(
        text.contains("comm::Halo::receive_from(int) > MPI_Recv"),
        "{text}\n{}",
        stderr(&out)
    );
    assert!(text.contains("work::Solver::iterate()"), "{text}");
    assert!(!text.contains("_ZN"), "{text}");
}
