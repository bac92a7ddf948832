//! Runs of ranks: how the ranks of a state (and a sender's roll call)
//! travel, consecutive ranks as one run and runs of equal length at equal
//! distances as one run of blocks.

use serde::{Deserialize, Serialize};

use mqs_core::model::DumpStats;

/// Ranks `rank..rank + count` with pids `pid..pid + count` on one host,
/// repeated `blocks` times, each block `every` ranks and pids after the one
/// before: a halo exchange's ranks inside a row, row after row, whose
/// edges are states of their own.
///
/// A run `by_number` names its ranks alone: their hosts and pids are in
/// the sender's roll call ([`super::States::roll`]), so it goes on across
/// hosts (a row that two hosts share, the rows of a plane that hosts
/// share), which a run with pids cannot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The front end's key of the host; none by number, or the sender's
    /// own ([`super::OWN_HOST`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    pub rank: i32,
    #[serde(default, skip_serializing_if = "is_zero_pid")]
    pub pid: i32,
    pub count: u32,
    #[serde(default = "one_block", skip_serializing_if = "is_one_block")]
    pub blocks: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub every: u32,
    /// Counters left at home ([`super::States::with_detail`]) are not sent.
    #[serde(default, skip_serializing_if = "is_unset")]
    pub stats: DumpStats,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_number: bool,
}

fn one_block() -> u32 {
    1
}

fn is_one_block(blocks: &u32) -> bool {
    *blocks == 1
}

fn is_zero(every: &u32) -> bool {
    *every == 0
}

fn is_zero_pid(pid: &i32) -> bool {
    *pid == 0
}

fn is_unset(stats: &DumpStats) -> bool {
    *stats == DumpStats::default()
}

impl Run {
    /// One rank on `host`.
    pub fn one(host: &str, rank: i32, pid: i32, stats: DumpStats) -> Run {
        Run {
            host: host.to_string(),
            rank,
            pid,
            count: 1,
            blocks: 1,
            every: 0,
            stats,
            by_number: false,
        }
    }

    /// The same ranks by number alone.
    pub fn numbered(self) -> Run {
        Run {
            host: String::new(),
            pid: 0,
            by_number: true,
            ..self
        }
    }

    /// How many ranks it stands for.
    pub fn ranks(&self) -> usize {
        self.count as usize * self.blocks.max(1) as usize
    }

    /// Whether it is one rank alone.
    pub fn is_single(&self) -> bool {
        self.count == 1 && self.blocks <= 1
    }

    /// Its blocks, each a run of consecutive ranks.
    pub fn each_block(&self) -> impl Iterator<Item = Run> + '_ {
        (0..self.blocks.max(1)).map(move |b| self.block(b))
    }

    /// The (pid, rank) of each rank in it (pid 0 by number).
    pub fn members(&self) -> impl Iterator<Item = (i32, i32)> + '_ {
        self.each_block().flat_map(|b| {
            (0..b.count).map(move |i| {
                let i = i32::try_from(i).unwrap_or(i32::MAX);
                let pid = if b.by_number {
                    0
                } else {
                    b.pid.saturating_add(i)
                };
                (pid, b.rank.saturating_add(i))
            })
        })
    }

    /// Its block `b` (from 0).
    fn block(&self, b: u32) -> Run {
        let shift = i32::try_from(u64::from(b) * u64::from(self.every)).unwrap_or(i32::MAX);
        Run {
            rank: self.rank.saturating_add(shift),
            pid: if self.by_number {
                0
            } else {
                self.pid.saturating_add(shift)
            },
            blocks: 1,
            every: 0,
            ..self.clone()
        }
    }

    /// Its last block.
    fn last_block(&self) -> Run {
        self.block(self.blocks.max(1) - 1)
    }

    /// Whether `other` may go in one run with it: the same host, counters
    /// and form.
    fn alike(&self, other: &Run) -> bool {
        self.host == other.host && self.stats == other.stats && self.by_number == other.by_number
    }

    /// How far `other` starts after `self` does, in ranks; None if its
    /// pids are not as far on (runs with pids).
    fn distance(&self, other: &Run) -> Option<i64> {
        let apart = i64::from(other.rank) - i64::from(self.rank);
        (self.by_number || apart == i64::from(other.pid) - i64::from(self.pid)).then_some(apart)
    }
}

/// Adds `run` at the end of `list`: extending its last run where it goes
/// on, and making runs of equal length at equal distances one run of
/// blocks.
pub fn push_run(list: &mut Vec<Run>, run: Run) {
    let Some(last) = list.last_mut() else {
        list.push(run);
        return;
    };
    if run.blocks <= 1 && last.blocks <= 1 && continues(last, &run) {
        last.count += run.count;
    } else if run.blocks <= 1 && last.blocks > 1 && continues(&last.last_block(), &run) {
        // Its last block goes on past the others' length: a run of its own
        // again.
        let mut block = last.last_block();
        last.blocks -= 1;
        if last.blocks == 1 {
            last.every = 0;
        }
        block.count += run.count;
        list.push(block);
    } else if !more_blocks(last, &run) {
        list.push(run);
    }
    fold_last(list);
}

/// Makes the last run of `list` further blocks of the one before it, if it
/// may be ([`more_blocks`]).
fn fold_last(list: &mut Vec<Run>) {
    let [.., before, last] = list.as_mut_slice() else {
        return;
    };
    if more_blocks(before, last) {
        list.pop();
    }
}

/// Makes `run` further blocks of `last`, if its blocks are as long as
/// `last`'s, alike, and as far apart as `last`'s and from `last`'s last
/// block (any distance past its end, if both have one block).
fn more_blocks(last: &mut Run, run: &Run) -> bool {
    if !last.alike(run) || run.count != last.count || last.rank < 0 {
        return false;
    }
    let Some(apart) = last.last_block().distance(run) else {
        return false;
    };
    if apart <= i64::from(last.count) {
        return false;
    }
    let Ok(apart) = u32::try_from(apart) else {
        return false;
    };
    if (last.blocks > 1 && apart != last.every) || (run.blocks > 1 && apart != run.every) {
        return false;
    }
    let Some(blocks) = last.blocks.max(1).checked_add(run.blocks.max(1)) else {
        return false;
    };
    last.every = apart;
    last.blocks = blocks;
    true
}

/// Whether `next` extends `run`: the next rank (and pid) on the same host,
/// with equal counters.
fn continues(run: &Run, next: &Run) -> bool {
    let count = i32::try_from(run.count).unwrap_or(i32::MAX);
    run.alike(next)
        && run.rank >= 0
        && next.rank == run.rank.saturating_add(count)
        && run.distance(next) == Some(i64::from(count))
}

/// `list` in rank order, its runs joined again where that makes fewer
/// (runs gathered from children in the order they answered).
pub fn in_rank_order(list: &mut Vec<Run>) {
    if list.windows(2).all(|w| w[0].rank <= w[1].rank) {
        return;
    }
    // Blocks folded out of order may belong elsewhere: each on its own.
    let mut blocks: Vec<Run> = list.iter().flat_map(Run::each_block).collect();
    blocks.sort_by_key(|r| r.rank);
    list.clear();
    for block in blocks {
        push_run(list, block);
    }
}
