//! Layout of the generated Rust types against the C compiler, for both
//! interface levels, and against the LP64 layout that debuggers were built
//! with (docs/abi.md). The C side is `probe/layout_probe.c`, compiled over the
//! same header by build.rs.

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr};
use std::mem::{offset_of, size_of};

use mqs_abi::ffi::{mpi1, mpi2};

/// One row of the probe's table (mirrors `struct mqs_abi_probe_entry`).
#[repr(C)]
struct ProbeEntry {
    type_name: *const c_char,
    field_name: *const c_char,
    offset: usize,
    size: usize,
}

extern "C" {
    static mqs_abi_probe_mpi1: [ProbeEntry; 0];
    static mqs_abi_probe_mpi2: [ProbeEntry; 0];
}

/// (type, field or "" for the whole struct) -> (offset, size)
type Layout = BTreeMap<(String, String), (usize, usize)>;

fn c_layout(table: *const ProbeEntry) -> Layout {
    let mut layout = Layout::new();
    let mut entry = table;
    loop {
        // SAFETY: the probe's table is a static array ending with an entry
        // whose type_name is NULL; we stop there.
        let e = unsafe { &*entry };
        if e.type_name.is_null() {
            break;
        }
        // SAFETY: type_name and field_name are NULL or static C strings.
        let ty = unsafe { CStr::from_ptr(e.type_name) }
            .to_string_lossy()
            .into_owned();
        let field = if e.field_name.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(e.field_name) }
                .to_string_lossy()
                .into_owned()
        };
        assert!(layout.insert((ty, field), (e.offset, e.size)).is_none());
        // SAFETY: the terminator has not been reached, so the next entry exists.
        entry = unsafe { entry.add(1) };
    }
    layout
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! rust_layout {
    ($layout:ident, $m:ident, $( $t:ident { $($f:ident),* $(,)? } )*) => {
        $(
            $layout.insert((stringify!($t).to_string(), String::new()), (0, size_of::<$m::$t>()));
            $(
                $layout.insert(
                    (stringify!($t).to_string(), stringify!($f).to_string()),
                    (offset_of!($m::$t, $f), field_size(|s: &$m::$t| &s.$f)),
                );
            )*
        )*
    };
}

macro_rules! common_structs {
    ($layout:ident, $m:ident) => {
        rust_layout!($layout, $m,
            mqs_target_type_sizes { short_size, int_size, long_size, long_long_size, pointer_size }
            mqs_communicator { unique_id, local_rank, size, name }
            mqs_pending_operation {
                status, desired_local_rank, desired_global_rank, tag_wild, desired_tag,
                desired_length, system_buffer, buffer, actual_local_rank, actual_global_rank,
                actual_tag, actual_length, extra_text,
            }
            mqs_image_callbacks {
                mqs_get_type_sizes_fp, mqs_find_function_fp, mqs_find_symbol_fp,
                mqs_find_type_fp, mqs_field_offset_fp, mqs_sizeof_fp,
            }
        );
    };
}

fn rust_layout_mpi1() -> Layout {
    let mut l = Layout::new();
    common_structs!(l, mpi1);
    rust_layout!(l, mpi1,
        mqs_basic_callbacks {
            mqs_malloc_fp, mqs_free_fp, mqs_dprints_fp, mqs_errorstring_fp,
            mqs_put_image_info_fp, mqs_get_image_info_fp, mqs_put_process_info_fp,
            mqs_get_process_info_fp,
        }
        mqs_process_callbacks {
            mqs_get_global_rank_fp, mqs_get_image_fp, mqs_fetch_data_fp, mqs_target_to_host_fp,
        }
    );
    l
}

fn rust_layout_mpi2() -> Layout {
    let mut l = Layout::new();
    common_structs!(l, mpi2);
    rust_layout!(l, mpi2,
        mqs_basic_callbacks {
            mqs_malloc_fp, mqs_free_fp, mqs_dprints_fp, mqs_errorstring_fp,
            mqs_put_image_info_fp, mqs_get_image_info_fp, mqs_put_process_info_fp,
            mqs_get_process_info_fp, mqs_put_job_info_fp, mqs_get_job_info_fp,
        }
        mqs_process_callbacks {
            mqs_get_global_rank_fp, mqs_get_image_fp, mqs_fetch_data_fp, mqs_target_to_host_fp,
            mqs_get_process_job_fp, mqs_get_process_identity_fp,
        }
        mqs_job_callbacks { mqs_get_process_fp }
        mqs_process_location { pid, image_name, host_name }
    );
    l
}

