//! The Open MPI readers on synthetic memory laid out with the real type
//! layouts of Open MPI 4.1.4 (recorded from its DWARF): sparse groups,
//! sentinel group members, ob1's out-of-sequence fragment rings, and the
//! layout facts derived from the types.

mod common;

use common::snapshot::Snapshot;
use mqs_dll::access::ImageAccess;
use mqs_dll::openmpi::groups::{self, Translator, World};
use mqs_dll::openmpi::layout::{Layout, NameStorage, SparseStructs};
use mqs_dll::openmpi::ob1_comm::Ob1Comm;
use mqs_dll::openmpi::unexpected;
use mqs_dll::target::{ByteOrder, Sizes, Target};
use mqs_dll::testing::{FakeImage, FakeProcess};

fn layout() -> Layout {
    let snap = Snapshot::load(&common::data("ompi-4.1.4-g-types.json")).unwrap_or_default();
    let resolved = Layout::resolve(&snap.fake_image());
    assert!(resolved.is_ok(), "{resolved:?}");
    resolved.unwrap_or_else(|_| unreachable!())
}

#[test]
fn layout_facts_of_open_mpi_4_1_4() {
    let l = layout();
    assert_eq!(l.comm.name_storage, NameStorage::Inline(64));
    assert!(l.group.sparse.is_some());
    assert_eq!(l.proc_.name, 40);
    let ob1 = l.ob1.as_ref().map_err(|m| m.to_string());
    assert!(ob1.is_ok(), "{ob1:?}");
    if let Ok(ob1) = ob1 {
        // No heterogeneous support: the match header is 14 bytes on the
        // wire (sizeof is 16); the rendezvous header 32.
        assert_eq!(ob1.match_hdr_len, 14);
        assert_eq!(ob1.rndv_hdr_len, 32);
        assert_eq!(ob1.frag_max_segments, 16);
    }
    // vader: what the transport reader relies on (seen with gdb on a live
    // job): a 48-byte fragment header with the data after it, 352-byte
    // endpoints with fbox_in at 40 and its seq at 60 by C's rules.
    let sm = l.sm.as_ref().map_err(|m| m.to_string());
    assert!(sm.is_ok(), "{sm:?}");
    if let Ok(sm) = sm {
        assert_eq!((sm.name, sm.symbol), ("vader", "mca_btl_vader_component"));
        assert_eq!(sm.hdr_size, 48);
        assert_eq!(
            (sm.hdr_next, sm.hdr_tag, sm.hdr_flags, sm.hdr_len),
            (0, 16, 17, 20)
        );
        assert_eq!((sm.hdr_sc_iov, sm.hdr_fbox_base), (Some(24), 40));
        assert_eq!((sm.ep_size, sm.ep_fbox_in), (352, 40));
        assert_eq!(sm.ep_fbox_in + 2 * 8 + 4, 60);
        assert_eq!((sm.fifo_head, sm.fifo_tail), (0, 8));
        assert!(sm.num_local_peers.is_some());
    }
}

const GROUP: u64 = 0x10_0000;

/// A group at `at`: count, flags, proc pointer table, parent.
fn group(
    p: &mut FakeProcess,
    l: &Layout,
    at: u64,
    count: u32,
    flags: u32,
    procs: u64,
    parent: u64,
) {
    let g = &l.group;
    p.map(at, vec![0; g.size as usize]);
    p.write_u32(at + g.proc_count, count);
    p.write_u32(at + g.flags, flags);
    p.write_u64(at + g.proc_pointers, procs);
    if let Some(sp) = g.sparse {
        p.write_u64(at + sp.parent, parent);
    }
}

/// The four sparse-group structs have a struct tag and no typedef.
const SPARSE_TAGS: [&str; 4] = [
    "ompi_group_sporadic_data_t",
    "ompi_group_sporadic_list_t",
    "ompi_group_strided_data_t",
    "ompi_group_bitmap_data_t",
];

/// An image that counts the type lookups asked of it.
struct Debugger {
    image: FakeImage,
    lookups: std::cell::RefCell<Vec<String>>,
}

impl ImageAccess for Debugger {
    type Type = usize;
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.image.find_symbol(name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.image.find_function(name)
    }
    fn find_type(&self, name: &str) -> Option<usize> {
        self.lookups.borrow_mut().push(name.to_string());
        self.image.find_type(name)
    }
    fn field_offset(&self, ty: usize, field: &str) -> Option<u64> {
        self.image.field_offset(ty, field)
    }
    fn size_of(&self, ty: usize) -> Option<u64> {
        self.image.size_of(ty)
    }
}

