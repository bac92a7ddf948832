//! The parameters of the function at a code address, as DWARF describes
//! them there: where a parameter's value lives at that address (its
//! location expression, from a location list where the compiler moved it),
//! the function's frame base, and, for a pointer to a struct, the members
//! of that struct asked for. Reading the values is the caller's (it has
//! the frame's registers and the process's memory).

use gimli::{constants as dw, AttributeValue, DebugInfoOffset, Unit, UnitOffset};

use super::dwarf_data::{DwarfData, Slice};
use super::types::member_offset;

/// Typedef and qualifier chains longer than this are taken as corrupt.
const MAX_TYPE_HOPS: usize = 16;
/// DIEs looked at below one compilation unit at most.
const MAX_ENTRIES: usize = 1 << 20;

/// A parameter of the function at an address.
#[derive(Debug)]
pub struct Parameter<'a> {
    /// Its name in the source.
    pub name: String,
    /// The size of its value in bytes (after typedefs), where DWARF says.
    pub byte_size: Option<u64>,
    /// Where its value is at that address.
    pub location: gimli::Expression<Slice<'a>>,
    /// The function's `DW_AT_frame_base`, for `DW_OP_fbreg`.
    pub frame_base: Option<gimli::Expression<Slice<'a>>>,
    pub encoding: gimli::Encoding,
    /// The struct the parameter points to, when it is a pointer to one
    /// whose definition this unit has.
    pub pointee: Option<Pointee>,
}

/// A struct pointed to, and the members of it that were asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointee {
    /// Its tag or typedef name (`ompi_communicator_t`, `MPIR_Comm`).
    pub name: String,
    /// (name, byte offset, byte size) of each member asked for that it has,
    /// in the order asked.
    pub members: Vec<(String, u64, u64)>,
}

/// The first parameter named one of `names` (in that order of preference)
/// of the function whose code holds the link-time address `svma`, with its
/// location there. None when DWARF has no such function, parameter or
/// location at `svma` (optimised out).
pub(crate) fn parameter_at<'a>(
    data: &'a DwarfData,
    svma: u64,
    names: &[&str],
    members: &[&str],
) -> Option<Parameter<'a>> {
    parameters_at(data, svma, names, members).into_iter().next()
}

/// Every parameter named one of `names` of the function whose code holds
/// `svma` that has a location there, in the order of `names`.
pub(crate) fn parameters_at<'a>(
    data: &'a DwarfData,
    svma: u64,
    names: &[&str],
    members: &[&str],
) -> Vec<Parameter<'a>> {
    parameters_in(data, svma, names, members).unwrap_or_default()
}

fn parameters_in<'a>(
    data: &'a DwarfData,
    svma: u64,
    names: &[&str],
    members: &[&str],
) -> Option<Vec<Parameter<'a>>> {
    let dwarf = data.dwarf();
    let offset = data.unit_for(svma)?;
    let header = dwarf.debug_info.header_from_offset(offset).ok()?;
    let unit = dwarf.unit(header).ok()?;
    let function = function_at(&dwarf, &unit, svma)?;
    let mut found: Vec<(usize, Parameter<'a>)> = Vec::new();
    let mut tree = unit.entries_tree(Some(function)).ok()?;
    let root = tree.root().ok()?;
    let frame_base = match root.entry().attr_value(dw::DW_AT_frame_base) {
        Some(AttributeValue::Exprloc(e)) => Some(e),
        _ => None,
    };
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let entry = child.entry();
        if entry.tag() != dw::DW_TAG_formal_parameter {
            continue;
        }
        let Some(name) = attr_through_origin(&unit, entry, dw::DW_AT_name)
            .and_then(|v| dwarf.attr_string(&unit, v).ok())
            .map(|s| s.to_string_lossy().into_owned())
        else {
            continue;
        };
        let Some(rank) = names.iter().position(|n| *n == name) else {
            continue;
        };
        let Some(location) = entry
            .attr_value(dw::DW_AT_location)
            .and_then(|v| location_at(&dwarf, &unit, v, svma))
        else {
            continue;
        };
        let ty = attr_through_origin(&unit, entry, dw::DW_AT_type);
        let pointee = ty.and_then(|t| pointee(&dwarf, &unit, t, members));
        let byte_size = ty.and_then(|t| type_size(&unit, t));
        found.push((
            rank,
            Parameter {
                name,
                byte_size,
                location,
                frame_base,
                encoding: unit.encoding(),
                pointee,
            },
        ));
    }
    found.sort_by_key(|(rank, _)| *rank);
    Some(found.into_iter().map(|(_, p)| p).collect())
}

