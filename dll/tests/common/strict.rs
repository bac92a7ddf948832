//! The strict host (the workspace's `tests/c/strict_host.c`): compiling it,
//! describing a process to it, running it (under valgrind), and reading
//! what it printed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

use mqs_abi::{OpClass, PendingOperation};

use super::mutate::Patch;
use super::snapshot::{from_hex, Snapshot};

/// The cdylib cargo built for this test run (next to the test binary).
pub fn cdylib() -> PathBuf {
    super::session::our_dll_path()
}

/// The strict host, compiled once per test binary for this build's
/// interface level.
pub fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let level = if cfg!(feature = "mpi2") { 1 } else { 0 };
        // Examples share these helpers and have no CARGO_TARGET_TMPDIR.
        let out = option_env!("CARGO_TARGET_TMPDIR")
            .map_or_else(std::env::temp_dir, PathBuf::from)
            .join(format!("strict_host_mpi{}", level + 1));
        let status = Command::new("cc")
            .args(["-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-DFOR_MPI2={level}"))
            .arg(format!("-I{}", root.join("../include").display()))
            .arg(root.join("../tests/c/strict_host.c"))
            .arg("-ldl")
            .arg("-o")
            .arg(&out)
            .status()
            .expect("run cc");
        assert!(status.success(), "compiling strict_host.c failed");
        out
    })
}

/// valgrind's exit code when it found an error.
pub const VALGRIND_ERROR: i32 = 99;

/// The command that runs the strict host, under valgrind if asked. A
/// missing valgrind fails the test: scripts/setup-mpis installs it.
pub fn command(valgrind: bool) -> Command {
    if !valgrind {
        return Command::new(binary());
    }
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "valgrind is missing: install it (scripts/setup-mpis installs the Debian package)"
    );
    let mut c = Command::new("valgrind");
    c.args([
        "-q",
        &format!("--error-exitcode={VALGRIND_ERROR}"),
        "--exit-on-first-error=yes",
    ])
    .arg(binary());
    c
}

/// A recorded process as the strict host reads it: its types by typedef
/// name only (tag-only structs left out, as a debugger that evaluates
/// `sizeof(NAME)` cannot find them), its symbols and its memory.
pub fn description(snap: &Snapshot) -> String {
    let mut d = String::new();
    let s = snap.type_sizes;
    d.push_str(&format!(
        "sizes {} {} {} {} {}\n",
        s[0], s[1], s[2], s[3], s[4]
    ));
    for (name, addr) in &snap.symbols {
        d.push_str(&format!("symbol {name} {addr:#x}\n"));
    }
    for (name, t) in snap.types.iter().filter(|(_, t)| !t.tag_only) {
        d.push_str(&format!("type {name} {}\n", t.size));
        for (field, offset) in &t.fields {
            d.push_str(&format!("field {field} {offset}\n"));
        }
    }
    for r in &snap.memory {
        if !from_hex(&r.hex).is_empty() {
            d.push_str(&format!("memory {:#x} {}\n", r.addr, r.hex));
        }
    }
    d
}

/// One session's summary line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub failed: bool,
    pub comms: u64,
    pub ops: u64,
    /// mqs_end_of_list from setup_operation_iterator.
    pub setup_eol: u64,
    /// ... from setup_communicator_iterator.
    pub comm_eol: u64,
    /// Structures the DLL left partly unwritten.
    pub unwritten: u64,
    /// Iterations stopped by the host's cap.
    pub endless: u64,
    pub fetches: u64,
    /// The 256-byte reads behind the fetches.
    pub pieces: u64,
    /// Codes other than mqs_ok, mqs_no_information, mqs_end_of_list.
    pub codes: Vec<i32>,
}

impl Summary {
    pub fn parse(line: &str) -> Result<Summary, String> {
        let rest = line
            .strip_prefix("result ")
            .ok_or_else(|| format!("not a result line: {line}"))?;
        let mut s = Summary::default();
        for item in rest.split_whitespace() {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("bad item {item} in {line}"))?;
            let num = || {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{key}: {e} in {line}"))
            };
            match key {
                "failed" => s.failed = num()? != 0,
                "comms" => s.comms = num()?,
                "ops" => s.ops = num()?,
                "setup_eol" => s.setup_eol = num()?,
                "comm_eol" => s.comm_eol = num()?,
                "unwritten" => s.unwritten = num()?,
                "endless" => s.endless = num()?,
                "fetches" => s.fetches = num()?,
                "pieces" => s.pieces = num()?,
                "codes" if value == "-" => {}
                "codes" => {
                    s.codes = value
                        .split(',')
                        .map(|c| c.parse().map_err(|e| format!("code {c}: {e}")))
                        .collect::<Result<_, String>>()?
                }
                _ => return Err(format!("unknown item {key} in {line}")),
            }
        }
        Ok(s)
    }
}

