//! A Cartesian communicator's grid, as MPICH keeps it: an attribute on
//! the communicator's list whose keyval is `MPIR_Topology_keyval` and
//! whose value points at an `MPIR_Topology` (`kind`, then the union whose
//! `cart` member is an `MPII_Cart_topology`). Synthetic memory laid out by
//! the types given here (as MPICH 4.0.2's `mpir_attr.h` and `mpir_topo.h`
//! define them, LP64).

use std::sync::Arc;

use mqs_abi::{Cartesian, ReturnCode};

use super::layout::Layout;
use super::Mpich;
use crate::iteration::{AnyProcess, Process};
use crate::target::{ByteOrder, Sizes};
use crate::testing::{FakeImage, FakeProcess};

const LIST: u64 = 0x1000;
const KEYVAL_SYM: u64 = 0x1100;
const WORLD: u64 = 0x2000;
const CART: u64 = 0x2200;
const ATTRS: u64 = 0x3000;
const KEYVALS: u64 = 0x3400;
const TOPO: u64 = 0x3800;
const ARRAYS: u64 = 0x3a00;
const COMM: u64 = 256;
/// `MPIR_Comm.attributes`.
const ATTRIBUTES: u64 = 208;
/// The topology's keyval handle (a comm keyval from the direct block) and
/// a user's.
const TOPO_KEYVAL: u32 = 0xa440_0000;
const USER_KEYVAL: u32 = 0xa440_0001;

fn image(with_symbol: bool) -> FakeImage {
    let mut i = FakeImage::new();
    i.add_type("MPIR_Comm_list", 16, &[("sequence_number", 0), ("head", 8)]);
    i.add_type(
        "MPIR_Comm",
        COMM,
        &[
            ("handle", 0),
            ("context_id", 4),
            ("recvcontext_id", 6),
            ("remote_size", 8),
            ("rank", 12),
            ("local_group", 16),
            ("remote_group", 24),
            ("name", 64),
            ("errhandler", 128),
            ("comm_next", 200),
            ("attributes", ATTRIBUTES),
        ],
    );
    super::test_image::add_group_and_request_types(&mut i);
    i.add_type(
        "MPIR_Debugq",
        56,
        &[
            ("req", 0),
            ("tag", 8),
            ("rank", 12),
            ("context_id", 16),
            ("buf", 24),
            ("count", 32),
            ("next", 40),
            ("prev", 48),
        ],
    );
    i.add_type(
        "MPIR_Attribute",
        56,
        &[
            ("handle", 0),
            ("ref_count", 4),
            ("keyval", 8),
            ("next", 16),
            ("attrType", 24),
            ("pre_sentinal", 32),
            ("value", 40),
            ("post_sentinal", 48),
        ],
    );
    i.add_type(
        "MPII_Keyval",
        48,
        &[("handle", 0), ("ref_count", 4), ("kind", 8)],
    );
    i.add_type("MPIR_Topology", 56, &[("kind", 0), ("topo", 8)]);
    i.add_type(
        "MPII_Cart_topology",
        32,
        &[
            ("nnodes", 0),
            ("ndims", 4),
            ("dims", 8),
            ("periodic", 16),
            ("position", 24),
        ],
    );
    for (name, addr) in [
        ("MPIR_All_communicators", LIST),
        ("MPIR_Sendq_head", 0x1200),
        ("MPIR_Recvq_head", 0x1208),
        ("MPIR_Unexpq_head", 0x1210),
    ] {
        i.symbols.insert(name.into(), addr);
    }
    if with_symbol {
        i.symbols.insert("MPIR_Topology_keyval".into(), KEYVAL_SYM);
    }
    i
}

fn comm(p: &mut FakeProcess, at: u64, handle: u32, ctx: u16, size: u32, name: &str, next: u64) {
    p.map(at, vec![0; COMM as usize]);
    p.write_u32(at, handle);
    p.write_u16(at + 4, ctx);
    p.write_u16(at + 6, ctx);
    p.write_u32(at + 8, size);
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    p.map(at + 64, n);
    p.write_u64(at + 200, next);
}

/// The topology `MPIR_Topology` of `kind` at [`TOPO`]: `nnodes`, and the
/// dimensions and periods given.
fn topology(p: &mut FakeProcess, kind: u32, nnodes: u32, dims: &[u32], periods: &[u32]) {
    p.map(TOPO, vec![0; 56]);
    p.write_u32(TOPO, kind);
    p.write_u32(TOPO + 8, nnodes);
    p.write_u32(TOPO + 12, dims.len() as u32);
    p.write_u64(TOPO + 16, ARRAYS);
    p.write_u64(TOPO + 24, ARRAYS + 0x40);
    p.write_u64(TOPO + 32, ARRAYS + 0x80);
    for (i, (&d, &q)) in dims.iter().zip(periods).enumerate() {
        p.write_u32(ARRAYS + 4 * i as u64, d);
        p.write_u32(ARRAYS + 0x40 + 4 * i as u64, q);
        p.write_u32(ARRAYS + 0x80 + 4 * i as u64, 0);
    }
}

