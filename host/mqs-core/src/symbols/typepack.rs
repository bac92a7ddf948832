//! Type packs: the types, fields and hidden symbols a message-queue DLL
//! asks for, taken once from a library's DWARF and kept in a small JSON
//! file keyed by the library's build-id, so that a stripped library (a
//! distribution's stock build) answers as if its debug file were there.
//!
//! Packs are looked up by build-id in the `--typepack` directories, the
//! installed data directory and the user's cache, in that order
//! ([`TypePacks::standard`]). A pack is a record, never a guess: the host
//! checks it against the running process before any DLL reads through it
//! (`crate::typepack::guard`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use super::types::{TypeInfo, TypeKind};
use crate::{Error, Result};

/// The `format` field of every pack.
pub const FORMAT: &str = "mqs-typepack";
/// Bumped on any change of the meaning of a pack's fields.
pub const VERSION: u32 = 1;
/// A pack larger than this is not believed (real ones are a few kB).
const MAX_PACK_BYTES: u64 = 16 << 20;

/// One pack: what a library's DWARF says about the names DLLs ask for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypePack {
    pub format: String,
    pub version: u32,
    /// The library's file name, for people.
    pub library: String,
    /// The build-id (hex) of the library this pack describes: its key.
    pub build_id: String,
    /// Where the layouts come from and how that was checked.
    pub provenance: Provenance,
    /// Data symbols the DLLs look up that the library's `.dynsym` lacks
    /// (file-statics, hidden ones), by link-time value.
    #[serde(default)]
    pub symbols: BTreeMap<String, PackSymbol>,
    /// The same for functions.
    #[serde(default)]
    pub functions: BTreeMap<String, PackSymbol>,
    /// Types by the name they are asked for.
    #[serde(default)]
    pub types: BTreeMap<String, PackType>,
    /// What the running process must agree with before the pack is used.
    #[serde(default)]
    pub checks: Checks,
}

/// Where a pack's layouts come from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Free text: which package, which build, which script.
    pub description: String,
    /// The program that wrote the pack.
    pub tool: String,
    /// The file the DWARF was read from, and its dwz supplementary file.
    pub dwarf_file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dwz_file: Option<String>,
    /// Set when the DWARF belongs to a rebuild of the library rather than to
    /// the library itself: the rebuild's build-id, and the proof that both
    /// load the same bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuilt: Option<Rebuilt>,
}

/// A rebuild whose DWARF describes the library.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebuilt {
    pub build_id: String,
    /// The loaded (SHF_ALLOC) sections found identical, compared byte for
    /// byte (NOBITS by size) between the library and the rebuild, except the
    /// build-id note.
    pub identical_sections: Vec<String>,
    /// Sections that differ only by a newer linker's order of the imported
    /// symbols, proven to make the same code (`.dynsym`, code sections);
    /// the statement says what was checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equivalent_sections: Vec<String>,
    pub bytes_compared: u64,
    /// The one sentence a reader needs.
    pub statement: String,
}

/// A symbol's link-time value (st_value) and binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackSymbol {
    pub value: u64,
    pub global: bool,
}

/// A type as the host answers `find_type`: its size and members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackType {
    /// The underlying type's own name (a struct's tag).
    pub name: String,
    pub kind: String,
    pub size: Option<u64>,
    /// Members and byte offsets, in declaration order.
    pub fields: Vec<(String, u64)>,
}

/// Facts of the library the running process must agree with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checks {
    /// What `MPIR_debug_typedefs_sizeof` holds by the DWARF's base types:
    /// short, int, long, long long, void *, bool, size_t.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typedefs_sizeof: Option<Vec<i64>>,
}

impl PackType {
    pub fn from_info(info: &TypeInfo) -> Self {
        Self {
            name: info.name.clone(),
            kind: kind_name(info.kind).to_owned(),
            size: info.size,
            fields: info.fields.clone(),
        }
    }

    pub fn to_info(&self) -> TypeInfo {
        TypeInfo {
            name: self.name.clone(),
            kind: kind_of(&self.kind),
            size: self.size,
            fields: self.fields.clone(),
        }
    }
}