/// An operation as the strict host read it from the raw structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOp {
    pub tag_wild: i32,
    /// desired_tag as written, whatever tag_wild says.
    pub desired_tag: i64,
    /// The same read as hosts read it (tag_wild: no tag).
    pub op: PendingOperation,
}

/// One communicator as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub unique_id: u64,
    pub local_rank: i64,
    pub size: i64,
    pub name: String,
    pub group: Option<Vec<i64>>,
    /// (class, setup return code, operations).
    pub queues: Vec<(OpClass, i32, Vec<RawOp>)>,
}

/// What one session printed in full.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub comms: Vec<Comm>,
    /// Callback counts by kind, plus `pieces` and `refused_types`.
    pub counts: BTreeMap<String, u64>,
    /// "what:name" for each symbol or type asked for and not found.
    pub missing: Vec<String>,
    pub summary: Summary,
    pub verdict_ok: bool,
    pub text: String,
}

fn int<T: std::str::FromStr>(w: Option<&str>, line: &str) -> Result<T, String> {
    w.and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("bad number in: {line}"))
}

impl Listing {
    pub fn parse(text: &str) -> Result<Listing, String> {
        let mut l = Listing {
            text: text.to_string(),
            ..Listing::default()
        };
        let mut summary = None;
        for line in text.lines() {
            let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
            let mut w = rest.split_whitespace();
            match head {
                "comm" => {
                    let mut parts = rest.splitn(4, ' ');
                    l.comms.push(Comm {
                        unique_id: int(parts.next(), line)?,
                        local_rank: int(parts.next(), line)?,
                        size: int(parts.next(), line)?,
                        name: parts.next().unwrap_or("").to_string(),
                        group: None,
                        queues: Vec::new(),
                    });
                }
                "group" => {
                    let comm = l.comms.last_mut().ok_or("group before comm")?;
                    if !rest.starts_with("error") {
                        comm.group = Some(
                            w.map(|r| r.parse().map_err(|e| format!("{e}: {line}")))
                                .collect::<Result<_, String>>()?,
                        );
                    }
                }
                "queue" => {
                    let comm = l.comms.last_mut().ok_or("queue before comm")?;
                    let class = match w.next() {
                        Some("sends") => OpClass::PendingSends,
                        Some("receives") => OpClass::PendingReceives,
                        Some("unexpected") => OpClass::UnexpectedMessages,
                        _ => return Err(format!("bad queue: {line}")),
                    };
                    comm.queues.push((class, int(w.next(), line)?, Vec::new()));
                }
                "op" => {
                    let v: Vec<&str> = w.collect();
                    if v.len() != 12 {
                        return Err(format!("bad op: {line}"));
                    }
                    let n = |i: usize| -> Result<i64, String> { int(Some(v[i]), line) };
                    let tag_wild = n(3)? as i32;
                    let raw = RawOp {
                        tag_wild,
                        desired_tag: n(4)?,
                        op: PendingOperation {
                            status: mqs_abi::OpStatus::from_raw(n(0)? as i32),
                            desired_local_rank: n(1)?,
                            desired_global_rank: n(2)?,
                            desired_tag: (tag_wild == 0).then_some(n(4)?),
                            desired_length: n(5)?,
                            system_buffer: n(6)? != 0,
                            buffer: u64::from_str_radix(v[7].trim_start_matches("0x"), 16)
                                .map_err(|e| format!("{e}: {line}"))?,
                            actual_local_rank: n(8)?,
                            actual_global_rank: n(9)?,
                            actual_tag: n(10)?,
                            actual_length: n(11)?,
                            extra_text: Default::default(),
                        },
                    };
                    let queue = l
                        .comms
                        .last_mut()
                        .and_then(|c| c.queues.last_mut())
                        .ok_or("op outside a queue")?;
                    queue.2.push(raw);
                }
                "text" => {
                    let op = l
                        .comms
                        .last_mut()
                        .and_then(|c| c.queues.last_mut())
                        .and_then(|q| q.2.last_mut())
                        .ok_or("text outside an op")?;
                    op.op.extra_text.push(rest);
                }
                "counts" => {
                    for item in w {
                        let (k, v) = item.split_once('=').ok_or("bad count")?;
                        l.counts.insert(k.to_string(), int(Some(v), line)?);
                    }
                }
                "missing" => l.missing.push(rest.to_string()),
                "result" => summary = Some(Summary::parse(line)?),
                "verdict" => l.verdict_ok = rest == "ok",
                _ => {}
            }
        }
        l.summary = summary.ok_or("no result line")?;
        Ok(l)
    }

