//! ob1's matching structures: a communicator's `mca_pml_ob1_comm_t`, its
//! per-peer `mca_pml_ob1_comm_proc_t`, and the posted-receive queues in the
//! order ob1 matches them.
//!
//! ob1 keeps ANY_SOURCE receives on the communicator's `wild_receives` and
//! the others on the peer's `specific_receives`; every receive gets the next
//! `recv_sequence` when posted, and an incoming message is matched against
//! the two candidate queues by taking whichever head was posted first. So
//! all receives merged by `req_sequence` is exactly MPI's matching order.
//!
//! The backend's queues under ob1 are read here too: sends and receives
//! from the request free lists (scanned once per stop), the receives put
//! in that matching order where ob1's types are there, and the unexpected
//! fragments followed by what waits in the transport ([`super::sm`]).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::access::ProcessAccess;
use crate::iteration::Context;
use crate::messages;
use crate::openmpi::communicators::Comm;
use crate::openmpi::layout::{self, Layout, Ob1Layout};
use crate::openmpi::lists;
use crate::openmpi::ob1_comm::{list_is_empty, peer_view, read_comm, NotUsable, Ob1Comm};
use crate::openmpi::requests::{self, Request};
use crate::openmpi::{keep_tag, unexpected, OpenMpi, Pending, Symbols};
use crate::target::{ReadError, Target};
use crate::transit;
use crate::walk::{self, AddrHasher, AddrSet, Stop};

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

// The queues as ob1 shows them: its requests, decoded from the request
// free lists and put in its matching order, and its unexpected fragments.

/// The line that says how a request's queue is ordered.
#[derive(Debug, Clone, Copy)]
pub enum Order {
    None,
    /// The `number`th in ob1's matching order, from the ANY_SOURCE queue
    /// (`wild`) or a peer's.
    Posted {
        number: usize,
        wild: bool,
    },
    Text(&'static str),
}

impl Order {
    /// The line that says it, if any.
    pub fn line(self) -> Option<String> {
        match self {
            Order::None => None,
            Order::Posted { number, wild } => {
                let queue = if wild {
                    "ANY_SOURCE queue"
                } else {
                    "peer queue"
                };
                Some(format!("posted #{number} in ob1 matching order ({queue})"))
            }
            Order::Text(text) => Some(text.to_string()),
        }
    }
}

/// A queue as read at setup: its requests and its items in order, and why
/// it was cut.
pub(super) type Built = (Vec<Request>, Vec<Pending>, Option<Stop>);

impl OpenMpi {
    /// Takes the live requests of `comm` out of one of the request free
    /// lists' scans (made once per stop and shared by every communicator),
    /// with the scan's stop. Taken, they are held once, by the queue they
    /// are shown in; a communicator asked for again in the same stop gets a
    /// new scan.
    fn take_requests<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        fl: u64,
        sends: bool,
        comm: &Comm,
    ) -> (Vec<Request>, Option<Stop>) {
        let cache = if sends {
            &mut self.cache.sends
        } else {
            &mut self.cache.recvs
        };
        let scan = cache.get(
            |s| &s.by_comm,
            &[comm.addr],
            || requests::scan_free_list(t, layout, fl),
        );
        (scan.by_comm.take(comm.addr), scan.stop)
    }

    /// The request at `index` of `requests` as an item to be made into an
    /// operation when taken, its datatype read now (once per datatype).
    fn item<P: ProcessAccess + ?Sized>(
        &mut self,
        t: &Target<'_, P>,
        layout: &Layout,
        requests: &[Request],
        index: u32,
        order: Order,
    ) -> Pending {
        if let Some(r) = requests.get(index as usize) {
            requests::read_datatype(t, layout, &mut self.cache.datatypes, r.datatype);
        }
        Pending::Request { index, order }
    }

    pub(super) fn sends<P: ProcessAccess + ?Sized>(
        &mut self,
        cx: &Context,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let fl = syms.send_requests?;
        let (mut reqs, stop) = self.take_requests(t, layout, fl, true, comm);
        reqs.retain(|r| r.kind == requests::Kind::Send && keep_tag(cx, r.tag));
        // ob1 numbers sends per peer as they start: the closest thing to
        // the order they were issued.
        reqs.sort_by_key(|r| (r.sequence.unwrap_or(u64::MAX), r.peer, r.addr));
        let ops = (0..reqs.len() as u32)
            .map(|i| self.item(t, layout, &reqs, i, Order::None))
            .collect();
        Some((reqs, ops, stop))
    }

