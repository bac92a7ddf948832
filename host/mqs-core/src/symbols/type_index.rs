//! Where an object's named types are: a map from name to DIE location for
//! the type definitions at the top level of every unit (and, for C++,
//! inside namespaces), built in one pass that reads only those DIEs and
//! jumps over everything else by `DW_AT_sibling`. Members are not read here:
//! `resolve` parses a struct only when somebody asks for it.

use std::borrow::Cow;
use std::collections::HashMap;

use gimli::constants as dw;
use gimli::{AttributeValue, Reader, Section, Unit, UnitHeader, UnitOffset, UnitType};

use super::dwarf_data::Slice;

/// Which file of an object's DWARF a DIE lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FileSel {
    Main,
    /// The dwz supplementary file.
    Sup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SectionSel {
    Info,
    /// DWARF 4 type units.
    Types,
}

/// A unit, by its header's offset in its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct UnitLoc {
    pub(crate) file: FileSel,
    pub(crate) section: SectionSel,
    pub(crate) offset: usize,
}

/// A DIE: its unit and its offset within that unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DieLoc {
    pub(crate) unit: UnitLoc,
    pub(crate) entry: usize,
}

/// The kinds of named type, each a namespace of its own in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NameKind {
    Typedef,
    Struct,
    Class,
    Union,
    Enum,
    Base,
}

const KINDS: usize = 6;

impl NameKind {
    pub(crate) fn of(tag: dw::DwTag) -> Option<Self> {
        Some(match tag {
            dw::DW_TAG_typedef => Self::Typedef,
            dw::DW_TAG_structure_type => Self::Struct,
            dw::DW_TAG_class_type => Self::Class,
            dw::DW_TAG_union_type => Self::Union,
            dw::DW_TAG_enumeration_type => Self::Enum,
            dw::DW_TAG_base_type => Self::Base,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    die: DieLoc,
    /// Indexed by its unqualified name although it is inside a namespace:
    /// a top-level type of the same name replaces it.
    nested: bool,
}

#[derive(Default)]
pub(crate) struct TypeIndex {
    names: [HashMap<Box<str>, Slot>; KINDS],
    /// Sorted header offsets of the `.debug_info` units of each file, to
    /// find the unit of a section-relative reference (DW_FORM_ref_addr).
    units: [Vec<usize>; 2],
    /// Type-unit signatures (DW_FORM_ref_sig8) to their type DIEs.
    signatures: HashMap<u64, DieLoc>,
    /// Units that could not be read; the rest of the index is still good.
    pub(crate) errors: Vec<String>,
}

/// Counts only, like `SymbolTable`.
impl std::fmt::Debug for TypeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypeIndex")
            .field("names", &self.len())
            .field("signatures", &self.signatures.len())
            .field("errors", &self.errors.len())
            .finish()
    }
}

impl TypeIndex {
    pub(crate) fn build(dwarf: &gimli::Dwarf<Slice<'_>>) -> Self {
        let mut index = Self::default();
        index.add_file(dwarf, FileSel::Main);
        if let Some(sup) = dwarf.sup() {
            index.add_file(sup, FileSel::Sup);
        }
        index
    }

    /// The definition named `name` of kind `kind`, if any unit has one.
    pub(crate) fn get(&self, kind: NameKind, name: &str) -> Option<DieLoc> {
        let name = key(kind, name);
        self.names[kind as usize].get(&*name).map(|slot| slot.die)
    }

    /// The number of distinct (kind, name) pairs.
    pub(crate) fn len(&self) -> usize {
        self.names.iter().map(HashMap::len).sum()
    }

    /// The DIE at `offset` in `file`'s `.debug_info`.
    pub(crate) fn die_at(&self, file: FileSel, offset: usize) -> Option<DieLoc> {
        let units = &self.units[file as usize];
        let start = *units.get(units.partition_point(|&u| u <= offset).checked_sub(1)?)?;
        Some(DieLoc {
            unit: UnitLoc {
                file,
                section: SectionSel::Info,
                offset: start,
            },
            entry: offset - start,
        })
    }

    pub(crate) fn signature(&self, signature: u64) -> Option<DieLoc> {
        self.signatures.get(&signature).copied()
    }

