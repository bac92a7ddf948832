//! The runtime invariants that guard every type pack: before a DLL reads a
//! process through a pack, the pack must read the process right where the
//! answers are known. For Open MPI:
//!
//! - `MPIR_debug_typedefs_sizeof` holds the sizes the pack's DWARF gave;
//! - MPI_COMM_WORLD's name (`c_name`) reads `MPI_COMM_WORLD`;
//! - its local group's size (`grp_proc_count`) is the job size, and its
//!   `c_my_rank` the rank, where the environment says them;
//! - with ob1's pack: the world's `c_pml_comm` has `num_procs` = the size.
//!
//! A pack that fails one is refused with the reason, never used to guess.

use std::path::PathBuf;

use crate::members::MpiEnvironment;
use crate::{Error, Result};
use mqs_core::interface::{read_word, Target};
use mqs_core::symbols::{SymbolIndex, TypeSource};

const WORLD: &str = "ompi_mpi_comm_world";
const TYPEDEFS: &str = "MPIR_debug_typedefs_sizeof";
/// Sizes beyond this are not a job (and not a group we believe).
const MAX_PROCS: u64 = 1 << 24;

/// The packs a process's symbols answer from: (library, pack file).
pub fn packs_in_use(index: &SymbolIndex) -> Vec<(PathBuf, PathBuf, String)> {
    index
        .objects()
        .into_iter()
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
    let refuse = |detail: String| {
        let (library, pack, id) = &in_use[0];
        let (library, pack, id) = in_use
            .iter()
            .find(|(l, ..)| detail.contains(&*l.file_name().unwrap_or_default().to_string_lossy()))
            .unwrap_or(&(library.clone(), pack.clone(), id.clone()))
            .clone();
        Error::TypePackRefused(Box::new(crate::error::PackRefusal {
            pack,
            library,
            build_id: id,
            detail,
        }))
    };
    let mut done = Vec::new();
    let world = index.find_symbol(WORLD).ok_or_else(|| {
        refuse(format!(
            "{WORLD} is not found: the host knows no invariants for this library, and uses a \
             pack only where it can check it"
        ))
    })?;
    let word = target.pointer_size();

    // 1. The library's own record of its base types.
    let expected = in_use.iter().find_map(|(_, pack, _)| {
        mqs_core::symbols::typepack::TypePack::load(pack)
            .ok()
            .and_then(|p| p.checks.typedefs_sizeof)
    });
    if let (Some(expected), Some(addr)) = (expected, index.find_symbol(TYPEDEFS)) {
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
    let comm = index
        .find_type("ompi_communicator_t")
        .ok_or_else(|| refuse("the pack has no ompi_communicator_t".into()))?;
    let field = |t: &mqs_core::symbols::TypeInfo, name: &str| {
        t.field_offset(name)
            .ok_or_else(|| refuse(format!("the pack has no field {name} of {}", t.name)))
    };
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
    let group = index
        .find_type("ompi_group_t")
        .ok_or_else(|| refuse("the pack has no ompi_group_t".into()))?;
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
    if let (Some(rank), Some(off)) = (env.rank, comm.field_offset("c_my_rank")) {
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
    if ob1_packed {
        if let (Some(pml), Some(ob1)) = (
            comm.field_offset("c_pml_comm"),
            index.find_type("mca_pml_ob1_comm_t"),
        ) {
            let pml_comm = read_word(target, world + pml, word)?;
            let num = read_word(target, pml_comm + field(&ob1, "num_procs")?, word)?;
            if i64::from(count) != num as i64 {
                return Err(refuse(format!(
                    "mca_pml_ob1.so: ob1's MPI_COMM_WORLD has {num} procs \
                     (mca_pml_ob1_comm_t.num_procs), its group {count}"
                )));
            }
            done.push(format!("ob1's MPI_COMM_WORLD has {num} procs"));
        }
    }
    Ok(done)
}

fn c_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
