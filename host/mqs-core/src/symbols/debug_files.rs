//! Finding separate debug files: by build-id under `.build-id/`, by
//! `.gnu_debuglink` (name + CRC32), and the dwz supplementary file named by
//! `.gnu_debugaltlink`. The user's debug directories come before the
//! system's `/usr/lib/debug`.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use super::elf::ElfFile;
use super::fetch::DebugFileFetcher;
use super::typepack::TypePacks;
use crate::hex::hex;

const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// Where an object's types may come from besides its own DWARF: the debug
/// directories (user-given first), type packs, and debuginfod servers.
#[derive(Debug)]
pub(crate) struct DebugDirs {
    dirs: Vec<PathBuf>,
    pub(crate) packs: TypePacks,
    pub(crate) debuginfod: Option<Arc<dyn DebugFileFetcher>>,
}

impl DebugDirs {
    /// Debug directories only (packs from the standard places, no
    /// debuginfod).
    pub(crate) fn new(user: Vec<PathBuf>) -> Self {
        Self::with(user, TypePacks::standard(Vec::new()), None)
    }

    pub(crate) fn with(
        user: Vec<PathBuf>,
        packs: TypePacks,
        debuginfod: Option<Arc<dyn DebugFileFetcher>>,
    ) -> Self {
        let mut dirs = user;
        dirs.push(PathBuf::from(SYSTEM_DEBUG_DIR));
        Self {
            dirs,
            packs,
            debuginfod,
        }
    }

    /// The separate debug file of `elf`: by build-id, else by debuglink.
    /// Rejected candidates are described in `notes`.
    pub(crate) fn debug_file_for(&self, elf: &ElfFile, notes: &mut Vec<String>) -> Option<ElfFile> {
        if let Some(id) = &elf.build_id {
            if let Some(found) = self.by_build_id(id, elf.path(), elf.root(), notes) {
                return Some(found);
            }
        }
        let (name, crc) = elf.debuglink.as_ref()?;
        self.by_debuglink(elf.path(), elf.root(), name, *crc, notes)
    }

    /// The dwz supplementary file named by `file`'s `.gnu_debugaltlink`.
    pub(crate) fn supplementary_for(
        &self,
        file: &ElfFile,
        notes: &mut Vec<String>,
    ) -> Option<ElfFile> {
        let (alt, id) = file.altlink.as_ref()?;
        // A relative name is relative to the directory of the file naming
        // it: as opened, or (a build-id symlink) where it really is.
        let mut named = vec![alt.clone()];
        // An absolute name under /usr/lib/debug (Debian's dwz files) is
        // looked for under each debug directory too: an unpacked -dbgsym
        // package given with --debug-dir has it there.
        if let Ok(rest) = alt.strip_prefix(SYSTEM_DEBUG_DIR) {
            for dir in &self.dirs {
                if !named.contains(&dir.join(rest)) {
                    named.push(dir.join(rest));
                }
            }
        }
        if alt.is_relative() {
            named.clear();
            let real = std::fs::canonicalize(file.path()).ok();
            for path in [Some(file.path()), real.as_deref()].into_iter().flatten() {
                if let Some(dir) = path.parent() {
                    if !named.contains(&dir.join(alt)) {
                        named.push(dir.join(alt));
                    }
                }
            }
        }
        // A process in a root of its own has its dwz files there.
        if let Some(root) = file.root() {
            let rooted: Vec<PathBuf> = named
                .iter()
                .filter(|p| p.is_absolute())
                .map(|p| in_root(root, p))
                .collect();
            named.splice(0..0, rooted);
        }
        let candidates = named
            .into_iter()
            .chain(self.build_id_paths(id, file.root()));
        for path in candidates {
            if let Some(sup) = open_candidate(&path, file.path(), notes) {
                match &sup.build_id {
                    Some(found) if found != id => notes.push(format!(
                        "{}: build-id {} is not the {} that {} asks for",
                        path.display(),
                        hex(found),
                        hex(id),
                        file.path().display()
                    )),
                    _ => return Some(sup),
                }
            }
        }
        notes.push(format!(
            "{}: dwz supplementary file {} (build-id {}) not found",
            file.path().display(),
            alt.display(),
            hex(id)
        ));
        None
    }

