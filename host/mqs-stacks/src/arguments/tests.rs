//! Arguments evaluated at the frames of the test program's recorded
//! stacks (src/testing): where its DWARF places each parameter at -O0 (the
//! stack, from the frame base), at -O1 and -O2 (registers, callee-saved
//! ones recovered through the CFI of the frames inside, the stack for the
//! seventh argument, nothing once a value is dead), and what `unwind`
//! makes of the stand-in MPI frames: the communicator and the call.

use gimli::constants::{DW_OP_GNU_entry_value, DW_OP_entry_value, DW_OP_fbreg, DW_OP_reg0};
use mqs_core::model::{CallArgs, FrameComm};

use super::{ParameterValue, CALLEE_SAVED, DWARF_REGISTERS};
use crate::testing::{recorded, Level, Replay, Seen, SeenThread, SOURCE};
use crate::FrameArguments;

/// The number `#define NAME` gives in stacks.c (`0x1e4`, `((int)0x84000003u)`,
/// `((void *)1)`).
fn defined(name: &str) -> u64 {
    let value = SOURCE
        .lines()
        .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("stacks.c defines no {name}"));
    if let Some(at) = value.find("0x") {
        let digits: String = value[at + 2..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        return u64::from_str_radix(&digits, 16).unwrap();
    }
    let digits: String = value
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

fn replay(level: Level) -> (Replay, Seen) {
    let replay = recorded(level).replay();
    let seen = replay.look();
    (replay, seen)
}

/// The parameter `name` of `function`'s frame, which DWARF must place.
fn parameter<'a>(thread: &'a SeenThread, function: &str, name: &str) -> &'a ParameterValue {
    thread
        .parameter(function, name)
        .unwrap_or_else(|| panic!("{function}'s {name} has no location here"))
}

/// The register a `DW_OP_regN` location names, if it is one.
fn register_of(p: &ParameterValue) -> Option<usize> {
    let op = p.op?.checked_sub(DW_OP_reg0.0)?;
    (op < 32).then_some(usize::from(op))
}

/// The thread's own value of DWARF register `reg`, as it was stopped.
fn thread_register(thread: &SeenThread, reg: usize) -> u64 {
    thread.registers.get(DWARF_REGISTERS[reg]).unwrap()
}

/// The communicator the program's second thread receives on.
fn communicator(replay: &Replay) -> FrameComm {
    let direct = replay.index.find_symbol("MPIR_Comm_direct").unwrap();
    let size = replay.index.find_type("MPIR_Comm").unwrap().size.unwrap();
    FrameComm {
        unique_id: defined("RECV_CONTEXT_ID"),
        address: direct + defined("COMM_INDEX") * size,
    }
}

#[test]
fn unoptimised_arguments_are_read_from_the_stack_at_the_frame_base() {
    let (replay, seen) = replay(Level::O0);
    let main = seen.thread_of("main");
    let mpi = seen.thread_of("MPI_Recv");
    let comm_ptr = communicator(&replay).address;
    let expected: [(&SeenThread, &str, &str, u64); 15] = [
        (main, "inner", "comm", 42),
        (main, "inner", "tag", 7),
        (main, "middle", "depth", 5),
        (main, "middle", "spare", 11),
        (main, "outer", "level", 3),
        (mpi, "MPI_Recv", "count", 4),
        (mpi, "MPI_Recv", "datatype", defined("MPI_INT")),
        (mpi, "MPI_Recv", "source", 3),
        (mpi, "MPI_Recv", "tag", 99),
        (mpi, "MPI_Recv", "comm", defined("COMM_HANDLE")),
        (mpi, "MPI_Recv", "status", defined("MPI_STATUS_IGNORE")),
        (mpi, "MPIR_Recv_impl", "count", 4),
        (mpi, "MPIR_Recv_impl", "source", 3),
        (mpi, "MPIR_Recv_impl", "tag", 99),
        (mpi, "MPIR_Recv_impl", "comm_ptr", comm_ptr),
    ];
    for (thread, function, name, value) in expected {
        let p = parameter(thread, function, name);
        assert_eq!(p.op, Some(DW_OP_fbreg.0), "{function}'s {name}: {p:?}");
        assert_eq!(p.held(), Some(value), "{function}'s {name}: {p:?}");
    }
}

