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

use crate::access::{ImageAccess, ProcessAccess};
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

/// The oldest UCX whose flag values ([`layout::request_flags`],
/// [`layout::rdesc_flags`]) are ours. Before 1.8 a rendezvous descriptor
/// was bit 5, not 6, and before 1.7 no request said it was a tag send. From
/// 1.8.0 to 1.22.0 (checked in UCX's history) they and the hash table's
/// size have not changed.
pub const OLDEST_SUPPORTED: [u32; 2] = [1, 8];

/// Refuses a UCX older than [`OLDEST_SUPPORTED`], whose flag bits mean
/// other things: its fields resolve all the same, so only its version
/// tells. A version not read is let through: the layouts are still
/// checked field by field, and the transport line says it is unknown.
pub fn check_version(version: Option<[u32; 3]>) -> Result<(), String> {
    match version {
        Some([a, b, _]) if [a, b] < OLDEST_SUPPORTED => Err(format!(
            "{} not supported: its request and descriptor flag bits differ before UCX {}.{}",
            version_name(version),
            OLDEST_SUPPORTED[0],
            OLDEST_SUPPORTED[1]
        )),
        _ => Ok(()),
    }
}

/// The version of the UCX an image links, from its `ucp_get_version`
/// ([`read_version`]); None when the function is absent or its code is not
/// the one we know.
pub fn version_of<I: ImageAccess, P: ProcessAccess + ?Sized>(
    image: &I,
    t: &Target<'_, P>,
) -> Option<[u32; 3]> {
    image
        .find_function(layout::names::FN_VERSION)
        .and_then(|f| read_version(t, f))
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

    #[test]
    fn a_ucx_older_than_1_8_is_refused_with_its_version() {
        assert_eq!(check_version(Some([1, 13, 1])), Ok(()));
        assert_eq!(check_version(Some([1, 8, 0])), Ok(()));
        assert_eq!(check_version(Some([2, 0, 0])), Ok(()));
        assert_eq!(check_version(None), Ok(()));
        assert_eq!(
            check_version(Some([1, 7, 0])),
            Err(
                "UCX 1.7.0 not supported: its request and descriptor flag bits differ before \
                 UCX 1.8"
                    .to_string()
            )
        );
        assert!(check_version(Some([0, 9, 9])).is_err());
    }
}
