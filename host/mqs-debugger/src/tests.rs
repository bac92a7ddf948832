//! The library's C entry points and its view of the debugger's answers,
//! over a fake debugger (real DLLs are driven by tests/e2e/debuggers.rs).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

use mqs_core::interface::{ImageSymbols, Target};

use super::answers::{Image, Process};
use super::*;

/// A fake debugger: memory in pieces, data symbols by name, one type with
/// one member; it notes the type questions.
struct Fake {
    memory: Vec<(u64, Vec<u8>)>,
    symbols: Vec<(&'static str, u64)>,
    asked: RefCell<Vec<String>>,
}

const BASE: u64 = 0x1000;

impl Default for Fake {
    /// 64 readable bytes at BASE (each its offset), MPIR_dll_name there.
    fn default() -> Self {
        Fake {
            memory: vec![(BASE, (0..64).collect())],
            symbols: vec![("MPIR_dll_name", BASE)],
            asked: RefCell::default(),
        }
    }
}

unsafe extern "C" fn read(
    context: *mut c_void,
    _process: u32,
    addr: u64,
    size: u32,
    buf: *mut u8,
    why: *mut c_char,
    why_len: u32,
) -> c_int {
    // SAFETY: the tests pass a Fake as the context.
    let fake = unsafe { &*context.cast::<Fake>() };
    let end = addr + u64::from(size);
    let piece = fake
        .memory
        .iter()
        .find(|(at, bytes)| *at <= addr && end <= at + bytes.len() as u64);
    let Some((at, bytes)) = piece else {
        let text = b"Cannot access memory\0";
        let n = text.len().min(why_len as usize);
        // SAFETY: the library's buffer of why_len bytes.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast(), why, n) };
        return 1;
    };
    let from = (addr - at) as usize;
    // SAFETY: the library's buffer of `size` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes[from..].as_ptr(), buf, size as usize) };
    0
}

unsafe extern "C" fn find_symbol(
    context: *mut c_void,
    _image: u32,
    name: *const c_char,
    function: c_int,
    addr: *mut u64,
) -> c_int {
    // SAFETY: the tests' Fake; a C string and an out-pointer.
    let (fake, name) = unsafe { (&*context.cast::<Fake>(), CStr::from_ptr(name)) };
    let found = fake
        .symbols
        .iter()
        .find(|(symbol, _)| function == 0 && symbol.as_bytes() == name.to_bytes());
    match found {
        Some(&(_, value)) => {
            // SAFETY: as above.
            unsafe { *addr = value };
            0
        }
        None => 1,
    }
}

unsafe extern "C" fn find_type(
    context: *mut c_void,
    _image: u32,
    name: *const c_char,
    id: *mut u64,
) -> c_int {
    // SAFETY: the tests' Fake; a C string and an out-pointer.
    let (fake, name) = unsafe { (&*context.cast::<Fake>(), CStr::from_ptr(name)) };
    fake.asked
        .borrow_mut()
        .push(format!("type {}", name.to_string_lossy()));
    if name.to_bytes() == b"struct s" {
        // SAFETY: as above.
        unsafe { *id = 7 };
        return 0;
    }
    1
}

unsafe extern "C" fn field_offset(
    context: *mut c_void,
    id: u64,
    name: *const c_char,
    offset: *mut u64,
) -> c_int {
    // SAFETY: as find_type.
    let (fake, name) = unsafe { (&*context.cast::<Fake>(), CStr::from_ptr(name)) };
    fake.asked
        .borrow_mut()
        .push(format!("field {id} {}", name.to_string_lossy()));
    if id == 7 && name.to_bytes() == b"recv.tag" {
        // SAFETY: as above.
        unsafe { *offset = 24 };
        return 0;
    }
    1
}

unsafe extern "C" fn size_of(_context: *mut c_void, id: u64, size: *mut u64) -> c_int {
    if id == 7 {
        // SAFETY: an out-pointer.
        unsafe { *size = 40 };
        return 0;
    }
    1
}

fn table(fake: &Fake) -> Answers {
    Answers {
        context: (fake as *const Fake).cast_mut().cast(),
        read: Some(read),
        find_symbol: Some(find_symbol),
        find_type: Some(find_type),
        field_offset: Some(field_offset),
        size_of: Some(size_of),
        calling: None,
    }
}

#[test]
fn memory_is_read_through_the_debugger_and_its_refusal_is_the_reason() {
    let fake = Fake::default();
    let process = Process {
        answers: table(&fake),
        index: 0,
        pid: 42,
        executable: "/bin/app".into(),
        pointer_size: 8,
        local_live: false,
    };
    let mut buf = [0u8; 4];
    process.read(BASE + 8, &mut buf).expect("readable");
    assert_eq!(buf, [8, 9, 10, 11]);
    let error = process.read(0x8, &mut buf).expect_err("unreadable");
    assert!(
        error.to_string().contains("Cannot access memory"),
        "{error}"
    );
    assert_eq!(process.pid(), 42);
    assert_eq!(process.pointer_size(), 8);
}

#[test]
fn a_type_is_asked_for_only_the_members_and_size_the_dll_wants() {
    let fake = Fake::default();
    let image = Image {
        answers: table(&fake),
        index: 0,
    };
    assert_eq!(image.find_symbol("MPIR_dll_name"), Some(BASE));
    assert_eq!(image.find_function("MPIR_dll_name"), None);
    assert!(image.find_type("struct nothing").is_none());
    let ty = image.find_type("struct s").expect("a type");
    assert_eq!(ty.handle, Some(7));
    assert!(ty.fields.is_empty());
    assert_eq!(image.field_offset(&ty, "recv.tag"), Some(24));
    assert_eq!(image.field_offset(&ty, "absent"), None);
    assert_eq!(image.type_size(&ty), Some(40));
    assert_eq!(
        *fake.asked.borrow(),
        [
            "type struct nothing",
            "type struct s",
            "field 7 recv.tag",
            "field 7 absent"
        ]
    );
}

/// Calls an entry point that answers a string; (rc, the string).
fn call(f: impl FnOnce(*mut *mut c_char) -> c_int) -> (c_int, String) {
    let mut out: *mut c_char = std::ptr::null_mut();
    let rc = f(&mut out);
    assert!(!out.is_null(), "every call answers a string");
    // SAFETY: a string the library made, freed once.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    unsafe { mqs_debugger_free(out) };
    (rc, text)
}

#[test]
fn bad_requests_are_one_line_errors() {
    let fake = Fake::default();
    let answers = table(&fake);
    // SAFETY: NULL is allowed; the out-pointer is ours.
    let (rc, text) = call(|out| unsafe { mqs_debugger_dump(std::ptr::null(), &answers, out) });
    assert_eq!((rc, text.as_str()), (1, "no request (NULL)"));

    let job = CString::new("{\"dll\": 3}").unwrap();
    // SAFETY: a C string and our table.
    let (rc, text) = call(|out| unsafe { mqs_debugger_dump(job.as_ptr(), &answers, out) });
    assert_eq!(rc, 1);
    assert!(
        text.starts_with("the debugger's request is not valid JSON"),
        "{text}"
    );

    let job = CString::new(r#"{"dll": "/nonexistent/libdll.so", "processes": []}"#).unwrap();
    // SAFETY: as above.
    let (rc, text) = call(|out| unsafe { mqs_debugger_dump(job.as_ptr(), &answers, out) });
    assert_eq!(rc, 1);
    assert_eq!(
        text,
        "message-queue DLL /nonexistent/libdll.so: no such file; give another with --dll \
         (--dll ours: mqs's own)"
    );
    assert!(!text.contains('\n'));

    let job = CString::new(r#"{"dll": "/", "processes": []}"#).unwrap();
    // SAFETY: a C string; NULL answers are refused before any use.
    let (rc, text) = call(|out| unsafe { mqs_debugger_dump(job.as_ptr(), std::ptr::null(), out) });
    assert_eq!((rc, text.as_str()), (1, "no request (NULL)"));
}

fn process_json(pid: i32, rank: i32) -> String {
    format!(
        r#"{{"pid": {pid}, "global_rank": {rank}, "executable": "/bin/app",
            "dll": {{"path": "/lib/dll.so", "version": "v", "compatibility": 2}},
            "communicators": {{"status": "not_available", "reason": "none here"}},
            "stats": {{"fetches": 0, "fetched_bytes": 0, "syscalls": 0, "elapsed_ms": 0.0}}}}"#
    )
}

#[test]
fn the_listing_is_mqs_dumps_in_rank_order_unknown_ranks_last() {
    let listing = format!(
        r#"{{"processes": [{}, {}, {}]}}"#,
        process_json(30, -1),
        process_json(20, 1),
        process_json(10, 0)
    );
    let listing = CString::new(listing).unwrap();
    // SAFETY: a C string and our out-pointer.
    let (rc, text) = call(|out| unsafe { mqs_debugger_render(listing.as_ptr(), 0, out) });
    assert_eq!(rc, 0, "{text}");
    let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("Process")).collect();
    assert_eq!(
        heads,
        [
            "Process 10 (rank 0): /bin/app",
            "Process 20 (rank 1): /bin/app",
            "Process 30 (rank unknown): /bin/app"
        ]
    );
    // SAFETY: as above.
    let (rc, json) = call(|out| unsafe { mqs_debugger_render(listing.as_ptr(), 1, out) });
    assert_eq!(rc, 0, "{json}");
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(value["schema_version"], mqs_core::model::SCHEMA_VERSION);
    assert_eq!(value["processes"][0]["pid"], 10);
    assert_eq!(value["processes"].as_array().map(Vec::len), Some(3));

