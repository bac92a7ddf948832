//! Synthetic jobs shaped as real applications are: a ring, a 3-D halo
//! exchange, a ring with a few outliers, a ring whose ranks all also wait
//! on rank 0. Every rank's dump carries what a
//! real rank's does and no other rank shares: its own buffer and request
//! addresses, counters, frame addresses (ASLR) and thread ids; and in any
//! neighbour pattern its peers are its own. Only what the job view and
//! the analysis read is alike between ranks.

use serde::{Deserialize, Serialize};

use mqs_abi::PendingOperation;
use mqs_core::model::{CommunicatorDump, ProcessDump, Queue, Section};

/// The shape of a synthetic job's queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// `states` states made from the templates, peers as recorded.
    #[default]
    States,
    /// Each rank waits for a message from the rank before it, and has one
    /// pending to the rank after it.
    Ring,
    /// A periodic 3-D grid (as near a cube as the size allows): each rank
    /// waits for a message from each of its 6 neighbours.
    Halo,
    /// The halo on a communicator that knows its grid (as
    /// `MPI_Cart_create` makes, read by the DLL: `cartesian`).
    Grid,
    /// The ring, with [`OUTLIERS`] ranks spread over the job that have
    /// nothing pending.
    Outliers,
    /// The ring, every rank but rank 0 also waiting for a message from
    /// rank 0 (a hub: its peer is the same rank for all).
    Hub,
}

/// How many ranks of an [`Pattern::Outliers`] job break the ring.
pub const OUTLIERS: usize = 5;

impl Pattern {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "states" => Some(Self::States),
            "ring" => Some(Self::Ring),
            "halo" => Some(Self::Halo),
            "grid" => Some(Self::Grid),
            "outliers" => Some(Self::Outliers),
            "hub" => Some(Self::Hub),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::States => "states",
            Self::Ring => "ring",
            Self::Halo => "halo",
            Self::Grid => "grid",
            Self::Outliers => "outliers",
            Self::Hub => "hub",
        }
    }

    /// The outlier ranks of a job of `ranks`.
    pub fn outliers(self, ranks: usize) -> Vec<usize> {
        if self != Self::Outliers || ranks < OUTLIERS * 2 {
            return Vec::new();
        }
        (0..OUTLIERS)
            .map(|k| k * ranks / OUTLIERS + ranks / (2 * OUTLIERS))
            .collect()
    }

    /// Gives `p`, rank `rank` of `ranks` made from a template, this
    /// pattern's queues on its MPI_COMM_WORLD (the communicator `world`
    /// of its list) and a real rank's own addresses, counters and ids.
    pub(super) fn apply(self, p: &mut ProcessDump, world: usize, rank: usize, ranks: usize) {
        if self == Self::States {
            return;
        }
        let (r, n) = (rank as i64, ranks as i64);
        if let Section::Ok { value } = &mut p.communicators {
            // The pattern is the job's traffic: the other communicators'
            // recorded operations (whose peers are the template's) go.
            for (i, comm) in value.list.iter_mut().enumerate() {
                if i != world {
                    for q in [&mut comm.sends, &mut comm.receives, &mut comm.unexpected] {
                        if let Section::Ok { value } = q {
                            value.operations.clear();
                        }
                    }
                }
            }
            if let Some(comm) = value.list.get_mut(world) {
                let model = model_op(comm);
                let peers: Vec<i64> = match self {
                    Self::Halo | Self::Grid => halo_neighbours(r, n).to_vec(),
                    Self::Hub if r > 0 => vec![(r + n - 1) % n, 0],
                    _ if self.outliers(ranks).contains(&rank) => Vec::new(),
                    _ => vec![(r + n - 1) % n],
                };
                let receives = peers
                    .iter()
                    .enumerate()
                    .map(|(i, &peer)| op_from(&model, peer, 10 + i as i64))
                    .collect();
                let sends = match self {
                    Self::Halo | Self::Grid => Vec::new(),
                    _ if peers.is_empty() => Vec::new(),
                    _ => vec![op_from(&model, (r + 1) % n, 20)],
                };
                comm.receives = queue(receives);
                comm.sends = queue(sends);
                if self == Self::Grid {
                    // Rank x + nx*(y + ny*z): z varies slowest, so the
                    // grid's dimensions, row-major, are (nz, ny, nx).
                    let [nx, ny, nz] = halo_grid(n);
                    comm.cartesian =
                        mqs_abi::Cartesian::checked(vec![nz, ny, nx], vec![true; 3], n);
                }
                comm.unexpected = queue(Vec::new());
            }
        }
        own_detail(p, rank);
    }
}

/// The first operation of `comm`'s queues, else a plain receive: what the
/// pattern's operations are made like.
fn model_op(comm: &CommunicatorDump) -> PendingOperation {
    [&comm.receives, &comm.sends, &comm.unexpected]
        .into_iter()
        .find_map(|q| match q {
            Section::Ok { value } => value.operations.first().cloned(),
            _ => None,
        })
        .unwrap_or_else(|| {
            serde_json::from_value(serde_json::json!({
                "status": "pending", "desired_local_rank": 0, "desired_global_rank": 0,
                "desired_tag": 0, "desired_length": 8, "system_buffer": false, "buffer": 0,
                "actual_local_rank": -1, "actual_global_rank": -1, "actual_tag": -1,
                "actual_length": -1, "extra_text": []
            }))
            .expect("a plain receive")
        })
}

