//! Unwinding the test program's threads (src/testing) with the CFI of its
//! objects: from the committed recordings, without ptrace, to the bottom
//! of each stack; a stack that cannot be read, cut and said so; and the
//! program run here, stopped and walked live, against its recording.

use mqs_core::interface::PAGE_SIZE;

use crate::testing::{record, recorded, Level, Seen};

/// The main thread, innermost first: the program's calls, then the C
/// library's start of a program.
const MAIN: [&str; 8] = [
    "pause",
    "inner",
    "middle",
    "outer",
    "main",
    "__libc_start_call_main",
    "__libc_start_main",
    "_start",
];
/// The second thread: the program's calls, then the C library's start of
/// a thread.
const RECEIVER: [&str; 6] = [
    "read",
    "MPIR_Recv_impl",
    "MPI_Recv",
    "waiter",
    "start_thread",
    "clone3",
];

#[test]
fn recorded_stacks_unwind_through_every_frame_to_the_bottom() {
    for level in Level::ALL {
        let recording = recorded(level);
        let seen = recording.replay().look();
        let functions: Vec<Vec<Option<&str>>> =
            seen.threads.iter().map(|t| t.functions()).collect();
        let expected = [MAIN.map(Some).to_vec(), RECEIVER.map(Some).to_vec()];
        assert_eq!(functions, expected, "{level:?}");
        for (thread, live) in seen.threads.iter().zip(&recording.threads) {
            // The CFI ends each stack (its outermost frame has no caller):
            // the walk was not cut.
            assert_eq!(thread.truncated, None, "{level:?}");
            // Frame for frame where the live walk was.
            let addresses: Vec<u64> = thread.frames.iter().map(|f| f.address).collect();
            let live: Vec<u64> = live.frames.iter().map(|(a, _)| *a).collect();
            assert_eq!(addresses, live, "{level:?}");
        }
    }
}

#[test]
fn a_stack_that_cannot_be_read_is_cut_and_says_why() {
    let recording = recorded(Level::O1);
    let mut replay = recording.replay();
    // Every recorded page of the main thread's stack, gone.
    let sp = recording.threads[0].registers.sp();
    replay
        .target
        .pages
        .retain(|page, _| page.abs_diff(sp / PAGE_SIZE) > 4);
    let seen = replay.look();
    let main = &seen.threads[0];
    // The registers give the innermost frame; its caller is on the stack.
    assert_eq!(main.functions(), [Some("pause")]);
    // It says where: the slot of pause's return address, above the stack
    // pointer.
    let why = main.truncated.as_deref().expect("a reason");
    let at = why
        .strip_prefix("Could not read stack memory at 0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| panic!("{why}"));
    assert!((sp..sp + 64).contains(&at), "{why}: sp {sp:#x}");
    // The other thread's stack is elsewhere, and whole.
    assert_eq!(seen.threads[1].functions(), RECEIVER.map(Some));
    assert_eq!(seen.threads[1].truncated, None);
}

#[test]
fn a_thread_without_registers_has_no_stack_and_says_why() {
    let mut replay = recorded(Level::O1).replay();
    replay.target.threads[1].registers = None;
    let raw = crate::unwind(&replay.target, &replay.index).unwrap();
    let thread = &raw.threads[1];
    assert_eq!((thread.frames.len(), thread.arguments.len()), (0, 0));
    assert_eq!(
        thread.truncated.as_deref(),
        Some("no registers: the thread was not stopped")
    );
    assert_eq!(raw.threads[0].frames.len(), MAIN.len());
}

/// What does not depend on where the process was loaded, nor on which C
/// library the machine has: per thread, the innermost function, the
/// program's frames with their parameters' values (pointers left out),
/// what MPI frames' arguments named (communicator ids, calls), and
/// whether the walk was cut.
fn portable(seen: &Seen) -> Vec<String> {
    let pointers = ["buf", "comm_ptr"];
    seen.threads
        .iter()
        .map(|t| {
            let mut out = format!("{:?} cut {:?}", t.frames[0].function, t.truncated);
            for (i, frame) in t.frames.iter().enumerate() {
                if t.parameters[i].is_empty() && t.arguments[i] == Default::default() {
                    continue;
                }
                out.push_str(&format!(" | {:?}", frame.function));
                for p in t.parameters[i]
                    .iter()
                    .filter(|p| !pointers.contains(&p.name.as_str()))
                {
                    out.push_str(&format!(" {}={:?}", p.name, p.held()));
                }
                let args = &t.arguments[i];
                let id = args.comm.as_ref().map(|c| c.unique_id);
                out.push_str(&format!(" comm {id:?} call {:?}", args.call));
            }
            out
        })
        .collect()
}

#[test]
fn a_live_process_unwinds_as_its_recordings() {
    for level in Level::ALL {
        let (live, recording) = record(level);
        // Made from what the walk read, the recording replays it exactly.
        assert_eq!(recording.replay().look(), live, "{level:?}");
        // And the committed one saw the same program.
        let committed = recorded(level).replay().look();
        assert_eq!(portable(&live), portable(&committed), "{level:?}");
        let main = live.thread_of("main").functions();
        assert_eq!(main[..5], MAIN.map(Some)[..5], "{level:?}");
        assert_eq!(main.last(), Some(&Some("_start")), "{level:?}");
    }
}
