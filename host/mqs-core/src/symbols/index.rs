//! The symbols and types of one process: its loaded objects in load order,
//! each with its load bias.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use super::cache::SymbolCache;
use super::object::{Lookup, ObjectSymbols, Symbol};
use super::types::{TypeInfo, TypeQuery};
use crate::interface::{ImageSymbols, MappedObject, Target, TypeLayout};
use crate::sync::{self, lock};
use crate::Result;

#[derive(Debug, Clone)]
struct Loaded {
    object: Arc<ObjectSymbols>,
    bias: u64,
}

/// Symbol and type lookup over all objects a process has loaded.
pub struct SymbolIndex {
    cache: Arc<SymbolCache>,
    objects: RwLock<Vec<Loaded>>,
    /// Answers to `find_type`. Objects are only ever appended, and earlier
    /// objects win, so only "not found" can change when one is added.
    types: Mutex<HashMap<String, Option<Arc<TypeInfo>>>>,
    skipped: Mutex<Vec<(PathBuf, String)>>,
    /// Objects whose debug files may be fetched from debuginfod when a
    /// type is found nowhere else (the MPI's own files, see `allow_fetch`).
    fetchable: RwLock<HashSet<PathBuf>>,
}

impl SymbolIndex {
    /// An index over `objects`, each `(path, load bias)`, in load order
    /// (the executable first), with a cache of its own.
    pub fn new(objects: Vec<(PathBuf, u64)>, debug_dirs: Vec<PathBuf>) -> Result<Self> {
        Self::with_cache(Arc::new(SymbolCache::new(debug_dirs)), objects)
    }

    /// Like `new`, sharing parsed files with other processes through `cache`.
    pub fn with_cache(cache: Arc<SymbolCache>, objects: Vec<(PathBuf, u64)>) -> Result<Self> {
        let index = Self {
            cache,
            objects: RwLock::new(Vec::new()),
            types: Mutex::new(HashMap::new()),
            skipped: Mutex::new(Vec::new()),
            fetchable: RwLock::new(HashSet::new()),
        };
        for (path, bias) in objects {
            index.add_object(&path, bias)?;
        }
        Ok(index)
    }

    /// An index over the objects of a process's maps (executable first),
    /// with biases from their lowest mappings. Mapped files that are not
    /// ELF (shared-memory segments, locale archives), or were deleted since
    /// they were mapped and cannot be read any more, are skipped; [`Self::skipped`] says which and why.
    pub fn from_mapped(objects: &[MappedObject], debug_dirs: Vec<PathBuf>) -> Result<Self> {
        Self::from_mapped_with_cache(Arc::new(SymbolCache::new(debug_dirs)), objects)
    }

    /// Like `from_mapped`, sharing parsed files with other processes (the
    /// ranks of one job run the same binaries) through `cache`.
    pub fn from_mapped_with_cache(
        cache: Arc<SymbolCache>,
        objects: &[MappedObject],
    ) -> Result<Self> {
        let index = Self::with_cache(cache, Vec::new())?;
        for object in objects {
            index.add_mapped(object);
        }
        Ok(index)
    }

    /// Adds a mapped object (one that appeared in the maps after start,
    /// say), or records why it was skipped. Returns whether it was added.
    pub fn add_mapped(&self, mapped: &MappedObject) -> bool {
        let added = match (mapped.deleted, &mapped.contents) {
            (false, None) => self
                .add_at_lowest_mapping(mapped, &mapped.path)
                .map_err(|e| e.to_string()),
            (false, Some(contents)) => self
                .add_at_lowest_mapping(mapped, contents)
                .map_err(|e| e.to_string()),
            // The path may name another file now (a rebuilt binary): read
            // the mapped one through the kernel's link to it.
            (true, Some(contents)) => self
                .add_at_lowest_mapping(mapped, contents)
                .map_err(|e| format!("deleted since it was mapped, and unreadable: {e}")),
            (true, None) => {
                Err("deleted since it was mapped: the path may name another file".to_owned())
            }
        };
        match added {
            Ok(()) => true,
            Err(reason) => {
                lock(&self.skipped).push((mapped.path.clone(), reason));
                false
            }
        }
    }

    fn add_at_lowest_mapping(&self, mapped: &MappedObject, file: &Path) -> Result<()> {
        // A file read through the process's own root keeps the name the
        // process maps it at.
        let object = if file.starts_with("/proc") && !mapped.deleted {
            self.cache.object_as(file, &mapped.path)?
        } else {
            self.cache.object(file)?
        };
        // The ELF header's mapping is the reference when there is one.
        let (start, offset) = match mapped.file_offset_zero_start {
            Some(start) => (start, 0),
            None => (mapped.base, mapped.base_offset),
        };
        let bias = object.load_bias(start, offset)?;
        self.push(object, bias);
        Ok(())
    }

