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

/// A function by address: where it starts, how long it is (0 if the
/// symbol does not say) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionRange {
    pub(crate) start: u64,
    pub(crate) size: u64,
    pub(crate) name: Box<str>,
    pub(crate) global: bool,
}

#[derive(Default)]
pub(crate) struct SymbolTable {
    data: HashMap<Box<str>, SymDef>,
    functions: HashMap<Box<str>, SymDef>,
    /// Functions by start address, one name per address (see `sort`).
    by_address: Vec<FunctionRange>,
}

/// Counts only: thousands of symbols help no log.
impl std::fmt::Debug for SymbolTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolTable")
            .field("data", &self.data.len())
            .field("functions", &self.functions.len())
            .field("by_address", &self.by_address.len())
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

    /// The function whose code holds the link-time address `addr`: the
    /// closest start at or below it, within its size where the symbol has
    /// one. Returns it with the offset of `addr` into it.
    pub(crate) fn function_at(&self, addr: u64) -> Option<(&FunctionRange, u64)> {
        let i = self.by_address.partition_point(|f| f.start <= addr);
        let f = self.by_address.get(i.checked_sub(1)?)?;
        let offset = addr - f.start;
        // A sized symbol ends where it says; an unsized one (assembly
        // without .size) is trusted up to the next symbol only.
        if f.size != 0 && offset >= f.size {
            return None;
        }
        Some((f, offset))
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
        self.sort();
    }

    /// Orders the address table and keeps one name per address: a
    /// global before a local, then the name people call (no leading
    /// underscore: `poll` before `__poll` and `__GI___poll`), then the
    /// shortest (`MPI_Recv` before its profiling alias `PMPI_Recv`), then
    /// by name, so the choice never depends on table order.
    fn sort(&mut self) {
        fn rank(f: &FunctionRange) -> (bool, bool, usize, &str) {
            (!f.global, f.name.starts_with('_'), f.name.len(), &f.name)
        }
        self.by_address
            .sort_by(|a, b| a.start.cmp(&b.start).then_with(|| rank(a).cmp(&rank(b))));
        self.by_address.dedup_by(|later, first| {
            if later.start != first.start {
                return false;
            }
            first.size = first.size.max(later.size);
            true
        });
    }

    /// Adds a definition known from elsewhere (a type pack), unless the
    /// tables have one already.
    pub(crate) fn add_def(&mut self, name: &str, value: u64, global: bool, function: bool) {
        let table = if function {
            &mut self.functions
        } else {
            &mut self.data
        };
        table.entry(name.into()).or_insert(SymDef { value, global });
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
        match st_info.st_type() {
            object::elf::STT_OBJECT
            | object::elf::STT_NOTYPE
            | object::elf::STT_FUNC
            | object::elf::STT_GNU_IFUNC => {}
            // TLS symbols are offsets into a thread's block, not addresses.
            _ => return,
        }
        let Ok(name) = sym.name() else { return };
        if name.is_empty() {
            return;
        }
        if table_is_functions(st_info.st_type()) {
            self.by_address.push(FunctionRange {
                start: sym.address(),
                size: sym.size(),
                name: name.into(),
                global: st_info.st_bind() != object::elf::STB_LOCAL,
            });
        }
        let table = if table_is_functions(st_info.st_type()) {
            &mut self.functions
        } else {
            &mut self.data
        };
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

fn table_is_functions(st_type: object::elf::SymbolType) -> bool {
    matches!(st_type, object::elf::STT_FUNC | object::elf::STT_GNU_IFUNC)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u64, u64, &str, bool)]) -> SymbolTable {
        let mut t = SymbolTable::default();
        for &(start, size, name, global) in entries {
            t.by_address.push(FunctionRange {
                start,
                size,
                name: name.into(),
                global,
            });
        }
        t.sort();
        t
    }

    #[test]
    fn function_at_prefers_the_plain_global_name_and_respects_sizes() {
        let t = table(&[
            (0x100, 0x40, "PMPI_Recv", true),
            (0x100, 0x40, "MPI_Recv", true),
            (0x200, 0x10, "__GI___poll", false),
            (0x200, 0x10, "__poll", true),
            (0x200, 0x10, "poll", true),
            (0x300, 0, "asm_entry", true),
        ]);
        let name = |a| t.function_at(a).map(|(f, off)| (f.name.to_string(), off));
        assert_eq!(name(0x100), Some(("MPI_Recv".into(), 0)));
        assert_eq!(name(0x13f), Some(("MPI_Recv".into(), 0x3f)));
        assert_eq!(name(0x140), None, "past the end of a sized symbol");
        assert_eq!(name(0x205), Some(("poll".into(), 5)));
        assert_eq!(name(0x80), None, "below every symbol");
        assert_eq!(name(0x350), Some(("asm_entry".into(), 0x50)));
    }
}
