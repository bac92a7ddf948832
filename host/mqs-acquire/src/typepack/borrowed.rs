//! Packs borrowed from another build of the same library
//! ([`mqs_core::symbols::typepack::BORROWABLE`]): a release build of Open
//! MPI compiles its shared-memory BTL without `-g`, so no debug file
//! anywhere has its layouts; a pack made for another build of the same
//! component may have them, if that build was configured alike. Before any
//! DLL reads through such a pack it must pass two checks against the
//! running process, or it is dropped (the DLL then says what it cannot
//! list, as without the pack):
//!
//! 1. the types of the pack that the process's own DWARF also describes
//!    (Open MPI's `libmpi` keeps DWARF for its debugger support even in a
//!    release build: lists, free lists, communicators, processes) mostly
//!    agree with it, size and every field offset; those are then answered
//!    from that DWARF, never from the pack;
//! 2. the library's own invariants, read through the pack's offsets. For
//!    vader: its component's `local_rank` counts the endpoints it set up,
//!    each endpoint `i` of `endpoints` (a stride of the endpoint's size)
//!    has `peer_smp_rank` = `i` and its `fifo` at its `segment_base`, one
//!    of them is this process's own (`segment_base` = `my_segment`), and
//!    `my_fifo` = `my_segment`. A component not set up yet (no endpoints)
//!    is not checked, and the DLL finds nothing to read. For ob1:
//!    MPI_COMM_WORLD's `c_pml_comm` (`mca_pml_ob1_comm_t`) has as many
//!    `num_procs` as the world's group has processes (the check the guard
//!    makes of a pack of ob1's own build too).

use std::path::Path;
use std::sync::Arc;

use mqs_core::interface::{read_word, ImageSymbols, Target, TypeLayout};
use mqs_core::symbols::{ObjectSymbols, SymbolIndex};

/// More endpoints than this are not a node's processes.
const MAX_LOCAL: u64 = 1 << 12;

const WORLD: &str = "ompi_mpi_comm_world";
const VADER_COMPONENT: &str = "mca_btl_vader_component";
const VADER_COMPONENT_T: &str = "mca_btl_vader_component_t";
const VADER_ENDPOINT_T: &str = "mca_btl_vader_endpoint_t";

/// Checks every borrowed pack the index answers from, drops the ones that
/// do not fit (saying why in the object's notes), and returns one line per
/// pack on what was found.
pub fn check(target: &dyn Target, index: &SymbolIndex) -> Vec<String> {
    let mut lines = Vec::new();
    let objects = index.objects();
    for (object, _) in &objects {
        // Refused while reading another process of the job (the objects
        // are shared): that one's reason stands for this one too.
        if let Some(why) = object.borrow_refusal() {
            lines.push(why.to_string());
            continue;
        }
        let Some(found) = object.pack().filter(|f| f.borrowed).cloned() else {
            continue;
        };
        let name = file_name(object.path());
        let pack_name = file_name(&found.path);
        let outcome =
            agree_with_dwarf(object, &objects, &found.pack.types).and_then(|(agreed, shared)| {
                index.shadow_borrowed(object, shared);
                let invariants = match name.as_str() {
                    "mca_btl_vader.so" => check_vader(target, index)?,
                    "mca_pml_ob1.so" => check_ob1(target, index)?,
                    _ => return Err("the host knows no invariants for it".into()),
                };
                Ok((agreed, invariants))
            });
        match outcome {
            Ok((agreed, invariants)) => lines.push(format!(
                "{name}: types from {pack_name}, made for another build: {agreed}; {}",
                invariants.unwrap_or_else(|| "its component is not set up yet".into())
            )),
            Err(why) => {
                let line = format!(
                    "{name}: the type pack {pack_name}, made for another build, does not fit \
                     this one: {why}"
                );
                index.refuse_borrowed(object, line.clone());
                lines.push(line);
            }
        }
    }
    lines
}