    pub(super) fn receives<P: ProcessAccess + ?Sized>(
        &mut self,
        cx: &Context,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<Built> {
        let ob1_comm = if self.ob1_selected() {
            read_comm(t, layout, comm, syms.ob1_comm_class)
        } else {
            Err(NotUsable::NotOb1)
        };
        // The free list holds every receive, including those already
        // matched (and so gone from ob1's queues) and not yet completed or
        // freed. Scanned first, its requests are what the walk of the
        // queues finds, decoded already.
        let (mut reqs, scan_stop) = match syms.recv_requests {
            Some(fl) => self.take_requests(t, layout, fl, false, comm),
            None => (Vec::new(), None),
        };
        let scanned = reqs.len();
        let mut stop = None;
        let posted = match (&ob1_comm, &layout.ob1) {
            (Ok(oc), Ok(ob1l)) => {
                let known: Known = reqs
                    .iter()
                    .zip(0u32..)
                    .filter_map(|(r, i)| Some((r.addr, (r.link?, i))))
                    .collect();
                let (posted, s) = posted(t, layout, ob1l, oc, &known, &mut reqs);
                stop = s;
                Some(posted)
            }
            _ => None,
        };
        let from_queues = posted.is_some();
        if let Err(NotUsable::Read(e)) = ob1_comm {
            stop = Some(read_stop(e));
        }
        let mut shown = vec![false; reqs.len()];
        // A scanned request the walk read again (its link was unreadable
        // in the scan) is shown once, as posted.
        let read_again: AddrSet = reqs[scanned.min(reqs.len())..]
            .iter()
            .map(|r| r.addr)
            .collect();
        let mut ops = Vec::with_capacity(reqs.len());
        let mut k = 0;
        for p in posted.into_iter().flatten() {
            shown[p.index as usize] = true;
            if !keep_tag(cx, reqs[p.index as usize].tag) {
                continue;
            }
            k += 1;
            let order = Order::Posted {
                number: k,
                wild: p.wild,
            };
            ops.push(self.item(t, layout, &reqs, p.index, order));
        }
        if syms.recv_requests.is_none() {
            return from_queues.then_some((reqs, ops, stop));
        }
        stop = stop.or(scan_stop);
        let mut rest: Vec<u32> = (0u32..)
            .zip(&reqs)
            .filter(|&(i, r)| {
                !shown[i as usize]
                    && !read_again.contains(&r.addr)
                    && r.kind.is_receive()
                    && keep_tag(cx, r.tag)
            })
            .map(|(i, _)| i)
            .collect();
        // ob1 numbers receives as they are posted; a PML that does not (all
        // equal) leaves allocation order.
        let sequence = |i: &u32| reqs[*i as usize].sequence;
        let distinct = rest.iter().filter_map(sequence).collect::<AddrSet>().len();
        let sequenced =
            rest.iter().all(|i| sequence(i).is_some()) && (rest.len() <= 1 || distinct > 1);
        if sequenced {
            rest.sort_by_key(|i| sequence(i).unwrap_or(u64::MAX));
        }
        let order = Order::Text(if from_queues {
            "not in ob1's posted queues (matched or probing)"
        } else if sequenced {
            "order: by posting sequence (no ob1 queue info)"
        } else {
            "order: allocation order (free list), not matching"
        });
        for i in rest {
            ops.push(self.item(t, layout, &reqs, i, order));
        }
        Some((reqs, ops, stop))
    }

    pub(super) fn unexpected<P: ProcessAccess + ?Sized>(
        &mut self,
        cx: &mut Context,
        t: &Target<'_, P>,
        layout: &Layout,
        syms: &Symbols,
        comm: &Comm,
    ) -> Option<(Built, transit::Unlisted)> {
        let ob1l = match &layout.ob1 {
            Ok(l) => l,
            Err(m) => {
                let btl = layout::btl_name(layout.comm.index.is_some());
                messages::set_no_information_reason(&format!(
                    "ob1 has no debug information ({m} missing): build Open MPI with -g to see unexpected messages ({} either)",
                    transit::not_listed(btl)
                ));
                let line = format!(
                    "mqs DLL: unexpected messages not available: ob1 has no debug information ({m} missing)"
                );
                // Said once per process, with the other consequences.
                cx.say_once("no-ob1", line);
                return None;
            }
        };
        if !self.ob1_selected() {
            messages::set_no_information_reason(
                "the selected PML is not ob1: only ob1's unexpected messages can be read",
            );
            return None;
        }
        let (frags, stop) = match read_comm(t, layout, comm, syms.ob1_comm_class) {
            Ok(oc) => unexpected::frags(t, layout, ob1l, &oc),
            Err(NotUsable::Read(e)) => (Vec::new(), Some(read_stop(e))),
            // No PML data on this communicator: it never communicated.
            Err(_) => (Vec::new(), None),
        };
        let mut ops: Vec<Pending> = frags
            .into_iter()
            .filter(|f| keep_tag(cx, f.tag))
            .map(Pending::Frag)
            .collect();
        // What waits in the transport comes after what ob1 holds: the
        // progress engine hands it to ob1 after those.
        let (waiting, cut, unlisted) = self.transit(t, layout, ob1l, syms, comm);
        ops.extend(
            waiting
                .into_iter()
                .filter(|m| keep_tag(cx, m.tag))
                .map(Pending::Transit),
        );
        Some(((Vec::new(), ops, stop.or(cut)), unlisted))
    }
}

fn read_stop(e: ReadError) -> Stop {
    match e {
        ReadError::Budget => Stop::Budget,
        ReadError::Unreadable(a) => Stop::Unreadable(a),
        ReadError::Misaligned(a) => Stop::BadPointer(a),
        ReadError::Null => Stop::BadPointer(0),
        ReadError::OutOfRange => Stop::Corrupt,
    }
}