fn kind_name(kind: TypeKind) -> &'static str {
    match kind {
        TypeKind::Struct => "struct",
        TypeKind::Class => "class",
        TypeKind::Union => "union",
        TypeKind::Enum => "enum",
        TypeKind::Base => "base",
        TypeKind::Pointer => "pointer",
        TypeKind::Array => "array",
        TypeKind::Function => "function",
        TypeKind::Void => "void",
        TypeKind::Other => "other",
    }
}

fn kind_of(name: &str) -> TypeKind {
    match name {
        "struct" => TypeKind::Struct,
        "class" => TypeKind::Class,
        "union" => TypeKind::Union,
        "enum" => TypeKind::Enum,
        "base" => TypeKind::Base,
        "pointer" => TypeKind::Pointer,
        "array" => TypeKind::Array,
        "function" => TypeKind::Function,
        "void" => TypeKind::Void,
        _ => TypeKind::Other,
    }
}

impl TypePack {
    /// Reads and validates a pack file.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |detail: String| Error::BadInput {
            path: path.to_owned(),
            detail,
        };
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_PACK_BYTES {
            return Err(bad(format!("{len} bytes is too large for a type pack")));
        }
        let text = std::fs::read(path).map_err(io)?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(bad(format!(
                "not an mqs type pack (no \"format\": \"{FORMAT}\")"
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64());
        if version != Some(u64::from(VERSION)) {
            return Err(bad(format!(
                "type pack format version {}; this mqs-dump reads version {VERSION}",
                version.map_or("?".into(), |v| v.to_string())
            )));
        }
        let pack: Self = serde_json::from_value(value)
            .map_err(|e| bad(format!("a malformed type pack: {e}")))?;
        if pack.build_id.is_empty() || !pack.build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(format!("build-id '{}' is not hex", pack.build_id)));
        }
        Ok(pack)
    }

    /// Writes the pack as pretty JSON (one reviewable line per field).
    pub fn save(&self, path: &Path) -> Result<()> {
        let pretty = serde_json::to_string_pretty(self).map_err(|e| Error::BadInput {
            path: path.to_owned(),
            detail: format!("cannot encode the type pack: {e}"),
        })?;
        let mut text = one_line_pairs(&pretty);
        text.push('\n');
        let partial = path.with_extension("partial");
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        std::fs::write(&partial, text).map_err(io)?;
        std::fs::rename(&partial, path).map_err(io)
    }

    /// The type asked for as `name`, as the host's DWARF reader would give it.
    pub fn find_type(&self, name: &str) -> Option<TypeInfo> {
        self.types.get(name.trim()).map(PackType::to_info)
    }
}

/// Pretty JSON with each `[name, offset]` member pair on one line, so a
/// pack reads (and diffs) one member per line.
fn one_line_pairs(pretty: &str) -> String {
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_end().ends_with('[') && i + 3 < lines.len() {
            let (name, offset, close) = (
                lines[i + 1].trim(),
                lines[i + 2].trim(),
                lines[i + 3].trim(),
            );
            let is_pair = name.starts_with('"')
                && name.ends_with("\",")
                && !offset.is_empty()
                && offset.bytes().all(|b| b.is_ascii_digit())
                && (close == "]" || close == "],");
            if is_pair {
                out.push(format!("{line}{name} {offset}{close}"));
                i += 4;
                continue;
            }
        }
        out.push(line.to_owned());
        i += 1;
    }
    out.join("\n")
}

/// A pack found for a library, and the file it came from.
#[derive(Debug, Clone)]
pub struct FoundPack {
    pub path: PathBuf,
    pub pack: Arc<TypePack>,
    /// Made for another build of a library of the same name (see
    /// [`BORROWABLE`]): it must pass its own runtime invariants
    /// (`crate::typepack::guard`) before any DLL reads through it.
    pub borrowed: bool,
}

/// Libraries whose pack may describe another build of the same file: ones
/// with no DWARF anywhere (a release build compiles them without `-g`),
/// whose layouts do not move with where code sits (their packs hold types
/// only), and for which the host checks the layouts against the running
/// process before use. Open MPI 4.1's shared-memory BTL (its component's
/// endpoints and FIFO point at each other in ways only right offsets read)
/// and ob1 (its MPI_COMM_WORLD knows as many processes as the world's
/// group).
pub const BORROWABLE: &[&str] = &["mca_btl_vader.so", "mca_pml_ob1.so"];