/// A library's or pack's file name, as the dump's lines name them.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Check 1: the pack's types that the DWARF of the MPI's own files (the
/// library's directory and the one above it: Open MPI keeps its components
/// in `lib/openmpi/`) also describes. Those are answered from that DWARF,
/// never from the pack (another build may size them otherwise: Debian's
/// `ompi_proc_t` has more endpoint slots than a build without UCX); the
/// pack is refused unless at least one of them agrees with it, size and
/// every field, and most do. Returns what was found, and the names to
/// leave to the process's DWARF.
fn agree_with_dwarf(
    object: &Arc<ObjectSymbols>,
    objects: &[(Arc<ObjectSymbols>, u64)],
    types: &std::collections::BTreeMap<String, mqs_core::symbols::typepack::PackType>,
) -> Result<(String, Vec<String>), String> {
    let dir = object.path().parent();
    let above = dir.and_then(Path::parent);
    let mine: Vec<&Arc<ObjectSymbols>> = objects
        .iter()
        .map(|(o, _)| o)
        .filter(|o| !Arc::ptr_eq(o, object))
        .filter(|o| {
            let parent = o.path().parent();
            parent.is_some() && (parent == dir || parent == above)
        })
        .filter(|o| o.has_local_dwarf())
        .collect();
    let (mut agreed, mut differ, mut shared) = (0usize, Vec::new(), Vec::new());
    for (name, t) in types {
        let Some((other, info)) = mine
            .iter()
            .find_map(|o| o.find_type(name).map(|info| (o, info)))
        else {
            continue;
        };
        shared.push(name.clone());
        let here = file_name(other.path());
        let same = info.size == t.size
            && t.fields
                .iter()
                .all(|(field, offset)| info.field_offset(field) == Some(*offset));
        if same {
            agreed += 1;
        } else {
            let size =
                |s: Option<u64>| s.map_or_else(|| "no size".into(), |s| format!("{s} bytes"));
            differ.push(format!(
                "{name} ({} in {here}'s DWARF, {} in the pack)",
                size(info.size),
                size(t.size)
            ));
        }
    }
    if agreed == 0 || differ.len() >= agreed {
        return Err(if shared.is_empty() {
            "none of its types is in the DWARF of the MPI's own libraries, so nothing of \
             the pack could be compared with this build"
                .into()
        } else {
            format!(
                "{} of the {} types the MPI's own DWARF also describes differ: {}",
                differ.len(),
                shared.len(),
                differ.join(", ")
            )
        });
    }
    let mut line = format!(
        "{agreed} of the {} types the MPI's own DWARF also describes agree",
        shared.len()
    );
    if !differ.is_empty() {
        line.push_str(&format!(
            " (read from that DWARF: {}, which differ)",
            differ.join(", ")
        ));
    }
    Ok((line, shared))
}

/// Check 2 for Open MPI 4.1's vader BTL (see the module's text). `None`:
/// the component has no endpoints yet.
pub fn check_vader(
    target: &dyn Target,
    symbols: &dyn ImageSymbols,
) -> Result<Option<String>, String> {
    let word = target.pointer_size();
    let Some(component) = symbols.find_symbol(VADER_COMPONENT) else {
        return Err(format!("{VADER_COMPONENT} is not found"));
    };
    let ty = |name: &str| -> Result<TypeLayout, String> {
        symbols
            .find_type(name)
            .ok_or_else(|| format!("the pack has no {name}"))
    };
    let (comp, ep) = (ty(VADER_COMPONENT_T)?, ty(VADER_ENDPOINT_T)?);
    let field = |t: &TypeLayout, tname: &str, f: &str| {
        t.field_offset(f)
            .ok_or_else(|| format!("the pack has no field {f} of {tname}"))
    };
    let c = |f: &str| field(&comp, VADER_COMPONENT_T, f);
    let e = |f: &str| field(&ep, VADER_ENDPOINT_T, f);
    let read = |addr: u64| read_word(target, addr, word).map_err(|err| err.to_string());
    let read_i32 = |addr: u64| -> Result<i64, String> {
        let mut b = [0u8; 4];
        target.read(addr, &mut b).map_err(|err| err.to_string())?;
        Ok(i64::from(i32::from_le_bytes(b)))
    };
    let endpoints = read(component + c("endpoints")?)?;
    if endpoints == 0 {
        return Ok(None);
    }
    let count = read_i32(component + c("local_rank")?)?;
    if count <= 0 || count as u64 > MAX_LOCAL {
        return Err(format!(
            "{VADER_COMPONENT_T}.local_rank (the endpoints set up) reads {count}"
        ));
    }
    let segment = read(component + c("my_segment")?)?;
    let fifo = read(component + c("my_fifo")?)?;
    if segment == 0 || fifo != segment {
        return Err(format!(
            "{VADER_COMPONENT_T}.my_fifo reads {fifo:#x}, my_segment {segment:#x}: the FIFO \
             starts the segment"
        ));
    }
    let stride = ep
        .size
        .filter(|&s| s > 0)
        .ok_or_else(|| format!("the pack has no size of {VADER_ENDPOINT_T}"))?;
    let (peer_at, base_at, fifo_at) = (e("peer_smp_rank")?, e("segment_base")?, e("fifo")?);
    let mut own = false;
    for i in 0..count as u64 {
        let at = endpoints + i * stride;
        let peer = read_i32(at + peer_at)?;
        let base = read(at + base_at)?;
        let ep_fifo = read(at + fifo_at)?;
        if peer != i as i64 || base == 0 || ep_fifo != base {
            return Err(format!(
                "endpoint {i} of {count} reads peer_smp_rank {peer}, segment_base {base:#x}, \
                 fifo {ep_fifo:#x} (expected {i}, a segment, the same address)"
            ));
        }
        own |= base == segment;
    }
    if !own {
        return Err(format!(
            "no endpoint of {count} has this process's segment ({segment:#x})"
        ));
    }
    Ok(Some(format!(
        "its {count} endpoints and its FIFO read right through the pack"
    )))
}