/// The LP64 layout of docs/abi.md, which TotalView, DDT and padb were built with.
fn lp64_expected(mpi2: bool) -> Layout {
    let mut l = Layout::new();
    let mut add = |ty: &str, size: usize, fields: &[(&str, usize, usize)]| {
        l.insert((ty.to_string(), String::new()), (0, size));
        for &(f, off, sz) in fields {
            l.insert((ty.to_string(), f.to_string()), (off, sz));
        }
    };
    add(
        "mqs_target_type_sizes",
        20,
        &[
            ("short_size", 0, 4),
            ("int_size", 4, 4),
            ("long_size", 8, 4),
            ("long_long_size", 12, 4),
            ("pointer_size", 16, 4),
        ],
    );
    add(
        "mqs_communicator",
        88,
        &[
            ("unique_id", 0, 8),
            ("local_rank", 8, 8),
            ("size", 16, 8),
            ("name", 24, 64),
        ],
    );
    add(
        "mqs_pending_operation",
        416,
        &[
            ("status", 0, 4),
            ("desired_local_rank", 8, 8),
            ("desired_global_rank", 16, 8),
            ("tag_wild", 24, 4),
            ("desired_tag", 32, 8),
            ("desired_length", 40, 8),
            ("system_buffer", 48, 4),
            ("buffer", 56, 8),
            ("actual_local_rank", 64, 8),
            ("actual_global_rank", 72, 8),
            ("actual_tag", 80, 8),
            ("actual_length", 88, 8),
            ("extra_text", 96, 320),
        ],
    );
    let ptrs = |names: &[&'static str]| -> Vec<(&'static str, usize, usize)> {
        names
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i * 8, 8))
            .collect()
    };
    add(
        "mqs_image_callbacks",
        48,
        &ptrs(&[
            "mqs_get_type_sizes_fp",
            "mqs_find_function_fp",
            "mqs_find_symbol_fp",
            "mqs_find_type_fp",
            "mqs_field_offset_fp",
            "mqs_sizeof_fp",
        ]),
    );
    let mut basic = vec![
        "mqs_malloc_fp",
        "mqs_free_fp",
        "mqs_dprints_fp",
        "mqs_errorstring_fp",
        "mqs_put_image_info_fp",
        "mqs_get_image_info_fp",
        "mqs_put_process_info_fp",
        "mqs_get_process_info_fp",
    ];
    let mut process = vec![
        "mqs_get_global_rank_fp",
        "mqs_get_image_fp",
        "mqs_fetch_data_fp",
        "mqs_target_to_host_fp",
    ];
    if mpi2 {
        basic.extend(["mqs_put_job_info_fp", "mqs_get_job_info_fp"]);
        process.extend(["mqs_get_process_job_fp", "mqs_get_process_identity_fp"]);
    }
    add("mqs_basic_callbacks", basic.len() * 8, &ptrs(&basic));
    add("mqs_process_callbacks", process.len() * 8, &ptrs(&process));
    if mpi2 {
        add("mqs_job_callbacks", 8, &ptrs(&["mqs_get_process_fp"]));
        // glibc: FILENAME_MAX is 4096.
        add(
            "mqs_process_location",
            4168,
            &[
                ("pid", 0, 8),
                ("image_name", 8, 4096),
                ("host_name", 4104, 64),
            ],
        );
    }
    l
}

fn assert_same(what: &str, left_name: &str, left: &Layout, right_name: &str, right: &Layout) {
    let mut problems = Vec::new();
    for (key, l) in left {
        match right.get(key) {
            None => problems.push(format!(
                "{key:?}: in {left_name}, missing from {right_name}"
            )),
            Some(r) if r != l => problems.push(format!(
                "{key:?}: (offset, size) {l:?} in {left_name}, {r:?} in {right_name}"
            )),
            Some(_) => {}
        }
    }
    for key in right.keys().filter(|k| !left.contains_key(*k)) {
        problems.push(format!(
            "{key:?}: in {right_name}, missing from {left_name}"
        ));
    }
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

#[test]
fn mpi1_rust_matches_c() {
    let c = c_layout((&raw const mqs_abi_probe_mpi1).cast());
    assert_same("MPI-1 layout", "C", &c, "Rust", &rust_layout_mpi1());
}

#[test]
fn mpi2_rust_matches_c() {
    let c = c_layout((&raw const mqs_abi_probe_mpi2).cast());
    assert_same("MPI-2 layout", "C", &c, "Rust", &rust_layout_mpi2());
}

#[cfg(all(target_pointer_width = "64", target_os = "linux", target_env = "gnu"))]
#[test]
fn mpi1_matches_the_debuggers_lp64_layout() {
    assert_same(
        "MPI-1 LP64",
        "ABI",
        &lp64_expected(false),
        "Rust",
        &rust_layout_mpi1(),
    );
}

#[cfg(all(target_pointer_width = "64", target_os = "linux", target_env = "gnu"))]
#[test]
fn mpi2_matches_the_debuggers_lp64_layout() {
    assert_same(
        "MPI-2 LP64",
        "ABI",
        &lp64_expected(true),
        "Rust",
        &rust_layout_mpi2(),
    );
}

#[test]
fn constants_match_the_interface_levels() {
    assert_eq!(mpi1::MQS_INTERFACE_COMPATIBILITY, 2);
    assert_eq!(mpi2::MQS_INTERFACE_COMPATIBILITY, 3);
    for (ok, noinfo, end, user, invalid) in [
        (
            mpi1::mqs_ok,
            mpi1::mqs_no_information,
            mpi1::mqs_end_of_list,
            mpi1::mqs_first_user_code,
            mpi1::MQS_INVALID_PROCESS,
        ),
        (
            mpi2::mqs_ok,
            mpi2::mqs_no_information,
            mpi2::mqs_end_of_list,
            mpi2::mqs_first_user_code,
            mpi2::MQS_INVALID_PROCESS,
        ),
    ] {
        assert_eq!((ok, noinfo, end, user, invalid), (0, 1, 2, 100, -1));
    }
    assert_eq!(
        [
            mpi1::mqs_lang_c,
            mpi1::mqs_lang_cplus,
            mpi1::mqs_lang_f77,
            mpi1::mqs_lang_f90
        ],
        [b'c' as u32, b'C' as u32, b'f' as u32, b'F' as u32]
    );
    assert_eq!(
        [
            mpi1::mqs_st_pending,
            mpi1::mqs_st_matched,
            mpi1::mqs_st_complete
        ],
        [0, 1, 2]
    );
}
