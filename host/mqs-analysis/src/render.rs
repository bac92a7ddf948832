//! Turning a dump into text for people and JSON for programs.
//!
//! Both are written as they are produced ([`write_json`], [`write_text`]):
//! a dump of 200,000 operations is some 130 MB of pretty JSON, which is
//! never held in memory whole.

use std::fmt::Write;
use std::io;

use mqs_abi::{OpClass, OpStatus};

use mqs_core::model::{
    CommunicatorDump, Frame, JobDump, Operation, ProcessDump, Queue, Section, ThreadStack,
};

/// Pretty JSON, schema in docs/json.md.
pub fn json(job: &JobDump) -> String {
    let mut out = Vec::new();
    // Serialising plain owned data into memory cannot fail; fall back to a
    // JSON error object rather than panic if it ever did.
    match write_json(job, &mut out) {
        Ok(()) => String::from_utf8(out)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialise the dump: {e}\"}}")),
        Err(e) => format!("{{\"error\": \"cannot serialise the dump: {e}\"}}"),
    }
}

/// [`json`], written to `out` as it is produced (buffer `out`: serde_json
/// writes a few bytes at a time).
/// Any part of the model may be written so (benchmarks time the render
/// of one process's communicators).
pub fn write_json<T: serde::Serialize + ?Sized>(job: &T, out: impl io::Write) -> io::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(out, Pretty::default());
    job.serialize(&mut serializer).map_err(io::Error::from)
}

/// Newline, then the deepest indentation written in one piece.
const NEWLINE_INDENT: &[u8; 65] =
    b"\n                                                                ";

/// serde_json's pretty layout (two spaces a level), byte for byte, with
/// each line break and its indentation written at once: the stock
/// formatter writes two spaces at a time, ten times per line of an
/// operation, and that was a fifth of a large dump's time.
#[derive(Debug, Default)]
struct Pretty {
    level: usize,
    has_value: bool,
}

impl Pretty {
    fn newline<W: ?Sized + io::Write>(&self, w: &mut W, level: usize) -> io::Result<()> {
        let mut spaces = level * 2;
        let first = spaces.min(NEWLINE_INDENT.len() - 1);
        w.write_all(&NEWLINE_INDENT[..1 + first])?;
        spaces -= first;
        while spaces > 0 {
            let n = spaces.min(NEWLINE_INDENT.len() - 1);
            w.write_all(&NEWLINE_INDENT[1..1 + n])?;
            spaces -= n;
        }
        Ok(())
    }

    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w, self.level)?;
        }
        w.write_all(bracket)
    }

    fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline(w, self.level)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// The readable listing.
pub fn text(job: &JobDump) -> String {
    let mut out = String::new();
    text_into(&mut out, job);
    out
}

