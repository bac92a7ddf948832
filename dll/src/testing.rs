//! In-memory fakes of a debugger's image and process, for tests: a sparse
//! byte map with a fetch counter, and a table of symbols and types.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::access::{ImageAccess, ProcessAccess};

const PAGE: u64 = 4096;

/// A process's memory as a sparse set of pages; bytes never written are
/// unmapped and unreadable.
#[derive(Debug, Default)]
pub struct FakeProcess {
    pages: BTreeMap<u64, Box<[u8]>>,
    /// Target byte order is the opposite of the host's.
    pub swap: bool,
    pub fetches: AtomicU64,
}

impl Clone for FakeProcess {
    fn clone(&self) -> Self {
        FakeProcess {
            pages: self.pages.clone(),
            swap: self.swap,
            fetches: AtomicU64::new(self.fetches.load(Ordering::Relaxed)),
        }
    }
}

impl FakeProcess {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `bytes` at `addr`, mapping the pages it touches.
    pub fn map(&mut self, addr: u64, bytes: Vec<u8>) {
        for (i, b) in bytes.into_iter().enumerate() {
            let a = addr + i as u64;
            let page = self
                .pages
                .entry(a / PAGE * PAGE)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            page[(a % PAGE) as usize] = b;
        }
    }

    fn put(&mut self, addr: u64, v: u64, n: usize) {
        let mut bytes = if cfg!(target_endian = "little") {
            v.to_le_bytes()[..n].to_vec()
        } else {
            v.to_be_bytes()[8 - n..].to_vec()
        };
        if self.swap {
            bytes.reverse();
        }
        self.map(addr, bytes);
    }

    pub fn write_u64(&mut self, addr: u64, v: u64) {
        self.put(addr, v, 8)
    }
    pub fn write_u32(&mut self, addr: u64, v: u32) {
        self.put(addr, u64::from(v), 4)
    }
    pub fn write_u16(&mut self, addr: u64, v: u16) {
        self.put(addr, u64::from(v), 2)
    }

    /// The mapped pages (address, bytes), for corrupting them in tests.
    pub fn pages_mut(&mut self) -> impl Iterator<Item = (u64, &mut [u8])> {
        self.pages.iter_mut().map(|(a, p)| (*a, &mut p[..]))
    }

    /// Unmaps the page holding `addr`.
    pub fn unmap(&mut self, addr: u64) {
        self.pages.remove(&(addr / PAGE * PAGE));
    }

    /// Whether `addr` is mapped.
    pub fn is_mapped(&self, addr: u64) -> bool {
        self.pages.contains_key(&(addr / PAGE * PAGE))
    }
}

impl ProcessAccess for FakeProcess {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        for (i, slot) in buf.iter_mut().enumerate() {
            let Some(a) = addr.checked_add(i as u64) else {
                return false;
            };
            match self.pages.get(&(a / PAGE * PAGE)) {
                Some(page) => *slot = page[(a % PAGE) as usize],
                None => return false,
            }
        }
        true
    }

    fn target_to_host(&self, input: &[u8], output: &mut [u8]) {
        let n = input.len().min(output.len());
        output[..n].copy_from_slice(&input[..n]);
        if self.swap {
            output[..n].reverse();
        }
    }
}

/// An image's symbols and types.
#[derive(Debug, Default, Clone)]
pub struct FakeImage {
    pub symbols: HashMap<String, u64>,
    pub types: Vec<(String, u64, HashMap<String, u64>)>,
}

impl FakeImage {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_type(&mut self, name: &str, size: u64, fields: &[(&str, u64)]) {
        self.types.push((
            name.to_string(),
            size,
            fields.iter().map(|(f, o)| (f.to_string(), *o)).collect(),
        ));
    }

    pub fn remove_type(&mut self, name: &str) {
        self.types.retain(|t| t.0 != name);
    }

    /// The fields of type `name`, by name, if it was added.
    pub fn fields_of(&mut self, name: &str) -> Option<&mut HashMap<String, u64>> {
        self.types
            .iter_mut()
            .find(|t| t.0 == name)
            .map(|t| &mut t.2)
    }

    /// Type `name` without its field `field`; whether it had it.
    pub fn remove_field(&mut self, name: &str, field: &str) -> bool {
        self.fields_of(name)
            .is_some_and(|fields| fields.remove(field).is_some())
    }
}

impl ImageAccess for FakeImage {
    type Type = usize;

    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_type(&self, name: &str) -> Option<usize> {
        self.types.iter().position(|t| t.0 == name)
    }
    fn field_offset(&self, ty: usize, field: &str) -> Option<u64> {
        self.types.get(ty)?.2.get(field).copied()
    }
    fn size_of(&self, ty: usize) -> Option<u64> {
        Some(self.types.get(ty)?.1)
    }
}
