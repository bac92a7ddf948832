//! Analyses over the dump model (never raw memory) and their rendering: the
//! job seen whole ([`global`]: ranks by global rank, communicators matched
//! across ranks, operations with global peers), who waits for whom
//! ([`Analysis`]), the ranks in collectives, merged call trees ([`tree`]),
//! what two snapshots share ([`confirm`]); the merged job view and the
//! wait-for graph as DOT ([`view`]), and one process's listing as text or
//! JSON ([`render`]).

pub mod calls;
pub mod collectives;
pub mod confirm;
pub mod global;
pub mod ranks;
pub mod render;
pub mod tree;
pub mod view;
pub mod waitfor;

pub use global::Job;
pub use ranks::RankSet;
pub use waitfor::Analysis;

#[cfg(test)]
mod tests;
