//! The debugger extensions (`debuggers/gdb/mqs.py`, `debuggers/lldb/mqs.py`)
//! in real gdb and lldb, against real hung `queues` jobs, and mqs-dump
//! beside a debugger that holds a rank.
//!
//! Each debugger runs in batch from a script whose commands print between
//! markers (`@@@name`). `mpi queues` in the debugger must print exactly the
//! listing `mqs-dump --pid` prints of the same process with the same DLL,
//! run from inside the debugger (`shell`) while it holds the process: that
//! is mqs-dump reading a process a debugger holds, too. Our DLL's JSON from
//! the extension is checked against the fixture's contents. A DLL that
//! crashes, hangs or lies, and a process whose memory is corrupted, must
//! give an error in the debugger and leave its session working.

mod support;

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::contents::{self, Process};
use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// How long one debugger session may take.
const SESSION_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Debugger {
    Gdb,
    Lldb,
}

/// What a session opens: a live process, or a program and its core file.
enum Subject<'a> {
    Pid(u32),
    Core { exe: &'a Path, core: &'a Path },
}

/// A debugger process, killed with its process group (lldb's lldb-server
/// too) if it is still there when this goes, whatever happened.
struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let pid = self.child.id() as libc::pid_t;
            // SAFETY: kill takes integers; the group is the one the child
            // leads (process_group(0) below).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// What a session printed, by marker, and the debugger's pid.
struct Transcript {
    text: String,
    pid: u32,
}

impl Transcript {
    /// The lines printed after `@@@name` and before the next marker.
    fn section(&self, name: &str) -> Vec<String> {
        let marker = format!("@@@{name}");
        let mut lines = self.text.lines().skip_while(|l| l.trim() != marker);
        assert!(
            lines.next().is_some(),
            "no section {name} in:\n{}",
            self.text
        );
        lines
            .take_while(|l| !l.starts_with("@@@"))
            // lldb echoes the commands it reads.
            .filter(|l| !l.starts_with("(lldb) "))
            .map(String::from)
            .collect()
    }

    fn joined(&self, name: &str) -> String {
        self.section(name).join("\n")
    }
}

/// A session's commands, each with the marker printed before it.
struct Script {
    debugger: Debugger,
    commands: Vec<String>,
    env: Vec<(String, String)>,
}

impl Script {
    fn new(debugger: Debugger) -> Script {
        let root = mqs_tests::workspace_root();
        let load = match debugger {
            Debugger::Gdb => format!("source {}", root.join("debuggers/gdb/mqs.py").display()),
            Debugger::Lldb => format!(
                "command script import {}",
                root.join("debuggers/lldb/mqs.py").display()
            ),
        };
        Script {
            debugger,
            commands: vec![load],
            // `--dll ours` finds our DLL of this build.
            env: vec![(
                "MQS_DLL".into(),
                mqs_tests::our_dll(false).display().to_string(),
            )],
        }
    }

    /// `command`'s output goes under `@@@name`.
    fn section(mut self, name: &str, command: &str) -> Script {
        self.commands.push(match self.debugger {
            Debugger::Gdb => format!("echo @@@{name}\\n"),
            Debugger::Lldb => format!("script print(\"@@@{name}\")"),
        });
        self.commands.push(command.to_string());
        self
    }

    /// Runs a shell command from inside the debugger (mqs-dump beside it).
    fn shell(self, name: &str, command: &str) -> Script {
        let line = match self.debugger {
            Debugger::Gdb => format!("shell {command}"),
            Debugger::Lldb => format!("platform shell {command}"),
        };
        self.section(name, &line)
    }

