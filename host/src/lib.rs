//! The debugger side of the message-queue ABI: read live MPI processes,
//! resolve their symbols and types, load a message-queue DLL and drive it.

pub mod dll;
pub mod dump;
pub mod error;
pub mod inspect;
pub mod job;
pub mod mpir;
pub mod process;
pub mod render;
pub mod snapshot;
pub mod symbols;

pub use error::{exit_code, Error, PermissionReason, Result};
