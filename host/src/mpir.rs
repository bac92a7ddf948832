//! MPIR process acquisition: a starter (`mpirun`, `mpiexec`) lists the
//! processes of its job in `MPIR_proctable`, an array of
//! `MPIR_PROCDESC { char *host_name; char *executable_name; int pid; }`
//! with `MPIR_proctable_size` entries, indexed by MPI_COMM_WORLD rank.
//!
//! Only reading happens here: the table of a running job is filled in by
//! the starter, so a tool attaching later needs no breakpoint.

use crate::dll::ImageSymbols;
use crate::process::{read_c_string, read_word, Target};
use crate::{Error, Result};

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

/// Whether a host name from the table is this machine: empty, `localhost`
/// (or `localhost.localdomain`), a loopback address, or this host's own
/// name, short or qualified.
pub fn is_local_host(host: &str) -> bool {
    let host = host.trim();
    if host.is_empty()
        || host == "localhost"
        || host.starts_with("localhost.")
        || host.starts_with("127.")
        || host == "::1"
    {
        return true;
    }
    let ours = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let short = |h: &str| h.split('.').next().unwrap_or("").to_string();
    !ours.is_empty() && short(&ours) == short(host)
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