    fn add_file<'a>(&mut self, dwarf: &gimli::Dwarf<Slice<'a>>, file: FileSel) {
        let mut attrs = Vec::new();
        let mut units = dwarf.units();
        loop {
            let header = match units.next() {
                Ok(Some(header)) => header,
                Ok(None) => break,
                Err(e) => {
                    self.errors.push(format!("{file:?} .debug_info: {e}"));
                    break;
                }
            };
            let Some(offset) = header.debug_info_offset() else {
                continue;
            };
            self.units[file as usize].push(offset.0);
            let loc = UnitLoc {
                file,
                section: SectionSel::Info,
                offset: offset.0,
            };
            if let Err(e) = self.add_unit(dwarf, header, loc, &mut attrs) {
                self.errors
                    .push(format!("{file:?} unit at {:#x}: {e}", offset.0));
            }
        }
        let mut units = dwarf.type_units();
        loop {
            let header = match units.next() {
                Ok(Some(header)) => header,
                Ok(None) => break,
                Err(e) => {
                    self.errors.push(format!("{file:?} .debug_types: {e}"));
                    break;
                }
            };
            let Some(offset) = header.debug_types_offset() else {
                continue;
            };
            let loc = UnitLoc {
                file,
                section: SectionSel::Types,
                offset: offset.0,
            };
            if let Err(e) = self.add_unit(dwarf, header, loc, &mut attrs) {
                self.errors
                    .push(format!("{file:?} type unit at {:#x}: {e}", offset.0));
            }
        }
    }

    fn add_unit<'a>(
        &mut self,
        dwarf: &gimli::Dwarf<Slice<'a>>,
        header: UnitHeader<Slice<'a>>,
        loc: UnitLoc,
        attrs: &mut Vec<gimli::Attribute<Slice<'a>>>,
    ) -> gimli::Result<()> {
        if let UnitType::Type {
            type_signature,
            type_offset,
        }
        | UnitType::SplitType {
            type_signature,
            type_offset,
        } = header.type_()
        {
            let die = DieLoc {
                unit: loc,
                entry: type_offset.0,
            };
            self.signatures.insert(type_signature.0, die);
        }
        let unit = Unit::new(dwarf, header)?;
        let mut raw = unit.entries_raw(None)?;
        let Some(root) = raw.read_abbreviation()? else {
            return Ok(());
        };
        raw.skip_attributes(root.attributes())?;

        // Depth of the entries `raw` reads, relative to where it started:
        // jumping to a sibling starts a new reader, so keep our own base.
        let mut base = 0;
        // Enclosing namespaces: (depth of the namespace DIE, qualified name).
        let mut scopes: Vec<(isize, String)> = Vec::new();
        while !raw.is_empty() {
            let depth = base + raw.next_depth();
            let offset = raw.next_offset();
            let Some(abbrev) = raw.read_abbreviation()? else {
                if depth <= 1 {
                    break; // the end of the unit DIE's children
                }
                continue;
            };
            while scopes.last().is_some_and(|(d, _)| depth <= *d) {
                scopes.pop();
            }
            let tag = abbrev.tag();
            let kind = NameKind::of(tag);
            let in_scope = depth == 1 || scopes.last().is_some_and(|(d, _)| depth == d + 1);
            let wanted = kind.is_some() || tag == dw::DW_TAG_namespace || abbrev.has_children();
            if !in_scope || !wanted {
                raw.skip_attributes(abbrev.attributes())?;
                continue;
            }
            raw.read_attributes(abbrev.attributes(), attrs)?;
            let mut name = None;
            let mut declaration = false;
            let mut sibling = None;
            for attr in attrs.iter() {
                match (attr.name(), attr.value()) {
                    (dw::DW_AT_name, value) => name = Some(value),
                    (dw::DW_AT_declaration, AttributeValue::Flag(flag)) => declaration = flag,
                    (dw::DW_AT_sibling, AttributeValue::UnitRef(to)) => sibling = Some(to),
                    _ => {}
                }
            }
            // Borrowed unless not UTF-8: allocate only for new names. A name
            // in a missing supplementary file's strings is no name.
            let name = name
                .and_then(|value| dwarf.attr_string(&unit, value).ok())
                .map(|name| name.to_string_lossy());
            let prefix = scopes.last().map_or("", |(_, p)| p.as_str());
            if tag == dw::DW_TAG_namespace {
                // Anonymous namespaces add nothing to the qualified name.
                let inner = match &name {
                    Some(name) => qualify(prefix, name),
                    None => prefix.to_owned(),
                };
                scopes.push((depth, inner));
                continue;
            }
            if let (Some(kind), Some(name), false) = (kind, &name, declaration) {
                let die = DieLoc {
                    unit: loc,
                    entry: offset.0,
                };
                if prefix.is_empty() {
                    self.insert(kind, name, die, false);
                } else {
                    let qualified = qualify(prefix, name);
                    self.insert(kind, &qualified, die, false);
                    self.insert(kind, name, die, true);
                }
            }
            if abbrev.has_children() {
                if let Some(to) = sibling.filter(|to| to.0 > offset.0) {
                    raw = unit.entries_raw(Some(to))?;
                    base = depth;
                }
                // Without DW_AT_sibling the children are read and skipped
                // one by one: they are deeper than any scope.
            }
        }
        Ok(())
    }

    fn insert(&mut self, kind: NameKind, name: &str, die: DieLoc, nested: bool) {
        let name = key(kind, name);
        let map = &mut self.names[kind as usize];
        match map.get_mut(&*name) {
            // The first definition wins (the same header gives the same
            // type in every unit), but a top-level one beats a nested one.
            Some(slot) => {
                if slot.nested && !nested {
                    *slot = Slot { die, nested };
                }
            }
            None => {
                map.insert(name.as_ref().into(), Slot { die, nested });
            }
        }
    }
}

