//! The symbol index against shared objects compiled at test time from
//! tests/data/symbols_*.c: every type size and member offset must equal what
//! the C compiler says (symbols_oracle.c), with the DWARF in the object, in
//! a separate file found by `.gnu_debuglink` or by build-id, and compressed
//! by dwz into a supplementary file; symbols with and without a load bias.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use mqs_core::interface::{MappedObject, MappedRange, Perms};
use mqs_core::symbols::{load_bias, ObjectSymbols, SymbolCache, SymbolIndex, TypeKind};
use object::{Object, ObjectSymbol};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A scratch directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mqs-symbols-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn compile(compiler: &str, flags: &[&str], out: &Path, sources: &[&str]) {
    let data = data_dir();
    let mut cmd = Command::new(compiler);
    cmd.args(flags).arg("-I").arg(&data).arg("-o").arg(out);
    for source in sources {
        cmd.arg(data.join(source));
    }
    run(&mut cmd);
}

/// libsyma.so (symbols_a.c + symbols_b.c) and libsymb.so (symbols_remote.c).
struct Libs {
    dir: TempDir,
    a: PathBuf,
    b: PathBuf,
}

fn build_libs(tag: &str, compiler: &str, debug_flags: &[&str]) -> Libs {
    let dir = TempDir::new(tag);
    let (a, b) = (dir.join("libsyma.so"), dir.join("libsymb.so"));
    let mut flags = debug_flags.to_vec();
    flags.extend(["-O0", "-fPIC", "-shared", "-Wl,--build-id"]);
    compile(compiler, &flags, &a, &["symbols_a.c", "symbols_b.c"]);
    compile(compiler, &flags, &b, &["symbols_remote.c"]);
    Libs { dir, a, b }
}

/// What the C compiler says: sizes and offsets by type name.
#[derive(Debug, Default)]
struct Oracle {
    sizes: Vec<(String, u64)>,
    offsets: Vec<(String, String, u64)>,
}

impl Oracle {
    fn parse(text: &str) -> Self {
        let mut oracle = Self::default();
        for line in text.lines() {
            let parts: Vec<&str> = line.split('\t').collect();
            match parts[..] {
                ["size", ty, n] => oracle.sizes.push((ty.into(), n.parse().unwrap())),
                ["offset", ty, field, n] => {
                    oracle
                        .offsets
                        .push((ty.into(), field.into(), n.parse().unwrap()))
                }
                _ => panic!("bad oracle line {line:?}"),
            }
        }
        oracle
    }

    fn size(&self, ty: &str) -> u64 {
        self.sizes.iter().find(|(t, _)| t == ty).unwrap().1
    }
}

fn c_oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let dir = TempDir::new("oracle");
        let exe = dir.join("oracle");
        compile("cc", &[], &exe, &["symbols_oracle.c"]);
        Oracle::parse(&run(&mut Command::new(&exe)))
    })
}

