//! Peers relative to the rank. In a ring, a halo exchange or a stencil every
//! rank's peers differ, so no two ranks' operations read alike; read
//! relative to each rank's own rank in the communicator ("recv from rank
//! r-1 (mod 8)"), they are one line. A queue's ranks are grouped both ways,
//! and each rank goes to the larger of its two groups: a relative line
//! stands for at least [`MIN_RELATIVE`] ranks, and the ranks that do not
//! fit the pattern keep lines of their own. On a communicator that knows
//! its Cartesian grid, a peer is told by its offset on it instead
//! ("recv from (+1,0,0)"): across a periodic grid's wrap the distance in
//! ranks changes, the offset does not. A peer that many of the
//! queue's ranks name (a rank that all of a ring also send to) is a hub and
//! keeps its own number in the relative line: "recv from rank r-1 (mod 8)
//! tag 10; recv from rank 0 tag 5".

use std::hash::{Hash, Hasher};

use mqs_abi::{Cartesian, OpClass, OpStatus, MAX_CART_DIMS};
use rustc_hash::{FxHashMap, FxHashSet};
use twox_hash::XxHash3_128;

use crate::global::{JobComm, Op, Peer};
use crate::RankSet;

/// The fewest ranks a relative line stands for: two ranks that swap
/// messages read better as two lines.
const MIN_RELATIVE: usize = 3;

/// The texts of one queue of one communicator, rank by rank.
///
/// A rank's own text is kept only as a fingerprint: in a ring or a halo
/// exchange every rank's text differs, and 100,000 of them are tens of
/// megabytes; the lines that need one make it again ([`QueueTexts::groups`]).
/// Relative texts are few and kept once each. Neither is written to tell
/// ranks apart: each is told by what its words are made of ([`Said`]),
/// which is the same exactly when the words are, and written once a line
/// needs it.
pub(super) struct QueueTexts<'c> {
    comm: &'c JobComm,
    /// Each member's own rank in the communicator, by global rank; None
    /// where the two are the same.
    local_of: Option<FxHashMap<i64, i64>>,
    /// Each rank, its text's fingerprint, and its relative text's number.
    ranks: Vec<(i64, Fingerprint, Option<usize>)>,
    relative_texts: Vec<String>,
    relative_numbers: FxHashMap<Vec<(Distance, Said<'c>)>, usize>,
    /// The last rank's relative parts, and the bytes of its own
    /// fingerprint: their buffers kept for the next.
    scratch: Vec<(Distance, Said<'c>)>,
    own: Wide,
    /// The peers, by their rank in the communicator, that more than a
    /// quarter of the queue's ranks name (`mqs_core::model::is_hub`).
    hubs: FxHashSet<i64>,
}

/// A 128-bit hash of a text's parts (XXH3): equal parts have equal
/// fingerprints, and two of 100,000 different ones meet with a chance
/// near 1e-29.
type Fingerprint = u128;

/// Keeps what a `Hash` writes, to be hashed in one call (XXH3-128): the
/// std hasher took two passes for 128 bits, and XXH3 fed field by field
/// costs more than the copy (a tenth of a 100,000-rank view either way).
#[derive(Default)]
struct Wide(Vec<u8>);

impl Wide {
    fn fingerprint(&self) -> Fingerprint {
        XxHash3_128::oneshot(&self.0)
    }
}

impl Hasher for Wide {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        self.fingerprint() as u64
    }
}

/// What an operation's words say besides its peer ([`super::op_text_with_peer`]):
/// the same parts, the same words.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Said<'o> {
    class: OpClass,
    tag: Option<i64>,
    length: i64,
    /// Where it waits in transit, else its status.
    ending: Result<&'o str, OpStatus>,
}

impl<'o> Said<'o> {
    fn of(op: &Op<'o>) -> Self {
        Self {
            class: op.class,
            tag: op.tag,
            length: op.op.desired_length,
            ending: op.in_transit().ok_or(op.status()),
        }
    }
}

/// An operation's peer as its own words name it ([`super::op_text`]): the
/// rank in the communicator only where the words give it.
#[derive(PartialEq, Eq, Hash)]
enum Named {
    Any,
    Rank(i64, Option<i64>),
    Local(i64),
}

/// A peer relative to the rank: its distance in the communicator, its
/// offset on the communicator's grid, or a hub by its own rank there.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Distance {
    Any,
    By(i64),
    On(Offset),
    Hub(i64),
}