    /// Adds the kernel's vDSO of `target`, read from its memory (it has no
    /// file): stacks caught inside it are then unwound and named. Nothing
    /// happens where the source does not know it or it cannot be read.
    pub fn add_vdso(&self, target: &dyn Target) {
        // The vDSO is a page or two; anything larger is not believed.
        const MAX: u64 = 1 << 20;
        let Some(range) = target
            .vdso()
            .filter(|r| r.end > r.start && r.end - r.start <= MAX)
        else {
            return;
        };
        let mut bytes = vec![0u8; (range.end - range.start) as usize];
        if target.read(range.start, &mut bytes).is_err() {
            return;
        }
        let added = self
            .cache
            .image(Path::new("[vdso]"), bytes)
            .and_then(|object| Ok((object.load_bias(range.start, 0)?, object)));
        match added {
            Ok((bias, object)) => self.push(object, bias),
            Err(e) => lock(&self.skipped).push(("[vdso]".into(), e.to_string())),
        }
    }

    /// Mapped files that `from_mapped`/`add_mapped` left out, and why.
    pub fn skipped(&self) -> Vec<(PathBuf, String)> {
        lock(&self.skipped).clone()
    }

    /// Adds an object loaded later (dlopen: Open MPI's components appear in
    /// the maps after start). Adding the same path at the same bias again
    /// does nothing.
    pub fn add_object(&self, path: &Path, bias: u64) -> Result<()> {
        let object = self.cache.object(path)?;
        self.push(object, bias);
        Ok(())
    }

    fn push(&self, object: Arc<ObjectSymbols>, bias: u64) {
        {
            let mut objects = sync::write(&self.objects);
            if objects
                .iter()
                .any(|l| Arc::ptr_eq(&l.object, &object) && l.bias == bias)
            {
                return;
            }
            objects.push(Loaded { object, bias });
        }
        lock(&self.types).retain(|_, found| found.is_some());
    }

    /// Stops `object` answering from a pack borrowed from another build
    /// (it failed its invariants: see `ObjectSymbols::refuse_borrowed`), and
    /// forgets the types it answered.
    pub fn refuse_borrowed(&self, object: &ObjectSymbols, why: String) {
        object.refuse_borrowed(why);
        lock(&self.types).clear();
    }

    /// Leaves the types `names` of `object`'s borrowed pack to the objects
    /// whose DWARF describes them, and forgets what was answered.
    pub fn shadow_borrowed(&self, object: &ObjectSymbols, names: Vec<String>) {
        object.shadow_borrowed(names);
        lock(&self.types).clear();
    }

    /// The objects, in order, with their biases.
    pub fn objects(&self) -> Vec<(Arc<ObjectSymbols>, u64)> {
        self.snapshot()
            .into_iter()
            .map(|l| (l.object, l.bias))
            .collect()
    }

    /// The object whose code holds the runtime address `addr`, with its
    /// load bias (the object's link-time address is `addr - bias`).
    pub fn object_at(&self, addr: u64) -> Option<(Arc<ObjectSymbols>, u64)> {
        self.snapshot()
            .into_iter()
            .find(|l| l.object.contains_code(addr.wrapping_sub(l.bias)))
            .map(|l| (l.object, l.bias))
    }

    /// [`Self::object_at`], for reading a frame's arguments: one of the
    /// MPI's own files (see `allow_fetch`) without DWARF here gets its debug
    /// file from debuginfod first, once.
    pub fn object_with_parameters_at(&self, addr: u64) -> Option<(Arc<ObjectSymbols>, u64)> {
        let (object, bias) = self.object_at(addr)?;
        if sync::read(&self.fetchable).contains(object.path()) {
            object.fetch_missing_dwarf();
        }
        Some((object, bias))
    }

    /// The function at the runtime address `addr`: its name (from the
    /// symbol tables) and the offset of `addr` into it.
    pub fn function_at(&self, addr: u64) -> Option<(String, u64)> {
        let (object, bias) = self.object_at(addr)?;
        object
            .function_at(addr.wrapping_sub(bias))
            .map(|(name, offset)| (name.to_owned(), offset))
    }

    /// The runtime address of the data symbol `name`: a GLOBAL/WEAK
    /// definition in any object (the first in object order) before a LOCAL
    /// one (file-static; again the first object's).
    pub fn find_symbol(&self, name: &str) -> Option<u64> {
        self.find(|object| object.data_symbol(name))
    }

    /// The runtime address of the function `name`, preferring globals the
    /// same way.
    pub fn find_function(&self, name: &str) -> Option<u64> {
        self.find(|object| object.function_symbol(name))
    }

    /// The layout of the type `name`: a typedef name, a tag (`foo`, or
    /// `struct foo` / `union foo` / `enum foo` / `class foo` for tags only),
    /// a base type (`int`, `long int`) or a C++ `ns::T`. Objects are
    /// searched in order; a declaration-only struct (a typedef of an opaque
    /// struct, say) is completed from the definition in any object.
    pub fn find_type(&self, name: &str) -> Option<Arc<TypeInfo>> {
        if let Some(hit) = lock(&self.types).get(name) {
            return hit.clone();
        }
        let found = self.resolve_type(&TypeQuery::parse(name));
        lock(&self.types).insert(name.to_owned(), found.clone());
        found
    }

