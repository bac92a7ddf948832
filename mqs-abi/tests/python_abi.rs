//! The Python hosts (the gdb and lldb extensions in `debuggers/`) take the
//! ABI from `debuggers/mqs_host/mqs_abi.py`, which mqs-abi's build script
//! writes from the header and the entry-point list the Rust side uses: the
//! committed copy must be what the build generates, name exactly
//! [`mqs_abi::ENTRY_POINTS`], and give ctypes the layouts the C compiler
//! gives (checked by running it under python3).
//!
//! `MQS_BLESS=1 cargo test -p mqs-abi --test python_abi` rewrites the copy.

use std::path::PathBuf;
use std::process::Command;

use mqs_abi::ffi::{mpi1, mpi2};

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/mqs_abi.py"));

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../debuggers/mqs_host/mqs_abi.py")
}

fn committed() -> String {
    std::fs::read_to_string(committed_path()).unwrap_or_default()
}

#[test]
fn the_committed_module_is_what_the_build_generates() {
    if std::env::var_os("MQS_BLESS").is_some_and(|v| v == "1") && committed() != GENERATED {
        std::fs::write(committed_path(), GENERATED).expect("write the module");
    }
    assert!(
        committed() == GENERATED,
        "{} differs from what mqs-abi's build generates from the header and \
         entry_points.rs; run `MQS_BLESS=1 cargo test -p mqs-abi --test python_abi` \
         and commit it",
        committed_path().display()
    );
}

/// The names in the module's ENTRY_POINTS tuple, in order, with their need.
fn python_entry_points(text: &str) -> Vec<(String, String)> {
    let list = text
        .split_once("ENTRY_POINTS = (\n")
        .and_then(|(_, rest)| rest.split_once("\n)\n"))
        .map(|(list, _)| list)
        .expect("an ENTRY_POINTS tuple");
    list.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('"').collect();
            assert_eq!(fields.len(), 5, "{line}");
            (fields[1].to_string(), fields[3].to_string())
        })
        .collect()
}

#[test]
fn the_module_names_exactly_the_entry_points() {
    let names = python_entry_points(&committed());
    let expected: Vec<(String, String)> = mqs_abi::ENTRY_POINTS
        .iter()
        .map(|e| {
            let need = match e.need {
                mqs_abi::Need::Required => "required",
                mqs_abi::Need::Optional => "optional",
                mqs_abi::Need::RequiredForMpi2 => "required_mpi2",
                mqs_abi::Need::OptionalForMpi2 => "optional_mpi2",
            };
            (e.name.to_string(), need.to_string())
        })
        .collect();
    assert_eq!(names, expected);
}

