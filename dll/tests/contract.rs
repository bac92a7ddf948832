//! The calling contract through the C entry points: versions, error codes
//! and strings, has_queues messages, misuse by a debugger (wrong order,
//! NULLs, calling past the end), caching, and graceful degradation when
//! ob1 has no debug information (an Open MPI "release" build).

mod common;

use std::ffi::{c_char, CStr};

use common::raw::{self as host, abi, Image, Process, Queue, DPRINTS};
use common::snapshot::Snapshot;
use mqs_dll::errors::DllError;
use mqs_dll::exports as x;

/// Rank 0 of the `queues` recording (queues.c with N=3), as a C
/// debugger's tables would hold it.
fn snapshot() -> Snapshot {
    let rec = common::session::recording("queues");
    let s = Snapshot::from_recorded(rec.name, rec.rank(0));
    assert!(!s.memory.is_empty());
    s
}

fn text(p: *mut c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the DLL returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[test]
fn versions_and_error_strings() {
    host::setup_basic();
    // SAFETY: plain calls without pointers.
    let (compat, width) = unsafe { (x::mqs_version_compatibility(), x::mqs_dll_taddr_width()) };
    assert_eq!(compat, if cfg!(feature = "mpi2") { 3 } else { 2 });
    assert_eq!(width, 8);
    // SAFETY: as above.
    let v = text(unsafe { x::mqs_version_string() });
    assert!(v.starts_with("mqs message-queue DLL"), "{v}");
    assert!(v.contains("Open MPI"), "{v}");
    for e in DllError::ALL {
        // SAFETY: as above.
        let s = text(unsafe { x::mqs_dll_error_string(e.code()) });
        assert_eq!(s, e.text().to_string_lossy());
    }
    // SAFETY: as above.
    let unknown = text(unsafe { x::mqs_dll_error_string(12345) });
    assert_eq!(unknown, "mqs DLL: unknown error code");
    // SAFETY: as above.
    let (first, again) = unsafe {
        (
            x::mqs_dll_error_string(12345),
            x::mqs_dll_error_string(12345),
        )
    };
    assert_eq!(first, again, "static, not re-allocated");
}

#[test]
fn image_checks_say_what_is_missing() {
    let base = snapshot();

    // Not Open MPI at all: neither its types nor its communicator table.
    let mut s = base.clone();
    s.symbols.remove("ompi_mpi_communicators");
    s.types.clear();
    let mut image = Image::new(s.fake_image());
    let (rc, msg) = host::setup_image(&mut image);
    assert_eq!(rc, DllError::NotOpenMpi.code());
    let msg = msg.unwrap_or_default();
    assert_eq!(msg.matches("%s").count(), 1, "{msg}");
    assert!(msg.contains("ompi_mpi_communicators"), "{msg}");
    host::destroy_image(&mut image);

    // Open MPI's types without its table: the image passes (the table is
    // looked up per process), the process says what is missing.
    let mut s = base.clone();
    s.symbols.remove("ompi_mpi_communicators");
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    let mut msg: *mut c_char = std::ptr::null_mut();
    // SAFETY: live handles and a writable out-pointer.
    let rc = unsafe {
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        x::mqs_process_has_queues(ph, &mut msg)
    };
    assert_eq!(rc, DllError::MissingSymbol.code());
    assert!(text(msg).contains("ompi_mpi_communicators"));
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);

    // A field missing: an unsupported version.
    let mut s = base.clone();
    if let Some(t) = s.types.get_mut("ompi_communicator_t") {
        t.fields.remove("c_contextid");
    }
    let mut image = Image::new(s.fake_image());
    let (rc, msg) = host::setup_image(&mut image);
    assert_eq!(rc, DllError::MissingField.code());
    let msg = msg.unwrap_or_default();
    assert!(
        msg.contains("c_contextid") && msg.contains("ompi_communicator_t"),
        "{msg}"
    );
    host::destroy_image(&mut image);

    // Asked to stay silent.
    let mut s = base.clone();
    s.symbols.insert("MPIR_Ignore_queues".into(), 0x1000);
    let mut image = Image::new(s.fake_image());
    let (rc, msg) = host::setup_image(&mut image);
    assert_eq!(rc, DllError::SilentFailure.code());
    assert_eq!(msg, None);
    host::destroy_image(&mut image);
}