    fn env(mut self, key: &str, value: &str) -> Script {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs the session to its end (the debugger detaches on its way out)
    /// and returns what it printed.
    fn run(self, subject: Subject<'_>, scratch: &Path) -> Transcript {
        let name = match self.debugger {
            Debugger::Gdb => "gdb",
            Debugger::Lldb => "lldb",
        };
        let output = scratch.join(format!("{name}.out"));
        let file = File::create(&output).expect("the transcript file");
        let mut cmd = Command::new(name);
        let mut commands = self.commands.clone();
        commands.push(match self.debugger {
            Debugger::Gdb => "echo @@@end\\n".into(),
            Debugger::Lldb => "script print(\"@@@end\")".into(),
        });
        match self.debugger {
            Debugger::Gdb => {
                // -batch goes on after a command fails, as the tests need.
                cmd.args(["-nx", "-q", "-batch"]);
                match subject {
                    Subject::Pid(pid) => cmd.arg("-p").arg(pid.to_string()),
                    Subject::Core { exe, core } => cmd.arg(exe).arg(core),
                };
                for c in &commands {
                    cmd.arg("-ex").arg(c);
                }
                cmd.stdin(Stdio::null());
            }
            Debugger::Lldb => {
                // lldb stops at the first failing command of -o (and -b),
                // but not of commands read from its input.
                let mut lines = vec![match subject {
                    Subject::Pid(pid) => format!("process attach --pid {pid}"),
                    Subject::Core { exe, core } => {
                        format!("target create {} --core {}", exe.display(), core.display())
                    }
                }];
                lines.extend(commands);
                let input = scratch.join("lldb.in");
                std::fs::write(&input, lines.join("\n") + "\n").expect("the lldb script");
                cmd.arg("--no-lldbinit")
                    .stdin(File::open(&input).expect("the lldb script"));
                if let Some(dir) = lldb_python_path() {
                    cmd.env("PYTHONPATH", dir);
                }
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(file.try_clone().expect("the transcript file"))
            .stderr(file)
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start {name} (scripts/setup-mpis installs it): {e}")
        });
        let mut running = Running { child };
        let pid = running.child.id();
        let deadline = Instant::now() + SESSION_LIMIT;
        loop {
            if running.child.try_wait().expect("wait").is_some() {
                break;
            }
            if Instant::now() > deadline {
                drop(running);
                panic!(
                    "{name} did not finish within {SESSION_LIMIT:?}: killed; it printed:\n{}",
                    std::fs::read_to_string(&output).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Transcript {
            text: std::fs::read_to_string(&output).expect("the transcript"),
            pid,
        }
    }
}

/// Where Debian 12's lldb keeps its Python module: what
/// `debuggers/lldb/mqs-lldb --python-path` finds (the one place that
/// knows), None where lldb finds it by itself.
fn lldb_python_path() -> Option<PathBuf> {
    let script = mqs_tests::workspace_root().join("debuggers/lldb/mqs-lldb");
    let out = Command::new(&script).arg("--python-path").output().ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

/// A scratch directory under the target dir, fresh for each test.
fn scratch(name: &str) -> PathBuf {
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join(format!("debuggers-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A process's listing as both print it: what differs only because mqs-dump
/// read the process beside a debugger (its "Held stopped by" line) is left
/// out, and so are blank lines (lldb trims the last one).
fn listing(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("  Held stopped by "))
        .cloned()
        .collect()
}

fn assert_same_listing(what: &str, debugger: &[String], dump: &[String]) {
    let (d, m) = (listing(debugger), listing(dump));
    assert!(
        d.len() > 3 && d[0].starts_with("Process "),
        "{what}: no listing from the debugger:\n{}",
        debugger.join("\n")
    );
    assert_eq!(
        d, m,
        "{what}: the debugger's listing (left) and mqs-dump's (right) differ"
    );
}

fn dll(path: &Path) -> String {
    path.display().to_string()
}

fn ours() -> String {
    dll(&mqs_tests::our_dll(false))
}

/// The DLL the MPI ships (and names in MPIR_dll_name).
fn theirs(mpi: Mpi) -> String {
    let prefix = mpi.prefix().expect("the MPI");
    dll(&match mpi.family() {
        mqs_tests::Family::OpenMpi => prefix.join("lib/openmpi/libompi_dbg_msgq.so"),
        mqs_tests::Family::Mpich => prefix.join("lib/libtvmpich.so"),
    })
}

/// A DLL's path as hosts print it: symbolic links resolved.
fn canonical(path: &str) -> String {
    dll(&std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

fn mqs_dump_path() -> String {
    mqs_dump().display().to_string()
}

/// Waits until our DLL, through mqs-dump, sees what the fixture left in
/// `pid` (a rank posts its blocking receive just after READY).
fn settle(pid: u32, expected: &Process) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let json = dump_json(pid, &["--dll", &ours()]);
        match contents::check_ours(expected, &json["processes"][0]["communicators"]) {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("pid {pid} never settled: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// Our DLL's JSON from the extension holds the fixture's contents.
fn assert_contents(what: &str, lines: &[String], expected: &Process) {
    let json: Value = serde_json::from_str(&lines.join("\n"))
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{}", lines.join("\n")));
    assert_eq!(json["schema_version"], 1, "{what}");
    contents::check_ours(expected, &json["processes"][0]["communicators"])
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The listings of `mpi queues` with our DLL and the MPI's own, against
/// mqs-dump's of the same held process; the default DLL is the one the
/// MPI names; our JSON holds the fixture's contents.
fn debugger_matches_mqs_dump(debugger: Debugger, mpi: Mpi, expected: &[Process]) {
    let job = Job::launch(mpi, "queues", 2, &["3"]).expect("launch queues");
    let dir = scratch(&format!("{debugger:?}-{}", mpi.name()));
    let (ours, theirs, mqs_dump) = (ours(), theirs(mpi), mqs_dump_path());
    for (rank, pid) in job.rank_pids() {
        let expected = &expected[rank as usize];
        settle(pid, expected);
        let session = Script::new(debugger)
            .section("ours", &format!("mpi queues --dll {ours}"))
            .section("theirs", &format!("mpi queues --dll {theirs}"))
            .section("default", "mpi queues")
            .section("json", "mpi queues --dll ours --json")
            .shell("dump-ours", &format!("{mqs_dump} --pid {pid} --dll {ours}"))
            .shell(
                "dump-theirs",
                &format!("{mqs_dump} --pid {pid} --dll {theirs}"),
            )
            .run(Subject::Pid(pid), &dir);
        let what = format!("{debugger:?} on {mpi} rank {rank}");
        assert_same_listing(
            &format!("{what}, ours"),
            &session.section("ours"),
            &session.section("dump-ours"),
        );
        assert_same_listing(
            &format!("{what}, theirs"),
            &session.section("theirs"),
            &session.section("dump-theirs"),
        );
        // mqs-dump read the process as the debugger held it, and said so.
        let held = session.joined("dump-ours");
        let holder = match debugger {
            Debugger::Gdb => format!("Held stopped by gdb (pid {})", session.pid),
            Debugger::Lldb => format!("for lldb (pid {})", session.pid),
        };
        assert!(held.contains(&holder), "{what}: {holder} missing:\n{held}");
        let default = session.joined("default");
        assert!(
            default.contains(&format!("  DLL {} [", canonical(&theirs)))
                && default.contains("  DLL chosen: the one the MPI names (MPIR_dll_name)"),
            "{what}: the default DLL:\n{default}"
        );
        assert_eq!(
            listing(&session.section("default"))
                .into_iter()
                .filter(|l| !l.starts_with("  DLL chosen"))
                .collect::<Vec<_>>(),
            listing(&session.section("theirs")),
            "{what}: the default is the MPI's DLL"
        );
        assert_contents(&what, &session.section("json"), expected);
        assert_running_untraced(pid);
    }
    job.shutdown().expect("teardown");
}

#[test]
fn gdb_lists_open_mpi_queues_as_mqs_dump_does_with_both_dlls() {
    debugger_matches_mqs_dump(Debugger::Gdb, Mpi::OpenMpiG, &contents::queues(3, true));
}

#[test]
fn gdb_lists_mpich_ch3_queues_as_mqs_dump_does_with_both_dlls() {
    debugger_matches_mqs_dump(Debugger::Gdb, Mpi::Mpich, &contents::mpich_queues(2, 3));
}

#[test]
fn lldb_lists_open_mpi_queues_as_mqs_dump_does_with_both_dlls() {
    debugger_matches_mqs_dump(Debugger::Lldb, Mpi::OpenMpiG, &contents::queues(3, true));
}

#[test]
fn lldb_lists_mpich_ch3_queues_as_mqs_dump_does_with_both_dlls() {
    debugger_matches_mqs_dump(Debugger::Lldb, Mpi::Mpich, &contents::mpich_queues(2, 3));
}

/// gdb holding both ranks of a job as two inferiors: `mpi queues all`
/// lists each as mqs-dump lists it, in rank order, and leaves the user's
/// inferior selected.
/// Under pml ucx our DLL asks for UCX's request and worker fields by path
/// (`recv.tag.sn`, members of untagged structs): the extensions answer
/// those as mqs-dump does, and list the same queues; on Open MPI 4.1.4 and
/// 5.0.7 under pml ucx, and on MPICH 4.0.2 ch4:ucx (whose launcher sets
/// UCX's transports itself).
fn ucx_matches_mqs_dump(debugger: Debugger, mpi: Mpi) {
    let (env, transport) = if mpi == Mpi::MpichUcx {
        (Vec::new(), "device ch4:ucx, device queues, UCX 1.13.1")
    } else {
        (mqs_tests::pml_ucx_env(), "pml ucx, UCX 1.13.1")
    };
    let options = LaunchOptions {
        env,
        ..LaunchOptions::default()
    };
    let job =
        Job::launch_with(mpi, "queues", 2, &[], &options).expect("launch queues under pml ucx");
    let dir = scratch(&format!("{debugger:?}-{mpi}"));
    let (ours, mqs_dump) = (ours(), mqs_dump_path());
    for (rank, pid) in job.rank_pids() {
        // Each rank's blocking receive on mqs-wait comes after READY.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stdout(&run(&["--pid", &pid.to_string(), "--dll", &ours])).contains("tag 1000 ") {
            assert!(Instant::now() < deadline, "rank {rank} never settled");
            std::thread::sleep(Duration::from_millis(250));
        }
        let session = Script::new(debugger)
            .section("ours", &format!("mpi queues --dll {ours}"))
            .shell("dump-ours", &format!("{mqs_dump} --pid {pid} --dll {ours}"))
            .run(Subject::Pid(pid), &dir);
        let what = format!("{debugger:?} on {mpi} ({transport}), rank {rank}");
        let text = session.joined("ours");
        assert!(text.contains(transport), "{what}:\n{text}");
        assert!(text.contains("tag 1000 "), "{what}:\n{text}");
        assert_same_listing(
            &format!("{what}, ours"),
            &session.section("ours"),
            &session.section("dump-ours"),
        );
        assert_running_untraced(pid);
    }
    job.shutdown().expect("teardown");
}

#[test]
fn gdb_lists_queues_under_pml_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Gdb, Mpi::OpenMpiUcx);
}

#[test]
fn lldb_lists_queues_under_pml_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Lldb, Mpi::OpenMpiUcx);
}

#[test]
fn gdb_lists_queues_under_open_mpi_5_pml_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Gdb, Mpi::OpenMpi5Ucx);
}

#[test]
fn lldb_lists_queues_under_open_mpi_5_pml_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Lldb, Mpi::OpenMpi5Ucx);
}

#[test]
fn gdb_lists_queues_under_mpich_ch4_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Gdb, Mpi::MpichUcx);
}

#[test]
fn lldb_lists_queues_under_mpich_ch4_ucx_as_mqs_dump_does() {
    ucx_matches_mqs_dump(Debugger::Lldb, Mpi::MpichUcx);
}

#[test]
fn gdb_lists_every_inferior_with_all() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &["3"]).expect("launch queues");
    let expected = contents::queues(3, true);
    let pids: Vec<u32> = job.rank_pids().into_iter().map(|(_, pid)| pid).collect();
    for (pid, expected) in pids.iter().zip(&expected) {
        settle(*pid, expected);
    }
    let dir = scratch("all");
    let (ours, mqs_dump) = (ours(), mqs_dump_path());
    let session = Script::new(Debugger::Gdb)
        .section("second", "add-inferior")
        .section("switch", "inferior 2")
        .section("attach", &format!("attach {}", pids[1]))
        .section("back", "inferior 1")
        .section("all", "mpi queues all --dll ours")
        .section("current", "inferior")
        .shell(
            "dump0",
            &format!("{mqs_dump} --pid {} --dll {ours}", pids[0]),
        )
        .shell(
            "dump1",
            &format!("{mqs_dump} --pid {} --dll {ours}", pids[1]),
        )
        .run(Subject::Pid(pids[0]), &dir);
    let mut both = session.section("dump0");
    both.extend(session.section("dump1"));
    assert_same_listing("mpi queues all", &session.section("all"), &both);
    let current = session.joined("current");
    assert!(
        current.contains("Current inferior is 1 "),
        "the user's inferior: {current}"
    );
    for pid in pids {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("teardown");
}