/// A world of 6 (no attributes) and a communicator "cart" of 6 whose
/// attribute list holds a user's attribute (an integer value), then the
/// topology's; the topology keyval's value as MPICH keeps it.
fn process(keyval_value: u32) -> FakeProcess {
    let mut p = FakeProcess::new();
    p.write_u64(LIST, 2);
    p.write_u64(LIST + 8, WORLD);
    comm(&mut p, WORLD, 0x4400_0000, 0, 6, "MPI_COMM_WORLD", CART);
    comm(&mut p, CART, 0x8400_0000, 16, 6, "cart", 0);
    p.write_u64(CART + ATTRIBUTES, ATTRS);
    for (at, keyval, handle, value, next) in [
        (ATTRS, KEYVALS, USER_KEYVAL, 42, ATTRS + 64),
        (ATTRS + 64, KEYVALS + 64, TOPO_KEYVAL, TOPO, 0),
    ] {
        p.map(at, vec![0; 56]);
        p.write_u64(at + 8, keyval);
        p.write_u64(at + 16, next);
        p.write_u64(at + 40, value);
        p.map(keyval, vec![0; 48]);
        p.write_u32(keyval, handle);
    }
    p.write_u32(KEYVAL_SYM, keyval_value);
    for q in [0x1200, 0x1208, 0x1210] {
        p.write_u64(q, 0);
    }
    topology(&mut p, 2, 6, &[3, 2], &[1, 0]);
    p
}

/// Each communicator's name and grid.
fn grids(image: &FakeImage, p: &FakeProcess) -> Vec<(String, Option<Cartesian>)> {
    let layout = Layout::resolve(image).expect("layout");
    // Asked for only once a process has made a topology.
    assert!(layout.comm.cart.is_none());
    let backend = Mpich::new(Arc::new(layout));
    let mut process = Process::new(std::ptr::null(), backend, Sizes::LP64, ByteOrder::probe(p));
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    s.check(image, p).expect("check");
    s.update_communicators(p, None).expect("communicators");
    let mut out = Vec::new();
    assert_eq!(s.setup_communicators(), ReturnCode::Ok);
    loop {
        out.push((s.current_comm().unwrap().name, s.comm_cartesian().unwrap()));
        if s.next_communicator().unwrap() != ReturnCode::Ok {
            break;
        }
    }
    out
}

fn grid_of(image: &FakeImage, p: &FakeProcess) -> Option<Cartesian> {
    let all = grids(image, p);
    assert_eq!(all[0], ("MPI_COMM_WORLD".to_string(), None));
    assert_eq!(all[1].0, "cart");
    all[1].1.clone()
}

fn three_by_two() -> Option<Cartesian> {
    Some(Cartesian {
        dims: vec![3, 2],
        periods: vec![true, false],
    })
}

#[test]
fn the_grid_is_the_attribute_of_mpichs_topology_keyval() {
    assert_eq!(grid_of(&image(true), &process(TOPO_KEYVAL)), three_by_two());
}

#[test]
fn without_the_keyval_symbol_no_grid_is_looked_for() {
    // Whether the process made a topology is not known: the grid's types
    // are not asked for.
    assert_eq!(grid_of(&image(false), &process(TOPO_KEYVAL)), None);
}

#[test]
fn a_grid_that_is_not_the_communicators_size_is_refused() {
    for with_symbol in [true, false] {
        let image = image(with_symbol);
        // 4 x 2 claimed for 6 nodes.
        let mut p = process(TOPO_KEYVAL);
        topology(&mut p, 2, 6, &[4, 2], &[1, 0]);
        assert_eq!(grid_of(&image, &p), None);
        // 3 x 2 of 8 nodes on a communicator of 6.
        let mut p = process(TOPO_KEYVAL);
        topology(&mut p, 2, 8, &[3, 2], &[1, 0]);
        assert_eq!(grid_of(&image, &p), None);
        // Too many dimensions.
        let mut p = process(TOPO_KEYVAL);
        topology(&mut p, 2, 6, &[1; 17], &[0; 17]);
        assert_eq!(grid_of(&image, &p), None);
        // A graph topology.
        let mut p = process(TOPO_KEYVAL);
        topology(&mut p, 1, 6, &[3, 2], &[1, 0]);
        assert_eq!(grid_of(&image, &p), None);
    }
}

#[test]
fn the_topology_is_only_that_of_the_keyval_when_it_is_known() {
    // Another keyval's value: the attribute is someone else's.
    assert_eq!(grid_of(&image(true), &process(USER_KEYVAL)), None);
    // No topology made yet (MPI_KEYVAL_INVALID): nothing is read.
    assert_eq!(grid_of(&image(true), &process(0x2400_0000)), None);
}

#[test]
fn a_cycle_in_the_attribute_list_ends_the_search() {
    let mut p = process(TOPO_KEYVAL);
    // The user's attribute points back at itself: the topology's is never
    // reached.
    p.write_u64(ATTRS + 16, ATTRS);
    assert_eq!(grid_of(&image(true), &p), None);
    assert_eq!(grid_of(&image(false), &p), None);
}

#[test]
fn without_the_topology_types_nothing_changes() {
    let mut image = image(true);
    image.remove_type("MPIR_Topology");
    let layout = Layout::resolve(&image).expect("layout");
    assert!(layout.comm.cart.is_none());
    let backend = Mpich::new(Arc::new(layout));
    let p = process(TOPO_KEYVAL);
    let mut process = Process::new(std::ptr::null(), backend, Sizes::LP64, ByteOrder::probe(&p));
    let s: &mut dyn AnyProcess<FakeImage> = &mut process;
    s.check(&image, &p).expect("check");
    s.update_communicators(&p, None).expect("communicators");
    assert_eq!(s.setup_communicators(), ReturnCode::Ok);
    assert_eq!(s.next_communicator().unwrap(), ReturnCode::Ok);
    assert_eq!(s.current_comm().unwrap().name, "cart");
    assert_eq!(s.comm_cartesian().unwrap(), None);
}