/// The index key of a name: compilers spell C's integer types differently
/// (gcc "long unsigned int", clang "unsigned long"), so base types are keyed
/// by one spelling of each: "unsigned" first, then "short" or the "long"s,
/// then "int"; `signed` dropped except for `signed char`, which is not
/// `char`. Other names are their own key.
fn key(kind: NameKind, name: &str) -> Cow<'_, str> {
    if kind != NameKind::Base {
        return Cow::Borrowed(name);
    }
    let words: Vec<&str> = name.split_whitespace().collect();
    let integer_word = |w: &&str| {
        matches!(
            *w,
            "signed" | "unsigned" | "short" | "long" | "int" | "char"
        )
    };
    if words.is_empty() || !words.iter().all(integer_word) {
        return Cow::Borrowed(name);
    }
    let has = |word: &str| words.contains(&word);
    let mut canonical = Vec::new();
    if has("unsigned") {
        canonical.push("unsigned");
    } else if has("signed") && has("char") {
        canonical.push("signed");
    }
    if has("char") {
        canonical.push("char");
    } else {
        if has("short") {
            canonical.push("short");
        }
        canonical.extend(words.iter().filter(|w| **w == "long"));
        canonical.push("int");
    }
    let canonical = canonical.join(" ");
    if canonical == name {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(canonical)
    }
}

fn qualify(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}::{name}")
    }
}

/// The header of the unit at `loc`.
pub(crate) fn unit_header<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    loc: UnitLoc,
) -> gimli::Result<UnitHeader<Slice<'a>>> {
    match loc.section {
        SectionSel::Info => dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(loc.offset)),
        SectionSel::Types => {
            // gimli only walks .debug_types from its start; a section that
            // begins at the unit parses just that unit. Its references are
            // unit-relative or by signature, so the shifted base is harmless.
            let mut data = *dwarf.debug_types.reader();
            data.skip(loc.offset)?;
            gimli::DebugTypes::from(data)
                .units()
                .next()?
                .ok_or(gimli::Error::UnexpectedEof(data.offset_id()))
        }
    }
}

/// `UnitOffset` of a DIE location, for gimli calls.
pub(crate) fn entry_offset(loc: DieLoc) -> UnitOffset {
    UnitOffset(loc.entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_spellings_share_a_key() {
        let base = |name| key(NameKind::Base, name).into_owned();
        assert_eq!(base("long unsigned int"), "unsigned long int");
        assert_eq!(base("unsigned long"), "unsigned long int");
        assert_eq!(base("long long int"), base("long long"));
        assert_eq!(base("short unsigned int"), base("unsigned short"));
        assert_eq!(base("unsigned"), "unsigned int");
        assert_eq!(base("signed int"), "int");
        assert_eq!(base("signed char"), "signed char");
        assert_eq!(base("char"), "char");
        assert_eq!(base("char unsigned"), "unsigned char");
        assert_eq!(base("long double"), "long double");
        assert_eq!(base("_Bool"), "_Bool");
        assert_eq!(key(NameKind::Typedef, "unsigned long"), "unsigned long");
    }
}
