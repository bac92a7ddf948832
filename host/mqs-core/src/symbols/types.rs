//! Resolving a named type to its layout: follow typedefs and qualifiers to
//! the underlying type, trade a declaration for the definition of the same
//! tag, and read a struct's members only now that somebody asked.

use std::collections::HashMap;

use gimli::constants as dw;
use gimli::{AttributeValue, Operation, Unit};

use super::dwarf_data::Slice;
use super::type_index::{entry_offset, unit_header, DieLoc, FileSel, NameKind, TypeIndex, UnitLoc};

/// The layout of a type, as a message-queue DLL asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// The underlying type's own name (a struct's tag, say), or the name it
    /// was looked up by when it has none (`typedef struct {..} foo_t;`).
    pub name: String,
    pub kind: TypeKind,
    /// `sizeof`: DW_AT_byte_size; pointers without one take the unit's
    /// address size; arrays multiply out their bounds. None for `void`,
    /// functions and types without a size.
    pub size: Option<u64>,
    /// Top-level members and their byte offsets, in declaration order.
    /// Members of anonymous struct/union members are flattened into the
    /// parent with their offsets added, as C lets you name them directly.
    /// A named member whose type is an untagged struct or union (`struct
    /// { .. } recv;`, which no type name reaches) also lists its own
    /// members by path, `recv.tag.sn`, right after it: the only way a DLL
    /// can ask for them (UCX's requests are built so).
    /// A bitfield is listed at the byte offset of the storage unit holding
    /// it (DWARF 2/3) or of the byte holding its first bit (DWARF 4+
    /// `DW_AT_data_bit_offset`); C's `offsetof` does not apply to them.
    /// Members without a constant offset are left out, and C++ base
    /// classes are not flattened (C DLLs compose `super` themselves).
    pub fields: Vec<(String, u64)>,
}

impl TypeInfo {
    /// The offset of the member `name` (top level, or flattened from an
    /// anonymous member).
    pub fn field_offset(&self, name: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, off)| *off)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypeKind {
    Struct,
    Class,
    Union,
    Enum,
    Base,
    Pointer,
    Array,
    Function,
    Void,
    Other,
}

/// What a lookup within one object's DWARF came to.
#[derive(Debug, Clone)]
pub(crate) enum Found {
    Type(TypeInfo),
    /// Only a declaration of this tag is known here: its definition may be
    /// in another object.
    Declared(TypeQuery),
}

/// Which index namespaces a query searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Any,
    /// `typedef NAME`: only a typedef of that name, what a debugger that
    /// evaluates C's `sizeof(NAME)` finds (test hosts mimic such debuggers).
    Typedef,
    Struct,
    Class,
    Union,
    Enum,
}

impl Scope {
    fn kinds(self) -> &'static [NameKind] {
        use NameKind::*;
        match self {
            // In C a plain name is the ordinary identifier (a typedef);
            // C++ and DLLs that ask for a tag by its bare name come next.
            Self::Any => &[Typedef, Struct, Class, Union, Enum, Base],
            Self::Typedef => &[Typedef],
            Self::Struct => &[Struct, Class],
            Self::Class => &[Class, Struct],
            Self::Union => &[Union],
            Self::Enum => &[Enum],
        }
    }

    fn of_tag(tag: dw::DwTag) -> Self {
        match tag {
            dw::DW_TAG_class_type => Self::Class,
            dw::DW_TAG_union_type => Self::Union,
            dw::DW_TAG_enumeration_type => Self::Enum,
            _ => Self::Struct,
        }
    }
}

/// A type name as asked for: `foo_t`, `struct foo`, `union u`, `ns::T`,
/// `typedef foo_t` (a typedef only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TypeQuery {
    pub(crate) scope: Scope,
    pub(crate) name: String,
}

impl TypeQuery {
    pub(crate) fn parse(text: &str) -> Self {
        let text = text.trim();
        let keywords = [
            ("typedef", Scope::Typedef),
            ("struct", Scope::Struct),
            ("class", Scope::Class),
            ("union", Scope::Union),
            ("enum", Scope::Enum),
        ];
        for (keyword, scope) in keywords {
            if let Some(rest) = text.strip_prefix(keyword) {
                if rest.starts_with(char::is_whitespace) {
                    return Self {
                        scope,
                        name: rest.trim_start().to_owned(),
                    };
                }
            }
        }
        Self {
            scope: Scope::Any,
            name: text.to_owned(),
        }
    }