    /// The candidates for build-id `id`: the system directory in the
    /// process's own root first, where it has one, then each directory.
    fn build_id_paths<'a>(
        &'a self,
        id: &'a [u8],
        root: Option<&Path>,
    ) -> impl Iterator<Item = PathBuf> + 'a {
        let rooted = root.map(|r| in_root(r, Path::new(SYSTEM_DEBUG_DIR)));
        rooted
            .into_iter()
            .chain(self.dirs.iter().cloned())
            .filter_map(move |dir| {
                let (first, rest) = id.split_first()?;
                if rest.is_empty() {
                    return None;
                }
                Some(
                    dir.join(".build-id")
                        .join(hex(&[*first]))
                        .join(format!("{}.debug", hex(rest))),
                )
            })
    }

    fn by_build_id(
        &self,
        id: &[u8],
        object: &Path,
        root: Option<&Path>,
        notes: &mut Vec<String>,
    ) -> Option<ElfFile> {
        for path in self.build_id_paths(id, root) {
            let Some(found) = open_candidate(&path, object, notes) else {
                continue;
            };
            // The name already says which build it is; a mismatch means a
            // stale or misplaced file.
            match &found.build_id {
                Some(other) if other != id => notes.push(format!(
                    "{}: build-id {} does not match {}",
                    path.display(),
                    hex(other),
                    hex(id)
                )),
                _ => return Some(found),
            }
        }
        None
    }

    fn by_debuglink(
        &self,
        object: &Path,
        root: Option<&Path>,
        name: &Path,
        crc: u32,
        notes: &mut Vec<String>,
    ) -> Option<ElfFile> {
        // Only the file name counts: a link with directories in it would let
        // a binary point us anywhere.
        let name = Path::new(name.file_name()?);
        // `object` is named as its process maps it: in that process's root,
        // where it has one of its own.
        let real = match root {
            Some(_) => object.to_owned(),
            None => std::fs::canonicalize(object).unwrap_or_else(|_| object.to_owned()),
        };
        let obj_dir = real.parent().unwrap_or(Path::new("/"));
        let under = |dir: &Path| {
            dir.join(obj_dir.strip_prefix("/").unwrap_or(obj_dir))
                .join(name)
        };
        let here = |p: PathBuf| match root {
            Some(r) => in_root(r, &p),
            None => p,
        };
        let mut candidates = vec![
            here(obj_dir.join(name)),
            here(obj_dir.join(".debug").join(name)),
        ];
        if let Some(r) = root {
            let system = in_root(r, Path::new(SYSTEM_DEBUG_DIR));
            candidates.push(under(&system));
            candidates.push(system.join(name));
        }
        for dir in &self.dirs {
            candidates.push(under(dir));
            candidates.push(dir.join(name));
        }
        for path in candidates {
            let Some(found) = open_candidate(&path, &real, notes) else {
                continue;
            };
            let actual = crc32fast::hash(found.mapped().bytes());
            if actual == crc {
                return Some(found);
            }
            notes.push(format!(
                "{}: CRC {actual:08x} does not match the {crc:08x} in {}'s .gnu_debuglink",
                path.display(),
                object.display()
            ));
        }
        None
    }
}

/// `path`, an absolute path in a process's root, as reached through `root`.
fn in_root(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Opens `path` as an ELF file if it exists and is not `object` itself.
fn open_candidate(path: &Path, object: &Path, notes: &mut Vec<String>) -> Option<ElfFile> {
    if !path.is_file() || same_file(path, object) {
        return None;
    }
    match ElfFile::open(path) {
        Ok(elf) => Some(elf),
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_split_the_first_byte() {
        let dirs = DebugDirs::new(vec![PathBuf::from("/mine")]);
        let paths: Vec<_> = dirs.build_id_paths(&[0xab, 0xcd, 0x01], None).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/mine/.build-id/ab/cd01.debug"),
                PathBuf::from("/usr/lib/debug/.build-id/ab/cd01.debug")
            ]
        );
        assert_eq!(dirs.build_id_paths(&[0xab], None).count(), 0);
        // A process in a root of its own: that root's system directory first.
        let root = Path::new("/proc/42/root");
        let paths: Vec<_> = dirs.build_id_paths(&[0xab, 0xcd], Some(root)).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/proc/42/root/usr/lib/debug/.build-id/ab/cd.debug"),
                PathBuf::from("/mine/.build-id/ab/cd.debug"),
                PathBuf::from("/usr/lib/debug/.build-id/ab/cd.debug")
            ]
        );
    }
}
