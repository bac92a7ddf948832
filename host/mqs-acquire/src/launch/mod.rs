//! MPIR launch mode: `mqs-dump launch -- mpirun ...` starts the job under
//! the tool, learns its processes at the starter's job-spawn event, lets it
//! run, and dumps it on a timer, on SIGUSR1 or when it aborts.
//!
//! Two processes. The *tracer* (a child of mqs-dump: `mqs-dump
//! __trace-starter`) starts the starter and is its only tracer: it sets
//! `MPIR_being_debugged` once the starter's MPIR symbols are mapped (a
//! breakpoint on the dynamic loader's `_dl_debug_state`, which it calls
//! after every change of the link map, says when), plants the breakpoint on
//! `MPIR_Breakpoint`, and reports each event to the *front end* (mqs-dump
//! itself) over a socket, holding the starter at the breakpoint until the
//! front end answers. The front end dumps the ranks (attaching them itself),
//! forwards signals, and exits with the job's status.
//!
//! Why two: a process that dies while it traces another leaves behind every
//! breakpoint byte it planted, and the next hit of one kills the starter
//! with SIGTRAP. Killing mqs-dump (even with SIGKILL) closes the socket; the
//! tracer then restores every byte and detaches before it exits, so the job
//! runs on untouched. Only if the tracer itself is killed with SIGKILL can
//! a breakpoint outlive it, and then only until the starter calls
//! `MPIR_Breakpoint` again: the tracer keeps that breakpoint only while it
//! is needed (until the spawn event, or for the whole run with
//! `--dump-on-abort`).

mod front;
mod options;
mod protocol;
mod tracer;

pub use front::launch;
pub use options::{Analyst, LaunchOptions};
pub use protocol::TRACER_COMMAND;
pub use tracer::run_tracer;