/// What python3 says of the committed module: sizes and offsets of the
/// structures and tables, and each level's entry points, as lines
/// `name size` and `name.field offset`, `entry name`.
fn python_facts(level: &str) -> String {
    let dir = committed_path().parent().unwrap().to_path_buf();
    let script = format!(
        r#"
import ctypes, sys
sys.path.insert(0, {dir:?})
import mqs_abi
l = mqs_abi.{level}
for name in sorted(vars(l)):
    t = getattr(l, name)
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        print(name, ctypes.sizeof(t))
        for f in t._fields_:
            print("%s.%s %d" % (name, f[0], getattr(t, f[0]).offset))
for name in l.ENTRY:
    print("entry", name)
"#,
        dir = dir.display().to_string()
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs (scripts/setup-mpis installs it)");
    assert!(
        out.status.success(),
        "python3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

macro_rules! layout {
    ($out:ident, $m:ident :: $t:ident { $($f:ident),* }) => {{
        $out.push(format!("{} {}", stringify!($t), size_of::<$m::$t>()));
        $($out.push(format!(
            "{}.{} {}",
            stringify!($t),
            stringify!($f),
            std::mem::offset_of!($m::$t, $f)
        ));)*
    }};
}

fn sorted(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.sort();
    lines
}

#[test]
fn ctypes_lays_the_structures_out_as_rust_and_c_do() {
    let mut one = Vec::new();
    layout!(
        one,
        mpi1::mqs_target_type_sizes {
            short_size,
            int_size,
            long_size,
            long_long_size,
            pointer_size
        }
    );
    layout!(
        one,
        mpi1::mqs_communicator {
            unique_id,
            local_rank,
            size,
            name
        }
    );
    layout!(
        one,
        mpi1::mqs_pending_operation {
            status,
            desired_local_rank,
            desired_global_rank,
            tag_wild,
            desired_tag,
            desired_length,
            system_buffer,
            buffer,
            actual_local_rank,
            actual_global_rank,
            actual_tag,
            actual_length,
            extra_text
        }
    );
    layout!(
        one,
        mpi1::mqs_basic_callbacks {
            mqs_malloc_fp,
            mqs_free_fp,
            mqs_dprints_fp,
            mqs_errorstring_fp,
            mqs_put_image_info_fp,
            mqs_get_image_info_fp,
            mqs_put_process_info_fp,
            mqs_get_process_info_fp
        }
    );
    layout!(
        one,
        mpi1::mqs_image_callbacks {
            mqs_get_type_sizes_fp,
            mqs_find_function_fp,
            mqs_find_symbol_fp,
            mqs_find_type_fp,
            mqs_field_offset_fp,
            mqs_sizeof_fp
        }
    );
    layout!(
        one,
        mpi1::mqs_process_callbacks {
            mqs_get_global_rank_fp,
            mqs_get_image_fp,
            mqs_fetch_data_fp,
            mqs_target_to_host_fp
        }
    );
    for e in mqs_abi::ENTRY_POINTS.iter().filter(|e| !e.need.mpi2_only()) {
        one.push(format!("entry {}", e.name));
    }
    one.sort();
    assert_eq!(sorted(&python_facts("mpi1")), one);

    let mut two = Vec::new();
    layout!(
        two,
        mpi2::mqs_target_type_sizes {
            short_size,
            int_size,
            long_size,
            long_long_size,
            pointer_size
        }
    );
    layout!(
        two,
        mpi2::mqs_communicator {
            unique_id,
            local_rank,
            size,
            name
        }
    );
    layout!(
        two,
        mpi2::mqs_pending_operation {
            status,
            desired_local_rank,
            desired_global_rank,
            tag_wild,
            desired_tag,
            desired_length,
            system_buffer,
            buffer,
            actual_local_rank,
            actual_global_rank,
            actual_tag,
            actual_length,
            extra_text
        }
    );
    layout!(
        two,
        mpi2::mqs_process_location {
            pid,
            image_name,
            host_name
        }
    );
    layout!(
        two,
        mpi2::mqs_basic_callbacks {
            mqs_malloc_fp,
            mqs_free_fp,
            mqs_dprints_fp,
            mqs_errorstring_fp,
            mqs_put_image_info_fp,
            mqs_get_image_info_fp,
            mqs_put_process_info_fp,
            mqs_get_process_info_fp,
            mqs_put_job_info_fp,
            mqs_get_job_info_fp
        }
    );
    layout!(
        two,
        mpi2::mqs_image_callbacks {
            mqs_get_type_sizes_fp,
            mqs_find_function_fp,
            mqs_find_symbol_fp,
            mqs_find_type_fp,
            mqs_field_offset_fp,
            mqs_sizeof_fp
        }
    );
    layout!(
        two,
        mpi2::mqs_process_callbacks {
            mqs_get_global_rank_fp,
            mqs_get_image_fp,
            mqs_fetch_data_fp,
            mqs_target_to_host_fp,
            mqs_get_process_job_fp,
            mqs_get_process_identity_fp
        }
    );
    layout!(two, mpi2::mqs_job_callbacks { mqs_get_process_fp });
    for e in mqs_abi::ENTRY_POINTS {
        two.push(format!("entry {}", e.name));
    }
    two.sort();
    assert_eq!(sorted(&python_facts("mpi2")), two);
}
