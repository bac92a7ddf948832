//! The runtime invariants that guard every type pack: before a DLL reads a
//! process through a pack, the pack must read the process right where the
//! answers are known. For Open MPI:
//!
//! - `MPIR_debug_typedefs_sizeof` holds the sizes the pack's DWARF gave;
//! - MPI_COMM_WORLD's name (`c_name`) reads `MPI_COMM_WORLD`;
//! - its local group's size (`grp_proc_count`) is the job size, and its
//!   `c_my_rank` the rank, where the environment says them;
//! - with ob1's pack: the world's `c_pml_comm` has `num_procs` = the size;
//! - with the packs of pml ucx or UCX's libucp, when pml ucx runs: the
//!   worker's list of unexpected messages (`tm.unexpected.all`, a circular
//!   doubly linked list) links back to itself both ways.
//!
//! For MPICH (no `ompi_mpi_comm_world`, a `MPIR_Comm_builtin`): its first
//! builtin communicator has MPI_COMM_WORLD's handle and name, the job's
//! size (`remote_size`) and the process's rank.
//!
//! A pack that fails one is refused with the reason, never used to guess.

use std::path::PathBuf;

use crate::members::MpiEnvironment;
use crate::{Error, Result};
use mqs_core::interface::{read_word, ImageSymbols, Target, TypeLayout};
use mqs_core::symbols::{SymbolIndex, TypeSource};

const WORLD: &str = "ompi_mpi_comm_world";
const TYPEDEFS: &str = "MPIR_debug_typedefs_sizeof";
/// Sizes beyond this are not a job (and not a group we believe).
const MAX_PROCS: u64 = 1 << 24;