/// Every size and offset the oracle printed, through `index`.
fn check_layouts(index: &SymbolIndex, oracle: &Oracle) {
    let mut failures = Vec::new();
    for (ty, size) in &oracle.sizes {
        match index.find_type(ty) {
            Some(info) if info.size == Some(*size) => {}
            other => failures.push(format!("sizeof({ty}) = {size}, index says {other:?}")),
        }
    }
    for (ty, field, offset) in &oracle.offsets {
        let found = index.find_type(ty).map(|info| info.field_offset(field));
        if found != Some(Some(*offset)) {
            failures.push(format!(
                "offsetof({ty}, {field}) = {offset}, index says {found:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The C layouts plus what offsetof cannot say.
fn check_c_types(index: &SymbolIndex) {
    let oracle = c_oracle();
    check_layouts(index, oracle);

    let anon = index.find_type("with_anon_t").unwrap();
    assert_eq!(anon.name, "with_anon");
    assert_eq!(anon.kind, TypeKind::Struct);
    // Members of a named member are not flattened: they are named by path
    // (the oracle checks their offsets), and a path into a named struct's
    // member (point_t) is no name.
    assert_eq!(anon.field_offset("a"), None);
    assert_eq!(anon.field_offset("b"), None);
    assert_eq!(anon.field_offset("deeper.s"), None);
    assert!(anon.field_offset("named_inner.deeper.s").is_some());
    // Bitfields sit inside their struct, between their neighbours.
    let flags = anon.field_offset("flags").unwrap();
    let more = anon.field_offset("more").unwrap();
    let tail = anon.field_offset("tail").unwrap();
    let after = anon.field_offset("after_bits").unwrap();
    assert!(tail < flags && flags <= more && more < after, "{anon:?}");

    let typedef_anon = index.find_type("anon_typedef_t").unwrap();
    assert_eq!(typedef_anon.name, "anon_typedef_t");
    assert_eq!(
        index.find_type("list_item_ptr_t").unwrap().kind,
        TypeKind::Pointer
    );
    assert_eq!(
        index.find_type("union number").unwrap().kind,
        TypeKind::Union
    );
    assert_eq!(index.find_type("color_t").unwrap().kind, TypeKind::Enum);
    assert_eq!(index.find_type("matrix_t").unwrap().kind, TypeKind::Array);
    assert_eq!(index.find_type("int").unwrap().kind, TypeKind::Base);
    // Tag-only queries do not see typedef names, and vice versa.
    assert!(index.find_type("struct with_anon_t").is_none());
    assert!(index.find_type("union point").is_none());
    // `typedef NAME` finds typedefs only, as C's sizeof(NAME) does.
    assert_eq!(
        index.find_type("typedef with_anon_t").unwrap().name,
        "with_anon"
    );
    assert!(index.find_type("typedef with_anon").is_none());
    assert!(index.find_type("no_such_type_t").is_none());
    assert_eq!(
        index.find_type("hidden_t").unwrap().size,
        Some(oracle.size("struct hidden"))
    );
}

/// The st_value of `name` in `path`'s own symbol tables.
fn symbol_value(path: &Path, name: &str) -> u64 {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.name() == Ok(name) && s.is_definition())
        .unwrap_or_else(|| panic!("{name} not in {}", path.display()))
        .address()
}

/// Symbol lookups against the unstripped originals at `a` and `b`, in an
/// index of (libsyma, libsymb) with bias 0.
fn check_symbols(index: &SymbolIndex, a: &Path, b: &Path) {
    assert_eq!(
        index.find_symbol("global_counter"),
        Some(symbol_value(a, "global_counter"))
    );
    // File-static: only in .symtab.
    assert_eq!(
        index.find_symbol("file_static_counter"),
        Some(symbol_value(a, "file_static_counter"))
    );
    // Local in libsyma (first), global in libsymb: the global wins.
    assert_eq!(
        index.find_symbol("dup_name"),
        Some(symbol_value(b, "dup_name"))
    );
    assert_eq!(
        index.find_function("some_function"),
        Some(symbol_value(a, "some_function"))
    );
    assert_eq!(
        index.find_function("remote_x"),
        Some(symbol_value(b, "remote_x"))
    );
    assert_eq!(index.find_symbol("some_function"), None);
    assert_eq!(index.find_function("global_counter"), None);
    assert_eq!(index.find_symbol("no_such_symbol"), None);
}

fn index_of(objects: &[&Path], debug_dirs: &[&Path]) -> SymbolIndex {
    SymbolIndex::new(
        objects.iter().map(|p| (p.to_path_buf(), 0)).collect(),
        debug_dirs.iter().map(|p| p.to_path_buf()).collect(),
    )
    .unwrap()
}

fn check_in_place(tag: &str, compiler: &str, flags: &[&str]) {
    let libs = build_libs(tag, compiler, flags);
    let index = index_of(&[&libs.a, &libs.b], &[]);
    check_c_types(&index);
    check_symbols(&index, &libs.a, &libs.b);
}

#[test]
fn dwarf5_in_the_object() {
    check_in_place("dwarf5", "cc", &["-g"]);
}

#[test]
fn dwarf4_in_the_object() {
    check_in_place("dwarf4", "cc", &["-gdwarf-4"]);
}

/// DWARF 2 gives member offsets as DW_OP_plus_uconst expressions.
#[test]
fn dwarf2_member_location_expressions() {
    check_in_place("dwarf2", "cc", &["-gdwarf-2"]);
}

/// Type units: .debug_types in DWARF 4, DW_UT_type units in DWARF 5,
/// referenced by signature.
#[test]
fn type_units() {
    check_in_place("types4", "cc", &["-gdwarf-4", "-fdebug-types-section"]);
    check_in_place("types5", "cc", &["-gdwarf-5", "-fdebug-types-section"]);
}

/// clang: DWARF 5 string forms (strx) and no DW_AT_sibling to skip by.
#[test]
fn clang_dwarf5() {
    assert!(
        Command::new("clang").arg("--version").output().is_ok(),
        "clang is missing: install it (scripts/setup-mpis does)"
    );
    check_in_place("clang", "clang", &["-g"]);
}

/// Compressed debug sections (as distributions ship debug files): gcc's
/// -gz, zlib and, where binutils has it, zstd.
#[test]
fn compressed_debug_sections() {
    let libs = build_libs("gz", "cc", &["-g", "-gz=zlib"]);
    let data = std::fs::read(&libs.a).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let info =
        object::ObjectSection::compressed_file_range(&file.section_by_name(".debug_info").unwrap())
            .unwrap();
    assert_eq!(info.format, object::CompressionFormat::Zlib);
    let index = index_of(&[&libs.a, &libs.b], &[]);
    check_c_types(&index);

    // Debian 12's binutils writes zstd; a binutils that cannot fails here.
    run(Command::new("objcopy")
        .arg("--compress-debug-sections=zstd")
        .arg(&libs.a)
        .arg(libs.dir.join("zstd-a.so")));
    let b = libs.dir.join("zstd-b.so");
    run(Command::new("objcopy")
        .arg("--compress-debug-sections=zstd")
        .arg(&libs.b)
        .arg(&b));
    let index = index_of(&[&libs.dir.join("zstd-a.so"), &b], &[]);
    check_c_types(&index);
}

/// Splits `lib`'s DWARF into `debug`, strips `lib` of everything else too
/// (.symtab included), and links the two with `.gnu_debuglink` when `link`.
fn split_debug(lib: &Path, debug: &Path, link: bool) {
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(lib)
        .arg(debug));
    let mut strip = Command::new("objcopy");
    strip.arg("--strip-all");
    if link {
        strip.arg(format!("--add-gnu-debuglink={}", debug.display()));
    }
    run(strip.arg(lib));
}

fn copy_libs(libs: &Libs, dir: &TempDir) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("libsyma.so"), dir.join("libsymb.so"));
    std::fs::copy(&libs.a, &a).unwrap();
    std::fs::copy(&libs.b, &b).unwrap();
    (a, b)
}

#[test]
fn debuglink_next_to_the_object_and_in_dot_debug() {
    let libs = build_libs("debuglink", "cc", &["-g"]);
    let work = TempDir::new("debuglink-work");
    let (a, b) = copy_libs(&libs, &work);
    split_debug(&a, &work.join("libsyma.so.debug"), true);
    split_debug(&b, &work.join("libsymb.so.debug"), true);
    let index = index_of(&[&a, &b], &[]);
    check_c_types(&index);
    check_symbols(&index, &libs.a, &libs.b);
    drop(index);

    // The same files in the object's .debug/ subdirectory.
    std::fs::create_dir(work.join(".debug")).unwrap();
    for name in ["libsyma.so.debug", "libsymb.so.debug"] {
        std::fs::rename(work.join(name), work.join(".debug").join(name)).unwrap();
    }
    let index = index_of(&[&a, &b], &[]);
    check_c_types(&index);
    check_symbols(&index, &libs.a, &libs.b);
    let (object, _) = index.objects().into_iter().next().unwrap();
    let dwarf_path = object.index_types().dwarf_path.unwrap();
    assert!(
        dwarf_path.ends_with(".debug/libsyma.so.debug"),
        "{}",
        dwarf_path.display()
    );
}

#[test]
fn debuglink_with_a_wrong_crc_is_rejected() {
    let libs = build_libs("badcrc", "cc", &["-g"]);
    let other = build_libs("badcrc-other", "cc", &["-g", "-DUNUSED_MACRO=1", "-O1"]);
    let work = TempDir::new("badcrc-work");
    let (a, _) = copy_libs(&libs, &work);
    let debug = work.join("libsyma.so.debug");
    split_debug(&a, &debug, true);
    // Another build's debug file under the linked name.
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&other.a)
        .arg(&debug));

    let object = ObjectSymbols::open(&a, Vec::new()).unwrap();
    assert!(object.find_type("with_anon_t").is_none());
    assert!(object.index_types().dwarf_path.is_none());
    assert!(
        object.notes().iter().any(|n| n.contains("CRC")),
        "{:?}",
        object.notes()
    );
    // .dynsym still answers for globals; statics needed the debug file.
    assert!(object.data_symbol("global_counter").is_some());
    assert!(object.data_symbol("file_static_counter").is_none());
}