/// Sets bit 3 (file-backed shared mappings) of a process's coredump filter,
/// which gdb's gcore honours.
fn keep_shared_mappings_in_cores(pid: u32) {
    let path = format!("/proc/{pid}/coredump_filter");
    let filter = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let filter = u32::from_str_radix(filter.trim(), 16).unwrap_or_else(|e| panic!("{path}: {e}"));
    std::fs::write(&path, format!("{:#x}", filter | 0x8)).unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// A core file gdb wrote of a rank (gcore), loaded in `debugger`: `mpi
/// queues` with both DLLs prints what `mqs-dump --core` prints of it.
fn core_file_matches_mqs_dump(debugger: Debugger, mpi: Mpi, expected: &[Process]) {
    let job = Job::launch(mpi, "queues", 2, &["3"]).expect("launch queues");
    let dir = scratch(&format!("core-{debugger:?}-{}", mpi.name()));
    let pid = job.rank_pid(0).expect("rank 0");
    settle(pid, &expected[0]);
    // gcore leaves file-backed shared mappings out (the coredump filter's
    // default); gdb and mqs-dump then read them from their files, which lldb
    // cannot, and lldb rightly says the transport was unreadable. The core
    // here holds them, so all three read the same bytes.
    keep_shared_mappings_in_cores(pid);
    let core = dir.join("rank0.core");
    let session = Script::new(Debugger::Gdb)
        .section("gcore", &format!("gcore {}", core.display()))
        .run(Subject::Pid(pid), &dir);
    assert!(
        core.exists(),
        "gcore wrote nothing:\n{}",
        session.joined("gcore")
    );
    assert_running_untraced(pid);
    let exe = job.executable().to_path_buf();
    let (ours, theirs) = (ours(), theirs(mpi));
    let session = Script::new(debugger)
        .section("ours", &format!("mpi queues --dll {ours}"))
        .section("theirs", &format!("mpi queues --dll {theirs}"))
        .section("json", &format!("mpi queues --dll {ours} --json"))
        .run(
            Subject::Core {
                exe: &exe,
                core: &core,
            },
            &dir,
        );
    let core_arg = core.display().to_string();
    for (name, dll) in [("ours", &ours), ("theirs", &theirs)] {
        let out = run(&["--core", &core_arg, "--dll", dll]);
        assert!(out.status.success(), "mqs-dump --core: {}", stderr(&out));
        let dump: Vec<String> = stdout(&out).lines().map(String::from).collect();
        assert_same_listing(
            &format!("{debugger:?} on a core of {mpi}, {name}"),
            &session.section(name),
            &dump,
        );
    }
    // The rank came from the core's environment, as mqs-dump takes it.
    assert!(
        session
            .joined("ours")
            .starts_with(&format!("Process {pid} (rank 0): ")),
        "{}",
        session.joined("ours")
    );
    assert_contents(
        &format!("{debugger:?} on a core"),
        &session.section("json"),
        &expected[0],
    );
    let _ = std::fs::remove_dir_all(&dir);
    job.shutdown().expect("teardown");
}

#[test]
fn gdb_lists_the_queues_of_an_open_mpi_core_file_as_mqs_dump_does() {
    core_file_matches_mqs_dump(Debugger::Gdb, Mpi::OpenMpiG, &contents::queues(3, true));
}

#[test]
fn gdb_lists_the_queues_of_an_mpich_core_file_as_mqs_dump_does() {
    core_file_matches_mqs_dump(Debugger::Gdb, Mpi::Mpich, &contents::mpich_queues(2, 3));
}

#[test]
fn lldb_lists_the_queues_of_an_open_mpi_core_file_as_mqs_dump_does() {
    core_file_matches_mqs_dump(Debugger::Lldb, Mpi::OpenMpiG, &contents::queues(3, true));
}

/// `mqs-dump --pid` on a rank gdb holds: its queues and its threads' stacks
/// (from what the kernel tells of a stopped thread, without tracing), the
/// holder named; gdb then still runs the rank to a breakpoint, lists its
/// queues again and lets it go.
#[test]
fn mqs_dump_reads_a_rank_gdb_holds_and_gdb_continues_it() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &["3"]).expect("launch queues");
    let expected = contents::queues(3, true);
    let pid = job.rank_pid(0).expect("rank 0");
    settle(pid, &expected[0]);
    let dir = scratch("held");
    let mqs_dump = mqs_dump_path();
    let session = Script::new(Debugger::Gdb)
        .shell("dump", &format!("{mqs_dump} --pid {pid} --stacks"))
        .shell("json", &format!("{mqs_dump} --pid {pid} --json"))
        .section("break", "tbreak opal_progress")
        .section("continue", "continue")
        .section("after", "mpi queues --dll ours --json")
        .section("detach", "detach")
        .run(Subject::Pid(pid), &dir);
    let dump = session.joined("dump");
    assert!(
        dump.contains(&format!(
            "  Held stopped by gdb (pid {}): read as that debugger holds it",
            session.pid
        )),
        "{dump}"
    );
    // The stack of the main thread, walked from the kernel's stack and
    // instruction pointers of the stopped thread.
    assert!(
        dump.lines().any(|l| l.contains(" MPI_Recv+")) && dump.contains(" main+"),
        "no stack through MPI_Recv and main:\n{dump}"
    );
    assert_contents(
        "mqs-dump beside gdb",
        &session.section("json"),
        &expected[0],
    );
    let json: Value = serde_json::from_str(&session.joined("json")).expect("JSON");
    assert_eq!(
        json["processes"][0]["held_by"]["pid"], session.pid,
        "{json}"
    );
    assert_eq!(json["processes"][0]["held_by"]["name"], "gdb");
    // gdb runs the rank on, to the breakpoint, and reads it there.
    let continued = session.joined("continue");
    assert!(
        continued.contains("Temporary breakpoint 1, ") && continued.contains("opal_progress"),
        "gdb did not continue the rank to its breakpoint:\n{continued}"
    );
    assert_contents(
        "gdb after continuing",
        &session.section("after"),
        &expected[0],
    );
    assert_running_untraced(pid);
    job.shutdown().expect("teardown");
}

