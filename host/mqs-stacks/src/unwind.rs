//! Walking a stopped thread's stack with `framehop`: the `.eh_frame`
//! (with its `.eh_frame_hdr` index) or `.debug_frame` CFI of each mapped
//! object, frame pointers where an object has none.

use std::ops::Range;
use std::time::Instant;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Module, ModuleSectionInfo, Unwinder};

use super::arguments::{arguments, Cfi, FrameArguments};
use mqs_core::interface::Target;
use mqs_core::symbols::{SectionBytes, SymbolIndex, UnwindSections};

/// Frames per thread at most: a corrupt stack cannot make a walk long.
const MAX_FRAMES: usize = 256;

/// One thread's stack as addresses: the instruction pointer, then return
/// addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawStack {
    pub tid: i32,
    pub name: Option<String>,
    pub frames: Vec<FrameAddress>,
    /// Per frame: the communicator its `comm` argument names, where known.
    pub arguments: Vec<FrameArguments>,
    pub truncated: Option<String>,
}

/// Every thread of a process, and how long the walk took.
#[derive(Debug, Clone)]
pub struct RawStacks {
    pub threads: Vec<RawStack>,
    pub elapsed_ms: f64,
}

/// An object's unwind sections for framehop, which takes each section's
/// bytes once but asks for its address range after that too.
struct Sections {
    eh_frame: Option<Range<u64>>,
    eh_frame_hdr: Option<Range<u64>>,
    data: UnwindSections,
}

impl Sections {
    fn new(data: UnwindSections) -> Self {
        Self {
            eh_frame: data.eh_frame.as_ref().map(|s| s.0.clone()),
            eh_frame_hdr: data.eh_frame_hdr.as_ref().map(|s| s.0.clone()),
            data,
        }
    }
}

impl ModuleSectionInfo<SectionBytes> for Sections {
    fn base_svma(&self) -> u64 {
        // ELF CFI addresses are link-time addresses from 0.
        0
    }

    fn section_svma_range(&mut self, name: &[u8]) -> Option<Range<u64>> {
        match name {
            b".eh_frame" => self.eh_frame.clone(),
            b".eh_frame_hdr" => self.eh_frame_hdr.clone(),
            b".text" => self.data.text.clone(),
            b".got" => self.data.got.clone(),
            _ => None,
        }
    }

    fn section_data(&mut self, name: &[u8]) -> Option<SectionBytes> {
        match name {
            b".eh_frame" => self.data.eh_frame.take().map(|s| s.1),
            b".eh_frame_hdr" => self.data.eh_frame_hdr.take().map(|s| s.1),
            b".debug_frame" => self.data.debug_frame.take(),
            _ => None,
        }
    }
}

/// An unwinder that knows every object of the process where it is loaded.
fn unwinder_for(index: &SymbolIndex) -> UnwinderX86_64<SectionBytes> {
    let mut unwinder = UnwinderX86_64::new();
    for (object, bias) in index.objects() {
        let code = object.code_ranges();
        let (Some(start), Some(end)) = (
            code.iter().map(|r| r.start).min(),
            code.iter().map(|r| r.end).max(),
        ) else {
            continue;
        };
        let avma = start.wrapping_add(bias)..end.wrapping_add(bias);
        unwinder.add_module(Module::new(
            object.path().display().to_string(),
            avma,
            bias,
            Sections::new(object.unwind_sections()),
        ));
    }
    unwinder
}

/// Unwinds every thread of the stopped process behind `target`. Threads
/// without registers (a process read without stopping it) get an empty
/// stack that says why.
pub fn unwind(target: &dyn Target, index: &SymbolIndex) -> mqs_core::Result<RawStacks> {
    let started = Instant::now();
    let threads = target.threads()?;
    let unwinder = unwinder_for(index);
    let mut cache = CacheX86_64::<_>::new();
    let mut cfi = Cfi::default();
    let mut out = Vec::new();
    for thread in threads {
        let Some(regs) = thread.registers else {
            out.push(RawStack {
                tid: thread.tid,
                name: thread.name,
                frames: Vec::new(),
                arguments: Vec::new(),
                truncated: Some("no registers: the thread was not stopped".into()),
            });
            continue;
        };
        let mut read_stack = |addr: u64| {
            let mut word = [0u8; 8];
            target
                .read(addr, &mut word)
                .map(|()| u64::from_le_bytes(word))
                .map_err(|_| ())
        };
        let mut iter = unwinder.iter_frames(
            regs.ip(),
            UnwindRegsX86_64::new(regs.ip(), regs.sp(), regs.bp()),
            &mut cache,
            &mut read_stack,
        );
        let mut frames = Vec::new();
        let truncated = loop {
            if frames.len() >= MAX_FRAMES {
                break Some(format!("cut at {MAX_FRAMES} frames"));
            }
            match iter.next() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        // Arguments are read now, while the memory they point to is the
        // stopped process's.
        let arguments = arguments(target, index, &mut cfi, &regs, &frames);
        out.push(RawStack {
            tid: thread.tid,
            name: thread.name,
            frames,
            arguments,
            truncated,
        });
    }
    Ok(RawStacks {
        threads: out,
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

#[cfg(test)]
mod tests;
