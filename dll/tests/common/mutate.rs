//! Random corruption of recorded processes, for the strict host's fuzz:
//! the mutations, their strategies, and applying them to a process's memory
//! or its type table (or, for a host in another process, as patches).
//! Memory mutations are aimed where a clean session read ([`Aim`]): at the
//! bytes it fetched, the list links and the pointers in them, as
//! `fuzz.rs` aims its own.

use mqs_dll::access::ProcessAccess;
use mqs_dll::testing::FakeProcess;
use proptest::prelude::*;

use super::aim::Aim;
use super::snapshot::Snapshot;

/// One corruption, relative to the snapshot's recorded regions.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Flip one bit.
    Flip {
        region: usize,
        offset: usize,
        bit: u8,
    },
    /// Overwrite an aligned 8-byte word (a pointer, a count, a size).
    Word {
        region: usize,
        offset: usize,
        value: Value,
    },
    /// Overwrite an aligned 4-byte word (an int count, rank, tag).
    Int {
        region: usize,
        offset: usize,
        value: u32,
    },
    /// Unmap the page under a region's byte.
    Unmap { region: usize, offset: usize },
    /// A debugger reporting a wrong layout: one field offset (or, for
    /// `field == usize::MAX`, a type's size) replaced.
    Layout { ty: usize, field: usize, value: u64 },
    /// A list link the layout names, bent.
    Link { link: usize, kind: Link },
    /// A pointer moved `8 * delta` bytes into the object it points to.
    Pointer { pointer: usize, delta: u8 },
}

#[derive(Debug, Clone)]
pub enum Link {
    /// The item's next is itself.
    ToItself,
    /// The item's next is the item before it: a cycle of two.
    Back,
    /// The item's next points `8 * n` bytes into the next item.
    IntoMiddle(u8),
}

#[derive(Debug, Clone)]
pub enum Value {
    Zero,
    Raw(u64),
    /// Somewhere in a recorded region (possibly making a cycle).
    Into {
        region: usize,
        offset: usize,
    },
    /// A recorded region's address plus a small misalignment.
    Misaligned {
        region: usize,
        delta: u8,
    },
    Huge,
}

pub fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Zero),
        any::<u64>().prop_map(Value::Raw),
        (any::<usize>(), any::<usize>())
            .prop_map(|(region, offset)| Value::Into { region, offset }),
        (any::<usize>(), 1u8..8).prop_map(|(region, delta)| Value::Misaligned { region, delta }),
        Just(Value::Huge),
    ]
}

fn flip() -> impl Strategy<Value = Mutation> {
    (any::<usize>(), any::<usize>(), 0u8..8).prop_map(|(region, offset, bit)| Mutation::Flip {
        region,
        offset,
        bit,
    })
}

fn word() -> impl Strategy<Value = Mutation> {
    (any::<usize>(), any::<usize>(), value()).prop_map(|(region, offset, value)| Mutation::Word {
        region,
        offset,
        value,
    })
}

fn int() -> impl Strategy<Value = Mutation> {
    (
        any::<usize>(),
        any::<usize>(),
        prop_oneof![Just(u32::MAX), Just(0x7fff_ffff), Just(0), any::<u32>()],
    )
        .prop_map(|(region, offset, value)| Mutation::Int {
            region,
            offset,
            value,
        })
}

fn unmap() -> impl Strategy<Value = Mutation> {
    (any::<usize>(), any::<usize>()).prop_map(|(region, offset)| Mutation::Unmap { region, offset })
}

fn layout() -> impl Strategy<Value = Mutation> {
    (
        any::<usize>(),
        prop_oneof![Just(usize::MAX), any::<usize>()],
        prop_oneof![0u64..4096, Just(0x7fff_ffff), Just(0)],
    )
        .prop_map(|(ty, field, value)| Mutation::Layout { ty, field, value })
}

/// A mutation, weighted as `fuzz.rs` weighs its own: the aimed kinds
/// (links, pointers) 5 in 12.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => flip(),
        2 => word(),
        1 => int(),
        1 => unmap(),
        1 => layout(),
        3 => (
            any::<usize>(),
            prop_oneof![
                Just(Link::ToItself),
                Just(Link::Back),
                (1u8..8).prop_map(Link::IntoMiddle)
            ]
        )
            .prop_map(|(link, kind)| Mutation::Link { link, kind }),
        2 => (any::<usize>(), 1u8..8)
            .prop_map(|(pointer, delta)| Mutation::Pointer { pointer, delta }),
    ]
}

/// The strict fuzz's mutations before they were aimed, kept only to
/// measure the aimed ones against: no links or pointers, each other kind
/// equally likely (applied over whole recorded pages: [`Aim::pages`]).
pub fn unaimed_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![flip(), word(), int(), unmap(), layout()]
}

/// What applying a mutation to memory touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touched {
    Bytes(u64, usize),
    Unmapped(u64),
}

fn read_u64(p: &FakeProcess, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    p.fetch(addr, &mut b).then(|| u64::from_le_bytes(b))
}