#[test]
fn build_id_directory() {
    let libs = build_libs("buildid", "cc", &["-g"]);
    let work = TempDir::new("buildid-work");
    let (a, b) = copy_libs(&libs, &work);
    let debug_root = TempDir::new("buildid-dbg");
    for lib in [&a, &b] {
        let object = ObjectSymbols::open(lib, Vec::new()).unwrap();
        let id = object.build_id().expect("linked with --build-id").to_vec();
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let dir = debug_root.0.join(".build-id").join(&hex[..2]);
        std::fs::create_dir_all(&dir).unwrap();
        split_debug(lib, &dir.join(format!("{}.debug", &hex[2..])), false);
    }
    let index = index_of(&[&a, &b], &[&debug_root.0]);
    check_c_types(&index);
    check_symbols(&index, &libs.a, &libs.b);
    let (object, _) = index.objects().into_iter().next().unwrap();
    let stats = object.index_types();
    assert!(stats.dwarf_path.unwrap().starts_with(&debug_root.0));

    // Without the directory there is no DWARF and no .symtab.
    let bare = index_of(&[&a, &b], &[]);
    assert!(bare.find_type("with_anon_t").is_none());
    assert!(bare.find_symbol("file_static_counter").is_none());
}

fn has_dwz() -> bool {
    Command::new("dwz").arg("--version").output().is_ok()
}