/// Open MPI's communicator table pointed at unmapped memory from gdb (as
/// the strict host's `Word` mutation does to a recording): our DLL says
/// the table cannot be read, Open MPI's reads nothing and says where it
/// could not read; gdb goes on.
#[test]
fn corrupted_memory_is_an_error_in_gdb_and_the_session_goes_on() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch queues");
    let pid = job.rank_pid(1).expect("rank 1");
    settle(pid, &contents::queues(0, true)[1]);
    let dir = scratch("corrupt");
    let theirs = theirs(Mpi::OpenMpiG);
    let session = Script::new(Debugger::Gdb)
        .section("saved", "set $saved = ompi_mpi_communicators.addr")
        .section(
            "corrupt",
            "set var ompi_mpi_communicators.addr = (void **) 8",
        )
        .section("ours", "mpi queues --dll ours")
        .section("theirs", &format!("mpi queues --dll {theirs}"))
        .section(
            "in-process",
            &format!("mpi queues --in-process --dll {theirs}"),
        )
        .section("alive", "print 6 * 7")
        .section("restore", "set var ompi_mpi_communicators.addr = $saved")
        .section("restored", "mpi queues --dll ours")
        .run(Subject::Pid(pid), &dir);
    let ours = session.joined("ours");
    assert!(
        ours.contains("The Open MPI communicator table of")
            && ours.contains("cannot be read (corrupt memory"),
        "{ours}"
    );
    for name in ["theirs", "in-process"] {
        let text = session.joined(name);
        assert!(
            text.contains("  no communicators")
                && text.contains("  Memory the DLL could not read:")
                && text.contains("8 bytes at 0x8: the page at 0x0 is not readable"),
            "{name}:\n{text}"
        );
    }
    assert!(session.joined("alive").contains("= 42"), "{}", session.text);
    assert!(
        session
            .joined("restored")
            .contains("Communicator MPI_COMM_WORLD"),
        "{}",
        session.joined("restored")
    );
    assert_running_untraced(pid);
    job.shutdown().expect("teardown");
}