#[test]
fn optimised_arguments_are_read_from_the_registers_that_hold_them() {
    for level in [Level::O1, Level::O2] {
        let (_, seen) = replay(level);
        let main = seen.thread_of("main");
        // Nothing between inner and the stop touches the registers that
        // hold its arguments: their values are the thread's own.
        for (name, value) in [("comm", 42), ("tag", 7)] {
            let p = parameter(main, "inner", name);
            let reg = register_of(p).unwrap_or_else(|| panic!("{level:?} {p:?}"));
            assert_eq!(p.held(), Some(value), "{level:?} inner's {name}");
            assert_eq!(thread_register(main, reg) as u32, value as u32);
        }
    }
}

#[test]
fn callee_saved_registers_are_recovered_through_the_frames_inside() {
    for level in [Level::O1, Level::O2] {
        let (_, seen) = replay(level);
        let main = seen.thread_of("main");
        let mpi = seen.thread_of("MPI_Recv");
        // Whether a frame inside reused the register, so that the value
        // can only have come from where that frame saved it.
        let expected: [(&SeenThread, &str, &str, u64, bool); 6] = [
            (main, "middle", "depth", 5, true),
            (main, "outer", "level", 3, true),
            (mpi, "MPI_Recv", "count", 4, true),
            (mpi, "MPI_Recv", "tag", 99, true),
            (mpi, "MPI_Recv", "comm", defined("COMM_HANDLE"), true),
            (mpi, "MPIR_Recv_impl", "tag", 99, false),
        ];
        for (thread, function, name, value, saved_inside) in expected {
            let p = parameter(thread, function, name);
            let what = format!("{level:?} {function}'s {name}: {p:?}");
            let reg = register_of(p).unwrap_or_else(|| panic!("{what}"));
            assert!(CALLEE_SAVED.contains(&reg), "{what}");
            assert_eq!(p.held(), Some(value), "{what}");
            let own = thread_register(thread, reg) as u32;
            assert_eq!(
                own != value as u32,
                saved_inside,
                "{what}: the thread has {own:#x}"
            );
        }
    }
}

#[test]
fn a_stack_passed_argument_is_read_at_the_frame_base_when_optimised() {
    for level in [Level::O1, Level::O2] {
        let (_, seen) = replay(level);
        let p = parameter(seen.thread_of("MPI_Recv"), "MPI_Recv", "status");
        assert_eq!(p.op, Some(DW_OP_fbreg.0), "{level:?} {p:?}");
        assert_eq!(p.held(), Some(defined("MPI_STATUS_IGNORE")), "{level:?}");
    }
}

#[test]
fn an_argument_optimised_out_has_no_value() {
    for level in [Level::O1, Level::O2] {
        let (_, seen) = replay(level);
        let main = seen.thread_of("main");
        let mpi = seen.thread_of("MPI_Recv");
        for (thread, function, name) in [
            (main, "middle", "spare"),
            (mpi, "MPI_Recv", "datatype"),
            (mpi, "MPIR_Recv_impl", "count"),
        ] {
            // DWARF says only what the value was on entry.
            let p = parameter(thread, function, name);
            let entry = [DW_OP_entry_value.0, DW_OP_GNU_entry_value.0];
            assert!(
                p.op.is_some_and(|op| entry.contains(&op)),
                "{level:?} {p:?}"
            );
            assert_eq!(p.value, None, "{level:?} {function}'s {name}");
        }
    }
}

#[test]
fn mpi_frames_name_their_communicator_and_the_call() {
    for level in Level::ALL {
        let (replay, seen) = replay(level);
        let comm = communicator(&replay);
        let mpi = seen.thread_of("MPI_Recv");
        let mut expected = vec![FrameArguments::default(); mpi.frames.len()];
        // MPIR_Recv_impl's comm_ptr points at it; MPI_Recv's handle
        // names it in MPIR_Comm_direct.
        expected[mpi.frame("MPIR_Recv_impl")].comm = Some(comm);
        expected[mpi.frame("MPI_Recv")] = FrameArguments {
            comm: Some(comm),
            call: Some(CallArgs {
                mpi: "mpich".into(),
                ints: vec![
                    ("source".into(), 3),
                    ("tag".into(), 99),
                    ("count".into(), 4),
                ],
                requests: Vec::new(),
            }),
        };
        assert_eq!(mpi.arguments, expected, "{level:?}");
        let main = seen.thread_of("main");
        let nothing = vec![FrameArguments::default(); main.frames.len()];
        assert_eq!(main.arguments, nothing, "{level:?}: no MPI frames");
    }
}
