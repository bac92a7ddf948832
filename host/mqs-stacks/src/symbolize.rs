//! Naming the addresses of unwound stacks: the function from the symbol
//! tables (`.symtab`, `.dynsym`), inlined functions and file:line from
//! DWARF where the object has it.

use std::sync::Arc;

use framehop::FrameAddress;

use super::arguments::FrameArguments;
use super::unwind::RawStacks;
use mqs_core::model::{Frame, ThreadList, ThreadStack};
use mqs_core::symbols::{LineTables, ObjectSymbols, SymbolIndex};

/// The named stacks of one process. `lines` is shared by the processes of
/// a job (they load the same objects), so each object's line tables are
/// read once.
pub fn symbolize<'a>(
    raw: &RawStacks,
    index: &'a SymbolIndex,
    objects: &'a [Arc<ObjectSymbols>],
    lines: &mut LineTables<'a>,
) -> ThreadList {
    let list = raw
        .threads
        .iter()
        .map(|thread| ThreadStack {
            tid: thread.tid,
            name: thread.name.clone(),
            frames: thread
                .frames
                .iter()
                .enumerate()
                .flat_map(|(i, &frame)| {
                    let arguments = thread.arguments.get(i).cloned().unwrap_or_default();
                    frames_at(frame, arguments, index, objects, lines)
                })
                .collect(),
            truncated: thread.truncated.clone(),
        })
        .collect();
    ThreadList { list }
}

/// The frames at one address: inlined functions innermost first, then the
/// function that holds them.
fn frames_at<'a>(
    frame: FrameAddress,
    arguments: FrameArguments,
    index: &SymbolIndex,
    objects: &'a [Arc<ObjectSymbols>],
    lines: &mut LineTables<'a>,
) -> Vec<Frame> {
    let address = frame.address();
    // A return address is past the call: look up the call itself.
    let lookup = frame.address_for_lookup();
    let Some((object, bias)) = index.object_at(lookup) else {
        return vec![Frame {
            address,
            function: None,
            offset: None,
            inlined: false,
            object: None,
            file: None,
            line: None,
            comm: arguments.comm,
            call: arguments.call,
        }];
    };
    let svma = lookup.wrapping_sub(bias);
    let symbol = object.function_at(svma);
    let path = Some(object.path().display().to_string());
    // Lines come from the job's list of objects, which outlives the line
    // tables; an object missing from it is named without lines.
    let listed = objects.iter().find(|o| Arc::ptr_eq(o, &object));
    let mut source = match listed {
        Some(listed) => lines.frames(listed, svma),
        None => Vec::new(),
    };
    let outer = source.pop().unwrap_or_default();
    let mut out: Vec<Frame> = source
        .into_iter()
        .map(|s| Frame {
            address,
            function: s.function,
            offset: None,
            inlined: true,
            object: path.clone(),
            file: s.file,
            line: s.line,
            comm: None,
            call: None,
        })
        .collect();
    out.push(Frame {
        address,
        function: symbol
            .map(|(name, _)| mqs_core::symbols::demangle(name).into_owned())
            .or(outer.function),
        offset: symbol.map(|(_, offset)| offset + (address - lookup)),
        inlined: false,
        object: path,
        file: outer.file,
        line: outer.line,
        comm: arguments.comm,
        call: arguments.call,
    });
    out
}

#[cfg(test)]
mod tests;