#[test]
fn misuse_gets_error_codes_not_crashes() {
    let s = snapshot();
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    let mut comm = abi::mqs_communicator::default();
    let mut op = abi::mqs_pending_operation::default();
    let mut ranks = [0i32; 2];
    // SAFETY: live handles, writable buffers (and deliberate NULLs).
    unsafe {
        // Before mqs_setup_process.
        assert_eq!(
            x::mqs_update_communicator_list(ph),
            DllError::NoProcessInfo.code()
        );
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        // Iterators used before being set up.
        assert_eq!(
            x::mqs_get_communicator(ph, &mut comm),
            DllError::NoCurrentCommunicator.code()
        );
        assert_eq!(
            x::mqs_next_communicator(ph),
            DllError::NoCurrentCommunicator.code()
        );
        // Skipping has_queues and update: the DLL catches up.
        assert_eq!(x::mqs_setup_communicator_iterator(ph), 0);
        assert_eq!(
            x::mqs_next_operation(ph, &mut op),
            DllError::NoOperationIterator.code()
        );
        assert_eq!(
            x::mqs_setup_operation_iterator(ph, 7),
            DllError::BadOpClass.code()
        );
        assert_eq!(
            x::mqs_get_communicator(ph, std::ptr::null_mut()),
            DllError::NullArgument.code()
        );
        assert_eq!(
            x::mqs_get_comm_group(ph, std::ptr::null_mut()),
            DllError::NullArgument.code()
        );
        assert_eq!(
            x::mqs_next_operation(ph, std::ptr::null_mut()),
            DllError::NullArgument.code()
        );
        assert_eq!(x::mqs_get_communicator(ph, &mut comm), 0);
        assert_eq!(x::mqs_get_comm_group(ph, ranks.as_mut_ptr()), 0);
        assert_eq!(ranks, [0, 1]);
        // Walk to the end, then once more: an error, not a NULL dereference.
        let mut n = 1;
        while x::mqs_next_communicator(ph) == 0 {
            n += 1;
        }
        assert_eq!(n, 5);
        assert_eq!(
            x::mqs_next_communicator(ph),
            DllError::NoCurrentCommunicator.code()
        );
        assert_eq!(
            x::mqs_get_communicator(ph, &mut comm),
            DllError::NoCurrentCommunicator.code()
        );
        assert_eq!(
            x::mqs_setup_operation_iterator(ph, 0),
            DllError::NoCurrentCommunicator.code()
        );
        // NULL handles.
        assert_eq!(
            x::mqs_update_communicator_list(std::ptr::null_mut()),
            DllError::NullArgument.code()
        );
        assert_eq!(
            x::mqs_setup_image(std::ptr::null_mut(), &host::IMAGE_CB),
            DllError::NullArgument.code()
        );
        let mut msg: *mut c_char = std::ptr::null_mut();
        assert_eq!(x::mqs_process_has_queues(ph, &mut msg), 0);
        assert!(msg.is_null());
        assert_eq!(x::mqs_process_has_queues(ph, std::ptr::null_mut()), 0);
        // Destroying NULL or twice is harmless.
        x::mqs_destroy_process_info(std::ptr::null_mut());
        x::mqs_destroy_image_info(std::ptr::null_mut());
    }
    host::destroy_process(&mut process);
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}

#[test]
fn the_communicator_list_is_rebuilt_only_when_the_table_changes() {
    let s = snapshot();
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    // SAFETY: live handles.
    unsafe {
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        assert_eq!(x::mqs_process_has_queues(ph, std::ptr::null_mut()), 0);
        let before = process.fetches.get();
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        let first = process.fetches.get() - before;
        let before = process.fetches.get();
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        let second = process.fetches.get() - before;
        // The second update reads the table header and slots only.
        assert!(
            second <= 2 && second < first,
            "{first} then {second} fetches"
        );
    }
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}

#[test]
fn without_ob1_debug_info_receives_come_from_the_free_lists() {
    let mut s = snapshot();
    // What an Open MPI release build has: no DWARF for ob1's private types.
    s.types
        .retain(|name, _| !name.starts_with("mca_pml_ob1_") && name != "mca_btl_base_segment_t");
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let d = host::dump(&mut process);
    assert_eq!(d.process_rc, 0);
    let dup = d.comm("mqs-dup").map(|c| c.queues.clone());
    let Some([sends, recvs, unexpected]) = dup else {
        unreachable!("no mqs-dup in {d:?}");
    };
    assert_eq!(sends, Queue::Ops(vec![]));
    assert_eq!(unexpected, Queue::NoInformation);
    let tags: Vec<_> = recvs.ops().iter().map(|o| o.desired_tag).collect();
    // Still in posting order: the requests carry their sequence numbers.
    assert_eq!(
        tags,
        [Some(7), Some(1_000_000), Some(1_000_001), Some(1_000_002)]
    );
    for op in recvs.ops() {
        assert_eq!(
            op.extra_text.last(),
            Some("order: by posting sequence (no ob1 queue info)")
        );
    }
    let world = d
        .comm("MPI_COMM_WORLD")
        .map(|c| c.queues[1].ops().to_vec())
        .unwrap_or_default();
    assert_eq!(world.len(), 1);
    assert_eq!(
        (world[0].desired_local_rank, world[0].desired_tag),
        (-1, Some(8))
    );
    let lines = DPRINTS.lock().map(|d| d.join("\n")).unwrap_or_default();
    assert!(
        lines.contains("ob1's queues have no debug information"),
        "{lines}"
    );
    host::destroy_image(&mut image);
}

