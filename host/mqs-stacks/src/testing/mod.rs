//! What the crate's tests share: a real process to unwind,
//! `tests/data/stacks.c`, whose calls and arguments are known; recordings
//! of it stopped (`tests/data/stacks-O0.rec`, `-O1`, `-O2`), replayed
//! without ptrace on any machine (`recording`, with the system libraries
//! cut down by `trim`); and recording it live (`live`), which the live
//! tests compare with the committed recordings.

mod live;
mod recording;
mod trim;

use std::path::PathBuf;
use std::sync::Arc;

use mqs_core::interface::{Registers, Target};
use mqs_core::symbols::SymbolIndex;

use crate::arguments::{parameter_values, ParameterValue};
use crate::FrameArguments;
pub(crate) use live::record;
pub(crate) use recording::{Recording, Replay};

/// The program the tests unwind.
pub(crate) const SOURCE: &str = include_str!("../../tests/data/stacks.c");

/// Every parameter of the program's functions.
pub(crate) const PARAMETERS: [&str; 11] = [
    "comm", "tag", "depth", "spare", "level", "buf", "count", "datatype", "source", "status",
    "comm_ptr",
];

/// How the program is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    O0,
    O1,
    O2,
}

impl Level {
    pub(crate) const ALL: [Level; 3] = [Level::O0, Level::O1, Level::O2];

    pub(crate) fn flag(self) -> &'static str {
        match self {
            Level::O0 => "-O0",
            Level::O1 => "-O1",
            Level::O2 => "-O2",
        }
    }

    /// The executable's name, and its recording's stem.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::O0 => "stacks-O0",
            Level::O1 => "stacks-O1",
            Level::O2 => "stacks-O2",
        }
    }

    fn recording_path(self) -> PathBuf {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        PathBuf::from(data).join(format!("{}.rec", self.name()))
    }
}

/// The committed recording of the program at `level`.
pub(crate) fn recorded(level: Level) -> Recording {
    let path = level.recording_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; `cargo test -p mqs-stacks -- --ignored record_test_data` makes it",
            path.display()
        )
    });
    Recording::parse(&text)
}

/// The line of `stacks.c` marked `call:NAME`.
pub(crate) fn call_line(name: &str) -> u32 {
    let mark = format!("/* call:{name} */");
    let at = SOURCE.lines().position(|l| l.contains(&mark));
    at.map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("stacks.c marks no {mark}"))
}

/// One frame as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeenFrame {
    pub(crate) address: u64,
    /// The address its function and CFI are looked up at.
    pub(crate) lookup: u64,
    pub(crate) function: Option<String>,
}

/// What the code under test made of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeenThread {
    pub(crate) tid: i32,
    /// Its registers as it was stopped.
    pub(crate) registers: Registers,
    pub(crate) frames: Vec<SeenFrame>,
    pub(crate) truncated: Option<String>,
    /// What `unwind` read of each frame's arguments.
    pub(crate) arguments: Vec<FrameArguments>,
    /// Each frame's parameters (of [`PARAMETERS`]) where its DWARF places
    /// them.
    pub(crate) parameters: Vec<Vec<ParameterValue>>,
}

impl SeenThread {
    /// The functions of its frames, innermost first.
    pub(crate) fn functions(&self) -> Vec<Option<&str>> {
        self.frames.iter().map(|f| f.function.as_deref()).collect()
    }

    /// The frame of `function`.
    pub(crate) fn frame(&self, function: &str) -> usize {
        let found = self.functions().iter().position(|f| *f == Some(function));
        found.unwrap_or_else(|| panic!("no frame of {function}: {:?}", self.functions()))
    }

    /// The parameter `name` of the frame of `function`, where DWARF has it.
    pub(crate) fn parameter(&self, function: &str, name: &str) -> Option<&ParameterValue> {
        self.parameters[self.frame(function)]
            .iter()
            .find(|p| p.name == name)
    }
}

/// What the code under test made of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) threads: Vec<SeenThread>,
}

impl Seen {
    /// The thread whose stack holds `function`.
    pub(crate) fn thread_of(&self, function: &str) -> &SeenThread {
        let found = self
            .threads
            .iter()
            .find(|t| t.functions().contains(&Some(function)));
        found.unwrap_or_else(|| panic!("no thread is in {function}: {self:?}"))
    }
}

/// Walks every thread of `target` (stopped) with `unwind`, names the
/// frames, and evaluates every parameter of the program's functions at
/// each of their frames (the system libraries' are left alone: whether
/// their DWARF is installed is the machine's business).
pub(crate) fn look(target: &dyn Target, index: &SymbolIndex) -> Seen {
    let stacks = crate::unwind(target, index).expect("threads");
    let threads = target.threads().expect("threads");
    let (program, _) = index.objects().into_iter().next().expect("the executable");
    let seen = stacks
        .threads
        .into_iter()
        .zip(threads)
        .map(|(stack, thread)| {
            assert_eq!(stack.tid, thread.tid);
            let registers = thread.registers.expect("registers");
            let mut parameters =
                parameter_values(target, index, &registers, &stack.frames, &PARAMETERS);
            for (frame, values) in stack.frames.iter().zip(&mut parameters) {
                let object = index.object_at(frame.address_for_lookup());
                if !object.is_some_and(|(o, _)| Arc::ptr_eq(&o, &program)) {
                    values.clear();
                }
            }
            SeenThread {
                tid: thread.tid,
                registers,
                parameters,
                frames: stack
                    .frames
                    .iter()
                    .map(|f| SeenFrame {
                        address: f.address(),
                        lookup: f.address_for_lookup(),
                        function: index
                            .function_at(f.address_for_lookup())
                            .map(|(name, _)| name),
                    })
                    .collect(),
                truncated: stack.truncated,
                arguments: stack.arguments,
            }
        })
        .collect();
    Seen { threads: seen }
}

impl Replay {
    pub(crate) fn look(&self) -> Seen {
        look(&self.target, &self.index)
    }
}

/// Not a test: makes the committed recordings again, from the program
/// compiled and run here (cc and ptrace needed). Each is checked to replay
/// exactly as the live process walked before it is written.
#[test]
#[ignore = "writes tests/data: run it to record the test program again"]
fn record_test_data() {
    for level in Level::ALL {
        let (live, recording) = record(level);
        assert_eq!(recording.replay().look(), live, "{level:?}");
        std::fs::write(level.recording_path(), recording.to_text()).unwrap();
    }
}
