//! Defined symbols of one object, by name: data objects for `find_symbol`,
//! functions for `find_function`. Values are link-time (st_value); the load
//! bias is added by the caller that knows where the object sits.

use std::collections::HashMap;

use object::{Object, ObjectSymbol, SymbolFlags, SymbolSection};

/// One definition: its st_value, and whether it is visible outside its
/// translation unit (GLOBAL, WEAK or GNU_UNIQUE) rather than LOCAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SymDef {
    pub(crate) value: u64,
    pub(crate) global: bool,
}

#[derive(Default)]
pub(crate) struct SymbolTable {
    data: HashMap<Box<str>, SymDef>,
    functions: HashMap<Box<str>, SymDef>,
}

/// Counts only: thousands of symbols help no log.
impl std::fmt::Debug for SymbolTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolTable")
            .field("data", &self.data.len())
            .field("functions", &self.functions.len())
            .finish()
    }
}

impl SymbolTable {
    pub(crate) fn data(&self, name: &str) -> Option<SymDef> {
        self.data.get(name).copied()
    }

    pub(crate) fn function(&self, name: &str) -> Option<SymDef> {
        self.functions.get(name).copied()
    }

    /// Adds the defined symbols of `.symtab` (when `symtab`) and `.dynsym`.
    pub(crate) fn add_from(&mut self, obj: &object::File<'_>, symtab: bool) {
        if symtab {
            for sym in obj.symbols() {
                self.add(&sym);
            }
        }
        for sym in obj.dynamic_symbols() {
            self.add(&sym);
        }
    }

    fn add<'data>(&mut self, sym: &impl ObjectSymbol<'data>) {
        // Undefined, common and absolute symbols have no address in this
        // object that the bias would relocate.
        if !matches!(sym.section(), SymbolSection::Section(_)) {
            return;
        }
        let SymbolFlags::Elf { st_info, .. } = sym.flags() else {
            return;
        };
        let table = match st_info.st_type() {
            object::elf::STT_OBJECT | object::elf::STT_NOTYPE => &mut self.data,
            object::elf::STT_FUNC | object::elf::STT_GNU_IFUNC => &mut self.functions,
            // TLS symbols are offsets into a thread's block, not addresses.
            _ => return,
        };
        let Ok(name) = sym.name() else { return };
        if name.is_empty() {
            return;
        }
        let def = SymDef {
            value: sym.address(),
            global: matches!(
                st_info.st_bind(),
                object::elf::STB_GLOBAL | object::elf::STB_WEAK | object::elf::STB_GNU_UNIQUE
            ),
        };
        // The first definition wins, except that a global one replaces a
        // local one: two file-statics of one name are ambiguous anyway, and a
        // global is what the name means outside its file.
        match table.get_mut(name) {
            Some(old) if !old.global && def.global => *old = def,
            Some(_) => {}
            None => {
                table.insert(name.into(), def);
            }
        }
    }
}
