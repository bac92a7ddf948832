//! Open MPI's lists, walked bounded as every walk is ([`crate::walk`]):
//! `opal_list_t` (items linked through `opal_list_next` around a sentinel)
//! and `opal_free_list_t` (every element of every slab, free or in use).

use crate::access::ProcessAccess;
use crate::openmpi::layout::{FreeListLayout, ListLayout};
use crate::target::{ReadError, Spans, Target, View};
use crate::walk::{AddrSet, Stop, Walk, MAX_LIST_ITEMS};

/// Most slabs a free list may have.
pub const MAX_SLABS: usize = 1 << 16;
/// Largest free-list element we accept.
pub const MAX_ELEMENT_SIZE: u64 = 1 << 20;

/// Walks an `opal_list_t` at `list_addr`: the items between the sentinel's
/// `next` and the sentinel itself, at most `cap` of them. Reads only the
/// links: [`opal_list_read`] with nothing else to read.
pub fn opal_list<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    list: &ListLayout,
    list_addr: u64,
    cap: usize,
) -> Walk {
    opal_list_read(t, list, list_addr, cap, &Spans::whole(0), |_, _| {})
}

/// Walks an `opal_list_t` as [`opal_list`] does, reading the parts `spans`
/// of each item on the way: one fetch per item and span instead of one for
/// the link and one for the item. When `spans` hold the item's `next`
/// pointer the walk follows it from the bytes read; when the item cannot be
/// read, its `next` is read alone, so the walk goes on as [`opal_list`]
/// would. `visit` gets every item in order, with its bytes or the error.
pub fn opal_list_read<'t, 'a, P: ProcessAccess + ?Sized>(
    t: &'t Target<'a, P>,
    list: &ListLayout,
    list_addr: u64,
    cap: usize,
    spans: &Spans,
    mut visit: impl FnMut(u64, Result<View<'t, 'a, P>, ReadError>),
) -> Walk {
    let nothing_known = |_| None::<(u64, std::convert::Infallible)>;
    opal_list_read_known(
        t,
        list,
        list_addr,
        cap,
        spans,
        nothing_known,
        |item, read| {
            visit(
                item,
                read.map(|item| match item {
                    Item::Read(view) => view,
                    Item::Known(never) => match never {},
                }),
            )
        },
    )
}

/// An item of a list walk: read now, or known from bytes read before.
pub enum Item<'t, 'a, P: ProcessAccess + ?Sized, K> {
    Read(View<'t, 'a, P>),
    Known(K),
}

impl<P: ProcessAccess + ?Sized, K> std::fmt::Debug for Item<'_, '_, P, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Read(view) => write!(f, "Read({:#x})", view.addr),
            Item::Known(_) => f.write_str("Known"),
        }
    }
}

/// [`opal_list_read`], taking the items `known` has (what was decoded of
/// them from bytes read before in the same stop, and their `next`
/// pointer) without reading them again; the walk (its order, checks and
/// stops) is the same.
pub fn opal_list_read_known<'t, 'a, P: ProcessAccess + ?Sized, K>(
    t: &'t Target<'a, P>,
    list: &ListLayout,
    list_addr: u64,
    cap: usize,
    spans: &Spans,
    mut known: impl FnMut(u64) -> Option<(u64, K)>,
    mut visit: impl FnMut(u64, Result<Item<'t, 'a, P, K>, ReadError>),
) -> Walk {
    let mut walk = Walk::default();
    let Some(sentinel) = list_addr.checked_add(list.sentinel) else {
        walk.stop = Some(Stop::BadPointer(list_addr));
        return walk;
    };
    let first = t
        .check_ptr(sentinel, t.ptr_align(), list.item_size)
        .and_then(|s| t.read_ptr(s + list.item_next));
    let mut cur = match first {
        Ok(p) => p,
        Err(e) => {
            walk.stop = Some(Stop::from_read(e, sentinel));
            return walk;
        }
    };
    let next_in_spans = spans.contains(list.item_next, u64::from(t.sizes.pointer));
    let mut seen = AddrSet::default();
    seen.insert(sentinel);
    let cap = cap.min(MAX_LIST_ITEMS);
    while cur != sentinel {
        if !walk.admit(t, cur, list.item_size, &mut seen, cap) {
            break;
        }
        if let Some((next, item)) = known(cur) {
            visit(cur, Ok(Item::Known(item)));
            cur = next;
            continue;
        }
        let next = match t.view_spans(cur, spans) {
            Ok(view) => {
                let next = if next_in_spans {
                    view.ptr(list.item_next)
                } else {
                    cur.checked_add(list.item_next)
                        .ok_or(ReadError::OutOfRange)
                        .and_then(|a| t.read_ptr(a))
                };
                visit(cur, Ok(Item::Read(view)));
                next
            }
            Err(e) => {
                visit(cur, Err(e));
                cur.checked_add(list.item_next)
                    .ok_or(ReadError::OutOfRange)
                    .and_then(|a| t.read_ptr(a))
            }
        };
        match next {
            Ok(next) => cur = next,
            Err(e) => {
                walk.stop = Some(Stop::from_read(e, cur));
                break;
            }
        }
    }
    walk
}

