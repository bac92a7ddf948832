//! MPIR process acquisition: a starter (`mpirun`, `mpiexec`) lists the
//! processes of its job in `MPIR_proctable`, an array of
//! `MPIR_PROCDESC { char *host_name; char *executable_name; int pid; }`
//! with `MPIR_proctable_size` entries, indexed by MPI_COMM_WORLD rank.
//!
//! Only reading happens here: the table of a running job is filled in by
//! the starter, so a tool attaching later needs no breakpoint.

use crate::{Error, Result};
use mqs_core::interface::{read_c_string, read_word, ImageSymbols, Target};

/// Most entries believed (a corrupt size must not make us read gigabytes).
const MAX_PROCS: i64 = 1 << 22;
const MAX_STRING: usize = 4096;

/// One process of the job, as the starter describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcDesc {
    pub rank: usize,
    pub host: String,
    pub executable: String,
    pub pid: i32,
}

/// The layout of an MPIR_PROCDESC entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntryLayout {
    size: u64,
    host: u64,
    executable: u64,
    pid: u64,
}

/// The layout the MPIR specification gives: two pointers and an int,
/// padded to the pointer's alignment.
fn spec_layout(word: u64) -> EntryLayout {
    EntryLayout {
        size: 3 * word,
        host: 0,
        executable: word,
        pid: 2 * word,
    }
}

/// Whether the process is an MPIR starter (it has the breakpoint function
/// and the process table).
pub fn is_starter(symbols: &dyn ImageSymbols) -> bool {
    symbols.find_function("MPIR_Breakpoint").is_some()
        && symbols.find_symbol("MPIR_proctable").is_some()
        && symbols.find_symbol("MPIR_proctable_size").is_some()
}

fn layout(symbols: &dyn ImageSymbols, word: u32) -> EntryLayout {
    let from_dwarf = ["MPIR_PROCDESC", "struct MPIR_PROCDESC"]
        .iter()
        .find_map(|name| symbols.find_type(name))
        .and_then(|t| {
            Some(EntryLayout {
                size: t.size?,
                host: t.field_offset("host_name")?,
                executable: t.field_offset("executable_name")?,
                pid: t.field_offset("pid")?,
            })
        });
    from_dwarf.unwrap_or_else(|| spec_layout(u64::from(word)))
}

/// Reads the starter's process table; empty when the process has none
/// (a rank whose MPI library holds the MPIR symbols, or a starter whose job
/// has not started).
pub fn read_proctable(target: &dyn Target, symbols: &dyn ImageSymbols) -> Result<Vec<ProcDesc>> {
    let pid = target.pid();
    let not_ready = |detail: &str| Error::NotMpi {
        pid,
        detail: format!("it is an MPI starter but {detail}"),
    };
    let size_addr = symbols
        .find_symbol("MPIR_proctable_size")
        .ok_or_else(|| not_ready("has no MPIR_proctable_size"))?;
    let table_addr = symbols
        .find_symbol("MPIR_proctable")
        .ok_or_else(|| not_ready("has no MPIR_proctable"))?;
    let mut int = [0u8; 4];
    target.read(size_addr, &mut int)?;
    let size = i64::from(i32::from_ne_bytes(int));
    if !(0..=MAX_PROCS).contains(&size) {
        return Err(not_ready(&format!("its MPIR_proctable_size is {size}")));
    }
    let word = target.pointer_size();
    let table = read_word(target, table_addr, word)?;
    // MPI ranks of some MPIs (Open MPI: libopen-rte) carry the MPIR symbols
    // too, with an empty table: that is for the caller to tell apart.
    if size == 0 || table == 0 {
        return Ok(Vec::new());
    }
    let layout = layout(symbols, word);
    let mut entries = Vec::with_capacity(size as usize);
    for rank in 0..size as u64 {
        let base = table + rank * layout.size;
        let host = string_at(target, read_word(target, base + layout.host, word)?);
        let executable = string_at(target, read_word(target, base + layout.executable, word)?);
        target.read(base + layout.pid, &mut int)?;
        entries.push(ProcDesc {
            rank: rank as usize,
            host,
            executable,
            pid: i32::from_ne_bytes(int),
        });
    }
    Ok(entries)
}

