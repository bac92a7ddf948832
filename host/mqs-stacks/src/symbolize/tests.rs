//! Naming the frames of the test program's recorded stacks (src/testing):
//! functions from the symbol tables, the line of each call from DWARF, the
//! object each frame is in, and an address in no object left unnamed.

use std::sync::Arc;

use framehop::FrameAddress;
use mqs_core::model::Frame;
use mqs_core::symbols::{LineTables, ObjectSymbols};

use super::symbolize;
use crate::testing::{call_line, recorded, Level};
use crate::{RawStack, RawStacks};

/// Each thread's frames of a replay of `level`, named.
fn named(level: Level) -> Vec<Vec<Frame>> {
    let replay = recorded(level).replay();
    let raw = crate::unwind(&replay.target, &replay.index).unwrap();
    let objects: Vec<Arc<ObjectSymbols>> =
        replay.index.objects().into_iter().map(|(o, _)| o).collect();
    let mut lines = LineTables::new();
    let list = symbolize(&raw, &replay.index, &objects, &mut lines);
    list.list.into_iter().map(|t| t.frames).collect()
}

fn function(frame: &Frame) -> Option<&str> {
    frame.function.as_deref()
}

#[test]
fn frames_are_named_with_the_line_of_their_call() {
    for level in Level::ALL {
        let threads = named(level);
        // (function, the call it is in) for the program's frames.
        let calls = [
            ("inner", "pause"),
            ("middle", "inner"),
            ("outer", "middle"),
            ("main", "outer"),
            ("MPIR_Recv_impl", "read"),
            ("MPI_Recv", "MPIR_Recv_impl"),
            ("waiter", "MPI_Recv"),
        ];
        for (caller, callee) in calls {
            let frame = threads
                .iter()
                .flatten()
                .find(|f| function(f) == Some(caller))
                .unwrap_or_else(|| panic!("{level:?}: no frame of {caller}"));
            let what = format!("{level:?} {frame:?}");
            assert!(!frame.inlined, "{what}");
            assert!(
                frame.file.as_deref().unwrap().ends_with("stacks.c"),
                "{what}"
            );
            assert_eq!(frame.line, Some(call_line(callee)), "{what}");
            assert!(
                frame.object.as_deref().unwrap().ends_with(level.name()),
                "{what}"
            );
            // Past the function's start: a return address into its body.
            assert!(frame.offset.is_some_and(|o| o > 0), "{what}");
        }
        // The C library's frames are named from its symbols, without lines
        // (no DWARF of it is recorded).
        for (thread, top) in threads.iter().zip(["pause", "read"]) {
            let frame = &thread[0];
            assert_eq!(function(frame), Some(top), "{level:?}");
            assert!(frame.object.as_deref().unwrap().ends_with("libc.so.6"));
            assert_eq!((frame.file.as_deref(), frame.line), (None, None));
        }
    }
}

#[test]
fn mpi_frames_keep_what_their_arguments_named() {
    let threads = named(Level::O2);
    let frames = threads.iter().flatten();
    let with_comm: Vec<&str> = frames
        .filter(|f| f.comm.is_some())
        .filter_map(function)
        .collect();
    assert_eq!(with_comm, ["MPIR_Recv_impl", "MPI_Recv"]);
    let with_call: Vec<&str> = threads
        .iter()
        .flatten()
        .filter(|f| f.call.is_some())
        .filter_map(function)
        .collect();
    assert_eq!(with_call, ["MPI_Recv"]);
}

#[test]
fn an_address_in_no_object_is_left_unnamed() {
    let replay = recorded(Level::O1).replay();
    let raw = RawStacks {
        threads: vec![RawStack {
            tid: 1,
            name: None,
            frames: vec![FrameAddress::from_instruction_pointer(0x10)],
            arguments: Vec::new(),
            truncated: Some("cut".into()),
        }],
        elapsed_ms: 0.0,
    };
    let list = symbolize(&raw, &replay.index, &[], &mut LineTables::new());
    let frame = &list.list[0].frames[0];
    assert_eq!(frame.address, 0x10);
    assert_eq!(
        (&frame.function, &frame.object, &frame.file, frame.line),
        (&None, &None, &None, None)
    );
    assert_eq!(list.list[0].truncated.as_deref(), Some("cut"));
}
