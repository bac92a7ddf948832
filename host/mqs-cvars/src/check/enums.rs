//! Enumerations: on MPI_INT variables, items 0..num-1 with names, and
//! nothing outside that range.

use super::context::{place, Ctx};
use crate::abi::{MpiTError, MPI_SUCCESS};
use crate::model::Datatype;

/// Each enumeration handle once, with the first variable that has it.
pub(super) fn distinct_enums(ctx: &mut Ctx<'_>) -> Vec<(usize, String)> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (index, info) in ctx.known() {
        if info.enumtype != 0 && !seen.contains(&info.enumtype) {
            seen.push(info.enumtype);
            out.push((info.enumtype, place(index, &info.name)));
        }
    }
    out
}

pub(super) fn enumerations(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    let int = mpi.datatype_bits(Datatype::Int);
    let mut checked: Vec<usize> = Vec::new();
    for (index, info) in ctx.known() {
        if info.enumtype == 0 {
            continue;
        }
        let here = place(index, &info.name);
        if Some(info.datatype) != int {
            let d = mpi.datatype(info.datatype);
            ctx.note(
                format!("an enumeration on a variable of datatype {d}, not MPI_INT"),
                here.clone(),
            );
        }
        if checked.contains(&info.enumtype) {
            continue;
        }
        checked.push(info.enumtype);
        let (num, name) = match mpi.enum_info(info.enumtype) {
            Ok(pair) => pair,
            Err(rc) => {
                ctx.expect("MPI_T_enum_get_info", rc, None, here);
                continue;
            }
        };
        if num < 1 {
            ctx.note(
                "an enumeration without items",
                format!("{here}: {name} has {num}"),
            );
            continue;
        }
        let mut names: Vec<String> = Vec::new();
        for item in 0..num.min(4096) {
            match mpi.enum_item(info.enumtype, item) {
                Ok((_, item_name)) if item_name.is_empty() => ctx.note(
                    "an enumeration item with an empty name",
                    format!("{here}: {name} item {item}"),
                ),
                Ok((_, item_name)) if names.contains(&item_name) => ctx.note(
                    "two items of an enumeration have the same name",
                    format!("{here}: {name} item {item} ({item_name})"),
                ),
                Ok((_, item_name)) => names.push(item_name),
                Err(rc) => ctx.expect(
                    "MPI_T_enum_get_item for an item within 0..num-1",
                    rc,
                    None,
                    format!("{here}: {name} item {item}"),
                ),
            }
        }
    }
}

pub(super) fn enum_item_range(ctx: &mut Ctx<'_>) {
    let enums = distinct_enums(ctx);
    if enums.is_empty() {
        return;
    }
    let mpi = ctx.mpi;
    for (label, past_end) in [("num", true), ("-1", false)] {
        if !ctx.step(&format!("MPI_T_enum_get_item for item {label}")) {
            continue;
        }
        for (enumtype, here) in &enums {
            let Ok((num, name)) = mpi.enum_info(*enumtype) else {
                continue;
            };
            let item = if past_end { num } else { -1 };
            let rc = mpi.enum_item(*enumtype, item).err().unwrap_or(MPI_SUCCESS);
            ctx.expect(
                &format!("MPI_T_enum_get_item for item {label}"),
                rc,
                Some(MpiTError::InvalidItem),
                format!("{here}: {name}"),
            );
        }
    }
}