/// An offset on a Cartesian grid, one step count per dimension (the
/// grid's dimensions used, the rest 0).
type Offset = [i32; MAX_CART_DIMS];

/// Where an operation's peer is in the communicator.
enum Place {
    Any,
    At(i64),
    /// A rank whose place in the communicator is not known.
    Unknown,
}

impl<'c> QueueTexts<'c> {
    /// The queue's texts on `comm`, whose operations (in rank order) are
    /// `ops`: they tell which peers are hubs.
    pub(super) fn new<'o>(comm: &'c JobComm, ops: impl Iterator<Item = &'o Op<'o>>) -> Self
    where
        'c: 'o,
    {
        let local_of = (!comm.is_identity()).then(|| {
            comm.group
                .iter()
                .enumerate()
                .filter_map(|(local, global)| Some(((*global)?, local as i64)))
                .collect()
        });
        let mut texts = Self {
            comm,
            local_of,
            ranks: Vec::new(),
            relative_texts: Vec::new(),
            relative_numbers: FxHashMap::default(),
            scratch: Vec::new(),
            own: Wide::default(),
            hubs: Default::default(),
        };
        texts.hubs = texts.hubs_of(ops);
        texts
    }

    /// The peers named by more than a quarter of the ranks that list
    /// operations (each rank counted once per peer).
    fn hubs_of<'o>(&self, ops: impl Iterator<Item = &'o Op<'o>>) -> FxHashSet<i64> {
        // Each place's count and the last rank counted for it (a
        // communicator of more than 2^22 ranks has no hubs).
        let size = usize::try_from(self.comm.size)
            .ok()
            .filter(|&size| size <= 1 << 22)
            .unwrap_or(0);
        let mut named = vec![(0usize, i64::MIN); size];
        let (mut ranks, mut last_rank) = (0usize, None);
        for op in ops {
            if last_rank != Some(op.rank) {
                ranks += 1;
                last_rank = Some(op.rank);
            }
            let Place::At(peer) = self.place_of(op) else {
                continue;
            };
            if let Some((count, by)) = usize::try_from(peer).ok().and_then(|p| named.get_mut(p)) {
                if *by != op.rank {
                    *count += 1;
                    *by = op.rank;
                }
            }
        }
        (0i64..)
            .zip(named)
            .filter(|(_, (count, _))| mqs_core::model::is_hub(*count, ranks))
            .map(|(peer, _)| peer)
            .collect()
    }

    /// Where `op`'s peer is in the communicator.
    fn place_of(&self, op: &Op<'_>) -> Place {
        match op.peer {
            Peer::Any => Place::Any,
            Peer::Rank(global) => match op.local_peer.or(self.local_of.is_none().then_some(global))
            {
                Some(local) => Place::At(local),
                None => Place::Unknown,
            },
            Peer::Local(local) => Place::At(local),
        }
    }

    /// Rank `rank`, with its operations on this queue.
    pub(super) fn add(&mut self, rank: i64, ops: &[&Op<'c>]) {
        let identity = self.comm.is_identity();
        // As the list of (peer named, the rest) would hash, without the
        // list.
        let mut own = std::mem::take(&mut self.own);
        own.0.clear();
        ops.len().hash(&mut own);
        for op in ops {
            let named = match op.peer {
                Peer::Any => Named::Any,
                Peer::Rank(g) => Named::Rank(g, op.local_peer.filter(|&l| l != g || !identity)),
                Peer::Local(l) => Named::Local(l),
            };
            (named, Said::of(op)).hash(&mut own);
        }
        let fingerprint = own.fingerprint();
        self.own = own;
        let relative = self.relative(rank, ops).then(|| {
            let next = self.relative_texts.len();
            match self.relative_numbers.get(self.scratch.as_slice()) {
                Some(&number) => number,
                None => {
                    let text = self.relative_text(&self.scratch, ops);
                    self.relative_texts.push(text);
                    self.relative_numbers.insert(self.scratch.clone(), next);
                    next
                }
            }
        });
        self.ranks.push((rank, fingerprint, relative));
    }

    /// The operations with each peer relative to `rank`, in `scratch`;
    /// false where none is a rank, or one's rank in the communicator is
    /// not known.
    fn relative(&mut self, rank: i64, ops: &[&Op<'c>]) -> bool {
        let size = self.comm.size;
        let me = match &self.local_of {
            None => rank,
            Some(map) => match map.get(&rank) {
                Some(&me) => me,
                None => return false,
            },
        };
        if size < 2 || ops.iter().all(|op| op.peer == Peer::Any) {
            return false;
        }
        let grid = self.comm.grid();
        let mut parts = std::mem::take(&mut self.scratch);
        parts.clear();
        let mut known = true;
        for op in ops {
            let distance = match self.place_of(op) {
                Place::Any => Distance::Any,
                Place::Unknown => {
                    known = false;
                    break;
                }
                Place::At(peer) if self.hubs.contains(&peer) => Distance::Hub(peer),
                Place::At(peer) if grid.is_some() => match grid.and_then(|g| offset(g, me, peer)) {
                    Some(offset) => Distance::On(offset),
                    None => {
                        known = false;
                        break;
                    }
                },
                Place::At(peer) => {
                    let d = (peer - me).rem_euclid(size);
                    Distance::By(if d > size / 2 { d - size } else { d })
                }
            };
            parts.push((distance, Said::of(op)));
        }
        self.scratch = parts;
        known
    }

    /// The words of relative parts (`ops`, whose they are, give the rest).
    fn relative_text(&self, parts: &[(Distance, Said<'_>)], ops: &[&Op<'_>]) -> String {
        let texts: Vec<String> = parts
            .iter()
            .zip(ops)
            .map(|((distance, _), op)| {
                let peer = match distance {
                    Distance::Any => "ANY_SOURCE".to_owned(),
                    Distance::By(d) => self.relative_peer(*d),
                    Distance::On(offset) => {
                        let n = self.comm.grid().map_or(0, |g| g.dims.len());
                        let steps: Vec<i64> = offset[..n].iter().map(|&d| i64::from(d)).collect();
                        mqs_abi::offset_words(&steps)
                    }
                    Distance::Hub(_) => super::peer_words(self.comm, op),
                };
                super::op_text_with_peer(op, &peer)
            })
            .collect();
        texts.join("; ")
    }

    /// `rank r+1 (mod 8)`, or in a communicator whose ranks are not the
    /// job's, `"ring" rank r-1 (mod 8, r = its "ring" rank)`.
    fn relative_peer(&self, d: i64) -> String {
        let size = self.comm.size;
        let r = match d {
            0 => "r".to_owned(),
            d if d > 0 => format!("r+{d}"),
            d => format!("r{d}"),
        };
        if self.local_of.is_none() {
            format!("rank {r} (mod {size})")
        } else {
            let label = self.comm.label();
            format!("{label} rank {r} (mod {size}, r = its {label} rank)")
        }
    }

    /// The lines: each text with its ranks, in order of first appearance;
    /// `text_of` makes a rank's own text again where its line needs it.
    pub(super) fn groups(self, text_of: impl Fn(i64) -> String) -> Vec<(String, RankSet)> {
        let mut absolute: FxHashMap<Fingerprint, usize> = FxHashMap::default();
        let mut relative = vec![0usize; self.relative_texts.len()];
        for (_, text, rel) in &self.ranks {
            *absolute.entry(*text).or_default() += 1;
            if let Some(rel) = rel {
                relative[*rel] += 1;
            }
        }
        #[derive(PartialEq, Eq, Hash)]
        enum Line {
            Own(Fingerprint),
            Relative(usize),
        }
        let mut groups: Vec<(String, RankSet)> = Vec::new();
        let mut group_of: FxHashMap<Line, usize> = FxHashMap::default();
        for (rank, text, rel) in &self.ranks {
            let line = match rel {
                Some(rel) if relative[*rel] >= MIN_RELATIVE.max(absolute[text] + 1) => {
                    Line::Relative(*rel)
                }
                _ => Line::Own(*text),
            };
            match group_of.get(&line) {
                Some(&g) => {
                    groups[g].1.insert(*rank);
                }
                None => {
                    let words = match line {
                        Line::Relative(rel) => self.relative_texts[rel].clone(),
                        Line::Own(_) => text_of(*rank),
                    };
                    group_of.insert(line, groups.len());
                    groups.push((words, std::iter::once(*rank).collect()));
                }
            }
        }
        groups
    }
}

/// The offset on `grid` from rank `me` to rank `peer` (ranks in its
/// communicator), None if either is off it.
fn offset(grid: &Cartesian, me: i64, peer: i64) -> Option<Offset> {
    let mut steps = [0i64; MAX_CART_DIMS];
    if !grid.offset(me, peer, &mut steps) {
        return None;
    }
    let mut out = [0i32; MAX_CART_DIMS];
    for (slot, step) in out.iter_mut().zip(steps) {
        *slot = i32::try_from(step).ok()?;
    }
    Some(out)
}