/// The directories packs are looked up in, scanned once on first use.
#[derive(Debug, Default)]
pub struct TypePacks {
    dirs: Vec<PathBuf>,
    by_build_id: OnceLock<HashMap<String, FoundPack>>,
    /// Types-only packs of [`BORROWABLE`] libraries, by library file name.
    by_library: OnceLock<HashMap<String, FoundPack>>,
    notes: OnceLock<Vec<String>>,
}

impl TypePacks {
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        Self {
            dirs,
            by_build_id: OnceLock::new(),
            by_library: OnceLock::new(),
            notes: OnceLock::new(),
        }
    }

    /// `user` directories (`--typepack`), then the data directories
    /// ([`installed_dirs`]), then the user's cache (`~/.cache/mqs/typepacks`).
    pub fn standard(user: Vec<PathBuf>) -> Self {
        let mut dirs = user;
        for dir in installed_dirs()
            .into_iter()
            .chain(crate::cache_dir::cache_root().map(|c| c.join("typepacks")))
        {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        Self::new(dirs)
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The pack for the library with this build-id (hex), if any directory
    /// has one. The first directory wins.
    pub fn find(&self, build_id: &str) -> Option<FoundPack> {
        self.index().get(&build_id.to_ascii_lowercase()).cloned()
    }

    /// A pack made for another build of the library named `file_name`, for
    /// a build that has neither DWARF nor a pack of its own: only for the
    /// [`BORROWABLE`] libraries, and only a pack of types alone. The first
    /// directory (and, within it, the first file by name) wins.
    pub fn find_borrowed(&self, file_name: &str) -> Option<FoundPack> {
        if !BORROWABLE.contains(&file_name) {
            return None;
        }
        self.by_library
            .get_or_init(|| {
                let mut by_library: HashMap<String, FoundPack> = HashMap::new();
                let mut all: Vec<&FoundPack> = self.index().values().collect();
                all.sort_by_key(|f| self.rank_of(&f.path));
                for found in all {
                    let pack = &found.pack;
                    if BORROWABLE.contains(&pack.library.as_str())
                        && pack.symbols.is_empty()
                        && pack.functions.is_empty()
                    {
                        by_library
                            .entry(pack.library.clone())
                            .or_insert_with(|| FoundPack {
                                borrowed: true,
                                ..found.clone()
                            });
                    }
                }
                by_library
            })
            .get(file_name)
            .cloned()
    }

    /// Where a pack file sorts in search order: its directory's place, then
    /// its path.
    fn rank_of(&self, path: &Path) -> (usize, PathBuf) {
        let dir = self
            .dirs
            .iter()
            .position(|d| path.parent() == Some(d.as_path()))
            .unwrap_or(usize::MAX);
        (dir, path.to_owned())
    }

    /// Files in the directories that were not packs, and why.
    pub fn notes(&self) -> &[String] {
        self.index();
        self.notes.get().map_or(&[], Vec::as_slice)
    }

    fn index(&self) -> &HashMap<String, FoundPack> {
        self.by_build_id.get_or_init(|| {
            let mut found: HashMap<String, FoundPack> = HashMap::new();
            let mut notes = Vec::new();
            for dir in &self.dirs {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                let mut files: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                    .collect();
                files.sort();
                for path in files {
                    match TypePack::load(&path) {
                        Ok(pack) => {
                            let key = pack.build_id.to_ascii_lowercase();
                            found.entry(key).or_insert(FoundPack {
                                path,
                                pack: Arc::new(pack),
                                borrowed: false,
                            });
                        }
                        Err(e) => notes.push(e.to_string()),
                    }
                }
            }
            let _ = self.notes.set(notes);
            found
        })
    }
}

/// The data directories type packs are looked for in, in order (the
/// search path docs/typepacks.md gives): `$MQS_DATA_DIR/typepacks` alone
/// when that is set (a source tree sets it to itself in
/// `.cargo/config.toml`, tests to a directory of their own); else
/// `<prefix>/share/mqs/typepacks` beside `<prefix>/bin/mqs-dump`,
/// `$XDG_DATA_HOME/mqs/typepacks` (`~/.local/share/mqs/typepacks`),
/// `/usr/local/share/mqs/typepacks` and `/usr/share/mqs/typepacks`, those
/// that exist. No path of the build tree is built in.
pub fn installed_dirs() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("MQS_DATA_DIR") {
        return vec![PathBuf::from(dir).join("typepacks")];
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("share/mqs/typepacks")));
    let user = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .map(|d| d.join("mqs/typepacks"));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in beside
        .into_iter()
        .chain(user)
        .chain(["/usr/local/share/mqs/typepacks", "/usr/share/mqs/typepacks"].map(PathBuf::from))
    {
        if dir.is_dir() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(build_id: &str) -> TypePack {
        TypePack {
            format: FORMAT.into(),
            version: VERSION,
            library: "libx.so".into(),
            build_id: build_id.into(),
            provenance: Provenance::default(),
            symbols: BTreeMap::new(),
            functions: BTreeMap::new(),
            types: [(
                "t".to_owned(),
                PackType {
                    name: "t_s".into(),
                    kind: "struct".into(),
                    size: Some(16),
                    fields: vec![("a".into(), 0), ("b".into(), 8)],
                },
            )]
            .into(),
            checks: Checks::default(),
        }
    }

    #[test]
    fn packs_round_trip_and_are_found_by_build_id() {
        let dir = std::env::temp_dir().join(format!("mqs-typepack-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        pack("ABcd01").save(&dir.join("x.json")).unwrap();
        std::fs::write(dir.join("junk.json"), "{}").unwrap();
        let packs = TypePacks::new(vec![dir.join("missing"), dir.clone()]);
        let found = packs.find("abcd01").expect("found");
        assert_eq!(found.path, dir.join("x.json"));
        let t = found.pack.find_type("t").unwrap();
        assert_eq!(
            (t.kind, t.size, t.field_offset("b")),
            (TypeKind::Struct, Some(16), Some(8))
        );
        assert!(packs.find("abcd02").is_none());
        assert_eq!(packs.notes().len(), 1, "{:?}", packs.notes());
        assert!(packs.notes()[0].contains("not an mqs type pack"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_types_only_packs_of_borrowable_libraries_are_borrowed() {
        let dir = std::env::temp_dir().join(format!("mqs-typepack-b-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut vader = pack("aa01");
        vader.library = "mca_btl_vader.so".into();
        vader.save(&dir.join("vader.json")).unwrap();
        // ob1's, but with a symbol: where code sits is one build's alone.
        let mut ob1 = pack("aa02");
        ob1.library = "mca_pml_ob1.so".into();
        ob1.symbols.insert(
            "x".into(),
            PackSymbol {
                value: 0x10,
                global: false,
            },
        );
        ob1.save(&dir.join("ob1.json")).unwrap();
        pack("aa03").save(&dir.join("libx.json")).unwrap();
        let packs = TypePacks::new(vec![dir.clone()]);
        let found = packs.find_borrowed("mca_btl_vader.so").expect("borrowed");
        assert!(found.borrowed);
        assert_eq!(found.path, dir.join("vader.json"));
        assert!(!packs.find("aa01").expect("by id").borrowed);
        assert!(packs.find_borrowed("mca_pml_ob1.so").is_none());
        assert!(packs.find_borrowed("libx.so").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_versions_and_bad_ids_are_refused() {
        let dir = std::env::temp_dir().join(format!("mqs-typepack-v-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = pack("ab");
        p.version = 99;
        p.save(&dir.join("v.json")).unwrap();
        let e = TypePack::load(&dir.join("v.json")).unwrap_err();
        assert!(e.to_string().contains("version 99"), "{e}");
        let p = pack("not-hex");
        p.save(&dir.join("h.json")).unwrap();
        let e = TypePack::load(&dir.join("h.json")).unwrap_err();
        assert!(e.to_string().contains("not hex"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
