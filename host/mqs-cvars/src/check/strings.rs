//! The convention for returning strings (MPI-3.1 14.3.3), on the names and
//! descriptions of variables, enumerations and their items.

use std::ffi::{c_int, c_void};

use super::context::{empty_info, place, Ctx};
use super::enums::distinct_enums;
use crate::abi::MPI_SUCCESS;
use crate::library::CANARY;

/// One way to fetch a string: a buffer (None for NULL) and a length
/// pointer (None for NULL); returns the call's code.
type StringCall<'f> = dyn FnMut(Option<&mut [u8]>, Option<&mut c_int>) -> i32 + 'f;

/// The convention for returning strings, checked on one string whose full
/// text is `full`.
fn string_convention(
    ctx: &mut Ctx<'_>,
    what: &str,
    here: &str,
    full: &str,
    call: &mut StringCall<'_>,
) {
    let full = full.as_bytes();
    let want_len = full.len() as c_int + 1;
    let note = |ctx: &mut Ctx<'_>, message: String, detail: String| {
        let at = if detail.is_empty() {
            here.to_owned()
        } else {
            format!("{here}: {detail}")
        };
        ctx.note(format!("{what}: {message}"), at);
    };
    // A NULL buffer with a length: only the length comes back.
    let mut len: c_int = 7;
    let rc = call(None, Some(&mut len));
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a NULL buffer"), rc, None, here);
    } else if len != want_len {
        let message = if full.is_empty() && len == 0 {
            "an empty string (no description) comes back with length 0; the standard \
             wants 1 (the NUL)"
                .to_owned()
        } else {
            "a NULL buffer does not give the string's length plus one".to_owned()
        };
        note(ctx, message, format!("length {len}, want {want_len}"));
    }
    // A length of 0: the buffer is left alone, the length comes back.
    let mut buf = [b'X'; 16];
    let mut len: c_int = 0;
    let rc = call(Some(&mut buf), Some(&mut len));
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a length of 0"), rc, None, here);
    } else {
        if len != want_len {
            note(
                ctx,
                "a length of 0 does not give the string's length plus one".into(),
                format!("length {len}, want {want_len}"),
            );
        }
        if buf != [b'X'; 16] {
            note(
                ctx,
                "a length of 0 still writes into the buffer".into(),
                String::new(),
            );
        }
    }
    // Buffers of the exact size, one byte short, and one byte.
    let sizes: Vec<(usize, &str)> = if full.is_empty() {
        vec![(1, "exact")]
    } else {
        vec![
            (full.len() + 1, "exact"),
            (full.len(), "short"),
            (1, "one-byte"),
        ]
    };
    for (size, kind) in sizes {
        let mut buf = vec![b'X'; size + 16];
        buf[size..].fill(CANARY);
        let mut len = size as c_int;
        let rc = call(Some(&mut buf[..]), Some(&mut len));
        if rc != MPI_SUCCESS {
            ctx.expect(
                &format!("{what} with a buffer of the {kind} size"),
                rc,
                None,
                here,
            );
            continue;
        }
        let kept = size - 1;
        let want_text = &full[..kept.min(full.len())];
        if &buf[..kept] != want_text || buf[kept] != 0 {
            let text = String::from_utf8_lossy(&buf[..size]).into_owned();
            let message = if kind == "exact" {
                "a buffer of exactly the string's length plus one does not get the whole \
                 string and its NUL"
            } else {
                "a short buffer does not get the string cut to length-1 characters and a NUL"
            };
            note(ctx, message.into(), format!("buffer {size}: {text:?}"));
        }
        if buf[size..].iter().any(|&b| b != CANARY) {
            note(
                ctx,
                "the library writes past the length it was given".into(),
                format!("buffer {size}"),
            );
        }
        if len != want_len {
            let message = if kind == "exact" {
                "a buffer of the exact size does not give the string's length plus one"
            } else if len == size as c_int {
                "a cut string gives the buffer's length, not the full string's length plus one"
            } else {
                "a cut string does not give the full string's length plus one"
            };
            note(
                ctx,
                message.into(),
                format!("length {len}, want {want_len}"),
            );
        }
    }
    // A NULL length: nothing is returned.
    let mut buf = vec![b'X'; full.len() + 1];
    let rc = call(Some(&mut buf), None);
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a NULL length"), rc, None, here);
    } else if buf.iter().any(|&b| b != b'X') {
        note(
            ctx,
            "a NULL length still writes into the buffer".into(),
            String::new(),
        );
    }
}

pub(super) fn string_return(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        let mut desc = vec![0u8; info.description.len() + 64];
        let mut name_call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut desc_len = desc.len() as c_int;
            let mut out = empty_info();
            mpi.raw_info(
                index,
                buf,
                len,
                Some(&mut desc),
                Some(&mut desc_len),
                &mut out,
            )
        };
        string_convention(ctx, "cvar name", &here, &info.name, &mut name_call);
        let mut name = vec![0u8; info.name.len() + 64];
        let mut desc_call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut name_len = name.len() as c_int;
            let mut out = empty_info();
            mpi.raw_info(
                index,
                Some(&mut name),
                Some(&mut name_len),
                buf,
                len,
                &mut out,
            )
        };
        string_convention(
            ctx,
            "cvar description",
            &here,
            &info.description,
            &mut desc_call,
        );
    }
    // Enumeration names and item names, each enumeration once.
    for (enumtype, here) in distinct_enums(ctx) {
        let Ok((num, name)) = mpi.enum_info(enumtype) else {
            continue;
        };
        let mut call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut n: c_int = 0;
            // SAFETY: MPI_T_enum_get_info with a handle from get_info and
            // a buffer of the length given (or NULLs).
            unsafe {
                (mpi.f.enum_get_info)(
                    enumtype as *mut c_void,
                    &mut n,
                    buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast()),
                    len.map_or(std::ptr::null_mut(), |l| l as *mut c_int),
                )
            }
        };
        let enum_place = format!("{here}, enumeration {name}");
        string_convention(ctx, "enumeration name", &enum_place, &name, &mut call);
        for item in 0..num.clamp(0, 64) {
            let Ok((_, item_name)) = mpi.enum_item(enumtype, item) else {
                continue;
            };
            let mut call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
                let mut value: c_int = 0;
                // SAFETY: MPI_T_enum_get_item with an index below num.
                unsafe {
                    (mpi.f.enum_get_item)(
                        enumtype as *mut c_void,
                        item,
                        &mut value,
                        buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast()),
                        len.map_or(std::ptr::null_mut(), |l| l as *mut c_int),
                    )
                }
            };
            let item_place = format!("{enum_place} item {item}");
            string_convention(
                ctx,
                "enumeration item name",
                &item_place,
                &item_name,
                &mut call,
            );
        }
    }
}