/// Check 2 for ob1: MPI_COMM_WORLD's ob1 communicator knows as many
/// processes as its group. `None`: MPI is not initialised yet.
pub fn check_ob1(
    target: &dyn Target,
    symbols: &dyn ImageSymbols,
) -> Result<Option<String>, String> {
    let word = target.pointer_size();
    let Some(world) = symbols.find_symbol(WORLD) else {
        return Err(format!("{WORLD} is not found"));
    };
    let offset = |ty: &str, f: &str| {
        symbols
            .find_type(ty)
            .and_then(|t| t.field_offset(f))
            .ok_or_else(|| format!("no field {f} of {ty}"))
    };
    let read = |addr: u64| read_word(target, addr, word).map_err(|err| err.to_string());
    let pml_comm = read(world + offset("ompi_communicator_t", "c_pml_comm")?)?;
    let group = read(world + offset("ompi_communicator_t", "c_local_group")?)?;
    if pml_comm == 0 || group == 0 {
        return Ok(None);
    }
    let mut count = [0u8; 4];
    target
        .read(
            group + offset("ompi_group_t", "grp_proc_count")?,
            &mut count,
        )
        .map_err(|err| err.to_string())?;
    let count = i32::from_le_bytes(count);
    let num = read(pml_comm + offset("mca_pml_ob1_comm_t", "num_procs")?)?;
    if count <= 0 || num != count as u64 {
        return Err(format!(
            "ob1's MPI_COMM_WORLD has {num} procs (mca_pml_ob1_comm_t.num_procs), its group \
             {count}"
        ));
    }
    Ok(Some(format!(
        "ob1's MPI_COMM_WORLD has {num} procs, as its group"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typepack::fakes::{layout, Memory, Symbols};

    const COMP_AT: u64 = 0x1_0000;
    const EPS_AT: u64 = 0x2_0000;
    const SEG: [u64; 3] = [0x7000_0000, 0x7100_0000, 0x7200_0000];
    const STRIDE: u64 = 0x40;

    /// Local rank 1 of 3, its endpoints set up.
    fn right() -> (Memory, Symbols) {
        let mut m = Memory::default();
        m.write(COMP_AT, &[0; 0x40]);
        m.write(COMP_AT + 0x08, &EPS_AT.to_le_bytes());
        m.write(COMP_AT + 0x10, &3i32.to_le_bytes());
        m.write(COMP_AT + 0x18, &SEG[1].to_le_bytes());
        // segment_size between them, as in Open MPI.
        m.write(COMP_AT + 0x20, &0x1_0000u64.to_le_bytes());
        m.write(COMP_AT + 0x28, &SEG[1].to_le_bytes());
        for (i, seg) in SEG.iter().enumerate() {
            let at = EPS_AT + i as u64 * STRIDE;
            m.write(at, &[0; STRIDE as usize]);
            m.write(at + 0x10, &(i as i32).to_le_bytes());
            m.write(at + 0x18, &seg.to_le_bytes());
            // Open MPI keeps the FIFO's pointer right after the segment's,
            // and the same address in both: a pack one word off between
            // them reads the right value. Here a word lies between.
            m.write(at + 0x20, &0x55u64.to_le_bytes());
            m.write(at + 0x28, &seg.to_le_bytes());
        }
        let mut comp = layout(&[
            ("endpoints", 0x08),
            ("local_rank", 0x10),
            ("my_segment", 0x18),
            ("my_fifo", 0x28),
        ]);
        comp.size = Some(0x40);
        let mut ep = layout(&[
            ("peer_smp_rank", 0x10),
            ("segment_base", 0x18),
            ("fifo", 0x28),
        ]);
        ep.size = Some(STRIDE);
        let s = Symbols {
            symbols: [(VADER_COMPONENT, COMP_AT)].into(),
            types: [(VADER_COMPONENT_T, comp), (VADER_ENDPOINT_T, ep)].into(),
        };
        (m, s)
    }

    #[test]
    fn a_pack_that_reads_vader_right_passes() {
        let (m, s) = right();
        let line = check_vader(&m, &s).unwrap().unwrap();
        assert!(line.contains("3 endpoints"), "{line}");
    }

    #[test]
    fn a_component_not_set_up_is_not_checked() {
        let (mut m, s) = right();
        m.write(COMP_AT + 0x08, &0u64.to_le_bytes());
        assert_eq!(check_vader(&m, &s), Ok(None));
    }

    #[test]
    fn any_offset_or_size_off_is_refused() {
        // Each field of the pack one word off, and the endpoint's size.
        for (ty, field) in [
            (VADER_COMPONENT_T, "endpoints"),
            (VADER_COMPONENT_T, "local_rank"),
            (VADER_COMPONENT_T, "my_segment"),
            (VADER_COMPONENT_T, "my_fifo"),
            (VADER_ENDPOINT_T, "peer_smp_rank"),
            (VADER_ENDPOINT_T, "segment_base"),
            (VADER_ENDPOINT_T, "fifo"),
            (VADER_ENDPOINT_T, "size"),
        ] {
            let (m, mut s) = right();
            let t = s.types.get_mut(ty).unwrap();
            if field == "size" {
                t.size = t.size.map(|n| n + 8);
            } else {
                let f = t.fields.iter_mut().find(|(n, _)| n == field).unwrap();
                f.1 += 8;
            }
            assert!(
                check_vader(&m, &s).is_err(),
                "{ty}.{field} off: not refused"
            );
        }
    }

    #[test]
    fn an_endpoint_count_beyond_reason_and_a_missing_own_segment_are_refused() {
        let (mut m, s) = right();
        m.write(COMP_AT + 0x10, &(-1i32).to_le_bytes());
        assert!(check_vader(&m, &s).unwrap_err().contains("local_rank"));
        let (mut m, s) = right();
        m.write(COMP_AT + 0x18, &0x7300_0000u64.to_le_bytes());
        m.write(COMP_AT + 0x28, &0x7300_0000u64.to_le_bytes());
        assert!(check_vader(&m, &s)
            .unwrap_err()
            .contains("this process's segment"));
    }

    const WORLD_AT: u64 = 0x3_0000;
    const GROUP_AT: u64 = 0x4_0000;
    const PML_AT: u64 = 0x5_0000;

    fn ob1(num_procs: u64) -> (Memory, Symbols) {
        let mut m = Memory::default();
        m.write(WORLD_AT, &[0; 0x20]);
        m.write(WORLD_AT + 0x08, &GROUP_AT.to_le_bytes());
        m.write(WORLD_AT + 0x10, &PML_AT.to_le_bytes());
        m.write(GROUP_AT, &[0; 0x10]);
        m.write(GROUP_AT + 0x4, &4i32.to_le_bytes());
        m.write(PML_AT, &[0; 0x20]);
        m.write(PML_AT + 0x18, &num_procs.to_le_bytes());
        let s = Symbols {
            symbols: [(WORLD, WORLD_AT)].into(),
            types: [
                (
                    "ompi_communicator_t",
                    layout(&[("c_local_group", 0x08), ("c_pml_comm", 0x10)]),
                ),
                ("ompi_group_t", layout(&[("grp_proc_count", 0x4)])),
                ("mca_pml_ob1_comm_t", layout(&[("num_procs", 0x18)])),
            ]
            .into(),
        };
        (m, s)
    }

    #[test]
    fn ob1_passes_when_its_world_knows_the_groups_processes() {
        let (m, s) = ob1(4);
        assert!(check_ob1(&m, &s).unwrap().unwrap().contains("4 procs"));
        let (m, s) = ob1(5);
        assert!(check_ob1(&m, &s).unwrap_err().contains("num_procs"));
        // Before MPI_Init: nothing to check yet.
        let (mut m, s) = ob1(4);
        m.write(WORLD_AT + 0x10, &0u64.to_le_bytes());
        assert_eq!(check_ob1(&m, &s), Ok(None));
    }
}