    fn find_in(&self, index: &TypeIndex) -> Option<DieLoc> {
        self.scope
            .kinds()
            .iter()
            .find_map(|&kind| index.get(kind, &self.name))
    }
}

/// Typedef chains, anonymous-member nesting and array element types are
/// followed at most this deep: real C never comes close, a cycle would
/// otherwise never end.
const MAX_DEPTH: u32 = 64;

/// The facts of one DIE that resolution uses.
#[derive(Debug)]
struct Die {
    tag: dw::DwTag,
    name: Option<String>,
    type_ref: Option<DieLoc>,
    /// DW_AT_type is there but leads nowhere we can read (a missing dwz
    /// supplementary file, say): unlike no DW_AT_type, this is not `void`.
    dangling: bool,
    signature: Option<DieLoc>,
    byte_size: Option<u64>,
    declaration: bool,
    address_size: u8,
}

#[derive(Debug)]
struct Member {
    name: Option<String>,
    offset: u64,
    type_ref: Option<DieLoc>,
}

#[derive(Debug)]
struct UnreadableName;

/// What an anonymous member's type turned out to be.
#[derive(Debug)]
enum Aggregate {
    Definition(DieLoc),
    Other,
    Unreadable,
}

/// Whether every member could be read and every anonymous one flattened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fields {
    Complete,
    Incomplete,
}

