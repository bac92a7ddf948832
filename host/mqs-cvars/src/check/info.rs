//! What MPI_T_cvar_get_info answers: the same with OUT parameters left
//! NULL, MPI_T's constants, and the same every time it is asked.

use std::ffi::{c_int, c_void};

use super::context::{place, Ctx};
use crate::abi::MPI_SUCCESS;
use crate::library::Info;
use crate::model::{Bind, DatatypeName, Scope, Verbosity};

/// The OUT parameters of MPI_T_cvar_get_info other than the strings.
const SCALAR_OUTS: [&str; 5] = ["verbosity", "datatype", "enumtype", "bind", "scope"];

pub(super) fn null_out(ctx: &mut Ctx<'_>) {
    let f = ctx.mpi.f.cvar_get_info;
    use std::ptr::null_mut as null;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        // SAFETY: every OUT parameter NULL, which the standard allows.
        let rc = unsafe {
            f(
                index,
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
            )
        };
        ctx.expect(
            "MPI_T_cvar_get_info with every OUT parameter NULL",
            rc,
            None,
            here.clone(),
        );
        for (which, name) in SCALAR_OUTS.iter().enumerate() {
            let mut verbosity: c_int = 0;
            let mut datatype: u64 = 0;
            let mut enumtype: *mut c_void = null();
            let (mut bind, mut scope): (c_int, c_int) = (0, 0);
            let pick = |i: usize, p: *mut c_void| if i == which { null() } else { p };
            // SAFETY: each pointer is NULL or valid storage of its type;
            // the strings are not asked for.
            let rc = unsafe {
                f(
                    index,
                    null(),
                    null(),
                    pick(0, (&raw mut verbosity).cast()).cast(),
                    pick(1, (&raw mut datatype).cast()),
                    pick(2, (&raw mut enumtype).cast()).cast(),
                    null(),
                    null(),
                    pick(3, (&raw mut bind).cast()).cast(),
                    pick(4, (&raw mut scope).cast()).cast(),
                )
            };
            if rc != MPI_SUCCESS {
                ctx.expect(
                    &format!("MPI_T_cvar_get_info with {name} NULL"),
                    rc,
                    None,
                    here.clone(),
                );
                continue;
            }
            let got = [
                i64::from(verbosity),
                ctx.mpi.handle_bits(datatype) as i64,
                enumtype as i64,
                i64::from(bind),
                i64::from(scope),
            ];
            let want = [
                i64::from(info.verbosity),
                info.datatype as i64,
                info.enumtype as i64,
                i64::from(info.bind),
                i64::from(info.scope),
            ];
            for (other, other_name) in SCALAR_OUTS.iter().enumerate() {
                if other != which && got[other] != want[other] {
                    ctx.note(
                        format!(
                            "MPI_T_cvar_get_info with {name} NULL answers a different {other_name}"
                        ),
                        here.clone(),
                    );
                }
            }
        }
    }
}

pub(super) fn constants(ctx: &mut Ctx<'_>) {
    let abi = ctx.mpi.abi;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        if let Verbosity::Unknown(raw) = abi.verbosity(info.verbosity) {
            ctx.note(
                "a verbosity that is none of MPI_T_VERBOSITY_*",
                format!("{here}: {raw}"),
            );
        }
        if let Scope::Unknown(raw) = abi.scope(info.scope) {
            ctx.note(
                "a scope that is none of MPI_T_SCOPE_*",
                format!("{here}: {raw}"),
            );
        }
        if let Bind::Unknown(raw) = abi.bind(info.bind) {
            ctx.note(
                "a binding that is none of MPI_T_BIND_*",
                format!("{here}: {raw}"),
            );
        }
        match ctx.mpi.datatype(info.datatype) {
            DatatypeName::Known(d) if d.is_standard() => {}
            DatatypeName::Known(d) => ctx.note(
                format!(
                    "datatype {d}, which MPI_T does not allow (only MPI_INT, MPI_UNSIGNED, \
                     MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_COUNT, MPI_CHAR, MPI_DOUBLE)"
                ),
                here,
            ),
            DatatypeName::Unknown(bits) => ctx.note(
                "a datatype handle that is no MPI datatype",
                format!("{here}: {bits:#x}"),
            ),
        }
    }
}

pub(super) fn stable(ctx: &mut Ctx<'_>) {
    let first: Vec<Result<Info, i32>> = ctx.infos().to_vec();
    for (index, before) in first.iter().enumerate() {
        let Ok(before) = before else { continue };
        let here = place(index as i32, &before.name);
        match ctx.mpi.info(index as i32) {
            Ok(now) => {
                let fields = [
                    ("name", before.name != now.name),
                    ("description", before.description != now.description),
                    ("verbosity", before.verbosity != now.verbosity),
                    ("datatype", before.datatype != now.datatype),
                    ("enumeration", before.enumtype != now.enumtype),
                    ("binding", before.bind != now.bind),
                    ("scope", before.scope != now.scope),
                ];
                for (field, changed) in fields {
                    if changed {
                        ctx.note(
                            format!("MPI_T_cvar_get_info answers a different {field} later"),
                            here.clone(),
                        );
                    }
                }
            }
            Err(rc) => {
                let code = ctx.code(rc);
                ctx.note(
                    format!("MPI_T_cvar_get_info fails later for a variable it described ({code})"),
                    here,
                );
            }
        }
    }
}