/// [`text`], written to `out` as it is produced (buffer `out`).
pub fn write_text(job: &JobDump, out: impl io::Write) -> io::Result<()> {
    let mut adapter = IoWriter {
        inner: out,
        error: None,
    };
    text_into(&mut adapter, job);
    match adapter.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// An `io::Write` seen as a `fmt::Write`, keeping the first error (after
/// which nothing more is written).
struct IoWriter<W: io::Write> {
    inner: W,
    error: Option<io::Error>,
}

impl<W: io::Write> Write for IoWriter<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.inner.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

fn text_into(out: &mut impl Write, job: &JobDump) {
    if let Some(launcher) = &job.launcher {
        let _ = writeln!(
            out,
            "Job of {} (pid {}): {} ranks dumped, {} failed\n",
            launcher.executable,
            launcher.pid,
            job.processes.len(),
            job.failures.len()
        );
    }
    for process in &job.processes {
        process_text(out, process);
    }
    for failure in &job.failures {
        let _ = writeln!(
            out,
            "Rank {} ({}): not dumped: {}",
            failure.rank,
            mqs_core::model::pid_on(failure.pid, &failure.host),
            failure.message
        );
    }
}

fn process_text(out: &mut impl Write, p: &ProcessDump) {
    let rank = if p.global_rank >= 0 {
        format!("rank {}", p.global_rank)
    } else {
        "rank unknown".into()
    };
    let rank = match &p.spawned {
        Some(s) => match &s.parent {
            Some(p) => format!(
                "{rank}; spawned: rank {} of job {}, by rank {} of {}",
                s.rank, s.job, p.rank, p.job
            ),
            None => format!("{rank}; spawned: rank {} of job {}", s.rank, s.job),
        },
        None => rank,
    };
    let host = p
        .host
        .as_ref()
        .map(|h| format!(" on {h}"))
        .unwrap_or_default();
    let _ = writeln!(out, "Process {} ({rank}){host}: {}", p.pid, p.executable);
    if let Some(held) = &p.held_by {
        let _ = writeln!(
            out,
            "  Held stopped by {held}: read as that debugger holds it, without tracing it"
        );
    } else if let Some(state) = p.os_state.as_ref().filter(|s| s.stopped_by_signal()) {
        let _ = writeln!(
            out,
            "  State: {} before mqs came, not by mqs: it stays stopped (kill -CONT {} resumes it)",
            state.words(),
            p.pid
        );
    } else if let Some(state) = p.os_state.as_ref().filter(|s| s.code == "D") {
        let _ = writeln!(out, "  State: {} when mqs came", state.words());
    }
    let _ = writeln!(
        out,
        "  DLL {} [{}, interface {}]",
        p.dll.path, p.dll.version, p.dll.compatibility
    );
    if let Some(chosen) = &p.dll.chosen {
        let _ = writeln!(out, "  DLL chosen: {chosen}");
    }
    if let Some(mpi) = &p.dll.mpi {
        let backend = p.dll.backend.as_deref().unwrap_or("?");
        let _ = writeln!(out, "  MPI: {mpi} (the DLL's {backend} backend)");
    }
    for line in &p.type_packs {
        let _ = writeln!(out, "  Types: {line}");
    }
    for line in &p.dll_output {
        let _ = writeln!(out, "  DLL output: {line}");
    }
    match &p.communicators {
        Section::Ok { value } if value.list.is_empty() => {
            let _ = writeln!(out, "  no communicators");
        }
        Section::Ok { value } => {
            for comm in &value.list {
                communicator_text(out, comm);
            }
        }
        Section::NotAvailable { reason } => {
            let _ = writeln!(out, "  communicators not available: {reason}");
        }
        Section::Error { message } => {
            let _ = writeln!(out, "  communicators could not be read: {message}");
        }
    }
    match &p.new_processes {
        None => {}
        Some(Section::Ok { value }) if value.list.is_empty() => {
            let _ = writeln!(out, "  New processes: none");
        }
        Some(Section::Ok { value }) => {
            let _ = writeln!(out, "  New processes: {}", value.list.len());
            for n in &value.list {
                let _ = writeln!(
                    out,
                    "    {}: {}",
                    mqs_core::model::pid_on(n.pid, &n.host),
                    n.executable
                );
            }
        }
        Some(Section::NotAvailable { reason }) => {
            let _ = writeln!(out, "  New processes: not available ({reason})");
        }
        Some(Section::Error { message }) => {
            let _ = writeln!(out, "  New processes: error: {message}");
        }
    }
    if let Some(name) = &p.spawn_breakpoint {
        let _ = writeln!(out, "  Spawn breakpoint: {name}");
    }
    if !p.unreadable.is_empty() {
        let _ = writeln!(out, "  Memory the DLL could not read:");
        for what in &p.unreadable {
            let _ = writeln!(out, "    {what}");
        }
    }
    match &p.stacks {
        None => {}
        Some(Section::Ok { value }) => {
            for thread in &value.list {
                stack_text(out, thread);
            }
        }
        Some(Section::NotAvailable { reason }) => {
            let _ = writeln!(out, "  Stacks: not available ({reason})");
        }
        Some(Section::Error { message }) => {
            let _ = writeln!(out, "  Stacks: error: {message}");
        }
    }
    let _ = out.write_char('\n');
}

/// One thread's stack, innermost frame first, as debuggers print them.
pub fn stack_text(out: &mut impl Write, thread: &ThreadStack) {
    let name = thread
        .name
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let _ = writeln!(out, "  Thread {}{name}:", thread.tid);
    for (i, frame) in thread.frames.iter().enumerate() {
        let _ = writeln!(out, "    #{i:<2} {}", frame_text(frame));
    }
    if let Some(why) = &thread.truncated {
        let _ = writeln!(out, "    (stack incomplete: {why})");
    }
}

/// `function+0x12 at file.c:40 [object]`, with what is known of it.
pub fn frame_text(frame: &Frame) -> String {
    let mut text = match (&frame.function, frame.offset) {
        (Some(f), Some(offset)) => format!("{f}+{offset:#x}"),
        (Some(f), None) => f.clone(),
        (None, _) => format!("{:#x}", frame.address),
    };
    if frame.inlined {
        text.push_str(" (inlined)");
    }
    if let Some(file) = &frame.file {
        let base = std::path::Path::new(file)
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.clone());
        match frame.line {
            Some(line) => {
                let _ = write!(text, " at {base}:{line}");
            }
            None => {
                let _ = write!(text, " at {base}");
            }
        }
    }
    if let Some(object) = &frame.object {
        if frame.file.is_none() {
            let base = std::path::Path::new(object)
                .file_name()
                .map(|b| b.to_string_lossy().into_owned())
                .unwrap_or_else(|| object.clone());
            let _ = write!(text, " in {base}");
        }
    }
    text
}

