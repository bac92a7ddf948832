//! UCX's tag matching (UCP) as the DLL reads it from a worker, for any MPI
//! that sends through UCX: the layouts ([`layout`]) and the bounded walks
//! ([`matching`]), and the operations they hold as the DLL reports them
//! ([`operations`]). What the 64-bit tags mean is the MPI's (Open MPI's pml
//! ucx: [`crate::openmpi::pml_ucx`]; MPICH's ucx netmod:
//! [`crate::mpich::ucx`]).

pub mod layout;
pub mod matching;
pub mod operations;
pub mod sends;

pub use operations::Tag;

use crate::access::ProcessAccess;
use crate::target::Target;

/// "UCX 1.13.1", or "UCX (version unknown)": how messages name the UCX a
/// process runs.
pub fn version_name(version: Option<[u32; 3]>) -> String {
    match version {
        Some([a, b, c]) => format!("UCX {a}.{b}.{c}"),
        None => "UCX (version unknown)".to_string(),
    }
}

/// Why UCX's queues cannot be read, from the first name missing: without
/// its first type, libucp has no types here at all (no debug information
/// and no pack), which a user fixes on their side; any other name missing
/// is a UCX whose layout we do not know.
pub fn unreadable(version: Option<[u32; 3]>, missing: crate::types::Missing) -> String {
    let name = version_name(version);
    match missing {
        crate::types::Missing::Type(t) if t == layout::names::WORKER => format!(
            "{name}'s types are not known here: type {t} missing (libucp.so.0 has no debug \
             information: install its debug symbols, point --debug-dir at them, or add its type \
             pack)"
        ),
        other => format!("{name} not supported: {other} missing"),
    }
}

/// UCX's version, read from the code of `ucp_get_version` at `function`
/// (the library records it nowhere else): compiled for x86-64 it is three
/// `movl $imm32, (reg)` to the major, minor and release pointers (rdi,
/// rsi, rdx) and a `ret`. Any other code: None, the version unknown.
pub fn read_version<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    function: u64,
) -> Option<[u32; 3]> {
    let code = t.read_bytes(function, 19).ok()?;
    let mut version = [None; 3];
    for store in code[..18].chunks(6) {
        // c7 /0 with ModRM mod=00: rdi 07, rsi 06, rdx 02.
        let slot = match store {
            [0xc7, 0x07, ..] => 0,
            [0xc7, 0x06, ..] => 1,
            [0xc7, 0x02, ..] => 2,
            _ => return None,
        };
        let imm = u32::from_le_bytes(store[2..6].try_into().ok()?);
        version[slot] = Some(imm);
    }
    if code[18] != 0xc3 {
        return None;
    }
    Some([version[0]?, version[1]?, version[2]?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{ByteOrder, Sizes};
    use crate::testing::FakeProcess;

    #[test]
    fn the_version_comes_from_ucp_get_version_code() {
        // UCX 1.13.1's, as gcc -O2 compiled it.
        let code = [
            0xc7, 0x07, 1, 0, 0, 0, 0xc7, 0x06, 13, 0, 0, 0, 0xc7, 0x02, 1, 0, 0, 0, 0xc3,
        ];
        let mut p = FakeProcess::new();
        p.map(0x1000, code.to_vec());
        // Other code (another compiler, another architecture): unknown.
        let mut other = code;
        other[18] = 0x90;
        p.map(0x2000, other.to_vec());
        p.map(0x3000, vec![0x55; 19]);
        let t = Target::new(&p, Sizes::LP64, ByteOrder::Same);
        assert_eq!(read_version(&t, 0x1000), Some([1, 13, 1]));
        assert_eq!(read_version(&t, 0x2000), None);
        assert_eq!(read_version(&t, 0x3000), None);
        assert_eq!(read_version(&t, 0x9000), None);
    }
}