/// Applies one memory mutation (layout ones do nothing here), in the
/// regions and at the links and pointers of `aim`.
pub fn apply(aim: &Aim, p: &mut FakeProcess, m: &Mutation) -> Option<Touched> {
    let regions = &aim.regions;
    if regions.is_empty() {
        return None;
    }
    let at = |region: usize, offset: usize, align: usize| {
        let (addr, len) = regions[region % regions.len()];
        let off = (offset % len) / align * align;
        addr + off as u64
    };
    match m {
        Mutation::Flip {
            region,
            offset,
            bit,
        } => {
            let a = at(*region, *offset, 1);
            let mut b = [0u8; 1];
            if !p.fetch(a, &mut b) {
                return None;
            }
            p.map(a, vec![b[0] ^ (1 << bit)]);
            Some(Touched::Bytes(a, 1))
        }
        Mutation::Word {
            region,
            offset,
            value,
        } => {
            let a = at(*region, *offset, 8);
            let v = match value {
                Value::Zero => 0,
                Value::Raw(v) => *v,
                Value::Into { region, offset } => at(*region, *offset, 8),
                Value::Misaligned { region, delta } => at(*region, 0, 1) + u64::from(*delta),
                Value::Huge => u64::MAX / 3,
            };
            p.write_u64(a, v);
            Some(Touched::Bytes(a, 8))
        }
        Mutation::Int {
            region,
            offset,
            value,
        } => {
            let a = at(*region, *offset, 4);
            p.write_u32(a, *value);
            Some(Touched::Bytes(a, 4))
        }
        Mutation::Unmap { region, offset } => {
            let a = at(*region, *offset, 1);
            p.unmap(a);
            Some(Touched::Unmapped(a))
        }
        Mutation::Link { link, kind } => {
            if aim.links.is_empty() {
                return None;
            }
            let (addr, item) = aim.links[link % aim.links.len()];
            let to = match kind {
                Link::ToItself => item,
                Link::Back => read_u64(p, item + aim.prev).unwrap_or(item),
                Link::IntoMiddle(n) => read_u64(p, addr).unwrap_or(0) + 8 * u64::from(*n),
            };
            p.write_u64(addr, to);
            Some(Touched::Bytes(addr, 8))
        }
        Mutation::Pointer { pointer, delta } => {
            if aim.pointers.is_empty() {
                return None;
            }
            let addr = aim.pointers[pointer % aim.pointers.len()];
            let to = read_u64(p, addr).unwrap_or(0) + 8 * u64::from(*delta);
            p.write_u64(addr, to);
            Some(Touched::Bytes(addr, 8))
        }
        Mutation::Layout { .. } => None,
    }
}

/// A change to a recorded process, for a host in another process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch {
    /// Bytes written (mapping zero-filled pages as needed).
    Write(u64, Vec<u8>),
    /// The 4 KiB page holding the address unmapped.
    Unmap(u64),
    /// A type's size changed.
    TypeSize(String, u64),
    /// (type, field, offset): a field's offset changed.
    Field(String, String, u64),
}

/// The layout change a mutation makes to a type table, if any.
fn layout_change(
    types: &std::collections::BTreeMap<String, super::snapshot::TypeInfo>,
    m: &Mutation,
) -> Option<Patch> {
    let Mutation::Layout { ty, field, value } = m else {
        return None;
    };
    let (name, t) = types.iter().nth(ty % types.len().max(1))?;
    if *field == usize::MAX || t.fields.is_empty() {
        return Some(Patch::TypeSize(name.clone(), *value));
    }
    let key = t.fields.keys().nth(field % t.fields.len())?;
    Some(Patch::Field(name.clone(), key.clone(), *value))
}

/// Applies the layout mutations to a copy of the snapshot's types.
pub fn mutate_layout(snap: &Snapshot, mutations: &[Mutation]) -> Snapshot {
    let mut s = snap.clone();
    for m in mutations {
        match layout_change(&s.types, m) {
            Some(Patch::TypeSize(name, size)) => {
                if let Some(t) = s.types.get_mut(&name) {
                    t.size = size;
                }
            }
            Some(Patch::Field(name, field, offset)) => {
                if let Some(slot) = s
                    .types
                    .get_mut(&name)
                    .and_then(|t| t.fields.get_mut(&field))
                {
                    *slot = offset;
                }
            }
            _ => {}
        }
    }
    s
}

/// The patches that make of `base` (the snapshot's memory) and the
/// snapshot's types what [`apply`] and [`mutate_layout`] make of them, in
/// order.
pub fn patches(
    snap: &Snapshot,
    aim: &Aim,
    base: &FakeProcess,
    mutations: &[Mutation],
) -> Vec<Patch> {
    let mut p = base.clone();
    let mut out = Vec::new();
    for m in mutations {
        match apply(aim, &mut p, m) {
            Some(Touched::Bytes(addr, len)) => {
                let mut bytes = vec![0u8; len];
                if p.fetch(addr, &mut bytes) {
                    out.push(Patch::Write(addr, bytes));
                }
            }
            Some(Touched::Unmapped(addr)) => out.push(Patch::Unmap(addr)),
            None => out.extend(layout_change(&snap.types, m)),
        }
    }
    out
}