    /// Lets lookups fetch the debug files of these objects (by path) from
    /// debuginfod when no object here knows a type. Only the MPI's own files
    /// are worth a download: asking for every stripped system library would
    /// fetch megabytes for nothing.
    pub fn allow_fetch(&self, objects: impl IntoIterator<Item = PathBuf>) {
        let mut fetchable = sync::write(&self.fetchable);
        fetchable.extend(objects);
        lock(&self.types).retain(|_, found| found.is_some());
    }

    fn resolve_type(&self, query: &TypeQuery) -> Option<Arc<TypeInfo>> {
        let objects = self.snapshot();
        // What is here first; debuginfod only when nothing here has it.
        self.resolve_in(&objects, query, false).or_else(|| {
            let any = sync::read(&self.fetchable)
                .iter()
                .any(|path| objects.iter().any(|l| l.object.path() == path));
            if !any {
                return None;
            }
            // Each fetch is a download: ask first the files whose name
            // shares the longest start with the type's (Open MPI names a
            // component's types after it: mca_pml_ob1_* in mca_pml_ob1.so).
            let mut ordered = objects.clone();
            ordered.sort_by_key(|l| std::cmp::Reverse(shared_start(l.object.path(), &query.name)));
            self.resolve_in(&ordered, query, true)
        })
    }

    fn resolve_in(
        &self,
        objects: &[Loaded],
        query: &TypeQuery,
        fetch: bool,
    ) -> Option<Arc<TypeInfo>> {
        let fetchable = |l: &Loaded| fetch && sync::read(&self.fetchable).contains(l.object.path());
        // Objects whose DWARF is in a separate debug file last: those are
        // mostly the system's libraries (libc's, compressed: decompressing
        // and indexing it was 40% of a dump of an MPICH rank, whose types
        // are all in libmpi), while an MPI built with -g has its types in
        // its own files. Otherwise in index order.
        let mut ordered: Vec<&Loaded> = objects.iter().collect();
        ordered.sort_by_key(|l| l.object.dwarf_is_separate());
        let objects = ordered;
        let mut declared = None;
        for &loaded in &objects {
            match loaded.object.lookup_type_with(query, fetchable(loaded)) {
                Lookup::Found(info) => return Some(info),
                Lookup::Declared(tag) => {
                    declared.get_or_insert(tag);
                }
                Lookup::Missing => {}
            }
        }
        let tag = declared?;
        objects.iter().find_map(|&loaded| {
            match loaded.object.lookup_type_with(&tag, fetchable(loaded)) {
                Lookup::Found(info) => Some(info),
                Lookup::Declared(_) | Lookup::Missing => None,
            }
        })
    }

    fn find(&self, lookup: impl Fn(&ObjectSymbols) -> Option<Symbol>) -> Option<u64> {
        let objects = self.snapshot();
        let mut local = None;
        for loaded in &objects {
            if let Some(symbol) = lookup(&loaded.object) {
                let address = symbol.value.wrapping_add(loaded.bias);
                if symbol.global {
                    return Some(address);
                }
                local.get_or_insert(address);
            }
        }
        local
    }

    /// A copy of the object list, so lookups (which may index DWARF for a
    /// while) never hold the lock.
    fn snapshot(&self) -> Vec<Loaded> {
        sync::read(&self.objects).clone()
    }
}

/// How many leading characters a file's name and a type's name share.
fn shared_start(path: &Path, type_name: &str) -> usize {
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    stem.chars()
        .zip(type_name.chars())
        .take_while(|(a, b)| a == b)
        .count()
}

impl std::fmt::Debug for SymbolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let objects: Vec<_> = self
            .snapshot()
            .into_iter()
            .map(|l| format!("{} @ {:#x}", l.object.path().display(), l.bias))
            .collect();
        f.debug_struct("SymbolIndex")
            .field("objects", &objects)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// The host's own symbol tables and DWARF.
impl ImageSymbols for SymbolIndex {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        SymbolIndex::find_symbol(self, name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        SymbolIndex::find_function(self, name)
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        let info = SymbolIndex::find_type(self, name)?;
        Some(TypeLayout {
            size: info.size,
            fields: info.fields.clone(),
            handle: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_named_like_the_type_come_first() {
        let ob1 = Path::new("/x/openmpi3/mca_pml_ob1.so");
        let btl = Path::new("/x/openmpi3/mca_btl_sm.so");
        let libmpi = Path::new("/x/libmpi.so.40");
        let t = "mca_pml_ob1_comm_t";
        assert!(shared_start(ob1, t) > shared_start(btl, t));
        assert!(shared_start(btl, t) > shared_start(libmpi, t));
        assert_eq!(shared_start(libmpi, "ompi_communicator_t"), 0);
    }
}
