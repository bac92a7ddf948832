//! Call stacks of a process's threads: unwound from each thread's
//! registers while the process is stopped ([`unwind`], through the same
//! [`Target`](mqs_core::interface::Target) as the dump, with the CFI of every
//! mapped object, reading the communicator each MPI frame's arguments
//! name), named afterwards ([`symbolize`], from the symbol tables and DWARF
//! lines), so the process is stopped no longer than the walk over its stack
//! memory.

mod arguments;
mod symbolize;
mod unwind;

#[cfg(test)]
mod testing;

pub use arguments::FrameArguments;
pub use symbolize::symbolize;
pub use unwind::{unwind, RawStack, RawStacks};
