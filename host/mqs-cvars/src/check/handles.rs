//! Control-variable handles: allocated for unbound variables, read
//! within their count, refused a write when read-only, freed to NULL; NULL
//! handles refused.

use std::ffi::c_int;

use super::context::{place, Ctx};
use crate::abi::{MpiTError, MPI_SUCCESS};
use crate::library::{value_buffer, Handle, Info, MpiT, CANARY};
use crate::model::{Bind, Datatype, Scope};

/// The unbound variables with a known datatype: (index, info, datatype).
fn unbound(ctx: &mut Ctx<'_>) -> Vec<(i32, Info, Datatype)> {
    let mpi = ctx.mpi;
    ctx.known()
        .into_iter()
        .filter(|(_, info)| mpi.abi.bind(info.bind) == Bind::NoObject)
        .filter_map(|(i, info)| {
            let d = mpi.datatype(info.datatype).known()?;
            Some((i, info, d))
        })
        .collect()
}

/// Reads a variable into a canaried buffer: (code, bytes of count
/// elements, whether the canary survived).
fn read_raw(mpi: &MpiT, handle: Handle, datatype: Datatype, count: i32) -> (i32, Vec<u8>, bool) {
    let mut buf = value_buffer(datatype, count);
    let len = datatype.size() * count.max(0) as usize;
    let rc = mpi.read_into(handle, &mut buf);
    let intact = buf[len..].iter().all(|&b| b == CANARY);
    buf.truncate(len);
    (rc, buf, intact)
}

pub(super) fn handles(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info, datatype) in unbound(ctx) {
        let here = place(index, &info.name);
        let (handle, count) = match mpi.alloc(index) {
            Ok(pair) => pair,
            Err(rc) => {
                ctx.expect(
                    "MPI_T_cvar_handle_alloc of an unbound variable",
                    rc,
                    None,
                    here,
                );
                continue;
            }
        };
        if handle.0.is_null() {
            ctx.note(
                "MPI_T_cvar_handle_alloc succeeds with MPI_T_CVAR_HANDLE_NULL",
                here.clone(),
            );
            continue;
        }
        if !(0..=1 << 20).contains(&count) {
            ctx.note(
                "MPI_T_cvar_handle_alloc gives an unbelievable count",
                format!("{here}: {count}"),
            );
            mpi.free(handle);
            continue;
        }
        let (rc, bytes, intact) = read_raw(mpi, handle, datatype, count);
        if rc != MPI_SUCCESS {
            ctx.expect("MPI_T_cvar_read", rc, None, format!("{here}, {datatype}"));
        } else {
            if !intact {
                ctx.note(
                    "MPI_T_cvar_read writes past count elements",
                    format!("{here}: count {count} of {datatype}"),
                );
            }
            if datatype == Datatype::Char && !bytes.contains(&0) {
                ctx.note(
                    "an MPI_CHAR value without a NUL within count characters",
                    format!("{here}: count {count}"),
                );
            }
            if mpi.abi.scope(info.scope) == Scope::Constant {
                let (rc, again, _) = read_raw(mpi, handle, datatype, count);
                if rc == MPI_SUCCESS && again != bytes {
                    ctx.note("a constant variable reads differently twice", here.clone());
                }
            }
        }
        let (rc, after) = mpi.free(handle);
        if rc != MPI_SUCCESS {
            ctx.expect("MPI_T_cvar_handle_free", rc, None, here);
        } else if after != 0 {
            ctx.note(
                "MPI_T_cvar_handle_free does not set the handle to MPI_T_CVAR_HANDLE_NULL",
                here,
            );
        }
    }
}

pub(super) fn read_only_write(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info, datatype) in unbound(ctx) {
        let scope = mpi.abi.scope(info.scope);
        if !scope.read_only() {
            continue;
        }
        let here = format!("{}, scope {}", place(index, &info.name), scope.as_str());
        let Ok((handle, count)) = mpi.alloc(index) else {
            continue;
        };
        if handle.0.is_null() || !(0..=1 << 20).contains(&count) {
            continue;
        }
        let (rc, mut bytes, _) = read_raw(mpi, handle, datatype, count);
        if rc == MPI_SUCCESS {
            // Its own value back: nothing changes should the write succeed.
            // Zeros beyond it, for libraries that read a fixed 8 bytes.
            bytes.resize(bytes.len() + crate::library::SLACK, 0);
            let rc = mpi.write_from(handle, &bytes);
            ctx.expect(
                "MPI_T_cvar_write to a read-only variable",
                rc,
                Some(MpiTError::CvarSetNever),
                here,
            );
        }
        mpi.free(handle);
    }
}

pub(super) fn null_handle(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    let null = std::ptr::null_mut();
    if ctx.step("MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL") {
        let mut buf = [0u8; 64];
        // SAFETY: MPI_T_CVAR_HANDLE_NULL is NULL in both families; the
        // call is meant to refuse it.
        let rc = unsafe { (mpi.f.cvar_read)(null, buf.as_mut_ptr().cast()) };
        ctx.expect(
            "MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
    if ctx.step("MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL") {
        let buf = [0u8; 64];
        // SAFETY: as above, for MPI_T_cvar_write.
        let rc = unsafe { (mpi.f.cvar_write)(null, buf.as_ptr().cast()) };
        ctx.expect(
            "MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
    if ctx.step("MPI_T_enum_get_info of MPI_T_ENUM_NULL") {
        let mut num: c_int = 0;
        let mut len: c_int = 0;
        // SAFETY: MPI_T_ENUM_NULL is NULL in both families.
        let rc = unsafe { (mpi.f.enum_get_info)(null, &mut num, null.cast(), &mut len) };
        ctx.expect(
            "MPI_T_enum_get_info of MPI_T_ENUM_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
}
