//! The `mpi_interface.h` message-queue debugging ABI in Rust.
//!
//! [`ffi`] holds the types bindgen generates from `include/mpi_interface.h`,
//! once for each interface level: [`ffi::mpi1`] (compatibility 2) and
//! [`ffi::mpi2`] (`FOR_MPI2`, compatibility 3). They are never written by
//! hand; `tests/layout.rs` checks them against the C compiler.
//!
//! [`ENTRY_POINTS`] names every DLL entry point once; `ffi::mpi1::entry` and
//! `ffi::mpi2::entry` give their types (from the header's declarations), the
//! tables hosts resolve them into, and the macros DLLs check their exports
//! with (`check_exports_mpi1!`, `check_exports_mpi2!`).
//!
//! [`model`] is a small safe layer over them: return codes, op classes and
//! statuses as Rust types, and owned communicators and operations with their
//! fixed-size C strings decoded.

pub mod cartesian;
mod entry_points;
pub mod ffi;
mod lines;
pub mod model;

pub use cartesian::{offset_words, Cartesian, MAX_CART_DIMS};
pub use entry_points::{EntryPoint, Need, ENTRY_POINTS};
pub use lines::{Lines, LinesBuf, Part};

pub use model::{
    decode_c_chars, encode_c_chars, request_line, request_of, request_parts, request_split,
    Communicator, OpClass, OpStatus, PendingOperation, ProcessLocation, ReturnCode, ANY_TAG,
    BLOCKING_RECEIVE, IN_TRANSIT,
};