/// The size of a type's values: its `DW_AT_byte_size` after typedefs and
/// qualifiers (a pointer's is the address size).
fn type_size(unit: &Unit<Slice<'_>>, ty: AttributeValue<Slice<'_>>) -> Option<u64> {
    let AttributeValue::UnitRef(ty) = ty else {
        return None;
    };
    let entry = unit.entry(strip(unit, ty)?).ok()?;
    match entry
        .attr_value(dw::DW_AT_byte_size)
        .and_then(|v| v.udata_value())
    {
        Some(size) => Some(size),
        None if entry.tag() == dw::DW_TAG_pointer_type => {
            Some(u64::from(unit.encoding().address_size))
        }
        None => None,
    }
}

impl DwarfData {
    /// The compilation unit whose code holds `svma`, from `.debug_aranges`
    /// (indexed once), else by each unit's ranges.
    pub(crate) fn unit_for(&self, svma: u64) -> Option<DebugInfoOffset> {
        let ranges = self.code_units.get_or_init(|| code_units(&self.dwarf()));
        let at = ranges.partition_point(|(begin, _, _)| *begin <= svma);
        ranges[..at]
            .iter()
            .rev()
            .take(64)
            .find(|(begin, end, _)| (*begin..*end).contains(&svma))
            .map(|(_, _, offset)| DebugInfoOffset(*offset))
    }
}