/// Reads DIEs of one object's DWARF for the duration of one query, keeping
/// the units it parsed.
pub(crate) struct Resolver<'a> {
    dwarf: &'a gimli::Dwarf<Slice<'a>>,
    index: &'a TypeIndex,
    units: HashMap<UnitLoc, Unit<Slice<'a>>>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(dwarf: &'a gimli::Dwarf<Slice<'a>>, index: &'a TypeIndex) -> Self {
        Self {
            dwarf,
            index,
            units: HashMap::new(),
        }
    }

    /// Looks `query` up in this object's index and resolves it.
    pub(crate) fn lookup(&mut self, query: &TypeQuery) -> gimli::Result<Option<Found>> {
        match query.find_in(self.index) {
            Some(die) => self.describe(die, &query.name, true, 0),
            None => Ok(None),
        }
    }

    fn file(&self, file: FileSel) -> gimli::Result<&'a gimli::Dwarf<Slice<'a>>> {
        match file {
            FileSel::Main => Ok(self.dwarf),
            FileSel::Sup => self
                .dwarf
                .sup()
                .ok_or(gimli::Error::NoEntryAtGivenOffset(0)),
        }
    }

    fn unit(&mut self, loc: UnitLoc) -> gimli::Result<&Unit<Slice<'a>>> {
        if !self.units.contains_key(&loc) {
            let dwarf = self.file(loc.file)?;
            let unit = Unit::new(dwarf, unit_header(dwarf, loc)?)?;
            self.units.insert(loc, unit);
        }
        Ok(&self.units[&loc])
    }

    /// Where a reference attribute of a DIE in unit `from` points.
    fn target(
        index: &TypeIndex,
        from: UnitLoc,
        value: AttributeValue<Slice<'_>>,
    ) -> Option<DieLoc> {
        match value {
            AttributeValue::UnitRef(offset) => Some(DieLoc {
                unit: from,
                entry: offset.0,
            }),
            AttributeValue::DebugInfoRef(offset) => index.die_at(from.file, offset.0),
            AttributeValue::DebugInfoRefSup(offset) => index.die_at(FileSel::Sup, offset.0),
            AttributeValue::DebugTypesRef(signature) => index.signature(signature.0),
            _ => None,
        }
    }

    fn die(&mut self, loc: DieLoc) -> gimli::Result<Die> {
        let (dwarf, index) = (self.file(loc.unit.file)?, self.index);
        let unit = self.unit(loc.unit)?;
        let entry = unit.entry(entry_offset(loc))?;
        let mut die = Die {
            tag: entry.tag(),
            name: None,
            type_ref: None,
            dangling: false,
            signature: None,
            byte_size: None,
            declaration: false,
            address_size: unit.header.address_size(),
        };
        for attr in entry.attrs() {
            match attr.name() {
                dw::DW_AT_name => die.name = string(dwarf, unit, attr.value()),
                dw::DW_AT_type => {
                    die.type_ref = Self::target(index, loc.unit, attr.value());
                    die.dangling = die.type_ref.is_none();
                }
                dw::DW_AT_signature => die.signature = Self::target(index, loc.unit, attr.value()),
                dw::DW_AT_byte_size => die.byte_size = attr.udata_value(),
                dw::DW_AT_declaration => {
                    die.declaration = attr.value() == AttributeValue::Flag(true)
                }
                _ => {}
            }
        }
        Ok(die)
    }

    /// Describes the type at `start`: `fields` only when wanted (an array's
    /// element type needs just its size).
    fn describe(
        &mut self,
        start: DieLoc,
        asked: &str,
        fields: bool,
        depth: u32,
    ) -> gimli::Result<Option<Found>> {
        let mut loc = start;
        let mut typedef_name: Option<String> = None;
        for _ in depth..MAX_DEPTH {
            let die = self.die(loc)?;
            let kind = match die.tag {
                dw::DW_TAG_typedef
                | dw::DW_TAG_const_type
                | dw::DW_TAG_volatile_type
                | dw::DW_TAG_restrict_type
                | dw::DW_TAG_atomic_type => {
                    if die.tag == dw::DW_TAG_typedef && typedef_name.is_none() {
                        typedef_name = die.name.clone();
                    }
                    match die.type_ref {
                        Some(next) => {
                            loc = next;
                            continue;
                        }
                        None if die.dangling => return Ok(None),
                        // `typedef void v;` and `const void` have no DW_AT_type.
                        None => TypeKind::Void,
                    }
                }
                dw::DW_TAG_structure_type
                | dw::DW_TAG_class_type
                | dw::DW_TAG_union_type
                | dw::DW_TAG_enumeration_type => {
                    if let Some(definition) = die.signature {
                        loc = definition;
                        continue;
                    }
                    if die.declaration {
                        let Some(tag) = die.name else { return Ok(None) };
                        let query = TypeQuery {
                            scope: Scope::of_tag(die.tag),
                            name: tag,
                        };
                        match query.find_in(self.index) {
                            Some(definition) => {
                                loc = definition;
                                continue;
                            }
                            None => return Ok(Some(Found::Declared(query))),
                        }
                    }
                    match die.tag {
                        dw::DW_TAG_structure_type => TypeKind::Struct,
                        dw::DW_TAG_class_type => TypeKind::Class,
                        dw::DW_TAG_union_type => TypeKind::Union,
                        _ => TypeKind::Enum,
                    }
                }
                dw::DW_TAG_base_type => TypeKind::Base,
                dw::DW_TAG_pointer_type
                | dw::DW_TAG_reference_type
                | dw::DW_TAG_rvalue_reference_type
                | dw::DW_TAG_ptr_to_member_type => TypeKind::Pointer,
                dw::DW_TAG_array_type => TypeKind::Array,
                dw::DW_TAG_subroutine_type => TypeKind::Function,
                dw::DW_TAG_unspecified_type => TypeKind::Void,
                _ => TypeKind::Other,
            };
            let size = match kind {
                TypeKind::Pointer => die.byte_size.or(Some(u64::from(die.address_size))),
                TypeKind::Array => match die.byte_size {
                    Some(size) => Some(size),
                    None => self.array_size(loc, die.type_ref, depth)?,
                },
                TypeKind::Function | TypeKind::Void => None,
                _ => die.byte_size,
            };
            let mut info = TypeInfo {
                name: die
                    .name
                    .or(typedef_name)
                    .unwrap_or_else(|| asked.to_owned()),
                kind,
                size,
                fields: Vec::new(),
            };
            if fields
                && matches!(kind, TypeKind::Struct | TypeKind::Class | TypeKind::Union)
                && self.collect_fields(loc, 0, &mut info.fields, depth)? == Fields::Incomplete
            {
                // Half a layout would send a DLL to wrong offsets.
                return Ok(None);
            }
            return Ok(Some(Found::Type(info)));
        }
        Ok(None)
    }

    /// The data members of the aggregate at `loc`; `Err(UnreadableName)`
    /// if a name is in strings we cannot read (a missing dwz file).
    fn members(&mut self, loc: DieLoc) -> gimli::Result<Result<Vec<Member>, UnreadableName>> {
        let (dwarf, index) = (self.file(loc.unit.file)?, self.index);
        let unit = self.unit(loc.unit)?;
        let mut tree = unit.entries_tree(Some(entry_offset(loc)))?;
        let mut children = tree.root()?.children();
        let mut members = Vec::new();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            // C++ static data members are DW_TAG_member declarations
            // (DWARF 4) or DW_TAG_variable (DWARF 5): not in the layout.
            if entry.tag() != dw::DW_TAG_member || entry.has_attr(dw::DW_AT_declaration) {
                continue;
            }
            let Some(offset) = member_offset(entry, unit.encoding()) else {
                continue;
            };
            let name = match entry.attr_value(dw::DW_AT_name) {
                Some(value) => match string(dwarf, unit, value) {
                    Some(name) => Some(name),
                    None => return Ok(Err(UnreadableName)),
                },
                None => None,
            };
            members.push(Member {
                name,
                offset,
                type_ref: entry
                    .attr_value(dw::DW_AT_type)
                    .and_then(|v| Self::target(index, loc.unit, v)),
            });
        }
        Ok(Ok(members))
    }

    fn collect_fields(
        &mut self,
        loc: DieLoc,
        base: u64,
        out: &mut Vec<(String, u64)>,
        depth: u32,
    ) -> gimli::Result<Fields> {
        if depth >= MAX_DEPTH {
            return Ok(Fields::Incomplete);
        }
        let Ok(members) = self.members(loc)? else {
            return Ok(Fields::Incomplete);
        };
        for member in members {
            let offset = base.saturating_add(member.offset);
            let inner = match (member.name, member.type_ref) {
                (Some(name), type_ref) => {
                    out.push((name.clone(), offset));
                    if let Some(untagged) = type_ref {
                        self.collect_paths(untagged, &name, offset, out, depth)?;
                    }
                    continue;
                }
                (None, None) => return Ok(Fields::Incomplete),
                (None, Some(type_ref)) => self.aggregate(type_ref, depth + 1)?,
            };
            let complete = match inner {
                Aggregate::Definition(inner) => {
                    self.collect_fields(inner, offset, out, depth + 1)?
                }
                // An unnamed member of another type (an unnamed padding
                // bitfield) names nothing.
                Aggregate::Other => Fields::Complete,
                Aggregate::Unreadable => Fields::Incomplete,
            };
            if complete == Fields::Incomplete {
                return Ok(Fields::Incomplete);
            }
        }
        Ok(Fields::Complete)
    }

    /// The members of an untagged struct or union at `loc` (a named
    /// member's type), each as `name.member` at `base` plus its offset.
    /// Nothing when the type is named or not an aggregate, or when its
    /// members cannot all be read (a partial list could be taken for the
    /// whole).
    fn collect_paths(
        &mut self,
        loc: DieLoc,
        name: &str,
        base: u64,
        out: &mut Vec<(String, u64)>,
        depth: u32,
    ) -> gimli::Result<()> {
        if depth + 1 >= MAX_DEPTH {
            return Ok(());
        }
        let die = self.die(loc)?;
        let aggregate = matches!(die.tag, dw::DW_TAG_structure_type | dw::DW_TAG_union_type);
        if !aggregate || die.name.is_some() || die.declaration || die.signature.is_some() {
            return Ok(());
        }
        let mut inner = Vec::new();
        if self.collect_fields(loc, base, &mut inner, depth + 1)? == Fields::Complete {
            out.extend(
                inner
                    .into_iter()
                    .map(|(member, offset)| (format!("{name}.{member}"), offset)),
            );
        }
        Ok(())
    }

    /// The struct/union definition that `loc` names through typedefs and
    /// qualifiers, if it is one.
    fn aggregate(&mut self, mut loc: DieLoc, depth: u32) -> gimli::Result<Aggregate> {
        for _ in depth..MAX_DEPTH {
            let die = self.die(loc)?;
            match die.tag {
                dw::DW_TAG_typedef
                | dw::DW_TAG_const_type
                | dw::DW_TAG_volatile_type
                | dw::DW_TAG_atomic_type => match die.type_ref {
                    Some(next) => loc = next,
                    None if die.dangling => return Ok(Aggregate::Unreadable),
                    None => return Ok(Aggregate::Other),
                },
                dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
                    return Ok(match die.signature {
                        Some(definition) => Aggregate::Definition(definition),
                        // A member's type is complete by C's rules: a
                        // declaration here means DWARF we cannot follow.
                        None if die.declaration => Aggregate::Unreadable,
                        None => Aggregate::Definition(loc),
                    });
                }
                _ => return Ok(Aggregate::Other),
            }
        }
        Ok(Aggregate::Unreadable)
    }

    /// Element size times the bounds of each dimension; None if any bound
    /// is unknown (a flexible array member, say).
    fn array_size(
        &mut self,
        loc: DieLoc,
        element: Option<DieLoc>,
        depth: u32,
    ) -> gimli::Result<Option<u64>> {
        let Some(element) = element else {
            return Ok(None);
        };
        let element_size = match self.describe(element, "", false, depth + 1)? {
            Some(Found::Type(info)) => info.size,
            _ => None,
        };
        let Some(mut size) = element_size else {
            return Ok(None);
        };
        let unit = self.unit(loc.unit)?;
        let mut tree = unit.entries_tree(Some(entry_offset(loc)))?;
        let mut children = tree.root()?.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            if entry.tag() != dw::DW_TAG_subrange_type {
                continue;
            }
            let count = match entry
                .attr_value(dw::DW_AT_count)
                .and_then(|v| v.udata_value())
            {
                Some(count) => Some(count),
                None => entry
                    .attr_value(dw::DW_AT_upper_bound)
                    .and_then(|v| v.udata_value())
                    .map(|upper| {
                        let lower = entry
                            .attr_value(dw::DW_AT_lower_bound)
                            .and_then(|v| v.udata_value())
                            .unwrap_or(0);
                        (upper + 1).saturating_sub(lower)
                    }),
            };
            let Some(count) = count else { return Ok(None) };
            size = size.saturating_mul(count);
        }
        Ok(Some(size))
    }
}