#[test]
fn any_source_and_any_tag_are_minus_one_and_tag_wild() {
    let s = snapshot();
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    // SAFETY: live handles and writable structs.
    unsafe {
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        assert_eq!(x::mqs_setup_communicator_iterator(ph), 0);
        let mut seen_any_source = false;
        let mut seen_any_tag = false;
        loop {
            assert_eq!(x::mqs_setup_operation_iterator(ph, 1) & !2, 0);
            let mut op = abi::mqs_pending_operation::default();
            while x::mqs_next_operation(ph, &mut op) == 0 {
                assert_ne!(op.desired_local_rank, 4_294_967_295);
                seen_any_source |= op.desired_local_rank == -1 && op.desired_global_rank == -1;
                seen_any_tag |= op.tag_wild != 0;
                op = abi::mqs_pending_operation::default();
            }
            if x::mqs_next_communicator(ph) != 0 {
                break;
            }
        }
        assert!(seen_any_source && seen_any_tag);
    }
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}

/// Target memory the test can change between calls.
#[derive(Clone)]
struct Shared(std::rc::Rc<std::cell::RefCell<mqs_dll::testing::FakeProcess>>);

impl mqs_dll::access::ProcessAccess for Shared {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.borrow().fetch(addr, buf)
    }
    fn target_to_host(&self, input: &[u8], output: &mut [u8]) {
        self.0.borrow().target_to_host(input, output)
    }
}

fn comm_names(ph: *mut abi::mqs_process) -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: a live handle and writable structs.
    unsafe {
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        let mut rc = x::mqs_setup_communicator_iterator(ph);
        while rc == 0 {
            let mut c = abi::mqs_communicator::default();
            assert_eq!(x::mqs_get_communicator(ph, &mut c), 0);
            names.push(mqs_abi::decode_c_chars(&c.name));
            rc = x::mqs_next_communicator(ph);
        }
    }
    names
}

#[test]
fn a_freed_communicator_disappears_at_the_next_update() {
    use mqs_dll::access::ProcessAccess;
    let s = snapshot();
    let memory = Shared(std::rc::Rc::new(std::cell::RefCell::new(s.fake_process())));
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(memory.clone()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    // SAFETY: a live handle and a static table.
    assert_eq!(unsafe { x::mqs_setup_process(ph, &host::PROCESS_CB) }, 0);
    let before = comm_names(ph);
    assert!(before.iter().any(|n| n == "mqs-split"), "{before:?}");

    // MPI_Comm_free: the table slot of mqs-split (context id 4) becomes NULL.
    let table = s
        .symbols
        .get("ompi_mpi_communicators")
        .copied()
        .unwrap_or(0);
    let addr_off = s.types["opal_pointer_array_t"].fields["addr"];
    let mut raw = [0u8; 8];
    assert!(memory.fetch(table + addr_off, &mut raw));
    let slots = u64::from_le_bytes(raw);
    memory.0.borrow_mut().write_u64(slots + 4 * 8, 0);

    let after = comm_names(ph);
    let expected: Vec<String> = before
        .iter()
        .filter(|n| *n != "mqs-split")
        .cloned()
        .collect();
    assert_eq!(after, expected);
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}

/// Debuggers that do not clear their info slots (padb keeps its image and
/// process on the stack, uninitialised): the DLL never asks for a slot it
/// has not written, and what a slot holds is only used if it is the DLL's
/// own info for that very object. Here image B's slot holds image A's info
/// (a copied struct, say) and the process slot points at garbage.
#[test]
fn info_slots_the_dll_never_wrote_are_never_read() {
    static GARBAGE: [u64; 8] = [0xa0a0_a0a0_a0a0_a0a0; 8];
    let s = snapshot();
    let mut a = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut a).0, 0);
    assert_eq!(a.slot.gets_before_put.get(), 0, "image A's slot read early");
    let a_info = a.info.get();

    let mut b = Image::new(s.fake_image());
    b.info.set(a_info);
    assert_eq!(host::setup_image(&mut b).0, 0);
    assert_eq!(b.slot.gets_before_put.get(), 0, "image B's slot read early");
    assert_eq!(b.slot.puts.get(), 1, "image B got no info of its own");
    assert_ne!(b.info.get(), a_info);

    // Both images still work, each with its own state.
    for image in [&mut a, &mut b] {
        let mut process = Process::new(Box::new(s.fake_process()), image, s.type_sizes, 0);
        process.info.set(GARBAGE.as_ptr().cast_mut().cast());
        let d = host::dump(&mut process);
        assert_eq!(
            process.slot.gets_before_put.get(),
            0,
            "process slot read early"
        );
        assert_eq!((d.process_rc, d.update_rc), (0, 0));
        assert_eq!(d.comms.len(), 5);
    }
    // The garbage is not ours: destroying it is a no-op, not a free.
    // SAFETY: a pointer the DLL must refuse, not free.
    unsafe { x::mqs_destroy_process_info(GARBAGE.as_ptr().cast_mut().cast()) };
    host::destroy_image(&mut a);
    host::destroy_image(&mut b);
}