/// Sparse groups are laid out by C's rules, never asked of the debugger
/// (no lookup names them), and those rules agree with Open MPI 4.1.4's
/// DWARF (the recorded `struct TAG` types).
#[test]
fn sparse_group_structs_are_laid_out_by_c_and_agree_with_the_dwarf() {
    let snap = Snapshot::load(&common::data("ompi-4.1.4-g-types.json")).unwrap_or_default();
    let debugger = Debugger {
        image: snap.fake_image(),
        lookups: Default::default(),
    };
    let resolved = Layout::resolve(&debugger);
    assert!(resolved.is_ok(), "{resolved:?}");
    let l = resolved.unwrap_or_else(|_| unreachable!());
    let asked: Vec<String> = debugger
        .lookups
        .borrow()
        .iter()
        .filter(|n| SPARSE_TAGS.iter().any(|t| n.contains(t)))
        .cloned()
        .collect();
    assert_eq!(asked, Vec::<String>::new());

    let image = snap.fake_image();
    let field = |tag: &str, name: &str| -> u64 {
        let ty = image.find_type(&format!("struct {tag}"));
        assert!(ty.is_some(), "struct {tag} recorded");
        let off = ty.and_then(|t| image.field_offset(t, name));
        assert!(off.is_some(), "{tag}.{name}");
        off.unwrap_or_default()
    };
    let list_ty = image.find_type("struct ompi_group_sporadic_list_t");
    let dwarf = SparseStructs {
        sporadic_list: field("ompi_group_sporadic_data_t", "grp_sporadic_list"),
        sporadic_len: field("ompi_group_sporadic_data_t", "grp_sporadic_list_len"),
        sporadic_first: field("ompi_group_sporadic_list_t", "rank_first"),
        sporadic_length: field("ompi_group_sporadic_list_t", "length"),
        sporadic_elem: list_ty.and_then(|t| image.size_of(t)).unwrap_or_default(),
        strided_offset: field("ompi_group_strided_data_t", "grp_strided_offset"),
        strided_stride: field("ompi_group_strided_data_t", "grp_strided_stride"),
        strided_last: field("ompi_group_strided_data_t", "grp_strided_last_element"),
        bitmap_array: field("ompi_group_bitmap_data_t", "grp_bitmap_array"),
        bitmap_len: field("ompi_group_bitmap_data_t", "grp_bitmap_array_len"),
    };
    assert_eq!(SparseStructs::c_rules(&Sizes::LP64), dwarf);
    check_sparse_groups(&l);
}

fn check_sparse_groups(l: &Layout) {
    let Some(sparse) = l.group.sparse else {
        unreachable!("sparse layout");
    };
    let sp = sparse.structs(&Sizes::LP64);
    let base = sparse.sparse_data;
    let mut p = FakeProcess::new();
    // World: 6 dense members, proc pointers 0x5000_0000 + 0x100 * rank.
    let world_procs = GROUP + 0x1000;
    p.map(world_procs, vec![0; 48]);
    for r in 0..6u64 {
        p.write_u64(world_procs + 8 * r, 0x5000_0000 + 0x100 * r);
    }
    group(&mut p, l, GROUP, 6, 0x4, world_procs, 0);

    // Strided: world ranks 1, 3, 5.
    let strided = GROUP + 0x2000;
    group(&mut p, l, strided, 3, 0x10, 0, GROUP);
    p.write_u32(strided + base + sp.strided_offset, 1);
    p.write_u32(strided + base + sp.strided_stride, 2);
    p.write_u32(strided + base + sp.strided_last, 5);

    // Sporadic: ranges (0, 2) and (4, 1): world ranks 0, 1, 4.
    let sporadic = GROUP + 0x3000;
    let list = GROUP + 0x3800;
    group(&mut p, l, sporadic, 3, 0x08, 0, GROUP);
    p.write_u64(sporadic + base + sp.sporadic_list, list);
    p.write_u32(sporadic + base + sp.sporadic_len, 2);
    p.map(list, vec![0; 16]);
    p.write_u32(list + sp.sporadic_first, 0);
    p.write_u32(list + sp.sporadic_length, 2);
    p.write_u32(list + sp.sporadic_elem + sp.sporadic_first, 4);
    p.write_u32(list + sp.sporadic_elem + sp.sporadic_length, 1);

    // Bitmap 0b0010_1100: world ranks 2, 3, 5.
    let bitmap = GROUP + 0x4000;
    let bits = GROUP + 0x4800;
    group(&mut p, l, bitmap, 3, 0x20, 0, GROUP);
    p.write_u64(bitmap + base + sp.bitmap_array, bits);
    p.write_u32(bitmap + base + sp.bitmap_len, 1);
    p.map(bits, vec![0b0010_1100]);

    // Sparse of sparse: every other member of the strided group (1, 5).
    let nested = GROUP + 0x5000;
    group(&mut p, l, nested, 2, 0x10, 0, strided);
    p.write_u32(nested + base + sp.strided_offset, 0);
    p.write_u32(nested + base + sp.strided_stride, 2);

    let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
    let world = groups::read_world(&t, l, GROUP, Some(1)).unwrap_or_default();
    assert_eq!(world.size, 6);
    let tr = Translator {
        world: &world,
        names: None,
    };
    assert_eq!(tr.group(&t, l, strided), Ok(vec![1, 3, 5]));
    assert_eq!(tr.group(&t, l, sporadic), Ok(vec![0, 1, 4]));
    assert_eq!(tr.group(&t, l, bitmap), Ok(vec![2, 3, 5]));
    assert_eq!(tr.group(&t, l, nested), Ok(vec![1, 5]));

    // A parent chain that loops ends at the depth bound, with unknowns.
    group(&mut p, l, nested, 2, 0x10, 0, nested);
    let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
    assert_eq!(tr.group(&t, l, nested), Ok(vec![-1, -1]));
}