fn string(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &Unit<Slice<'_>>,
    value: AttributeValue<Slice<'_>>,
) -> Option<String> {
    let s = dwarf.attr_string(unit, value).ok()?;
    Some(s.to_string_lossy().into_owned())
}

/// A member's byte offset: a constant `DW_AT_data_member_location`, or the
/// simple expressions producers use for it (`DW_OP_plus_uconst N`,
/// `DW_OP_constu N; DW_OP_plus`). Union members carry no location: 0.
pub(super) fn member_offset(
    entry: &gimli::DebuggingInformationEntry<Slice<'_>>,
    encoding: gimli::Encoding,
) -> Option<u64> {
    // Raw: gimli reads data4/data8 of DWARF 2/3 as location-list offsets,
    // but producers put constants there.
    if let Some(value) = entry.attr_value_raw(dw::DW_AT_data_member_location) {
        if let Some(constant) = value.udata_value() {
            return Some(constant);
        }
        return expression_offset(value.exprloc_value()?, encoding);
    }
    if let Some(bits) = entry
        .attr_value(dw::DW_AT_data_bit_offset)
        .and_then(|v| v.udata_value())
    {
        return Some(bits / 8);
    }
    Some(0)
}

fn expression_offset(expr: gimli::Expression<Slice<'_>>, encoding: gimli::Encoding) -> Option<u64> {
    let mut ops = expr.operations(encoding);
    let mut offset = 0u64;
    let mut pending = None;
    while let Some(op) = ops.next().ok()? {
        match op {
            Operation::PlusConstant { value } => offset = offset.checked_add(value)?,
            Operation::UnsignedConstant { value } => pending = Some(value),
            Operation::Plus => offset = offset.checked_add(pending.take()?)?,
            _ => return None,
        }
    }
    Some(offset)
}