fn op_from(model: &PendingOperation, peer: i64, tag: i64) -> PendingOperation {
    let mut op = model.clone();
    op.desired_local_rank = peer;
    op.desired_global_rank = peer;
    op.desired_tag = Some(tag);
    op.extra_text = Default::default();
    op
}

fn queue(operations: Vec<PendingOperation>) -> Section<Queue> {
    Section::Ok {
        value: Queue {
            operations,
            truncated: None,
            fixed_in_run: Vec::new(),
        },
    }
}

/// The grid of a 3-D halo exchange of `n` ranks: three factors of `n`,
/// as near each other as they go.
pub fn halo_grid(n: i64) -> [i64; 3] {
    // Asked once per rank: the last answer is kept (a search of the
    // factors per rank was a tenth of a 100,000-rank run's CPU time).
    thread_local! {
        static LAST: std::cell::Cell<Option<(i64, [i64; 3])>> = const { std::cell::Cell::new(None) };
    }
    if let Some((m, grid)) = LAST.get() {
        if m == n {
            return grid;
        }
    }
    let grid = search_grid(n);
    LAST.set(Some((n, grid)));
    grid
}

fn search_grid(n: i64) -> [i64; 3] {
    let mut best = [1, 1, n.max(1)];
    let spread = |g: &[i64; 3]| g[2] - g[0];
    for x in 1..=n {
        if x * x * x > n {
            break;
        }
        if n % x != 0 {
            continue;
        }
        let rest = n / x;
        for y in x..=rest {
            if y * y > rest {
                break;
            }
            if rest % y == 0 {
                let grid = [x, y, rest / y];
                if spread(&grid) < spread(&best) {
                    best = grid;
                }
            }
        }
    }
    best
}

/// Rank `r`'s 6 neighbours in the periodic grid of `n` ranks: -x, +x, -y,
/// +y, -z, +z.
pub fn halo_neighbours(r: i64, n: i64) -> [i64; 6] {
    let [nx, ny, nz] = halo_grid(n);
    let (x, y, z) = (r % nx, (r / nx) % ny, r / (nx * ny));
    let at =
        |x: i64, y: i64, z: i64| x.rem_euclid(nx) + nx * (y.rem_euclid(ny) + ny * z.rem_euclid(nz));
    [
        at(x - 1, y, z),
        at(x + 1, y, z),
        at(x, y - 1, z),
        at(x, y + 1, z),
        at(x, y, z - 1),
        at(x, y, z + 1),
    ]
}

/// What a real rank has of its own: buffer and request addresses (its own
/// heap), counters, frame addresses (its own load addresses) and thread
/// ids.
fn own_detail(p: &mut ProcessDump, rank: usize) {
    let heap = 0x5500_0000_0000u64 + (rank as u64) * 0x10_0000;
    if let Section::Ok { value } = &mut p.communicators {
        let mut at = heap;
        for comm in &mut value.list {
            for q in [&mut comm.sends, &mut comm.receives, &mut comm.unexpected] {
                if let Section::Ok { value } = q {
                    for op in &mut value.operations {
                        at += 0x100;
                        op.buffer = at;
                        op.extra_text
                            .push(&mqs_abi::request_line("receive", at + 0x40));
                    }
                }
            }
        }
    }
    p.stats.fetches = 40 + (rank % 7) as u64;
    p.stats.fetched_bytes = 4096 * p.stats.fetches;
    p.stats.elapsed_ms = 0.25 + (rank % 11) as f64 / 8.0;
    let pid = p.pid;
    if let Some(Section::Ok { value }) = &mut p.stacks {
        let slide = (rank as u64 % 251) * 0x1000_0000;
        for (i, thread) in value.list.iter_mut().enumerate() {
            thread.tid = if i == 0 { pid } else { pid + 2000 + i as i32 };
            for frame in &mut thread.frames {
                frame.address = frame.address.wrapping_add(slide);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_near_cubes_and_neighbours_are_each_others() {
        assert_eq!(halo_grid(100_000), [40, 50, 50]);
        assert_eq!(halo_grid(2000), [10, 10, 20]);
        assert_eq!(halo_grid(64), [4, 4, 4]);
        assert_eq!(halo_grid(7), [1, 1, 7]);
        let n = 2000;
        for r in 0..n {
            let mine = halo_neighbours(r, n);
            for (i, &peer) in mine.iter().enumerate() {
                // -x of mine has me as its +x, and so on.
                assert_eq!(
                    halo_neighbours(peer, n)[i ^ 1],
                    r,
                    "rank {r}, neighbour {i}"
                );
            }
        }
    }

    #[test]
    fn outliers_are_spread_and_distinct() {
        let o = Pattern::Outliers.outliers(100_000);
        assert_eq!(o, [10_000, 30_000, 50_000, 70_000, 90_000]);
        assert!(Pattern::Ring.outliers(100).is_empty());
    }
}
