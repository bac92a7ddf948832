//! ob1's per-communicator matching state: a communicator's
//! `mca_pml_ob1_comm_t`, the per-peer `mca_pml_ob1_comm_proc_t` it has set
//! up, and the lists they hold, read once for both the posted receives
//! ([`super::ob1`]) and the unexpected fragments ([`super::unexpected`]).

use crate::access::ProcessAccess;
use crate::openmpi::communicators::Comm;
use crate::openmpi::groups::MAX_GROUP;
use crate::openmpi::layout::{Layout, Ob1Layout};
use crate::target::{ReadError, Target};
use crate::walk::Stop;

/// Why ob1's queues cannot be used for a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotUsable {
    /// No ob1 debug info in the image.
    NoDebugInfo,
    /// The communicator has no PML data (or not ob1's).
    NotOb1,
    /// It could not be read.
    Read(ReadError),
}

/// A communicator's ob1 data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ob1Comm {
    pub addr: u64,
    /// Address of the `wild_receives` list.
    pub wild: u64,
    /// (peer rank, `mca_pml_ob1_comm_proc_t` address) for every peer ob1
    /// has set up (others have never communicated).
    pub procs: Vec<(u64, u64)>,
    /// Per-peer truncation: more peers than the group.
    pub stop: Option<Stop>,
}

/// Reads `comm`'s ob1 data, checking its object class when the class
/// symbol is known (`mca_pml_ob1_comm_t_class`).
pub fn read_comm<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    comm: &Comm,
    class: Option<u64>,
) -> Result<Ob1Comm, NotUsable> {
    let ob1 = layout.ob1.as_ref().map_err(|_| NotUsable::NoDebugInfo)?;
    if comm.pml_comm == 0 {
        return Err(NotUsable::NotOb1);
    }
    let at = t
        .check_ptr(comm.pml_comm, t.ptr_align(), ob1.comm_size)
        .map_err(|_| NotUsable::NotOb1)?;
    let v = t.view(at, ob1.comm_size).map_err(NotUsable::Read)?;
    if let (Some(off), Some(class)) = (layout.obj_class, class) {
        if v.ptr(off).map_err(NotUsable::Read)? != class {
            return Err(NotUsable::NotOb1);
        }
    }
    let procs_ptr = v.ptr(ob1.comm_procs).map_err(NotUsable::Read)?;
    let num = v.size_t(ob1.comm_num_procs).map_err(NotUsable::Read)?;
    let mut out = Ob1Comm {
        addr: at,
        wild: at + ob1.comm_wild_receives,
        procs: Vec::new(),
        stop: None,
    };
    // One slot per peer of the group peers are named in.
    let expected = comm.remote_ranks.len() as u64;
    let mut n = num.min(MAX_GROUP);
    if num != expected && expected > 0 {
        out.stop = Some(Stop::Corrupt);
        n = n.min(expected);
    }
    if n == 0 || procs_ptr == 0 {
        return Ok(out);
    }
    let psize = u64::from(t.sizes.pointer);
    let table = t
        .check_ptr(procs_ptr, psize, n * psize)
        .and_then(|a| t.view(a, n * psize))
        .map_err(NotUsable::Read)?;
    for peer in 0..n {
        let p = table.ptr(peer * psize).map_err(NotUsable::Read)?;
        if p != 0 {
            out.procs.push((peer, p));
        }
    }
    Ok(out)
}

/// Whether the opal_list_t at `list` is empty, decided from bytes already
/// read (saves a fetch per empty queue).
pub(crate) fn list_is_empty<P: ProcessAccess + ?Sized>(
    proc_view: &crate::target::View<'_, '_, P>,
    layout: &Layout,
    list_off: u64,
) -> Option<bool> {
    let sentinel_off = list_off + layout.list.sentinel;
    let next = proc_view.ptr(sentinel_off + layout.list.item_next).ok()?;
    Some(next == proc_view.addr + sentinel_off)
}

/// The bytes of one peer's `mca_pml_ob1_comm_proc_t`, or None (with the
/// reason in `stop`) when its pointer is bad: the step both per-peer walks
/// (posted receives, unexpected fragments) start from.
pub(crate) fn peer_view<'t, 'a, P: ProcessAccess + ?Sized>(
    t: &'t Target<'a, P>,
    ob1: &Ob1Layout,
    proc_addr: u64,
    stop: &mut Option<Stop>,
) -> Option<crate::target::View<'t, 'a, P>> {
    match t
        .check_ptr(proc_addr, t.ptr_align(), ob1.proc_size)
        .and_then(|a| t.view(a, ob1.proc_size))
    {
        Ok(v) => Some(v),
        Err(_) => {
            *stop = stop.or(Some(Stop::BadPointer(proc_addr)));
            None
        }
    }
}