/// The build-id that `lib`'s `.gnu_debugaltlink` asks for.
fn altlink_build_id(lib: &Path) -> Vec<u8> {
    let data = std::fs::read(lib).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let (_, id) = file
        .gnu_debugaltlink()
        .unwrap()
        .expect("dwz -m wrote .gnu_debugaltlink");
    id.to_vec()
}

#[test]
fn dwz_supplementary_file() {
    assert!(
        has_dwz(),
        "dwz is missing: install it (scripts/setup-mpis does)"
    );
    let libs = build_libs("dwz", "cc", &["-g"]);
    let work = TempDir::new("dwz-work");
    let (a, b) = copy_libs(&libs, &work);
    run(Command::new("dwz").current_dir(&work.0).args([
        "-m",
        "common.debug",
        "libsyma.so",
        "libsymb.so",
    ]));
    let id = altlink_build_id(&a);
    assert_eq!(id, altlink_build_id(&b));

    // The altlink names "common.debug", relative to the objects.
    let index = index_of(&[&a, &b], &[]);
    check_c_types(&index);
    check_symbols(&index, &libs.a, &libs.b);
    for (object, _) in index.objects() {
        let stats = object.index_types();
        assert_eq!(
            stats.sup_path.as_deref(),
            Some(work.join("common.debug").as_path())
        );
    }
    drop(index);

    // Moved away: found by its build-id under a debug directory.
    let debug_root = TempDir::new("dwz-dbg");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let dir = debug_root.0.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    let moved = dir.join(format!("{}.debug", &hex[2..]));
    std::fs::rename(work.join("common.debug"), &moved).unwrap();
    let index = index_of(&[&a, &b], &[&debug_root.0]);
    check_c_types(&index);
    let (object, _) = index.objects().into_iter().next().unwrap();
    assert_eq!(object.index_types().sup_path, Some(moved));

    // Missing altogether: types that dwz moved out are gone, and the notes
    // say why.
    let index = index_of(&[&a, &b], &[]);
    let (object, _) = index.objects().into_iter().next().unwrap();
    assert!(object.index_types().sup_path.is_none());
    assert!(object.notes().iter().any(|n| n.contains("supplementary")));
    // dwz moved with_anon_t's struct to common.debug: no half answers.
    assert!(index.find_type("with_anon_t").is_none());
    assert!(index.find_type("struct with_anon").is_none());
}