#[test]
fn sentinel_and_foreign_members() {
    let l = layout();
    let mut p = FakeProcess::new();
    let procs = GROUP + 0x1000;
    // Member 0 a real proc of our job (jobid 0x10001, vpid 3); member 1 a
    // sentinel of our job (vpid 2); member 2 a sentinel of another job.
    let real = GROUP + 0x2000;
    p.map(real, vec![0; 72]);
    p.write_u32(real + l.proc_.name, 0x10001);
    p.write_u32(real + l.proc_.name + 4, 3);
    let sentinel =
        |jobid: u64, vpid: u64| 1 | ((jobid & 0x7fff) << 1) | ((jobid >> 16) << 16) | (vpid << 32);
    p.map(procs, vec![0; 24]);
    p.write_u64(procs, real);
    p.write_u64(procs + 8, sentinel(0x10001, 2));
    p.write_u64(procs + 16, sentinel(0x20001, 0));
    group(&mut p, &l, GROUP, 3, 0x4, procs, 0);
    let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
    let world = World {
        jobid: Some(0x10001),
        ..World::default()
    };
    let tr = Translator {
        world: &world,
        names: None,
    };
    assert_eq!(tr.group(&t, &l, GROUP), Ok(vec![3, 2, -1]));
}

#[test]
fn out_of_sequence_fragments_are_read_from_their_rings_in_order() {
    let l = layout();
    let Ok(ob1) = l.ob1 else {
        unreachable!("ob1 layout");
    };
    let mut p = FakeProcess::new();
    let proc_addr = 0x20_0000u64;
    p.map(proc_addr, vec![0; ob1.proc_size as usize]);
    // Empty lists: sentinel.next points to itself.
    for list in [ob1.proc_specific_receives, ob1.proc_unexpected_frags] {
        let s = proc_addr + list + l.list.sentinel;
        p.write_u64(s + l.list.item_next, s);
    }
    // Ring A -> B -> A (seq 9 and 5); B heads a range ring C -> D -> C
    // (seq 6, 7): four fragments, listed by sequence.
    let frag = |i: u64| 0x30_0000 + i * 0x1000;
    let (a, b, c, d) = (frag(0), frag(1), frag(2), frag(3));
    for (addr, next, seq) in [(a, b, 9u16), (b, a, 5), (c, d, 6), (d, c, 7)] {
        p.map(addr, vec![0; ob1.frag_size as usize]);
        p.write_u64(addr + l.list.item_next, next);
        p.map(addr + ob1.frag_hdr + ob1.hdr_type, vec![0x41]);
        p.write_u16(addr + ob1.frag_hdr + ob1.hdr_seq, seq);
        p.write_u32(addr + ob1.frag_hdr + ob1.hdr_tag, 100 + u32::from(seq));
        p.write_u64(addr + ob1.frag_num_segments, 1);
        p.write_u64(addr + ob1.frag_segments + ob1.seg_len, 14 + 8);
    }
    if let Some(range) = ob1.frag_range {
        p.write_u64(b + range, c);
    }
    if let Some(off) = ob1.proc_frags_cant_match {
        p.write_u64(proc_addr + off, a);
    }
    let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
    let oc = Ob1Comm {
        addr: 0,
        wild: 0,
        procs: vec![(0, proc_addr)],
        stop: None,
    };
    let (frags, stop) = unexpected::frags(&t, &l, &ob1, &oc);
    assert_eq!(stop, None);
    let seqs: Vec<_> = frags
        .iter()
        .map(|f| (f.seq, f.tag, f.length, f.out_of_sequence))
        .collect();
    assert_eq!(
        seqs,
        [
            (5, 105, 8, true),
            (6, 106, 8, true),
            (7, 107, 8, true),
            (9, 109, 8, true)
        ]
    );

    // A range ring that loops into the horizontal ring is cut, not followed
    // for ever.
    p.write_u64(d + l.list.item_next, a);
    let t = Target::new(&p, Sizes::LP64, ByteOrder::probe(&p));
    let (frags, stop) = unexpected::frags(&t, &l, &ob1, &oc);
    assert!(frags.len() <= 6);
    assert!(stop.is_some());
}