fn fake_mpi() -> PathBuf {
    support_program("fake_mpi", &[], false)
}

fn test_dll(flag: &str) -> String {
    let flags: &[&str] = if flag.is_empty() { &[] } else { &[flag] };
    dll(&support_program("test_dll", flags, true))
}

/// DLLs that crash, hang, misuse the callbacks and corrupt their answers,
/// or are missing: each an error (or the listing of what it said) in gdb,
/// whose session goes on; what the lying DLL said is what mqs-dump shows.
#[test]
fn a_failing_dll_is_an_error_in_gdb_and_the_session_goes_on() {
    let crash = test_dll("-DCRASH_IN_DLL");
    let target = Spawned::start(&fake_mpi(), &[crash.as_str()]);
    let pid = target.pid();
    let dir = scratch("failing-gdb");
    let block = dir.join("block");
    std::fs::create_dir_all(&block).unwrap();
    let bad = test_dll("-DBAD_ANSWERS");
    let mqs_dump = mqs_dump_path();
    let session = Script::new(Debugger::Gdb)
        .env("MQS_TEST_BLOCK_DIR", &block.display().to_string())
        .section("crash", "mpi queues")
        .section("alive", "print 6 * 7")
        .section("bad", &format!("mpi queues --dll {bad}"))
        .shell("dump-bad", &format!("{mqs_dump} --pid {pid} --dll {bad}"))
        .section(
            "hang",
            &format!(
                "mpi queues --timeout 3 --dll {}",
                test_dll("-DBLOCK_IN_DLL")
            ),
        )
        .section("missing", "mpi queues --dll /nonexistent/libmsgq.so")
        .section("usage", "mpi queues --bogus")
        .section("good", &format!("mpi queues --dll {}", test_dll("")))
        .run(Subject::Pid(pid), &dir);
    assert!(
        session
            .joined("crash")
            .contains("the DLL died of SIGSEGV in mqs_update_communicator_list"),
        "{}",
        session.text
    );
    assert!(session.joined("alive").contains("= 42"), "{}", session.text);
    // What a lying DLL said, shown as mqs-dump shows it; only the reason
    // an address could not be read is each host's own.
    let unreason = |lines: Vec<String>| -> Vec<String> {
        lines
            .into_iter()
            .map(|l| match l.split_once(": ") {
                Some((head, _)) if head.contains(" bytes at 0x") => head.to_string(),
                _ => l,
            })
            .collect()
    };
    let bad_listing = session.section("bad");
    assert_same_listing(
        "a DLL that corrupts its answers",
        &unreason(bad_listing.clone()),
        &unreason(session.section("dump-bad")),
    );
    let text = bad_listing.join("\n");
    for want in [
        &format!("Communicator {}: size -5", "n".repeat(64)),
        "[0] status 77 to 0 tag 100 length 8 buffer 0x1000",
        &"x".repeat(64),
        "(list incomplete: mqs_next_operation failed: test DLL error (code 4321))",
        "Posted receives: error: mqs_setup_operation_iterator: test DLL error (code 1234)",
        "Unexpected messages: not available (the DLL has no information about unexpected)",
        "16 bytes at 0x8: ",
    ] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
    assert!(
        session
            .joined("hang")
            .contains("the DLL did not answer for 3 s (in mqs_update_communicator_list)"),
        "{}",
        session.text
    );
    assert!(
        session.joined("missing").contains("no such file"),
        "{}",
        session.text
    );
    assert!(
        session
            .joined("usage")
            .contains("unknown argument '--bogus'"),
        "{}",
        session.text
    );
    assert!(
        session.joined("good").contains("Communicator test: size 1"),
        "{}",
        session.text
    );
    assert_running_untraced(pid);
}