fn communicator_text(out: &mut impl Write, c: &CommunicatorDump) {
    let name = if c.name.is_empty() {
        "(unnamed)"
    } else {
        &c.name
    };
    let _ = writeln!(
        out,
        "  Communicator {name}: size {}, local rank {}, id {:#x}",
        c.size, c.local_rank, c.unique_id
    );
    if let Some(group) = &c.group {
        let ranks: Vec<String> = group.iter().map(|r| r.to_string()).collect();
        let _ = writeln!(out, "    global ranks: {}", ranks.join(" "));
    }
    for class in OpClass::ALL {
        queue_text(out, class, c.queue(class));
    }
}

fn queue_title(class: OpClass) -> &'static str {
    match class {
        OpClass::PendingSends => "Pending sends",
        OpClass::PendingReceives => "Posted receives",
        OpClass::UnexpectedMessages => "Unexpected messages",
    }
}

fn queue_text(out: &mut impl Write, class: OpClass, queue: &Section<Queue>) {
    let title = queue_title(class);
    match queue {
        Section::Ok { value } => {
            if value.operations.is_empty() && value.truncated.is_none() {
                let _ = writeln!(out, "    {title}: none");
                return;
            }
            let _ = writeln!(out, "    {title}: {}", value.operations.len());
            for (i, op) in value.operations.iter().enumerate() {
                operation_text(out, class, i, op);
            }
            if let Some(why) = &value.truncated {
                let _ = writeln!(out, "      (list incomplete: {why})");
            }
        }
        Section::NotAvailable { reason } => {
            let _ = writeln!(out, "    {title}: not available ({reason})");
        }
        Section::Error { message } => {
            let _ = writeln!(out, "    {title}: error: {message}");
        }
    }
}

/// A peer rank as the listing shows it: `ANY`, `3` or `3 (global 5)`.
struct Rank {
    local: i64,
    global: i64,
}

impl std::fmt::Display for Rank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.local < 0 {
            f.write_str("ANY")
        } else if self.global < 0 {
            write!(f, "{}", self.local)
        } else {
            write!(f, "{} (global {})", self.local, self.global)
        }
    }
}

/// A tag, `ANY` for MPI_ANY_TAG.
struct Tag(Option<i64>);

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(t) => write!(f, "{t}"),
            None => f.write_str("ANY"),
        }
    }
}