/// Lines of /proc/self/maps that map `path`.
fn self_mappings(path: &Path) -> Vec<MappedRange> {
    let real = std::fs::canonicalize(path).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut ranges = Vec::new();
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || Path::new(fields[5]) != real {
            continue;
        }
        let (start, end) = fields[0].split_once('-').unwrap();
        let perms = fields[1].as_bytes();
        ranges.push(MappedRange {
            start: u64::from_str_radix(start, 16).unwrap(),
            end: u64::from_str_radix(end, 16).unwrap(),
            offset: u64::from_str_radix(fields[2], 16).unwrap(),
            perms: Perms {
                read: perms[0] == b'r',
                write: perms[1] == b'w',
                execute: perms[2] == b'x',
                shared: perms[3] == b's',
            },
        });
    }
    ranges.sort_by_key(|r| r.start);
    ranges
}

fn mapped_object(path: &Path, ranges: Vec<MappedRange>) -> MappedObject {
    MappedObject {
        path: path.to_owned(),
        deleted: false,
        contents: None,
        inode: 0,
        base: ranges[0].start,
        base_offset: ranges[0].offset,
        file_offset_zero_start: ranges.iter().find(|r| r.offset == 0).map(|r| r.start),
        ranges,
    }
}

#[test]
fn load_bias_matches_dlsym() {
    let libs = build_libs("bias", "cc", &["-g"]);
    let path = libs.a.to_str().unwrap();
    // SAFETY: the library is ours (symbols_a.c/symbols_b.c): no constructors,
    // and we read its symbols only as addresses or call functions with the
    // signatures declared there.
    let lib = unsafe { libloading::Library::new(path) }.unwrap();
    // SAFETY: as above; the symbols exist with these types.
    let (global, function, static_address) = unsafe {
        let global = *lib.get::<*const i32>("global_counter").unwrap();
        let function = *lib
            .get::<extern "C" fn(i32) -> i32>("some_function")
            .unwrap();
        let static_address = lib
            .get::<extern "C" fn() -> *const i32>("static_counter_address")
            .unwrap()();
        (
            global as u64,
            function as usize as u64,
            static_address as u64,
        )
    };

    let ranges = self_mappings(&libs.a);
    let lowest = ranges[0];
    let bias = load_bias(&libs.a, lowest.start, lowest.offset).unwrap();
    assert_ne!(bias, 0);
    let index = SymbolIndex::new(vec![(libs.a.clone(), bias)], Vec::new()).unwrap();
    assert_eq!(index.find_symbol("global_counter"), Some(global));
    assert_eq!(index.find_function("some_function"), Some(function));
    assert_eq!(
        index.find_symbol("file_static_counter"),
        Some(static_address)
    );

    // The same from a maps entry, next to a mapped file that is not ELF.
    let not_elf = libs.dir.join("data.bin");
    std::fs::write(&not_elf, b"just bytes").unwrap();
    let objects = [
        mapped_object(&libs.a, ranges.clone()),
        mapped_object(&not_elf, vec![lowest]),
    ];
    let index = SymbolIndex::from_mapped(&objects, Vec::new()).unwrap();
    assert_eq!(index.find_symbol("global_counter"), Some(global));
    assert_eq!(index.objects().len(), 1);
    let skipped = index.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, not_elf);
    drop(lib);
}