/// A string the table points at; unreadable or NULL reads as empty.
fn string_at(target: &dyn Target, addr: u64) -> String {
    if addr == 0 {
        return String::new();
    }
    read_c_string(target, addr, MAX_STRING).unwrap_or_default()
}

/// `MPIR_debug_state` values.
pub const MPIR_NULL: i32 = 0;
pub const MPIR_DEBUG_SPAWNED: i32 = 1;
pub const MPIR_DEBUG_ABORTING: i32 = 2;

/// Where a starter keeps what a tool that launches it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StarterSymbols {
    /// `MPIR_Breakpoint`, where the starter announces events.
    pub breakpoint: u64,
    pub debug_state: u64,
    /// Written by the tool: 1 while a tool is present.
    pub being_debugged: Option<u64>,
    pub abort_string: Option<u64>,
    /// The starter holds the job at start itself; no gate needs opening.
    pub partial_attach_ok: bool,
}

impl StarterSymbols {
    /// The starter's MPIR symbols, once they are mapped.
    pub fn find(symbols: &dyn ImageSymbols) -> Option<Self> {
        Some(Self {
            breakpoint: symbols.find_function("MPIR_Breakpoint")?,
            debug_state: symbols.find_symbol("MPIR_debug_state")?,
            being_debugged: symbols.find_symbol("MPIR_being_debugged"),
            abort_string: symbols.find_symbol("MPIR_debug_abort_string"),
            partial_attach_ok: symbols.find_symbol("MPIR_partial_attach_ok").is_some(),
        })
    }
}

/// `MPIR_debug_state` now.
pub fn debug_state(target: &dyn Target, symbols: &StarterSymbols) -> Result<i32> {
    let mut int = [0u8; 4];
    target.read(symbols.debug_state, &mut int)?;
    Ok(i32::from_ne_bytes(int))
}

/// Why the job is aborting, as the starter says (empty when it does not).
pub fn abort_string(target: &dyn Target, symbols: &StarterSymbols) -> String {
    let Some(addr) = symbols.abort_string else {
        return String::new();
    };
    read_word(target, addr, target.pointer_size())
        .map(|p| string_at(target, p))
        .unwrap_or_default()
}

/// The length the MPIR specification gives `MPIR_executable_path` (some
/// starters have more room; none less).
pub const EXECUTABLE_PATH_LEN: usize = 256;
/// The same for `MPIR_server_arguments`.
pub const SERVER_ARGUMENTS_LEN: usize = 1024;

/// Where a starter that implements the tool-daemon launch extension keeps
/// what a tool writes to have it start a program on every node of the job
/// (MPIR 1.1, sections 7.1 and 7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDaemonSymbols {
    /// `char MPIR_executable_path[]`: the program.
    pub executable_path: u64,
    /// `char MPIR_server_arguments[]`: its arguments.
    pub server_arguments: u64,
    /// `int MPIR_being_debugged`: set to make the starter look.
    pub being_debugged: u64,
    /// `char MPIR_attach_fifo[]`: the FIFO a byte 1 is written into to make
    /// the starter look now (Open MPI); absent where the starter polls.
    pub attach_fifo: Option<u64>,
}

impl ToolDaemonSymbols {
    /// The extension's variables, if the starter has them.
    pub fn find(symbols: &dyn ImageSymbols) -> Option<Self> {
        Some(Self {
            executable_path: symbols.find_symbol("MPIR_executable_path")?,
            server_arguments: symbols.find_symbol("MPIR_server_arguments")?,
            being_debugged: symbols.find_symbol("MPIR_being_debugged")?,
            attach_fifo: symbols.find_symbol("MPIR_attach_fifo"),
        })
    }
}

