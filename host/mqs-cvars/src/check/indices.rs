//! How many variables there are, which indices answer, and the names
//! that find them.

use std::collections::HashMap;

use super::context::{empty_info, place, Ctx};
use crate::abi::{MpiTError, MPI_SUCCESS};

/// A name no library gives a variable.
const NO_SUCH_NAME: &str = "mqs_check_no_such_control_variable";

pub(super) fn num(ctx: &mut Ctx<'_>) {
    let mut seen = Vec::new();
    for _ in 0..3 {
        match ctx.mpi.num() {
            Ok(n) if n >= 0 => seen.push(n),
            Ok(n) => {
                ctx.note("MPI_T_cvar_get_num gave a negative number", format!("{n}"));
                return;
            }
            Err(rc) => {
                ctx.expect("MPI_T_cvar_get_num", rc, None, "");
                return;
            }
        }
    }
    if seen.windows(2).any(|w| w[1] < w[0]) {
        let counts: Vec<String> = seen.iter().map(ToString::to_string).collect();
        ctx.note(
            "the number of control variables shrank between calls",
            format!("counts {}", counts.join(", ")),
        );
    }
    ctx.num = seen.first().copied();
}

pub(super) fn index_range(ctx: &mut Ctx<'_>) {
    let n = ctx.num();
    for index in [-1, n, n + 1000] {
        let mut info = empty_info();
        let (mut name, mut desc) = ([0u8; 64], [0u8; 64]);
        let (mut name_len, mut desc_len) = (64, 64);
        let rc = ctx.mpi.raw_info(
            index,
            Some(&mut name),
            Some(&mut name_len),
            Some(&mut desc),
            Some(&mut desc_len),
            &mut info,
        );
        ctx.expect(
            "MPI_T_cvar_get_info for an index outside 0..num-1",
            rc,
            Some(MpiTError::InvalidIndex),
            format!("index {index}"),
        );
    }
    for index in [-1, n] {
        match ctx.mpi.alloc(index) {
            Ok((handle, _)) => {
                ctx.expect(
                    "MPI_T_cvar_handle_alloc for an index outside 0..num-1",
                    MPI_SUCCESS,
                    Some(MpiTError::InvalidIndex),
                    format!("index {index}"),
                );
                ctx.mpi.free(handle);
            }
            Err(rc) => ctx.expect(
                "MPI_T_cvar_handle_alloc for an index outside 0..num-1",
                rc,
                Some(MpiTError::InvalidIndex),
                format!("index {index}"),
            ),
        }
    }
    let failed: Vec<(i32, i32)> = ctx
        .infos()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|rc| (i as i32, *rc)))
        .collect();
    for (index, rc) in failed {
        let code = ctx.code(rc);
        ctx.note(
            format!("MPI_T_cvar_get_info fails for an index within 0..num-1 ({code})"),
            format!("index {index}"),
        );
    }
}

pub(super) fn names(ctx: &mut Ctx<'_>) {
    let mut seen: HashMap<String, i32> = HashMap::new();
    for (index, info) in ctx.known() {
        if info.name.is_empty() {
            ctx.note("a variable's name is empty", format!("cvar {index}"));
            continue;
        }
        if let Some(first) = seen.get(&info.name) {
            let first = *first;
            ctx.note(
                "two variables have the same name",
                format!("cvars {first} and {index} ({})", info.name),
            );
        } else {
            seen.insert(info.name.clone(), index);
        }
    }
}

pub(super) fn get_index(ctx: &mut Ctx<'_>) {
    let known = ctx.known();
    let mut indices: HashMap<&str, Vec<i32>> = HashMap::new();
    for (index, info) in &known {
        indices.entry(info.name.as_str()).or_default().push(*index);
    }
    for (index, info) in &known {
        if info.name.is_empty() {
            continue;
        }
        let here = place(*index, &info.name);
        match ctx.mpi.get_index(&info.name) {
            Ok(found) if indices[info.name.as_str()].contains(&found) => {}
            Ok(found) => ctx.note(
                "MPI_T_cvar_get_index gives another index than the variable's",
                format!("{here}: got {found}"),
            ),
            Err(rc) => ctx.expect("MPI_T_cvar_get_index of a variable's name", rc, None, here),
        }
    }
    let rc = ctx.mpi.get_index(NO_SUCH_NAME).err().unwrap_or(MPI_SUCCESS);
    ctx.expect(
        "MPI_T_cvar_get_index of a name no variable has",
        rc,
        Some(MpiTError::InvalidName),
        NO_SUCH_NAME,
    );
}