    /// The operations of a communicator's queue, read as hosts read them.
    pub fn ops(&self, comm: &str, class: OpClass) -> Option<Vec<PendingOperation>> {
        let c = self.comms.iter().find(|c| c.name == comm)?;
        let q = c.queues.iter().find(|q| q.0 == class)?;
        Some(q.2.iter().map(|r| r.op.clone()).collect())
    }

    pub fn count(&self, kind: &str) -> u64 {
        self.counts.get(kind).copied().unwrap_or(0)
    }
}

/// Runs the strict host on one description file; the listing and
/// valgrind's verdict (None when not run under valgrind).
pub fn run_one(description: &Path, valgrind: bool) -> (Result<Listing, String>, Option<bool>) {
    let out = command(valgrind)
        .arg(cdylib())
        .arg(description)
        .output()
        .expect("run strict_host");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let clean = valgrind.then(|| out.status.code() != Some(VALGRIND_ERROR) && err.is_empty());
    let listing = Listing::parse(&text).map_err(|e| {
        format!(
            "{e}\nstrict_host exited {:?}\nstdout:\n{text}\nstderr:\n{err}",
            out.status
        )
    });
    (listing, clean)
}

/// A strict host serving sessions over a pipe (fuzzing).
#[derive(Debug)]
pub struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub sessions: u64,
}

impl Server {
    /// Starts a host and loads the base descriptions (bases 0, 1, ...).
    pub fn start(bases: &[PathBuf], valgrind: bool) -> Result<Server, String> {
        let mut child = command(valgrind)
            .arg(cdylib())
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("start strict_host: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut server = Server {
            child,
            stdin,
            stdout,
            sessions: 0,
        };
        for (i, base) in bases.iter().enumerate() {
            server.send(&format!("load {}\n", base.display()))?;
            let line = server.line()?;
            if line != format!("loaded {i}") {
                return Err(server.died(&format!("loading {}: {line}", base.display())));
            }
        }
        Ok(server)
    }

    fn send(&mut self, text: &str) -> Result<(), String> {
        self.stdin
            .write_all(text.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| self.died(&format!("writing to strict_host: {e}")))
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err(self.died("strict_host closed its output")),
            Ok(_) => Ok(line.trim_end().to_string()),
            Err(e) => Err(self.died(&format!("reading strict_host: {e}"))),
        }
    }

    /// What the host (or valgrind) said when it went away.
    fn died(&mut self, what: &str) -> String {
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        format!(
            "{what} after {} sessions; exit {status:?}; stderr:\n{err}",
            self.sessions
        )
    }

    /// Runs one session: base `base` with `patches` applied.
    pub fn run(&mut self, base: usize, patches: &[Patch]) -> Result<Summary, String> {
        self.send_session(base, patches, "run\n")?;
        let line = self.line()?;
        self.sessions += 1;
        Summary::parse(&line).map_err(|e| self.died(&e))
    }

    /// Runs one session, base `base` with `patches` applied, with the full
    /// listing.
    pub fn run_listing(&mut self, base: usize, patches: &[Patch]) -> Result<Listing, String> {
        self.send_session(base, patches, "run full\n")?;
        self.listing()
    }

    fn send_session(&mut self, base: usize, patches: &[Patch], run: &str) -> Result<(), String> {
        let mut cmds = format!("session {base}\n");
        for p in patches {
            match p {
                Patch::Write(addr, bytes) => {
                    cmds.push_str(&format!("write {addr:#x} "));
                    for b in bytes {
                        cmds.push_str(&format!("{b:02x}"));
                    }
                    cmds.push('\n');
                }
                Patch::Unmap(addr) => cmds.push_str(&format!("unmap {addr:#x}\n")),
                Patch::TypeSize(name, size) => cmds.push_str(&format!("typesize {name} {size}\n")),
                Patch::Field(name, field, offset) => {
                    cmds.push_str(&format!("field {name} {field} {offset}\n"))
                }
            }
        }
        cmds.push_str(run);
        self.send(&cmds)
    }

    /// Runs base `base` unchanged, with the full listing.
    pub fn run_full(&mut self, base: usize) -> Result<Listing, String> {
        self.run_listing(base, &[])
    }

    fn listing(&mut self) -> Result<Listing, String> {
        let mut text = String::new();
        loop {
            let line = self.line()?;
            text.push_str(&line);
            text.push('\n');
            if line.starts_with("result ") {
                break;
            }
        }
        self.sessions += 1;
        Listing::parse(&text).map_err(|e| self.died(&e))
    }

    /// Ends the host; Err with its stderr if it (or valgrind) failed.
    pub fn finish(mut self) -> Result<(), String> {
        self.send("quit\n")?;
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        if status.success() && err.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "strict_host ended with {status} after {} sessions; stderr:\n{err}",
                self.sessions
            ))
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
