//! The embedding core of mqs: what a debugger needs to drive any
//! message-queue DLL (`mpi_interface.h`) against MPI processes, with no
//! user interface, command line or network in it.
//!
//! Data flows one way: [`interface`] (the interfaces: a process's memory and
//! state, [`interface::Target`]; what its images answer,
//! [`interface::ImageSymbols`]) ← [`process`] (the host's own sources: live
//! processes, core files, snapshots, a page cache) and [`symbols`] (ELF and
//! DWARF, separate debug files, type packs) → [`dll`] (loading a DLL, its
//! callbacks, a [`dll::Session`]) → [`model`] (the owned dump). Finding a
//! job's processes, collectors and launch mode live in `mqs-acquire`;
//! analyses and rendering in `mqs-analysis`; `mqs-dump` is a thin binary
//! over them.
//!
//! # Embedding in a debugger
//!
//! A debugger that controls its processes itself implements
//! [`interface::Target`] (memory and process facts) and
//! [`interface::ImageSymbols`] (symbol and type lookups) for its own process
//! model, and drives any DLL through a session; no ptrace of ours is
//! involved. `examples/embed.rs` is a complete example.
//!
//! ```no_run
//! use mqs_core::dll::{Dll, Session};
//! use mqs_core::interface::{ImageSymbols, Target};
//!
//! fn queues(
//!     memory: Box<dyn Target>,
//!     symbols: Box<dyn ImageSymbols>,
//!     rank: i32,
//! ) -> mqs_core::Result<()> {
//!     let dll = Dll::load("/usr/lib/openmpi/libompi_dbg_msgq.so".as_ref())?;
//!     let mut session = Session::new(dll)?;
//!     let image = session.add_image("a.out", symbols)?;
//!     let process = session.add_process(image, memory, rank, 8)?;
//!     let (communicators, _stats) = session.dump(process);
//!     println!("{}", serde_json::to_string_pretty(&communicators).unwrap());
//!     Ok(())
//! }
//! ```

pub mod cache_dir;
pub mod dll;
pub mod error;
pub mod hex;
pub mod interface;
pub mod model;
pub mod process;
pub mod symbols;
pub mod sync;

pub use error::PermissionReason;
pub use error::{exit_code, Error, Result};
