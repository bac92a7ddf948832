//! Analyses over the dump model (never raw memory): the job seen whole
//! ([`Job`]: communicators matched across ranks, operations with global
//! peers), who waits for whom ([`Analysis`]), the ranks in collectives,
//! merged call trees ([`tree`]), and what two snapshots share
//! ([`confirm`]).

pub mod collectives;
pub mod confirm;
pub mod job;
pub mod ranks;
pub mod tree;
pub mod waitfor;

pub use job::Job;
pub use ranks::RankSet;
pub use waitfor::Analysis;

#[cfg(test)]
mod tests;
