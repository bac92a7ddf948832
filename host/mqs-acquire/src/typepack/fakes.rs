//! Fakes for the unit tests of the pack checks: a process's memory as a
//! byte map and symbols as a pack answers them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use mqs_core::interface::{
    Environment, ImageSymbols, Liveness, MappedObject, Target, Thread, TypeLayout,
};

/// A process's memory as a byte map: what was written reads back,
/// anything else is unreadable.
#[derive(Debug, Default)]
pub struct Memory(BTreeMap<u64, u8>);

impl Memory {
    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.0.insert(addr + i as u64, *b);
        }
    }
}

impl Target for Memory {
    fn pid(&self) -> i32 {
        7
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> mqs_core::Result<()> {
        let len = buf.len();
        for (at, b) in (addr..).zip(buf.iter_mut()) {
            *b = *self.0.get(&at).ok_or_else(|| mqs_core::Error::Read {
                pid: 7,
                addr,
                len,
                detail: "not in the fake's memory".into(),
            })?;
        }
        Ok(())
    }
    fn mapped_objects(&self) -> mqs_core::Result<Vec<MappedObject>> {
        Ok(Vec::new())
    }
    fn executable(&self) -> mqs_core::Result<PathBuf> {
        Ok("/bin/app".into())
    }
    fn environment(&self) -> mqs_core::Result<Environment> {
        Ok(Environment::default())
    }
    fn threads(&self) -> mqs_core::Result<Vec<Thread>> {
        Ok(Vec::new())
    }
    fn liveness(&self) -> Liveness {
        Liveness::Offline
    }
}

/// Symbols and types as a pack answers them.
#[derive(Debug, Default)]
pub struct Symbols {
    pub symbols: BTreeMap<&'static str, u64>,
    pub types: BTreeMap<&'static str, TypeLayout>,
}

impl ImageSymbols for Symbols {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }
    fn find_function(&self, _: &str) -> Option<u64> {
        None
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        self.types.get(name).cloned()
    }
}

pub fn layout(fields: &[(&str, u64)]) -> TypeLayout {
    TypeLayout {
        size: None,
        fields: fields.iter().map(|(f, o)| ((*f).to_owned(), *o)).collect(),
        handle: None,
    }
}