/// An empty queue: `mqs_setup_operation_iterator` answers mqs_ok and
/// `mqs_next_operation` ends the list, as Open MPI's and MPICH's DLLs do
/// (padb counts anything but mqs_ok or mqs_no_information from a setup
/// call as a failure).
#[test]
fn an_empty_queue_is_set_up_with_mqs_ok() {
    let s = snapshot();
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    let mut empty = 0;
    // SAFETY: live handles and writable structs.
    unsafe {
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        assert_eq!(x::mqs_setup_communicator_iterator(ph), 0);
        loop {
            for class in 0..3 {
                let rc = x::mqs_setup_operation_iterator(ph, class);
                assert_eq!(rc, 0, "setup of queue {class}");
                let mut op = abi::mqs_pending_operation::default();
                let mut n = 0;
                while x::mqs_next_operation(ph, &mut op) == 0 {
                    n += 1;
                }
                assert_eq!(x::mqs_next_operation(ph, &mut op), 2, "stays ended");
                if n == 0 {
                    empty += 1;
                }
            }
            if x::mqs_next_communicator(ph) != 0 {
                break;
            }
        }
    }
    assert!(empty >= 5, "only {empty} empty queues seen");
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}

/// The raw operation as a debugger reads it: MPI_ANY_TAG is written as
/// desired_tag = -1 with tag_wild set (padb prints desired_tag as it is),
/// MPI_ANY_SOURCE as -1 in both desired ranks.
#[test]
fn wildcards_are_written_as_minus_one() {
    let s = snapshot();
    let mut image = Image::new(s.fake_image());
    assert_eq!(host::setup_image(&mut image).0, 0);
    let mut process = Process::new(Box::new(s.fake_process()), &mut image, s.type_sizes, 0);
    let ph: *mut abi::mqs_process = (&mut *process as *mut Process).cast();
    let (mut any_tag, mut any_source) = (0, 0);
    // SAFETY: live handles and writable structs.
    unsafe {
        assert_eq!(x::mqs_setup_process(ph, &host::PROCESS_CB), 0);
        assert_eq!(x::mqs_update_communicator_list(ph), 0);
        assert_eq!(x::mqs_setup_communicator_iterator(ph), 0);
        loop {
            assert_eq!(x::mqs_setup_operation_iterator(ph, 1), 0);
            // A debugger's own leftovers in the struct must not show through.
            let mut op = abi::mqs_pending_operation {
                desired_tag: 12345,
                ..Default::default()
            };
            while x::mqs_next_operation(ph, &mut op) == 0 {
                if op.tag_wild != 0 {
                    assert_eq!(op.desired_tag, -1, "ANY_TAG");
                    any_tag += 1;
                } else {
                    assert!(op.desired_tag >= 0, "{}", op.desired_tag);
                }
                if op.desired_local_rank == -1 {
                    assert_eq!(op.desired_global_rank, -1, "ANY_SOURCE");
                    any_source += 1;
                }
                op.desired_tag = 12345;
            }
            if x::mqs_next_communicator(ph) != 0 {
                break;
            }
        }
    }
    // queues.c: one ANY_TAG receive (mqs-split), two ANY_SOURCE ones.
    assert_eq!((any_tag, any_source), (1, 2));
    host::destroy_process(&mut process);
    host::destroy_image(&mut image);
}