/// The same in lldb: a crashing DLL is an error, and lldb goes on.
#[test]
fn a_crashing_dll_is_an_error_in_lldb_and_the_session_goes_on() {
    let crash = test_dll("-DCRASH_IN_DLL");
    let target = Spawned::start(&fake_mpi(), &[crash.as_str()]);
    let pid = target.pid();
    let dir = scratch("failing-lldb");
    let session = Script::new(Debugger::Lldb)
        .section("crash", "mpi queues")
        .section("alive", "script print(6 * 7)")
        .section("good", &format!("mpi queues --dll {}", test_dll("")))
        .run(Subject::Pid(pid), &dir);
    assert!(
        session
            .joined("crash")
            .contains("error: the DLL died of SIGSEGV in mqs_update_communicator_list"),
        "{}",
        session.text
    );
    assert!(session.joined("alive").contains("42"), "{}", session.text);
    assert!(
        session.joined("good").contains("Communicator test: size 1"),
        "{}",
        session.text
    );
    assert_running_untraced(pid);
}

/// An lldb whose Python module lacks lldb's API (Debian's stub where the
/// real module should be): importing the extension says in one line what
/// to set, not a traceback deep in the extension.
#[test]
fn an_incomplete_lldb_module_says_what_to_set() {
    let dir = scratch("lldb-stub");
    std::fs::create_dir_all(dir.join("lldb")).unwrap();
    std::fs::write(dir.join("lldb/__init__.py"), "").unwrap();
    let extension = mqs_tests::workspace_root().join("debuggers/lldb/mqs.py");
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sys; sys.path.insert(0, {:?}); exec(open({:?}).read())",
            dir.display().to_string(),
            extension.display().to_string()
        ))
        .output()
        .expect("python3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("ImportError: mqs: this lldb's Python module is incomplete")
            && err.contains("debuggers/lldb/mqs-lldb --python-path"),
        "{err}"
    );
    // And the launcher finds the real module on this machine.
    let path = lldb_python_path().expect("setup-mpis installs python3-lldb");
    assert!(
        path.join("lldb/embedded_interpreter.py").exists(),
        "{path:?}"
    );
}