/// The packs a process's symbols answer from: (library, pack file), but
/// those borrowed from another build (`super::borrowed` checks them).
pub fn packs_in_use(index: &SymbolIndex) -> Vec<(PathBuf, PathBuf, String)> {
    index
        .objects()
        .into_iter()
        .filter(|(object, _)| !object.pack().is_some_and(|f| f.borrowed))
        .filter_map(|(object, _)| match object.type_source() {
            TypeSource::Pack(pack) => Some((
                object.path().to_owned(),
                pack,
                object.build_id_hex().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

/// Checks every pack the index answers from against the process. Returns
/// what was checked (empty when no pack is in use).
pub fn check(
    target: &dyn Target,
    index: &SymbolIndex,
    env: &MpiEnvironment,
) -> Result<Vec<String>> {
    let in_use = packs_in_use(index);
    if in_use.is_empty() {
        return Ok(Vec::new());
    }
    let typedefs = in_use.iter().find_map(|(_, pack, _)| {
        mqs_core::symbols::typepack::TypePack::load(pack)
            .ok()
            .and_then(|p| p.checks.typedefs_sizeof)
    });
    check_packs(target, index, &in_use, typedefs.as_deref(), env)
}

/// The invariants of [`check`], with the process's symbols and types
/// (answered from `in_use`, as [`packs_in_use`] lists them) behind the
/// interfaces, and `typedefs` the sizes the packs' DWARF gave for
/// `MPIR_debug_typedefs_sizeof`, if they say.
pub fn check_packs(
    target: &dyn Target,
    symbols: &dyn ImageSymbols,
    in_use: &[(PathBuf, PathBuf, String)],
    typedefs: Option<&[i64]>,
    env: &MpiEnvironment,
) -> Result<Vec<String>> {
    let Some(first) = in_use.first() else {
        return Ok(Vec::new());
    };
    let refuse = |detail: String| {
        // The pack of the library the detail names, else the first.
        let (library, pack, id) = in_use
            .iter()
            .find(|(l, ..)| detail.contains(&*l.file_name().unwrap_or_default().to_string_lossy()))
            .unwrap_or(first)
            .clone();
        Error::TypePackRefused(Box::new(crate::error::PackRefusal {
            pack,
            library,
            build_id: id,
            detail,
        }))
    };
    let mut done = Vec::new();
    if symbols.find_symbol(WORLD).is_none() {
        if let Some(builtin) = symbols.find_symbol(MPICH_BUILTIN) {
            return check_mpich(target, symbols, builtin, env, &refuse);
        }
    }
    let world = symbols.find_symbol(WORLD).ok_or_else(|| {
        refuse(format!(
            "{WORLD} is not found: the host knows no invariants for this library, and uses a \
             pack only where it can check it"
        ))
    })?;
    let word = target.pointer_size();

    // 1. The library's own record of its base types.
    if let (Some(expected), Some(addr)) = (typedefs, symbols.find_symbol(TYPEDEFS)) {
        let mut actual = Vec::new();
        for i in 0..expected.len() as u64 {
            let mut b = [0u8; 4];
            target.read(addr + 4 * i, &mut b)?;
            actual.push(i64::from(i32::from_le_bytes(b)));
        }
        if actual != expected {
            return Err(refuse(format!(
                "{TYPEDEFS} holds {actual:?} in the process, the pack says {expected:?}"
            )));
        }
        done.push(format!("{TYPEDEFS} = {actual:?}"));
    }

    // 2. MPI_COMM_WORLD's name.
    let layout = |name: &'static str| symbols.find_type(name).map(|layout| Named { name, layout });
    let find_type =
        |name: &'static str| layout(name).ok_or_else(|| refuse(format!("the pack has no {name}")));
    let field = |t: &Named, name: &str| {
        t.layout
            .field_offset(name)
            .ok_or_else(|| refuse(format!("the pack has no field {name} of {}", t.name)))
    };
    let comm = find_type("ompi_communicator_t")?;
    let name_at = world + field(&comm, "c_name")?;
    let mut name = [0u8; 64];
    target.read(name_at, &mut name)?;
    let mut text = c_text(&name);
    if text != "MPI_COMM_WORLD" {
        // Open MPI 5 keeps a pointer to the name.
        let ptr = read_word(target, name_at, word).unwrap_or(0);
        if ptr != 0 && target.read(ptr, &mut name).is_ok() && c_text(&name) == "MPI_COMM_WORLD" {
            text = "MPI_COMM_WORLD".into();
        }
    }
    if text != "MPI_COMM_WORLD" {
        return Err(refuse(format!(
            "MPI_COMM_WORLD's name (ompi_communicator_t.c_name at offset {}) reads {text:?}, \
             not \"MPI_COMM_WORLD\" (or MPI is not initialised yet)",
            name_at - world
        )));
    }
    done.push("MPI_COMM_WORLD's name reads MPI_COMM_WORLD".into());

    // 3. Its group's size, and its rank.
    let group = find_type("ompi_group_t")?;
    let group_addr = read_word(target, world + field(&comm, "c_local_group")?, word)?;
    let mut count = [0u8; 4];
    target.read(group_addr + field(&group, "grp_proc_count")?, &mut count)?;
    let count = i32::from_le_bytes(count);
    match env.size {
        Some(size) if size != count => {
            return Err(refuse(format!(
                "MPI_COMM_WORLD's group has {count} processes (ompi_group_t.grp_proc_count), \
                 the job {size}"
            )))
        }
        None if count <= 0 || count as u64 > MAX_PROCS => {
            return Err(refuse(format!(
                "MPI_COMM_WORLD's group has {count} processes (ompi_group_t.grp_proc_count)"
            )))
        }
        _ => done.push(format!("MPI_COMM_WORLD's group has {count} processes")),
    }
    if let (Some(rank), Some(off)) = (env.rank, comm.layout.field_offset("c_my_rank")) {
        let mut r = [0u8; 4];
        target.read(world + off, &mut r)?;
        let mine = i32::from_le_bytes(r);
        if mine != rank {
            return Err(refuse(format!(
                "MPI_COMM_WORLD's c_my_rank reads {mine}, the process is rank {rank}"
            )));
        }
        done.push(format!("MPI_COMM_WORLD's rank is {rank}"));
    }

    // 4. ob1's communicator, when its pack is in use.
    let ob1_packed = in_use.iter().any(|(l, ..)| {
        l.file_name()
            .is_some_and(|n| n.to_string_lossy().contains("pml_ob1"))
    });
    if ob1_packed && layout("mca_pml_ob1_comm_t").is_some() {
        match super::borrowed::check_ob1(target, symbols) {
            Ok(Some(line)) => done.push(line),
            Ok(None) => {}
            Err(detail) => return Err(refuse(format!("mca_pml_ob1.so: {detail}"))),
        }
    }
    // 5. pml ucx's worker, when its pack or UCX's is in use.
    // Named by UCX's library if its pack is in use, else pml ucx's.
    let ucx_packed = ["libucp", "mca_pml_ucx"].iter().find_map(|prefix| {
        in_use.iter().find_map(|(l, ..)| {
            let n = l.file_name()?.to_string_lossy().into_owned();
            n.starts_with(prefix).then_some(n)
        })
    });
    if let Some(library) = ucx_packed {
        if let Some(checked) = check_ucx_worker(target, symbols, &library, &refuse)? {
            done.push(checked);
        }
    }
    Ok(done)
}

/// UCX's names as its sources spell them (the DLL's are in its
/// `ucx::layout::names`; the host reads these few for the check alone).
mod ucx {
    pub const MODULE: &str = "ompi_pml_ucx";
    pub const MODULE_TYPE: &str = "mca_pml_ucx_module_t";
    pub const MODULE_WORKER: &str = "ucp_worker";
    pub const WORKER: &str = "ucp_worker_t";
    pub const WORKER_TM: &str = "tm";
    pub const TAG_MATCH: &str = "ucp_tag_match_t";
    pub const TM_UNEXPECTED: &str = "unexpected.all";
    pub const LIST: &str = "ucs_list_link_t";
}

/// The worker's list of unexpected messages is a ring: its head's `next`
/// leads to a link whose `prev` is the head, and its `prev` to one whose
/// `next` is. A pack with a wrong offset on the way reads words that do
/// not. None: pml ucx does not run here (no module, or no worker).
fn check_ucx_worker(
    target: &dyn Target,
    symbols: &dyn ImageSymbols,
    library: &str,
    refuse: &dyn Fn(String) -> Error,
) -> Result<Option<String>> {
    let word = target.pointer_size();
    let Some(module) = symbols.find_symbol(ucx::MODULE) else {
        return Ok(None);
    };
    // Without UCX's types (no pack for libucp) the DLL says why it cannot
    // read UCX; there is nothing here to check.
    if symbols.find_type(ucx::WORKER).is_none() || symbols.find_type(ucx::MODULE_TYPE).is_none() {
        return Ok(None);
    }
    let offset = |ty: &str, field: &str| -> Result<u64> {
        symbols
            .find_type(ty)
            .and_then(|t| t.field_offset(field))
            .ok_or_else(|| refuse(format!("the pack has no field {field} of {ty}")))
    };
    let worker = read_word(
        target,
        module + offset(ucx::MODULE_TYPE, ucx::MODULE_WORKER)?,
        word,
    )?;
    if worker == 0 {
        return Ok(None);
    }
    let head =
        worker + offset(ucx::WORKER, ucx::WORKER_TM)? + offset(ucx::TAG_MATCH, ucx::TM_UNEXPECTED)?;
    let (next_off, prev_off) = (offset(ucx::LIST, "next")?, offset(ucx::LIST, "prev")?);
    let next = read_word(target, head + next_off, word)?;
    let prev = read_word(target, head + prev_off, word)?;
    let back = |at: u64, off: u64| read_word(target, at + off, word).ok();
    if next == 0
        || prev == 0
        || back(next, prev_off) != Some(head)
        || back(prev, next_off) != Some(head)
    {
        return Err(refuse(format!(
            "{library}: pml ucx's worker's list of unexpected messages \
             ({}.{} + {}.{}, {:#x} bytes into the worker) does not link back to itself",
            ucx::WORKER,
            ucx::WORKER_TM,
            ucx::TAG_MATCH,
            ucx::TM_UNEXPECTED,
            head - worker
        )));
    }
    Ok(Some(
        "pml ucx's worker's list of unexpected messages links back to itself".into(),
    ))
}

/// MPICH: its builtin communicators, MPI_COMM_WORLD first.
pub(crate) const MPICH_BUILTIN: &str = "MPIR_Comm_builtin";
/// MPI_COMM_WORLD's handle in MPICH (builtin, communicator, index 0).
const MPICH_WORLD_HANDLE: u32 = 0x4400_0000;

/// MPICH's invariants: `MPIR_Comm_builtin[0]` (MPI_COMM_WORLD, whether or
/// not MPICH was built with debugger support) has MPI_COMM_WORLD's handle
/// and name, the job's size (`remote_size`) and the process's rank.
fn check_mpich(
    target: &dyn Target,
    symbols: &dyn ImageSymbols,
    world: u64,
    env: &MpiEnvironment,
    refuse: &dyn Fn(String) -> Error,
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let comm = symbols
        .find_type("MPIR_Comm")
        .ok_or_else(|| refuse("the pack has no MPIR_Comm".into()))?;
    let field = |name: &str| {
        comm.field_offset(name)
            .ok_or_else(|| refuse(format!("the pack has no field {name} of MPIR_Comm")))
    };
    let int = |off: u64| -> Result<i32> {
        let mut b = [0u8; 4];
        target.read(world + off, &mut b)?;
        Ok(i32::from_le_bytes(b))
    };
    let handle = int(field("handle")?)? as u32;
    if handle != MPICH_WORLD_HANDLE {
        return Err(refuse(format!(
            "MPI_COMM_WORLD's handle (MPIR_Comm_builtin[0].handle) reads {handle:#x}, not \
             {MPICH_WORLD_HANDLE:#x} (or MPI is not initialised yet)"
        )));
    }
    done.push(format!("MPI_COMM_WORLD's handle is {handle:#x}"));
    let mut name = [0u8; 64];
    target.read(world + field("name")?, &mut name)?;
    let text = c_text(&name);
    if text != "MPI_COMM_WORLD" {
        return Err(refuse(format!(
            "MPI_COMM_WORLD's name (MPIR_Comm.name) reads {text:?}, not \"MPI_COMM_WORLD\""
        )));
    }
    done.push("MPI_COMM_WORLD's name reads MPI_COMM_WORLD".into());
    let size = int(field("remote_size")?)?;
    match env.size {
        Some(n) if n != size => {
            return Err(refuse(format!(
                "MPI_COMM_WORLD has {size} processes (MPIR_Comm.remote_size), the job {n}"
            )))
        }
        None if size <= 0 || size as u64 > MAX_PROCS => {
            return Err(refuse(format!(
                "MPI_COMM_WORLD has {size} processes (MPIR_Comm.remote_size)"
            )))
        }
        _ => done.push(format!("MPI_COMM_WORLD has {size} processes")),
    }
    if let Some(rank) = env.rank {
        let mine = int(field("rank")?)?;
        if mine != rank {
            return Err(refuse(format!(
                "MPI_COMM_WORLD's rank (MPIR_Comm.rank) reads {mine}, the process is rank {rank}"
            )));
        }
        done.push(format!("MPI_COMM_WORLD's rank is {rank}"));
    }
    Ok(done)
}

/// A type of the pack, with the name it was looked up by (for messages).
struct Named {
    name: &'static str,
    layout: TypeLayout,
}

fn c_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::typepack::fakes::{layout, Memory, Symbols};

    const WORLD_AT: u64 = 0x10000;
    const GROUP_AT: u64 = 0x20000;
    const OB1_AT: u64 = 0x30000;
    const TYPEDEFS_AT: u64 = 0x40000;
    const NAME_AT: u64 = 0x50000;
    /// Where ompi_communicator_t keeps its fields, in the process and in a
    /// right pack.
    const C_NAME: u64 = 0x10;
    const C_LOCAL_GROUP: u64 = 0x60;
    const C_MY_RANK: u64 = 0x68;
    const C_PML_COMM: u64 = 0x70;
    const GRP_PROC_COUNT: u64 = 0x4;
    const NUM_PROCS: u64 = 0x8;
    const SIZES: [i32; 5] = [2, 4, 8, 8, 8];

    /// Rank 2 of 4 of an Open MPI job, read through packs for libmpi and
    /// ob1 that describe it right.
    struct Case {
        memory: Memory,
        symbols: Symbols,
        in_use: Vec<(PathBuf, PathBuf, String)>,
        typedefs: Option<Vec<i64>>,
        env: MpiEnvironment,
    }

    impl Case {
        fn right() -> Self {
            let mut memory = Memory::default();
            let mut name = [0u8; 64];
            name[..14].copy_from_slice(b"MPI_COMM_WORLD");
            memory.write(WORLD_AT, &[0xaa; 0x80]);
            memory.write(WORLD_AT + C_NAME, &name);
            memory.write(WORLD_AT + C_LOCAL_GROUP, &GROUP_AT.to_le_bytes());
            memory.write(WORLD_AT + C_MY_RANK, &2i32.to_le_bytes());
            memory.write(WORLD_AT + C_PML_COMM, &OB1_AT.to_le_bytes());
            memory.write(GROUP_AT, &[0; 0x10]);
            memory.write(GROUP_AT + GRP_PROC_COUNT, &4i32.to_le_bytes());
            memory.write(OB1_AT, &[0; 0x10]);
            memory.write(OB1_AT + NUM_PROCS, &4u64.to_le_bytes());
            for (i, size) in SIZES.iter().enumerate() {
                memory.write(TYPEDEFS_AT + 4 * i as u64, &size.to_le_bytes());
            }
            let symbols = Symbols {
                symbols: [(WORLD, WORLD_AT), (TYPEDEFS, TYPEDEFS_AT)].into(),
                types: [
                    (
                        "ompi_communicator_t",
                        layout(&[
                            ("c_name", C_NAME),
                            ("c_local_group", C_LOCAL_GROUP),
                            ("c_my_rank", C_MY_RANK),
                            ("c_pml_comm", C_PML_COMM),
                        ]),
                    ),
                    (
                        "ompi_group_t",
                        layout(&[("grp_proc_count", GRP_PROC_COUNT)]),
                    ),
                    ("mca_pml_ob1_comm_t", layout(&[("num_procs", NUM_PROCS)])),
                ]
                .into(),
            };
            let pack = |library: &str, id: &str| {
                (
                    PathBuf::from(format!("/usr/lib/openmpi/{library}")),
                    PathBuf::from(format!("/packs/{id}.json")),
                    id.to_owned(),
                )
            };
            Case {
                memory,
                symbols,
                in_use: vec![
                    pack("libmpi.so.40", "aaaa"),
                    pack("openmpi3/mca_pml_ob1.so", "bbbb"),
                ],
                typedefs: Some(SIZES.iter().map(|s| i64::from(*s)).collect()),
                env: MpiEnvironment {
                    rank: Some(2),
                    job: None,
                    size: Some(4),
                },
            }
        }

        fn check(&self) -> Result<Vec<String>> {
            check_packs(
                &self.memory,
                &self.symbols,
                &self.in_use,
                self.typedefs.as_deref(),
                &self.env,
            )
        }

        /// The refusal, which must name the library and pack of `id`.
        fn refused(&self, id: &str) -> String {
            match self.check() {
                Err(Error::TypePackRefused(r)) => {
                    assert_eq!(r.build_id, id, "{r}");
                    assert_eq!(r.pack, PathBuf::from(format!("/packs/{id}.json")), "{r}");
                    r.detail
                }
                other => panic!("not refused: {other:?}"),
            }
        }

        fn field(&mut self, ty: &str, field: &str, offset: u64) {
            let layout = self.symbols.types.get_mut(ty).unwrap();
            layout
                .fields
                .iter_mut()
                .find(|(f, _)| f == field)
                .unwrap()
                .1 = offset;
        }
    }

    #[test]
    fn a_pack_that_reads_the_process_right_passes_every_invariant() {
        assert_eq!(
            Case::right().check().unwrap(),
            [
                "MPIR_debug_typedefs_sizeof = [2, 4, 8, 8, 8]",
                "MPI_COMM_WORLD's name reads MPI_COMM_WORLD",
                "MPI_COMM_WORLD's group has 4 processes",
                "MPI_COMM_WORLD's rank is 2",
                "ob1's MPI_COMM_WORLD has 4 procs, as its group",
            ]
        );
    }

    #[test]
    fn no_pack_in_use_is_nothing_to_check() {
        let mut case = Case::right();
        case.in_use.clear();
        case.memory = Memory::default();
        assert_eq!(case.check().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_world_name_that_reads_wrong_is_refused() {
        // The pack's c_name 8 bytes off: "_WORLD", a name, but not the one.
        let mut case = Case::right();
        case.field("ompi_communicator_t", "c_name", C_NAME + 8);
        let detail = case.refused("aaaa");
        assert!(
            detail.contains(
                "MPI_COMM_WORLD's name (ompi_communicator_t.c_name at offset 24) reads \"_WORLD\""
            ),
            "{detail}"
        );
        // Another communicator's name, and none (MPI not initialised).
        for name in [&b"MPI_COMM_SELF\0"[..], &[0u8]] {
            let mut case = Case::right();
            case.memory.write(WORLD_AT + C_NAME, name);
            let detail = case.refused("aaaa");
            assert!(detail.contains("c_name"), "{detail}");
            assert!(detail.contains("not \"MPI_COMM_WORLD\""), "{detail}");
        }
    }

    /// Open MPI 5 keeps a pointer to the name: it must lead to the right one.
    #[test]
    fn a_world_name_behind_a_pointer_is_followed() {
        let mut case = Case::right();
        let mut pointer = [0u8; 64];
        pointer[..8].copy_from_slice(&NAME_AT.to_le_bytes());
        case.memory.write(WORLD_AT + C_NAME, &pointer);
        case.memory.write(NAME_AT, b"MPI_COMM_WORLD\0");
        case.memory.write(NAME_AT + 15, &[0; 49]);
        assert!(case
            .check()
            .unwrap()
            .contains(&"MPI_COMM_WORLD's name reads MPI_COMM_WORLD".to_string()));
        case.memory.write(NAME_AT, b"MPI_COMM_SELF\0");
        assert!(case.refused("aaaa").contains("c_name"));
    }

    #[test]
    fn a_group_size_off_by_one_is_refused() {
        for count in [3i32, 5] {
            let mut case = Case::right();
            case.memory
                .write(GROUP_AT + GRP_PROC_COUNT, &count.to_le_bytes());
            let detail = case.refused("aaaa");
            assert_eq!(
                detail,
                format!(
                    "MPI_COMM_WORLD's group has {count} processes (ompi_group_t.grp_proc_count), \
                     the job 4"
                )
            );
        }
    }

    /// Without the job's size from the environment, only a size that is
    /// no job is refused.
    #[test]
    fn a_group_size_that_is_no_job_is_refused() {
        for (count, right) in [
            (4i32, true),
            (1, true),
            (0, false),
            (-1, false),
            (1 << 25, false),
        ] {
            let mut case = Case::right();
            case.env.size = None;
            case.memory
                .write(GROUP_AT + GRP_PROC_COUNT, &count.to_le_bytes());
            // ob1's count follows the group's, so only the group is judged.
            case.memory
                .write(OB1_AT + NUM_PROCS, &(count as u64).to_le_bytes());
            if right {
                assert!(case.check().is_ok(), "{count}: {:?}", case.check());
            } else {
                assert!(
                    case.refused("aaaa").contains("ompi_group_t.grp_proc_count"),
                    "{count}"
                );
            }
        }
    }

    #[test]
    fn a_rank_that_disagrees_is_refused() {
        let mut case = Case::right();
        case.memory.write(WORLD_AT + C_MY_RANK, &3i32.to_le_bytes());
        assert_eq!(
            case.refused("aaaa"),
            "MPI_COMM_WORLD's c_my_rank reads 3, the process is rank 2"
        );
        // Without a rank in the environment there is nothing to compare.
        case.env.rank = None;
        assert!(case.check().is_ok(), "{:?}", case.check());
    }

    #[test]
    fn ob1s_process_count_that_disagrees_is_refused_naming_ob1s_pack() {
        for num in [3u64, 5] {
            let mut case = Case::right();
            case.memory.write(OB1_AT + NUM_PROCS, &num.to_le_bytes());
            assert_eq!(
                case.refused("bbbb"),
                format!(
                    "mca_pml_ob1.so: ob1's MPI_COMM_WORLD has {num} procs \
                     (mca_pml_ob1_comm_t.num_procs), its group 4"
                )
            );
        }
        // ob1's count is checked only through ob1's own pack.
        let mut case = Case::right();
        case.memory.write(OB1_AT + NUM_PROCS, &5u64.to_le_bytes());
        case.in_use.truncate(1);
        assert_eq!(case.check().unwrap().len(), 4, "{:?}", case.check());
    }

    #[test]
    fn base_type_sizes_that_disagree_are_refused() {
        let mut case = Case::right();
        case.typedefs = Some(vec![2, 4, 4, 8, 8]);
        assert_eq!(
            case.refused("aaaa"),
            "MPIR_debug_typedefs_sizeof holds [2, 4, 8, 8, 8] in the process, the pack says \
             [2, 4, 4, 8, 8]"
        );
    }

    #[test]
    fn a_library_without_the_world_or_a_pack_without_a_field_is_refused() {
        let mut case = Case::right();
        case.symbols.symbols.remove(WORLD);
        assert!(case
            .refused("aaaa")
            .starts_with("ompi_mpi_comm_world is not found"),);
        let mut case = Case::right();
        case.symbols
            .types
            .get_mut("ompi_communicator_t")
            .unwrap()
            .fields
            .retain(|(f, _)| f != "c_local_group");
        assert_eq!(
            case.refused("aaaa"),
            "the pack has no field c_local_group of ompi_communicator_t"
        );
        let mut case = Case::right();
        case.symbols.types.remove("ompi_group_t");
        assert_eq!(case.refused("aaaa"), "the pack has no ompi_group_t");
    }

    /// Under pml ucx, with a pack for libucp: the module's worker, its
    /// tag matching at 0x100 and the unexpected list's head 0x40 into it,
    /// a ring of the head and one message.
    fn under_ucx(worker: u64) -> Case {
        const MODULE_AT: u64 = 0x60000;
        const WORKER_AT: u64 = 0x70000;
        const MESSAGE_AT: u64 = 0x80000;
        let mut case = Case::right();
        let head = WORKER_AT + 0x140;
        case.memory.write(MODULE_AT, &[0; 0x10]);
        case.memory.write(MODULE_AT + 0x8, &worker.to_le_bytes());
        case.memory.write(WORKER_AT, &[0x55; 0x200]);
        // next at 0, prev at 8: head <-> message.
        case.memory.write(head, &MESSAGE_AT.to_le_bytes());
        case.memory.write(head + 8, &MESSAGE_AT.to_le_bytes());
        case.memory.write(MESSAGE_AT, &head.to_le_bytes());
        case.memory.write(MESSAGE_AT + 8, &head.to_le_bytes());
        case.symbols.symbols.insert(ucx::MODULE, MODULE_AT);
        case.symbols.types.extend([
            (ucx::MODULE_TYPE, layout(&[(ucx::MODULE_WORKER, 0x8)])),
            (ucx::WORKER, layout(&[(ucx::WORKER_TM, 0x100)])),
            (ucx::TAG_MATCH, layout(&[(ucx::TM_UNEXPECTED, 0x40)])),
            (ucx::LIST, layout(&[("next", 0), ("prev", 8)])),
        ]);
        case.in_use.push((
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libucp.so.0.0.0"),
            PathBuf::from("/packs/cccc.json"),
            "cccc".to_owned(),
        ));
        case
    }

    /// Rank 2 of 4 of an MPICH job (no Open MPI world), read through a
    /// libmpich pack: `MPIR_Comm_builtin[0]` is MPI_COMM_WORLD.
    fn mpich() -> Case {
        let mut case = Case::right();
        let mut memory = Memory::default();
        let mut name = [0u8; 64];
        name[..14].copy_from_slice(b"MPI_COMM_WORLD");
        memory.write(WORLD_AT, &[0; 0x100]);
        memory.write(WORLD_AT, &0x4400_0000u32.to_le_bytes());
        memory.write(WORLD_AT + 0x10, &4i32.to_le_bytes());
        memory.write(WORLD_AT + 0x14, &2i32.to_le_bytes());
        memory.write(WORLD_AT + 0x40, &name);
        case.memory = memory;
        case.symbols = Symbols {
            symbols: [("MPIR_Comm_builtin", WORLD_AT)].into(),
            types: [(
                "MPIR_Comm",
                layout(&[
                    ("handle", 0),
                    ("remote_size", 0x10),
                    ("rank", 0x14),
                    ("name", 0x40),
                ]),
            )]
            .into(),
        };
        case.in_use = vec![(
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libmpich.so.12"),
            PathBuf::from("/packs/cccc.json"),
            "cccc".to_owned(),
        )];
        case.typedefs = None;
        case
    }

    #[test]
    fn pml_ucxs_unexpected_list_must_link_back_through_the_pack() {
        let right = under_ucx(0x70000);
        let done = right.check().unwrap();
        assert!(
            done.iter().any(|d| d.contains("links back to itself")),
            "{done:?}"
        );
        // An offset off by a word on the way: the words read are no ring.
        let mut shifted = under_ucx(0x70000);
        shifted
            .symbols
            .types
            .insert(ucx::TAG_MATCH, layout(&[(ucx::TM_UNEXPECTED, 0x48)]));
        let detail = shifted.refused("cccc");
        assert!(
            detail.starts_with("libucp.so.0.0.0: pml ucx's worker's list")
                && detail.contains("0x148 bytes into the worker"),
            "{detail}"
        );
        // No pack for libucp (UCX's types unknown): nothing to check; the
        // DLL says why it cannot read UCX.
        let mut untyped = under_ucx(0x70000);
        untyped.symbols.types.remove(ucx::WORKER);
        let done = untyped.check().unwrap();
        assert!(!done.iter().any(|d| d.contains("pml ucx")), "{done:?}");
        // pml ucx not running (no worker): nothing of UCX's to check.
        let idle = under_ucx(0);
        let done = idle.check().unwrap();
        assert!(!done.iter().any(|d| d.contains("pml ucx")), "{done:?}");
    }

    #[test]
    fn mpichs_world_that_reads_right_passes_and_one_that_does_not_is_refused() {
        let done = mpich().check().expect("passes");
        assert_eq!(
            done,
            [
                "MPI_COMM_WORLD's handle is 0x44000000",
                "MPI_COMM_WORLD's name reads MPI_COMM_WORLD",
                "MPI_COMM_WORLD has 4 processes",
                "MPI_COMM_WORLD's rank is 2",
            ]
        );
        let mut case = mpich();
        case.field("MPIR_Comm", "remote_size", 0x14);
        assert!(
            case.refused("cccc")
                .contains("MPI_COMM_WORLD has 2 processes"),
            "{}",
            case.refused("cccc")
        );
        let mut case = mpich();
        case.field("MPIR_Comm", "handle", 4);
        assert!(case.refused("cccc").contains("handle"));
        let mut case = mpich();
        case.env.rank = Some(1);
        assert!(case.refused("cccc").contains("the process is rank 1"));
    }
}