/// One operation's lines, written without building strings first (a
/// queue may hold 100,000 of them).
fn operation_text(out: &mut impl Write, class: OpClass, index: usize, op: &Operation) {
    let peer = Rank {
        local: op.desired_local_rank,
        global: op.desired_global_rank,
    };
    let direction = if class == OpClass::PendingSends {
        "to"
    } else {
        "from"
    };
    let _ = write!(out, "      [{index}] ");
    let _ = match op.status {
        OpStatus::Pending => out.write_str("pending"),
        OpStatus::Matched => out.write_str("matched"),
        OpStatus::Complete => out.write_str("complete"),
        OpStatus::Unknown(_) => out.write_str(&op.status.name()),
    };
    let _ = writeln!(
        out,
        " {direction} {peer} tag {} length {} buffer {:#x}{}",
        Tag(op.desired_tag),
        op.desired_length,
        op.buffer,
        if op.system_buffer {
            " (system buffer)"
        } else {
            ""
        }
    );
    if op.status != OpStatus::Pending {
        let _ = writeln!(
            out,
            "          matched {} tag {} length {}",
            Rank {
                local: op.actual_local_rank,
                global: op.actual_global_rank
            },
            op.actual_tag,
            op.actual_length
        );
    }
    for line in &op.extra_text {
        let _ = writeln!(out, "          {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqs_core::model::{CommunicatorList, DllInfo, DumpStats, SCHEMA_VERSION};

    fn sample() -> JobDump {
        let op = Operation {
            status: OpStatus::Pending,
            desired_local_rank: -1,
            desired_global_rank: -1,
            desired_tag: None,
            desired_length: 32,
            system_buffer: false,
            buffer: 0x1000,
            actual_local_rank: 0,
            actual_global_rank: 0,
            actual_tag: 0,
            actual_length: 0,
            extra_text: ["request 0x2000"].into(),
        };
        JobDump {
            schema_version: SCHEMA_VERSION,
            launcher: None,
            failures: vec![],
            processes: vec![ProcessDump {
                pid: 42,
                global_rank: 0,
                host: None,
                spawned: None,
                executable: "/bin/app".into(),
                dll: DllInfo::new("/lib/dll.so".into(), "test".into(), 2),
                communicators: Section::Ok {
                    value: CommunicatorList {
                        list: vec![CommunicatorDump {
                            unique_id: 0,
                            name: "MPI_COMM_WORLD".into(),
                            size: 2,
                            local_rank: 0,
                            group: Some(vec![0, 1]),
                            cartesian: None,
                            sends: Section::Ok {
                                value: Queue {
                                    operations: vec![],
                                    truncated: None,
                                    fixed_in_run: Vec::new(),
                                },
                            },
                            receives: Section::Ok {
                                value: Queue {
                                    operations: vec![op],
                                    truncated: None,
                                    fixed_in_run: Vec::new(),
                                },
                            },
                            unexpected: Section::NotAvailable {
                                reason: "no ob1 debug info".into(),
                            },
                        }],
                    },
                },
                new_processes: None,
                spawn_breakpoint: None,
                type_packs: vec![],
                unreadable: vec![],
                dll_output: vec![],
                held_by: None,
                os_state: None,
                stacks: None,
                stats: DumpStats::default(),
                run_len: 1,
                run_shifts_peers: false,
            }],
        }
    }

    #[test]
    fn text_lists_queues_with_any_and_not_available() {
        let text = text(&sample());
        assert!(
            text.contains("Communicator MPI_COMM_WORLD: size 2, local rank 0, id 0x0"),
            "{text}"
        );
        assert!(text.contains("Pending sends: none"), "{text}");
        assert!(
            text.contains("[0] pending from ANY tag ANY length 32 buffer 0x1000"),
            "{text}"
        );
        assert!(
            text.contains("Unexpected messages: not available (no ob1 debug info)"),
            "{text}"
        );
        assert!(text.contains("request 0x2000"), "{text}");
    }

    /// Everything optional filled in, odd values included.
    fn full_sample() -> JobDump {
        let mut job = sample();
        job.launcher = Some(mqs_core::model::Launcher {
            pid: 7,
            executable: "/bin/mpirun".into(),
            note: None,
        });
        job.failures.push(mqs_core::model::RankFailure {
            rank: 3,
            pid: 9,
            host: "nodeb".into(),
            message: "gone".into(),
            exit_code: 11,
        });
        let mut p = job.processes[0].clone();
        p.pid = 43;
        p.global_rank = 1;
        p.host = Some("nodea".into());
        p.spawned = Some(mqs_core::model::SpawnedJob {
            job: "12".into(),
            rank: 0,
            parent: Some(mqs_core::model::SpawnParent {
                job: "11".into(),
                rank: 0,
            }),
        });
        p.new_processes = Some(Section::Error {
            message: "bad".into(),
        });
        p.spawn_breakpoint = Some("MPIR_Breakpoint".into());
        p.type_packs = vec!["mca_pml_ob1.so: types from ob1.json".into()];
        p.unreadable = vec!["8 bytes at 0x10: unmapped".into()];
        p.dll_output = vec!["warning".into()];
        p.held_by = Some(mqs_core::interface::HeldBy {
            pid: 77,
            name: "gdb".into(),
            for_debugger: None,
        });
        p.stats = DumpStats {
            fetches: 3,
            fetched_bytes: u64::MAX,
            syscalls: 2,
            elapsed_ms: 0.1 + 0.2,
            stacks_ms: Some(1.5),
            callbacks: mqs_core::model::CallbackCounts {
                fetch: 3,
                find_type: 2,
                ..Default::default()
            },
        };
        if let Section::Ok { value } = &mut p.communicators {
            let comm = &mut value.list[0];
            comm.group = None;
            if let Section::Ok { value } = &mut comm.receives {
                let mut op = value.operations[0].clone();
                op.status = OpStatus::Unknown(-5);
                op.desired_tag = Some(i64::MIN);
                op.buffer = u64::MAX;
                value.operations.push(op);
                value.truncated = Some("bound".into());
            }
        }
        job.processes.push(p);
        job
    }

    #[test]
    fn json_is_serde_jsons_pretty_layout_byte_for_byte() {
        for job in [sample(), full_sample()] {
            assert_eq!(json(&job), serde_json::to_string_pretty(&job).unwrap());
        }
        // Deeper than one piece of indentation.
        let mut deep = serde_json::json!(1);
        for i in 0..40 {
            deep = serde_json::json!({ format!("k{i}"): [deep, [], {}] });
        }
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Pretty::default());
        serde::Serialize::serialize(&deep, &mut ser).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string_pretty(&deep).unwrap()
        );
    }

    #[test]
    fn json_reads_back_unchanged() {
        for job in [sample(), full_sample()] {
            let first = json(&job);
            let back: JobDump = serde_json::from_str(&first).unwrap();
            assert_eq!(json(&back), first);
        }
    }

    #[test]
    fn text_names_the_host_of_a_collected_process() {
        let text = text(&full_sample());
        assert!(
            text.contains("Process 43 (rank 1; spawned: rank 0 of job 12, by rank 0 of 11) on nodea: /bin/app"),
            "{text}"
        );
        assert!(text.contains("Process 42 (rank 0): /bin/app"), "{text}");
        assert!(
            text.contains("Process 43 (rank 1; spawned: rank 0 of job 12, by rank 0 of 11) on nodea: /bin/app\n  Held stopped by gdb (pid 77): read as that debugger holds it"),
            "{text}"
        );
    }

    #[test]
    fn text_names_the_type_packs_read_through() {
        let text = text(&full_sample());
        assert!(
            text.contains("  Types: mca_pml_ob1.so: types from ob1.json\n"),
            "{text}"
        );
        assert!(!super::text(&sample()).contains("Types:"));
    }

    #[test]
    fn json_distinguishes_empty_from_not_available() {
        let v: serde_json::Value = serde_json::from_str(&json(&sample())).unwrap();
        let comm = &v["processes"][0]["communicators"]["list"][0];
        assert_eq!(v["processes"][0]["communicators"]["status"], "ok");
        assert_eq!(comm["sends"]["status"], "ok");
        assert_eq!(comm["sends"]["operations"].as_array().unwrap().len(), 0);
        assert_eq!(comm["unexpected"]["status"], "not_available");
        assert_eq!(
            comm["receives"]["operations"][0]["desired_tag"],
            serde_json::Value::Null
        );
        assert_eq!(comm["receives"]["operations"][0]["desired_local_rank"], -1);
    }
}