/// The layouts a free-list walk needs.
#[derive(Debug, Clone, Copy)]
pub struct FreeListSpec<'l> {
    pub list: &'l ListLayout,
    pub free_list: &'l FreeListLayout,
    /// `opal_object_t.obj_class`, to check each element's class.
    pub obj_class: Option<u64>,
}

fn align_up(v: u64, a: u64) -> Option<u64> {
    let a = a.max(1);
    v.checked_add(a - 1).map(|x| x / a * a)
}

/// Visits every element of an `opal_free_list_t` (every request ever
/// allocated, free or in use), reading each slab in one fetch.
///
/// Slabs hang off `fl_allocations`, each an `opal_free_list_item_t` header
/// followed by elements at `fl_frag_alignment`, `fl_frag_size` apart. The
/// first slab is the initial allocation (its count is what the others do not
/// account for); elements whose object class is not `fl_frag_class` are
/// skipped, so a wrong count cannot produce garbage. `visit` gets each
/// element's address and the parts `spans` of it (cut at the element's
/// size); the object class must be among them for the class check.
pub fn free_list<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    spec: FreeListSpec<'_>,
    fl_addr: u64,
    spans: &Spans,
    cap: usize,
    mut visit: impl FnMut(u64, &View<'_, '_, P>),
) -> Option<Stop> {
    let FreeListSpec {
        list,
        free_list: fl,
        obj_class,
    } = spec;
    let header_len = [
        fl.num_allocated,
        fl.num_per_alloc,
        fl.frag_size,
        fl.frag_alignment,
        fl.frag_class,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
        + 8;
    let header = match t
        .check_ptr(fl_addr, t.ptr_align(), header_len)
        .and_then(|a| t.view(a, header_len))
    {
        Ok(v) => v,
        Err(e) => return Some(Stop::from_read(e, fl_addr)),
    };
    let fields = (|| {
        Ok::<_, ReadError>((
            header.size_t(fl.num_allocated)?,
            header.size_t(fl.num_per_alloc)?,
            header.size_t(fl.frag_size)?,
            header.size_t(fl.frag_alignment)?,
            header.ptr(fl.frag_class)?,
        ))
    })();
    let (allocated, per_alloc, frag_size, alignment, class) = match fields {
        Ok(f) => f,
        Err(e) => return Some(Stop::from_read(e, fl_addr)),
    };
    if alignment > 4096 || (alignment != 0 && !alignment.is_power_of_two()) {
        return Some(Stop::Corrupt);
    }
    let Some(stride) = align_up(frag_size, alignment) else {
        return Some(Stop::Corrupt);
    };
    if stride == 0 || stride > MAX_ELEMENT_SIZE {
        return Some(Stop::Corrupt);
    }
    let slabs = opal_list(t, list, fl_addr + fl.allocations, MAX_SLABS);
    let mut stop = slabs.stop;
    let cap = cap.min(MAX_LIST_ITEMS);
    let total = usize::try_from(allocated).unwrap_or(usize::MAX);
    let per_alloc = usize::try_from(per_alloc).unwrap_or(usize::MAX).max(1);
    let nslabs = slabs.items.len();
    if nslabs == 0 {
        return stop;
    }
    // No slab can hold more than one read's worth of elements: larger
    // counts are corrupt, and are cut to what could be real.
    let max_per_slab = usize::try_from(crate::target::MAX_READ as u64 / stride)
        .unwrap_or(1)
        .max(1);
    if per_alloc > max_per_slab {
        stop = stop.or(Some(Stop::Corrupt));
    }
    let per_alloc = per_alloc.min(max_per_slab);
    // The later slabs hold fl_num_per_alloc each; the first what is left.
    let later = per_alloc.saturating_mul(nslabs - 1);
    let mut first = match total.checked_sub(later) {
        Some(n) if n > 0 => n,
        _ => per_alloc.min(total.max(1)),
    };
    if first > max_per_slab {
        stop = stop.or(Some(Stop::Corrupt));
        first = per_alloc;
    }
    let mut visited = 0usize;
    for (i, &slab) in slabs.items.iter().enumerate() {
        let want = if i == 0 { first } else { per_alloc };
        let count = want.min(total.saturating_sub(visited));
        if count == 0 {
            continue;
        }
        if visited >= cap {
            stop = stop.or(Some(Stop::Limit(cap)));
            break;
        }
        let count = count.min(cap - visited);
        let Some(start) = slab
            .checked_add(fl.item_size)
            .and_then(|a| align_up(a, alignment))
        else {
            stop = stop.or(Some(Stop::Corrupt));
            break;
        };
        if (count as u64).checked_mul(stride).is_none() {
            stop = stop.or(Some(Stop::Corrupt));
            break;
        }
        // A slab is read a window at a time: at 100,000 requests one slab
        // is 16 MB, which need not be held whole.
        let per_window = (SLAB_WINDOW / stride).max(1);
        let mut done = 0u64;
        while done < count as u64 {
            let n = per_window.min(count as u64 - done);
            let Some(at) = start.checked_add(done * stride) else {
                stop = stop.or(Some(Stop::Corrupt));
                break;
            };
            let region = match t.view(at, n * stride) {
                Ok(r) => r,
                Err(e) => {
                    stop = stop.or(Some(Stop::from_read(e, at)));
                    if e == ReadError::Budget {
                        return stop;
                    }
                    // Unreadable: the rest of this slab, then the next.
                    break;
                }
            };
            for k in 0..n {
                let off = k * stride;
                let Ok(bytes) = region.bytes(off, spans.end().min(stride)) else {
                    break;
                };
                let elem = t.view_within(at + off, bytes, spans);
                if let Some(class_off) = obj_class {
                    if elem.ptr(class_off).ok() != Some(class) {
                        continue;
                    }
                }
                visit(at + off, &elem);
            }
            done += n;
        }
        visited += count;
    }
    stop
}

/// Most bytes of a free-list slab read at once.
const SLAB_WINDOW: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{Budget, ByteOrder, Sizes};
    use crate::testing::FakeProcess;

    fn target(p: &FakeProcess) -> Target<'_, FakeProcess> {
        Target::new(p, Sizes::LP64, ByteOrder::Same)
    }

    const LIST: ListLayout = ListLayout {
        item_next: 16,
        item_size: 40,
        sentinel: 16,
    };

    /// An opal_list_t at `at` with items at `items` (each 64 bytes apart).
    fn build_list(p: &mut FakeProcess, at: u64, items: &[u64], close: Option<u64>) {
        let sentinel = at + LIST.sentinel;
        p.map(at, vec![0; 64]);
        let mut prev = sentinel;
        for &it in items {
            p.map(it, vec![0; 64]);
            p.write_u64(prev + LIST.item_next, it);
            prev = it;
        }
        p.write_u64(prev + LIST.item_next, close.unwrap_or(sentinel));
    }

    #[test]
    fn walks_a_list_in_order() {
        let mut p = FakeProcess::new();
        build_list(&mut p, 0x10000, &[0x20000, 0x30000, 0x28000], None);
        let w = opal_list(&target(&p), &LIST, 0x10000, 100);
        assert_eq!(w.items, vec![0x20000, 0x30000, 0x28000]);
        assert_eq!(w.stop, None);
    }

    #[test]
    fn empty_list() {
        let mut p = FakeProcess::new();
        build_list(&mut p, 0x10000, &[], None);
        assert_eq!(opal_list(&target(&p), &LIST, 0x10000, 100), Walk::default());
    }

    #[test]
    fn detects_cycles_bad_pointers_and_caps() {
        let mut p = FakeProcess::new();
        build_list(&mut p, 0x10000, &[0x20000, 0x30000], Some(0x20000));
        let w = opal_list(&target(&p), &LIST, 0x10000, 100);
        assert_eq!(w.items, vec![0x20000, 0x30000]);
        assert_eq!(w.stop, Some(Stop::Cycle(0x20000)));

        build_list(&mut p, 0x10000, &[0x20000], Some(0x20003));
        let w = opal_list(&target(&p), &LIST, 0x10000, 100);
        assert_eq!(w.stop, Some(Stop::BadPointer(0x20003)));

        build_list(&mut p, 0x10000, &[0x20000], Some(0x9990000));
        let w = opal_list(&target(&p), &LIST, 0x10000, 100);
        assert_eq!(w.items, vec![0x20000, 0x9990000]);
        assert!(matches!(w.stop, Some(Stop::Unreadable(_))));

        build_list(&mut p, 0x10000, &[0x20000, 0x30000, 0x40000], None);
        let w = opal_list(&target(&p), &LIST, 0x10000, 2);
        assert_eq!(w.items.len(), 2);
        assert_eq!(w.stop, Some(Stop::Limit(2)));
    }

    #[test]
    fn a_self_loop_and_a_budget_stop() {
        let mut p = FakeProcess::new();
        build_list(&mut p, 0x10000, &[0x20000], Some(0x20000));
        let w = opal_list(&target(&p), &LIST, 0x10000, 100);
        assert_eq!(w.stop, Some(Stop::Cycle(0x20000)));

        let items: Vec<u64> = (1..=50).map(|i| 0x100000 + i * 0x100).collect();
        build_list(&mut p, 0x10000, &items, None);
        let budget = Budget {
            max_fetches: 10,
            max_bytes: 1 << 20,
        };
        let t = Target::with_budget(&p, Sizes::LP64, ByteOrder::Same, budget);
        let w = opal_list(&t, &LIST, 0x10000, 1000);
        assert_eq!(w.stop, Some(Stop::Budget));
        assert!(t.fetches() <= 10);
    }

    #[test]
    fn reading_walk_takes_items_and_links_in_one_fetch() {
        let mut p = FakeProcess::new();
        let items = [0x20000, 0x30000, 0x28000];
        build_list(&mut p, 0x10000, &items, None);
        for (i, &it) in items.iter().enumerate() {
            p.write_u64(it + 48, 100 + i as u64);
        }
        let t = target(&p);
        let spans = Spans::cover(&[(16, 8), (48, 8)], 64);
        let mut seen = Vec::new();
        let w = opal_list_read(&t, &LIST, 0x10000, 100, &spans, |a, v| {
            seen.push((a, v.and_then(|v| v.u64(48))));
        });
        assert_eq!(w, opal_list(&t, &LIST, 0x10000, 100));
        assert_eq!(
            seen,
            vec![(0x20000, Ok(100)), (0x30000, Ok(101)), (0x28000, Ok(102))]
        );
        // The sentinel, then one fetch per item.
        let before = t.fetches();
        opal_list_read(&t, &LIST, 0x10000, 100, &spans, |_, _| {});
        assert_eq!(t.fetches() - before, 4);

        // An item whose far span is unmapped is reported and passed over;
        // so is one whose spans leave out the link (read apart).
        let far = Spans::cover(&[(16, 8), (4096, 8)], 0);
        let mut errors = 0;
        let w = opal_list_read(&t, &LIST, 0x10000, 100, &far, |_, v| {
            errors += usize::from(v.is_err());
        });
        assert_eq!((w.items.len(), w.stop, errors), (3, None, 3));
        let no_link = Spans::cover(&[(48, 8)], 0);
        let w = opal_list_read(&t, &LIST, 0x10000, 100, &no_link, |_, v| {
            assert!(v.is_ok());
        });
        assert_eq!(w.items, items.to_vec());

        // Cycles and bad links stop it as they stop opal_list.
        build_list(&mut p, 0x10000, &[0x20000, 0x30000], Some(0x20000));
        let t = target(&p);
        let w = opal_list_read(&t, &LIST, 0x10000, 100, &spans, |_, _| {});
        assert_eq!(w.stop, Some(Stop::Cycle(0x20000)));
        build_list(&mut p, 0x10000, &[0x20000], Some(0x20003));
        let t = target(&p);
        let w = opal_list_read(&t, &LIST, 0x10000, 100, &spans, |_, _| {});
        assert_eq!(w.stop, Some(Stop::BadPointer(0x20003)));
    }

    const FL: FreeListLayout = FreeListLayout {
        num_allocated: 0,
        num_per_alloc: 8,
        frag_size: 16,
        frag_alignment: 24,
        frag_class: 32,
        allocations: 64,
        item_size: 56,
    };

    const SPEC: FreeListSpec<'static> = FreeListSpec {
        list: &LIST,
        free_list: &FL,
        obj_class: Some(0),
    };

    /// A free list at 0x10000 with slabs of `counts` elements (stride 128).
    fn build_free_list(p: &mut FakeProcess, counts: &[u64], per_alloc: u64) -> Vec<u64> {
        let fl = 0x10000;
        p.map(fl, vec![0; 512]);
        p.write_u64(fl + FL.num_allocated, counts.iter().sum());
        p.write_u64(fl + FL.num_per_alloc, per_alloc);
        p.write_u64(fl + FL.frag_size, 100);
        p.write_u64(fl + FL.frag_alignment, 64);
        p.write_u64(fl + FL.frag_class, 0xc1a55);
        let slabs: Vec<u64> = (0..counts.len() as u64)
            .map(|i| 0x100000 * (i + 1))
            .collect();
        let mut elems = Vec::new();
        for (&slab, &n) in slabs.iter().zip(counts) {
            p.map(slab, vec![0; (64 + n * 128) as usize]);
            for k in 0..n {
                let e = slab + 64 + k * 128;
                p.write_u64(e, 0xc1a55);
                elems.push(e);
            }
        }
        build_list(p, fl + FL.allocations, &slabs, None);
        elems
    }

    #[test]
    fn free_list_visits_every_element_of_every_slab() {
        let mut p = FakeProcess::new();
        let elems = build_free_list(&mut p, &[3, 4, 4], 4);
        let mut seen = Vec::new();
        let t = target(&p);
        let stop = free_list(&t, SPEC, 0x10000, &Spans::whole(16), 1000, |a, _| {
            seen.push(a)
        });
        assert_eq!(stop, None);
        assert_eq!(seen, elems);
        // One fetch for the header, one per slab link, one per slab.
        assert!(t.fetches() <= 1 + 4 + 3, "{} fetches", t.fetches());
    }

    #[test]
    fn a_large_slab_is_read_a_window_at_a_time() {
        let mut p = FakeProcess::new();
        // 20,000 elements of 128 bytes: 2.4 MiB, three windows.
        let elems = build_free_list(&mut p, &[20_000], 20_000);
        let mut seen = Vec::new();
        let t = target(&p);
        let stop = free_list(&t, SPEC, 0x10000, &Spans::whole(16), 100_000, |a, _| {
            seen.push(a)
        });
        assert_eq!(stop, None);
        assert_eq!(seen, elems);
        // The header, the slab's link and its end, and one per window.
        let windows = (20_000 * 128u64).div_ceil(SLAB_WINDOW);
        let fetches = t.fetches();
        assert!(
            (1 + windows..=3 + windows).contains(&fetches),
            "{fetches} fetches"
        );
    }

    #[test]
    fn free_list_skips_foreign_elements_and_survives_bad_counts() {
        let mut p = FakeProcess::new();
        let elems = build_free_list(&mut p, &[2, 4], 4);
        p.write_u64(elems[1], 0xbad);
        p.write_u64(0x10000 + FL.num_allocated, u64::MAX);
        let mut seen = Vec::new();
        let stop = free_list(
            &target(&p),
            SPEC,
            0x10000,
            &Spans::whole(16),
            1000,
            |a, _| seen.push(a),
        );
        assert!(!seen.contains(&elems[1]));
        assert!(seen.contains(&elems[0]));
        assert!(stop.is_some() || seen.len() <= 6);
        // Nonsense alignment.
        p.write_u64(0x10000 + FL.frag_alignment, 3);
        let stop = free_list(
            &target(&p),
            SPEC,
            0x10000,
            &Spans::whole(16),
            1000,
            |_, _| {},
        );
        assert_eq!(stop, Some(Stop::Corrupt));
    }
}
