//! The scale harness (`cargo bench -p mqs-dump --bench collect -- --scale`,
//! `e2e/scale.rs`): many collectors, each serving many ranks made from
//! recorded ones ([`SyntheticJob`]), on one machine and without MPI,
//! through the real front end, protocol, barrier, tree and merge; only
//! reading the processes is replaced.
//!
//! The harness runs as a program of its own, in two roles chosen by its
//! first argument: the front end ([`FRONT_ROLE`]), which starts one
//! collector per synthetic host through a `--launcher` template naming
//! its own program in the collector role ([`COLLECTOR_ROLE`]). The program
//! is the `mqs-scale` binary of this crate for the tests, or the collect
//! bench itself, which runs [`role`] first thing in its `main`.

mod collector;
mod front;
mod job;
mod pattern;

pub use job::{SyntheticJob, FIRST_PID, TAG_STEP};
pub use pattern::{halo_grid, halo_neighbours, Pattern, OUTLIERS};

/// The first argument that makes the harness's program its front end:
/// `FRONT_ROLE --spec FILE [--timeout-ms MS] [--fanout K] [--print-job] [--detail]
/// [--verbose]`; see [`front::run`] for what it prints.
pub const FRONT_ROLE: &str = "scale-front";
/// The first argument that makes it a collector: `COLLECTOR_ROLE --spec
/// FILE --as-host HOST`, then the collector's command line as the front
/// end gives it.
pub const COLLECTOR_ROLE: &str = "scale-collector";

/// Runs the role this process's arguments name, if they name one: its
/// exit code. None: the process is not the harness (a bench run as
/// itself).
pub fn role() -> Option<i32> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (first, rest) = args.split_first()?;
    match first.as_str() {
        FRONT_ROLE => Some(front::run(rest)),
        COLLECTOR_ROLE => Some(collector::run(rest)),
        _ => None,
    }
}

/// The value after `name` in `args`, if it is there.
fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}
