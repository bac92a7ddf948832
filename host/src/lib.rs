//! The debugger side of the message-queue ABI (`mpi_interface.h`): read MPI
//! processes (live, from core files, from saved snapshots), resolve their
//! symbols and types, load any message-queue DLL and drive it, and turn what
//! it reports into an owned model. `mqs-dump` is a thin binary over it.
//!
//! Data flows one way: [`process`] (the [`process::Target`] interface and
//! its sources) → [`symbols`] → [`dll`] (loading a DLL, its callbacks, a
//! [`dll::Session`]) → [`dump`] (the model) → [`render`]. [`inspect`] runs
//! that pipeline for `mqs-dump`; [`mpir`] and [`job`] find a job's processes;
//! [`snapshot`] saves and replays what a dump read.
//!
//! # Embedding in a debugger
//!
//! A debugger that controls its processes itself implements
//! [`process::Target`] (memory and process facts) and [`dll::ImageSymbols`]
//! (symbol and type lookups) for its own process model, and drives any DLL
//! through a session; no ptrace of ours is involved. `examples/embed.rs` is
//! a complete example.
//!
//! ```no_run
//! use mqs_host::dll::{Dll, ImageSymbols, Session};
//! use mqs_host::process::Target;
//!
//! fn queues(
//!     memory: Box<dyn Target>,
//!     symbols: Box<dyn ImageSymbols>,
//!     rank: i32,
//! ) -> mqs_host::Result<()> {
//!     let dll = Dll::load("/usr/lib/openmpi/libompi_dbg_msgq.so".as_ref())?;
//!     let mut session = Session::new(dll)?;
//!     let image = session.add_image("a.out", symbols)?;
//!     let process = session.add_process(image, memory, rank, 8)?;
//!     let (communicators, _stats) = session.dump(process);
//!     println!("{}", serde_json::to_string_pretty(&communicators).unwrap());
//!     Ok(())
//! }
//! ```

pub mod analysis;
pub mod collect;
pub mod cvars;
pub mod dll;
pub mod dump;
pub mod error;
pub mod hex;
pub mod inspect;
pub mod job;
pub mod launch;
pub mod mpi2dd;
pub mod mpir;
pub mod pmix;
pub mod process;
pub mod render;
pub mod snapshot;
pub mod stacks;
pub mod symbols;
pub mod sync;
pub mod typepack;
pub mod view;

pub use error::PermissionReason;
pub use error::{exit_code, Error, Result};