/// `MPIR_attach_fifo` now: the FIFO's path, if the starter made one.
pub fn attach_fifo(target: &dyn Target, symbols: &ToolDaemonSymbols) -> Option<String> {
    let addr = symbols.attach_fifo?;
    read_c_string(target, addr, EXECUTABLE_PATH_LEN)
        .ok()
        .filter(|path| !path.is_empty())
}

/// The bytes written into `MPIR_executable_path`: the path, NUL, and zeros
/// to the end of the specified length (so nothing of an earlier, longer
/// value is left).
pub fn encode_executable_path(path: &str) -> Result<Vec<u8>> {
    if path.is_empty() || path.contains('\0') || path.len() >= EXECUTABLE_PATH_LEN {
        return Err(Error::Usage(format!(
            "the collector path {path:?} does not fit MPIR_executable_path \
             (1 to {} bytes, no NUL)",
            EXECUTABLE_PATH_LEN - 1
        )));
    }
    let mut bytes = path.as_bytes().to_vec();
    bytes.resize(EXECUTABLE_PATH_LEN, 0);
    Ok(bytes)
}

/// The bytes written into `MPIR_server_arguments`: each argument followed
/// by a NUL, one more NUL after the last, and zeros to the end of the
/// specified length (a starter such as Open MPI's reads the whole array and
/// would take leftovers of an earlier value for more arguments).
pub fn encode_server_arguments(args: &[String]) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for arg in args {
        // An empty argument would end the list early.
        if arg.is_empty() || arg.contains('\0') {
            return Err(Error::Usage(format!(
                "collector argument {arg:?}: MPIR_server_arguments cannot pass an empty \
                 argument or a NUL"
            )));
        }
        bytes.extend_from_slice(arg.as_bytes());
        bytes.push(0);
    }
    bytes.push(0);
    if bytes.len() > SERVER_ARGUMENTS_LEN {
        return Err(Error::Usage(format!(
            "the collector's arguments take {} bytes, more than MPIR_server_arguments holds ({})",
            bytes.len(),
            SERVER_ARGUMENTS_LEN
        )));
    }
    bytes.resize(SERVER_ARGUMENTS_LEN, 0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_arguments_end_in_a_double_nul_and_are_padded() {
        let args: Vec<String> = ["-callback", "10.0.0.10", "has spaces and\ttabs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let bytes = encode_server_arguments(&args).unwrap();
        assert_eq!(bytes.len(), SERVER_ARGUMENTS_LEN);
        let text = b"-callback\x0010.0.0.10\x00has spaces and\ttabs\x00\x00";
        assert_eq!(&bytes[..text.len()], text);
        assert!(bytes[text.len()..].iter().all(|&b| b == 0));
        // Split the way a starter does: up to the first empty string.
        let parsed: Vec<&[u8]> = bytes
            .split(|&b| b == 0)
            .take_while(|a| !a.is_empty())
            .collect();
        assert_eq!(parsed.len(), 3);
        assert_eq!(
            encode_server_arguments(&[]).unwrap(),
            vec![0; SERVER_ARGUMENTS_LEN]
        );
    }

    #[test]
    fn arguments_that_cannot_be_passed_are_refused() {
        for bad in [
            vec![String::new()],
            vec!["a\0b".into()],
            vec!["x".repeat(1023)],
        ] {
            assert!(
                matches!(encode_server_arguments(&bad), Err(Error::Usage(_))),
                "{bad:?}"
            );
        }
        // 1022 bytes, its NUL and the final NUL: exactly full.
        assert!(encode_server_arguments(&["x".repeat(1022)]).is_ok());
    }

    #[test]
    fn executable_path_is_padded_and_bounded() {
        let bytes = encode_executable_path("/opt/mqs/bin/mqs-dump").unwrap();
        assert_eq!(bytes.len(), EXECUTABLE_PATH_LEN);
        assert!(bytes.starts_with(b"/opt/mqs/bin/mqs-dump\0"));
        assert!(encode_executable_path("").is_err());
        assert!(encode_executable_path(&"x".repeat(256)).is_err());
        assert!(encode_executable_path(&"x".repeat(255)).is_ok());
    }
}
