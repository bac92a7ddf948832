//! Type packs beyond the symbol layer: making one from a library's DWARF
//! (`extract`), checking one against a library (`check`), the proof that a
//! rebuild loads the same bytes as the library it stands in for
//! (`identity`; `plt_order`, the one linker difference it accepts), or,
//! asked for, that it is a close rebuild whose types alone are taken
//! (`abi`), the names DLLs ask for (`queries`), and the runtime
//! invariants that guard every pack before a DLL reads through it
//! (`guard`). The pack format and its lookup live in
//! [`mqs_core::symbols::typepack`], below this module.

pub mod abi;
pub mod borrowed;
pub mod check;
pub mod extract;
#[cfg(test)]
mod fakes;
pub mod guard;
pub mod identity;
mod plt_order;
pub mod queries;

pub use mqs_core::symbols::typepack::{TypePack, TypePacks};