/// Every unit's code ranges, sorted by start: from `.debug_aranges`, or
/// from the units themselves when it is missing or empty.
pub(super) fn code_units(dwarf: &gimli::Dwarf<Slice<'_>>) -> Vec<(u64, u64, usize)> {
    let mut out = Vec::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Ok(Some(header)) = headers.next() {
        let offset = header.debug_info_offset().0;
        let mut entries = header.entries();
        while let Ok(Some(entry)) = entries.next() {
            let r = entry.range();
            if r.end > r.begin {
                out.push((r.begin, r.end, offset));
            }
        }
    }
    if out.is_empty() {
        let mut units = dwarf.units();
        while let Ok(Some(header)) = units.next() {
            let Some(offset) = header.debug_info_offset() else {
                continue;
            };
            let Ok(unit) = dwarf.unit(header) else {
                continue;
            };
            let Ok(mut ranges) = dwarf.unit_ranges(&unit) else {
                continue;
            };
            while let Ok(Some(r)) = ranges.next() {
                if r.end > r.begin {
                    out.push((r.begin, r.end, offset.0));
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// The out-of-line function (`DW_TAG_subprogram`) of `unit` whose code
/// holds `svma`: among the unit's top-level entries (and namespaces'),
/// without descending into functions' bodies.
fn function_at(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &Unit<Slice<'_>>,
    svma: u64,
) -> Option<UnitOffset> {
    let mut tree = unit.entries_tree(None).ok()?;
    let root = tree.root().ok()?;
    let mut seen = 0usize;
    scope_function_at(dwarf, unit, root, svma, &mut seen, 0)
}

fn scope_function_at<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    unit: &Unit<Slice<'a>>,
    node: gimli::EntriesTreeNode<'_, '_, Slice<'a>>,
    svma: u64,
    seen: &mut usize,
    depth: usize,
) -> Option<UnitOffset> {
    let mut children = node.children();
    while let Ok(Some(child)) = children.next() {
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return None;
        }
        let entry = child.entry();
        match entry.tag() {
            dw::DW_TAG_subprogram => {
                let Ok(mut ranges) = dwarf.die_ranges(unit, entry) else {
                    continue;
                };
                while let Ok(Some(r)) = ranges.next() {
                    if (r.begin..r.end).contains(&svma) {
                        return Some(entry.offset());
                    }
                }
            }
            dw::DW_TAG_namespace if depth < MAX_TYPE_HOPS => {
                if let Some(found) = scope_function_at(dwarf, unit, child, svma, seen, depth + 1) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

/// An attribute of `entry`, or of the abstract DIE it is a concrete
/// instance of (`DW_AT_abstract_origin` in the same unit).
fn attr_through_origin<'a>(
    unit: &Unit<Slice<'a>>,
    entry: &gimli::DebuggingInformationEntry<Slice<'a>>,
    name: gimli::DwAt,
) -> Option<AttributeValue<Slice<'a>>> {
    if let Some(v) = entry.attr_value(name) {
        return Some(v);
    }
    match entry.attr_value(dw::DW_AT_abstract_origin) {
        Some(AttributeValue::UnitRef(origin)) => unit.entry(origin).ok()?.attr_value(name),
        _ => None,
    }
}

/// The location expression that holds at `svma`: the attribute's own, or
/// the location-list entry whose range holds `svma`.
fn location_at<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    unit: &Unit<Slice<'a>>,
    value: AttributeValue<Slice<'a>>,
    svma: u64,
) -> Option<gimli::Expression<Slice<'a>>> {
    if let AttributeValue::Exprloc(e) = value {
        return Some(e);
    }
    let mut list = dwarf.attr_locations(unit, value).ok()??;
    let mut seen = 0;
    while let Ok(Some(entry)) = list.next() {
        seen += 1;
        if seen > 4096 {
            return None;
        }
        if (entry.range.begin..entry.range.end).contains(&svma) {
            return Some(entry.data);
        }
    }
    None
}

/// The DIE behind typedefs and qualifiers.
fn strip<'a>(unit: &Unit<Slice<'a>>, mut offset: UnitOffset) -> Option<UnitOffset> {
    for _ in 0..MAX_TYPE_HOPS {
        let entry = unit.entry(offset).ok()?;
        match entry.tag() {
            dw::DW_TAG_typedef
            | dw::DW_TAG_const_type
            | dw::DW_TAG_volatile_type
            | dw::DW_TAG_restrict_type
            | dw::DW_TAG_atomic_type => match entry.attr_value(dw::DW_AT_type)? {
                AttributeValue::UnitRef(next) => offset = next,
                _ => return None,
            },
            _ => return Some(offset),
        }
    }
    None
}

/// For a pointer-to-struct type: the struct's name and the `members`
/// asked for, each with its offset and size.
fn pointee(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &Unit<Slice<'_>>,
    ty: AttributeValue<Slice<'_>>,
    members: &[&str],
) -> Option<Pointee> {
    let AttributeValue::UnitRef(ty) = ty else {
        return None;
    };
    let pointer = unit.entry(strip(unit, ty)?).ok()?;
    if pointer.tag() != dw::DW_TAG_pointer_type {
        return None;
    }
    let AttributeValue::UnitRef(target) = pointer.attr_value(dw::DW_AT_type)? else {
        return None;
    };
    let target = strip(unit, target)?;
    let entry = unit.entry(target).ok()?;
    if entry.tag() != dw::DW_TAG_structure_type || entry.has_attr(dw::DW_AT_declaration) {
        return None;
    }
    let name = entry
        .attr_value(dw::DW_AT_name)
        .and_then(|v| dwarf.attr_string(unit, v).ok())
        .map(|s| s.to_string_lossy().into_owned())?;
    let mut tree = unit.entries_tree(Some(target)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut found = Vec::new();
    while let Ok(Some(child)) = children.next() {
        let member = child.entry();
        if member.tag() != dw::DW_TAG_member {
            continue;
        }
        let Some(member_name) = member
            .attr_value(dw::DW_AT_name)
            .and_then(|v| dwarf.attr_string(unit, v).ok())
            .map(|s| s.to_string_lossy().into_owned())
        else {
            continue;
        };
        if !members.contains(&member_name.as_str()) {
            continue;
        }
        let Some(offset) = member_offset(member, unit.encoding()) else {
            continue;
        };
        let size = match member.attr_value(dw::DW_AT_type) {
            Some(AttributeValue::UnitRef(t)) => strip(unit, t)
                .and_then(|t| unit.entry(t).ok())
                .and_then(|t| t.attr_value(dw::DW_AT_byte_size))
                .and_then(|v| v.udata_value()),
            _ => None,
        };
        if let Some(size) = size {
            found.push((member_name, offset, size));
        }
    }
    found.sort_by_key(|(n, _, _)| members.iter().position(|m| m == n));
    Some(Pointee {
        name,
        members: found,
    })
}