    let bad = CString::new("[]").unwrap();
    // SAFETY: as above.
    let (rc, text) = call(|out| unsafe { mqs_debugger_render(bad.as_ptr(), 0, out) });
    assert_eq!(rc, 1);
    assert!(
        text.starts_with("the debugger's request is not valid JSON"),
        "{text}"
    );
}

#[test]
fn a_dll_the_target_named_is_checked_as_mqs_dump_checks_it() {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("mqs-debugger-{}.so", std::process::id()));
    std::fs::write(&path, b"not a DLL").expect("a temporary file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let mut name = c_bytes(&path.display().to_string());
    name.resize(4096, 0);
    let fake = Fake {
        memory: vec![(BASE, name)],
        ..Fake::default()
    };
    let answers = table(&fake);
    let plan_of = |trust: bool| {
        let request = CString::new(format!(
            r#"{{"trust_dll": {trust}, "processes": [{{"pid": 3, "executable": "/bin/app"}}]}}"#
        ))
        .unwrap();
        // SAFETY: a C string, our table and out-pointer.
        let (rc, text) = call(|out| unsafe { mqs_debugger_plan(request.as_ptr(), &answers, out) });
        assert_eq!(rc, 0, "{text}");
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
    };
    let checked = plan_of(false);
    let vouched = plan_of(true);
    let _ = std::fs::remove_file(&path);
    let error = checked[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("untrusted: writable by everyone") && error.contains("--trust-dll"),
        "{error}"
    );
    assert_eq!(checked[0]["exit_code"], mqs_core::exit_code::DLL_UNTRUSTED);
    assert_eq!(vouched[0]["dll"], path.display().to_string());
}

