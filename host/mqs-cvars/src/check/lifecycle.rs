//! Initialising and finalizing: MPI_T refuses calls before MPI_T_init_thread,
//! initialises, and nests initialisations and finalizations.

use std::ffi::c_int;

use super::context::{place, Ctx};
use crate::abi::{MpiTError, MPI_SUCCESS, MPI_THREAD_MULTIPLE};
use crate::library::MpiT;

pub(super) fn not_initialized(ctx: &mut Ctx<'_>) {
    let mut n: c_int = 0;
    // SAFETY: MPI_T_cvar_get_num(int *).
    let rc = unsafe { (ctx.mpi.f.cvar_get_num)(&mut n) };
    ctx.expect(
        "MPI_T_cvar_get_num before MPI_T_init_thread",
        rc,
        Some(MpiTError::NotInitialized),
        "",
    );
    let rc = ctx.mpi.finalize();
    ctx.expect(
        "MPI_T_finalize before MPI_T_init_thread",
        rc,
        Some(MpiTError::NotInitialized),
        "",
    );
}

pub(super) fn init(ctx: &mut Ctx<'_>) {
    let (rc, provided) = ctx.mpi.init();
    if rc != MPI_SUCCESS {
        ctx.expect("MPI_T_init_thread", rc, None, "");
        ctx.fatal = true;
        return;
    }
    if !(0..=MPI_THREAD_MULTIPLE).contains(&provided) {
        ctx.note(
            "MPI_T_init_thread set provided to a value that is no thread level",
            format!("provided {provided}"),
        );
    }
}

pub(super) fn nesting(ctx: &mut Ctx<'_>) {
    // Each call is a step, so that a crash names it; the state a later
    // step needs is gone with a crashed helper, so nothing is resumed.
    if ctx.skip_steps > 0 {
        return;
    }
    let mpi = ctx.mpi;
    let before: Vec<String> = ctx
        .known()
        .into_iter()
        .take(64)
        .map(|(_, info)| info.name)
        .collect();
    let num = |mpi: &MpiT| mpi.num().err().unwrap_or(MPI_SUCCESS);
    // Initialised once by `init`; once more now.
    if ctx.step("a second MPI_T_init_thread") {
        let (rc, _) = mpi.init();
        ctx.expect("a second MPI_T_init_thread", rc, None, "");
    }
    if ctx.step("the first of two MPI_T_finalize") {
        let rc = mpi.finalize();
        ctx.expect("the first of two MPI_T_finalize", rc, None, "");
    }
    let between = "MPI_T_cvar_get_num after one MPI_T_finalize of two initialisations";
    if ctx.step(between) {
        ctx.expect(between, num(mpi), None, "");
    }
    if ctx.step("the second of two MPI_T_finalize") {
        let rc = mpi.finalize();
        ctx.expect("the second of two MPI_T_finalize", rc, None, "");
    }
    let after = "MPI_T_cvar_get_num after the last MPI_T_finalize";
    if ctx.step(after) {
        ctx.expect(after, num(mpi), Some(MpiTError::NotInitialized), "");
    }
    let extra = "one MPI_T_finalize more than MPI_T_init_thread";
    if ctx.step(extra) {
        let rc = mpi.finalize();
        ctx.expect(extra, rc, Some(MpiTError::NotInitialized), "");
    }
    let again = "MPI_T_init_thread after the last MPI_T_finalize";
    if ctx.step(again) {
        let (rc, _) = mpi.init();
        ctx.expect(again, rc, None, "");
        if rc != MPI_SUCCESS {
            return;
        }
    }
    let count = "MPI_T_cvar_get_num after initialising again";
    if ctx.step(count) {
        ctx.expect(count, num(mpi), None, "");
    }
    if !ctx.step("MPI_T_cvar_get_info after initialising again") {
        return;
    }
    for (index, name) in before.iter().enumerate() {
        match mpi.info(index as i32) {
            Ok(info) if &info.name == name => {}
            Ok(info) => ctx.note(
                "initialised again, a variable has another index",
                format!("cvar {index}: {name} before, {} now", info.name),
            ),
            Err(rc) => {
                let code = ctx.code(rc);
                ctx.note(
                    format!("initialised again, an index no longer answers ({code})"),
                    place(index as i32, name),
                );
            }
        }
    }
}
