//! ob1's matching structures: a communicator's `mca_pml_ob1_comm_t`, its
//! per-peer `mca_pml_ob1_comm_proc_t`, and the posted-receive queues in the
//! order ob1 matches them.
//!
//! ob1 keeps ANY_SOURCE receives on the communicator's `wild_receives` and
//! the others on the peer's `specific_receives`; every receive gets the next
//! `recv_sequence` when posted, and an incoming message is matched against
//! the two candidate queues by taking whichever head was posted first. So
//! all receives merged by `req_sequence` is exactly MPI's matching order.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::access::ProcessAccess;
use crate::openmpi::communicators::Comm;
use crate::openmpi::groups::MAX_GROUP;
use crate::openmpi::layout::{Layout, Ob1Layout};
use crate::openmpi::lists;
use crate::openmpi::requests::{self, Request};
use crate::target::{ReadError, Target};
use crate::walk::{self, AddrHasher, Stop};

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

/// A posted receive in ob1's queues: its request's index in the list
/// [`posted`] was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted {
    pub index: u32,
    /// Whether it sits on `wild_receives` (ANY_SOURCE).
    pub wild: bool,
}

/// Where a request decoded earlier in this stop lies in the list handed to
/// [`posted`], with its list link: the walk follows it without a fetch.
pub type Known = HashMap<u64, (u64, u32), BuildHasherDefault<AddrHasher>>;

/// Posted receives of one communicator, in matching order, as indices into
/// `requests`. The requests `known` names (decoded from a scan of the
/// request free list in this stop) are taken where they lie in `requests`
/// instead of read again; the others are read and appended to it. So a
/// queue of 100,000 receives is held once, not once as scanned and again as
/// walked.
pub fn posted<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    layout: &Layout,
    ob1: &Ob1Layout,
    oc: &Ob1Comm,
    known: &Known,
    requests: &mut Vec<Request>,
) -> (Vec<Posted>, Option<Stop>) {
    let mut stop = oc.stop;
    let mut found: Vec<Posted> = Vec::new();
    // Each request is read with its list link (the list item is the
    // request's first member): one fetch per posted receive.
    let spans = requests::spans(layout, &t.sizes);
    let mut queue = |list: u64, wild: bool, stop: &mut Option<Stop>| {
        let mut failed = None;
        let w = lists::opal_list_read_known(
            t,
            &layout.list,
            list,
            walk::MAX_LIST_ITEMS,
            &spans,
            |item| known.get(&item).copied(),
            |item, read_now| {
                let index = read_now.and_then(|it| match it {
                    lists::Item::Read(view) => {
                        let request = requests::decode(&view, layout)?;
                        let index = u32::try_from(requests.len()).map_err(|_| ReadError::Budget)?;
                        requests.push(request);
                        Ok(index)
                    }
                    lists::Item::Known(index) => Ok(index),
                });
                match index {
                    Ok(index) => found.push(Posted { index, wild }),
                    // The first request that could not be read.
                    Err(e) => {
                        failed = failed.or(Some(match e {
                            ReadError::Budget => Stop::Budget,
                            _ => Stop::Unreadable(item),
                        }))
                    }
                }
            },
        );
        // The walk's own stop first, then the first request that could not
        // be read: as if the list were walked before its requests were read.
        *stop = stop.or(w.stop).or(failed);
    };
    queue(oc.wild, true, &mut stop);
    for &(_, proc_addr) in &oc.procs {
        if t.exhausted() {
            stop = stop.or(Some(Stop::Budget));
            break;
        }
        let Some(view) = peer_view(t, ob1, proc_addr, &mut stop) else {
            continue;
        };
        if list_is_empty(&view, layout, ob1.proc_specific_receives) == Some(true) {
            continue;
        }
        queue(proc_addr + ob1.proc_specific_receives, false, &mut stop);
    }
    // Stable: within one queue, list order already is sequence order.
    found.sort_by_key(|p| requests[p.index as usize].sequence.unwrap_or(u64::MAX));
    (found, stop)
}