/// `bytes` with a NUL after them.
fn c_bytes(text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    bytes
}

#[test]
fn the_dll_and_rank_are_found_as_mqs_dump_finds_them_without_running_a_dll() {
    let dll = std::env::temp_dir().join(format!("mqs-debugger-plan-{}.so", std::process::id()));
    std::fs::write(&dll, b"not run").expect("a temporary file");
    let words = |list: &[u64]| {
        list.iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>()
    };
    // A page at 0x3000: environ -> [0x3100] -> ["A=1", "PMI_RANK=5"]
    // (strings are read up to the end of their page, as a debugger can).
    let mut page = vec![0u8; 4096];
    let mut put = |at: usize, bytes: &[u8]| page[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &words(&[0x3100]));
    put(0x100, &words(&[0x3200, 0x3300, 0]));
    put(0x200, &c_bytes("A=1"));
    put(0x300, &c_bytes("PMI_RANK=5"));
    let mut name = c_bytes(&dll.display().to_string());
    name.resize(4096, 0);
    let fake = Fake {
        memory: vec![(0x2000, name), (0x3000, page)],
        symbols: vec![("MPIR_dll_name", 0x2000), ("environ", 0x3000)],
        asked: RefCell::default(),
    };
    let answers = table(&fake);
    let described = r#"{"pid": 7, "executable": "/bin/app", "pointer_size": 8}"#;
    let plan_of = |request: String| {
        let request = CString::new(request).unwrap();
        // SAFETY: a C string, our table and out-pointer.
        let (rc, text) = call(|out| unsafe { mqs_debugger_plan(request.as_ptr(), &answers, out) });
        assert_eq!(rc, 0, "{text}");
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
    };
    let named = plan_of(format!(
        r#"{{"by_default": true, "processes": [{described}]}}"#
    ));
    let _ = std::fs::remove_file(&dll);
    assert_eq!(named[0]["global_rank"], 5);
    assert_eq!(named[0]["dll"], dll.display().to_string());
    assert_eq!(named[0]["chosen"], plan::CHOSEN_NAMED);

    let given = plan_of(format!(
        r#"{{"dll": "/opt/given.so", "processes": [{described}]}}"#
    ));
    assert_eq!(given[0]["dll"], "/opt/given.so");
    assert!(given[0].get("chosen").is_none());

    // The DLL it names is gone now.
    let missing = plan_of(format!(r#"{{"processes": [{described}]}}"#));
    let error = missing[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("no such file") && error.contains("pass --dll"),
        "{error}"
    );
    assert_eq!(missing[0]["exit_code"], mqs_core::exit_code::DLL_MISSING);
    assert_eq!(missing[0]["global_rank"], 5);
}

#[test]
fn a_process_without_mpi_is_said_to_be_one() {
    let fake = Fake {
        symbols: vec![],
        ..Fake::default()
    };
    let answers = table(&fake);
    let request =
        CString::new(r#"{"processes": [{"pid": 9, "executable": "/bin/sh", "pointer_size": 8}]}"#)
            .unwrap();
    // SAFETY: a C string, our table and out-pointer.
    let (rc, text) = call(|out| unsafe { mqs_debugger_plan(request.as_ptr(), &answers, out) });
    assert_eq!(rc, 0, "{text}");
    let plan: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let error = plan[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("pid 9 is not an MPI process"), "{error}");
    assert_eq!(plan[0]["global_rank"], -1);
}

#[test]
fn dumps_travel_a_line_each_and_their_dlls_output_is_listed_with_them() {
    let dump: mqs_core::model::ProcessDump =
        serde_json::from_str(&process_json(10, 0)).expect("a dump");
    let outcomes = [
        Outcome {
            dump: Err(("no queues here".into(), 6)),
        },
        Outcome {
            dump: Ok(Box::new(dump)),
        },
    ];
    let text = answer_lines(&outcomes).expect("JSON");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        r#"[{"error":"no queues here","exit_code":6},{"ok":true}]"#
    );
    let listing = format!(
        r#"{{"processes": [{}], "dll_output": [[0, ["hello from the DLL"]]]}}"#,
        lines[1]
    );
    let listing = CString::new(listing).unwrap();
    // SAFETY: a C string and our out-pointer.
    let (rc, text) = call(|out| unsafe { mqs_debugger_render(listing.as_ptr(), 0, out) });
    assert_eq!(rc, 0, "{text}");
    assert!(text.starts_with("Process 10 (rank 0): /bin/app"), "{text}");
    assert!(text.contains("hello from the DLL"), "{text}");
}
