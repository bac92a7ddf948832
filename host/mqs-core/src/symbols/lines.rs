//! Source lines of code addresses, from an object's DWARF line tables and
//! inlining records (through `addr2line`).

use std::collections::HashMap;

use super::dwarf_data::Slice;
use super::object::ObjectSymbols;

/// One source-level frame at an address: a function inlined there, or the
/// function itself, with the file and line where the address lies in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFrame {
    /// The DWARF name (None for the outermost frame when DWARF has only
    /// line tables there).
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Line tables of the objects looked at, each prepared once: lookups over
/// many stacks of one job share them. Borrows the objects.
#[derive(Default)]
pub struct LineTables<'a> {
    contexts: HashMap<*const ObjectSymbols, Option<addr2line::Context<Slice<'a>>>>,
}

impl std::fmt::Debug for LineTables<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTables")
            .field("objects", &self.contexts.len())
            .finish()
    }
}

impl<'a> LineTables<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The source frames at the link-time address `svma` of `object`,
    /// innermost (inlined) first, the function that holds them last. Empty
    /// when the object has no DWARF for it.
    pub fn frames(&mut self, object: &'a ObjectSymbols, svma: u64) -> Vec<SourceFrame> {
        let context = self
            .contexts
            .entry(object as *const ObjectSymbols)
            .or_insert_with(|| {
                let data = object.dwarf_data()?;
                addr2line::Context::from_dwarf(data.dwarf()).ok()
            });
        let Some(context) = context else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // Split DWARF (.dwo) is not looked for: what the skeleton units
        // say is what we give.
        let Ok(mut iter) = context.find_frames(svma).skip_all_loads() else {
            return out;
        };
        // Bounded: a corrupt inlining tree cannot make this loop for ever.
        while let (Ok(Some(frame)), true) = (iter.next(), out.len() < 64) {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok().map(|n| n.into_owned()));
            let (file, line) = match &frame.location {
                Some(loc) => (loc.file.map(str::to_owned), loc.line),
                None => (None, None),
            };
            out.push(SourceFrame {
                function,
                file,
                line,
            });
        }
        out
    }
}