/// A non-PIE executable is at its link address: bias 0.
#[test]
fn load_bias_of_a_non_pie_executable_is_zero() {
    let dir = TempDir::new("nopie");
    let exe = dir.join("oracle");
    compile("cc", &["-no-pie", "-fno-pie"], &exe, &["symbols_oracle.c"]);
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let first = object::ObjectSegment::address(&file.segments().next().unwrap());
    let page_start = first & !0xfff;
    assert_eq!(load_bias(&exe, page_start, 0).unwrap(), 0);
}

#[test]
fn objects_added_later_complete_declarations() {
    let libs = build_libs("later", "cc", &["-g"]);
    let index = index_of(&[&libs.a], &[]);
    // libsyma only declares struct remote.
    assert!(index.find_type("remote_t").is_none());
    assert!(index.find_symbol("remote_x").is_none());
    index.add_object(&libs.b, 0).unwrap();
    let remote = index.find_type("remote_t").expect("defined in libsymb");
    assert_eq!(remote.size, Some(c_oracle().size("remote_t")));
    assert_eq!(
        index.find_function("remote_x"),
        Some(symbol_value(&libs.b, "remote_x"))
    );
    // Adding it again changes nothing.
    index.add_object(&libs.b, 0).unwrap();
    assert_eq!(index.objects().len(), 2);
}

#[test]
fn the_cache_shares_parsed_files() {
    let libs = build_libs("cache", "cc", &["-g"]);
    let cache = Arc::new(SymbolCache::new(Vec::new()));
    let one = SymbolIndex::with_cache(cache.clone(), vec![(libs.a.clone(), 0x1000)]).unwrap();
    let two = SymbolIndex::with_cache(cache.clone(), vec![(libs.a.clone(), 0x2000)]).unwrap();
    let (first, _) = one.objects().remove(0);
    let (second, _) = two.objects().remove(0);
    assert!(Arc::ptr_eq(&first, &second));
    let value = symbol_value(&libs.a, "global_counter");
    assert_eq!(one.find_symbol("global_counter"), Some(value + 0x1000));
    assert_eq!(two.find_symbol("global_counter"), Some(value + 0x2000));
    assert!(Arc::ptr_eq(
        &one.find_type("with_anon_t").unwrap(),
        &two.find_type("with_anon_t").unwrap()
    ));
}

#[test]
fn cxx_namespaces() {
    let dir = TempDir::new("cxx");
    let lib = dir.join("libns.so");
    compile(
        "c++",
        &["-g", "-fPIC", "-shared"],
        &lib,
        &["symbols_ns.cpp"],
    );
    let exe = dir.join("oracle");
    compile("c++", &["-DORACLE"], &exe, &["symbols_ns.cpp"]);
    let oracle = Oracle::parse(&run(&mut Command::new(&exe)));
    let index = index_of(&[&lib], &[]);
    check_layouts(&index, &oracle);
    let sizes: HashMap<_, _> = oracle.sizes.iter().cloned().collect();
    assert_eq!(
        index.find_type("struct outer::shallow").unwrap().size,
        Some(sizes["outer::shallow"])
    );
    assert_eq!(
        index.find_type("shallow").unwrap().field_offset("only_top"),
        Some(0)
    );
}

/// The host may look symbols up from several threads.
#[test]
fn the_index_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<SymbolIndex>();
    shareable::<SymbolCache>();
    shareable::<ObjectSymbols>();
}

/// Several threads asking at once: each object is indexed once and all
/// get the same answer.
#[test]
fn concurrent_queries() {
    let libs = build_libs("threads", "cc", &["-g"]);
    let index = index_of(&[&libs.a, &libs.b], &[]);
    let answers: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (
                        index.find_type("remote_t").unwrap(),
                        index.find_symbol("dup_name"),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (info, symbol) in &answers {
        assert_eq!(info.size, Some(c_oracle().size("remote_t")));
        assert_eq!(*symbol, Some(symbol_value(&libs.b, "dup_name")));
    }
    let debug = format!("{index:?}");
    assert!(debug.len() < 4000, "{debug}");
}
