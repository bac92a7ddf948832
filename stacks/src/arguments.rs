//! The communicator an MPI frame works on, from its `comm` argument, read
//! while the process is stopped: each frame's registers are recovered
//! through the CFI of the frames inside it (gimli's parser, the rows
//! applied here: framehop gives addresses only), the argument's DWARF
//! location is evaluated at the frame's address (gimli's evaluator), and
//! the communicator object's id is read through its DWARF type.
//!
//! An optimising compiler keeps `comm` in a callee-saved register across
//! the calls below it (`rbx` in Open MPI's `PMPI_Barrier` at -O2), so the
//! callee-saved registers must be followed through every inner frame's
//! saves; caller-saved ones are unknown above the innermost frame.

use std::collections::HashMap;
use std::sync::Arc;

use framehop::FrameAddress;
use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EhFrameHdr, EvaluationResult, LittleEndian,
    Location, RegisterRule, UnwindContext, UnwindSection, Value,
};

use mqs_core::interface::{Registers, Target};
use mqs_core::model::FrameComm;
use mqs_core::symbols::{ObjectSymbols, SymbolIndex, UnwindSections};

/// The names MPI functions give their communicator argument: the handle
/// (`comm`, a pointer in Open MPI) or the object behind it (`comm_ptr`,
/// MPICH's internal functions).
const COMM_ARGUMENTS: [&str; 2] = ["comm", "comm_ptr"];

/// The communicator objects of the MPIs, and the member that holds the id
/// their message-queue DLLs give as a communicator's `unique_id`, in order
/// of preference (Open MPI 5's DLL uses the local `c_index`, 4.1's
/// `c_contextid`; MPICH's the receive context id).
const COMM_TYPES: [(&str, &[&str]); 2] = [
    ("ompi_communicator_t", &["c_index", "c_contextid"]),
    ("MPIR_Comm", &["recvcontext_id"]),
];

/// x86-64's DWARF register numbers 0-16 (System V psABI), by their names
/// in `user_regs_struct`; 16 is the return address.
const DWARF_REGISTERS: [&str; 17] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];
const RSP: usize = 7;
const RETURN_ADDRESS: usize = 16;
/// rbx, rbp, r12-r15: kept across calls, so unchanged unless CFI says
/// where a callee saved them.
const CALLEE_SAVED: [usize; 6] = [3, 6, 12, 13, 14, 15];

/// Steps of one expression evaluation at most.
const MAX_STEPS: usize = 64;

type Regs = [Option<u64>; 17];

/// A frame's registers as far as they are known, and its canonical frame
/// address.
#[derive(Debug, Clone, Default)]
struct FrameState {
    regs: Regs,
    cfa: Option<u64>,
}

/// How to find a caller's register from the frame's row, as far as we
/// follow it.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Same,
    Undefined,
    AtCfa(i64),
    ValCfa(i64),
    Register(usize),
    Unknown,
}

/// One CFI row, owned.
struct Row {
    cfa: Option<(usize, i64)>,
    rules: Vec<(usize, Rule)>,
}

/// The unwind sections of the objects met so far.
#[derive(Default)]
pub(super) struct Cfi {
    objects: HashMap<*const ObjectSymbols, (Arc<ObjectSymbols>, UnwindSections)>,
    ctx: UnwindContext<usize>,
}

impl Cfi {
    fn row(&mut self, object: &Arc<ObjectSymbols>, svma: u64) -> Option<Row> {
        let (_, sections) = self
            .objects
            .entry(Arc::as_ptr(object))
            .or_insert_with(|| (object.clone(), object.unwind_sections()));
        let mut bases = BaseAddresses::default();
        if let Some(text) = &sections.text {
            bases = bases.set_text(text.start);
        }
        if let Some(got) = &sections.got {
            bases = bases.set_got(got.start);
        }
        let row = if let Some((range, bytes)) = &sections.eh_frame {
            bases = bases.set_eh_frame(range.start);
            let eh = EhFrame::new(bytes, LittleEndian);
            let indexed = sections.eh_frame_hdr.as_ref().and_then(|(hdr_range, hdr)| {
                let bases = bases.clone().set_eh_frame_hdr(hdr_range.start);
                let parsed = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8).ok()?;
                let table = parsed.table()?;
                table
                    .unwind_info_for_address(
                        &eh,
                        &bases,
                        &mut self.ctx,
                        svma,
                        EhFrame::cie_from_offset,
                    )
                    .ok()
                    .map(own_row)
            });
            match indexed {
                Some(row) => Some(row),
                None => eh
                    .unwind_info_for_address(&bases, &mut self.ctx, svma, EhFrame::cie_from_offset)
                    .ok()
                    .map(own_row),
            }
        } else if let Some(bytes) = &sections.debug_frame {
            let mut df = DebugFrame::new(bytes, LittleEndian);
            df.set_address_size(8);
            df.unwind_info_for_address(&bases, &mut self.ctx, svma, DebugFrame::cie_from_offset)
                .ok()
                .map(own_row)
        } else {
            None
        };
        row
    }
}

fn own_row(row: &gimli::UnwindTableRow<usize>) -> Row {
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => Some((register.0 as usize, *offset)),
        CfaRule::Expression(_) => None,
    };
    let rules = row
        .registers()
        .map(|(reg, rule)| {
            let rule = match rule {
                RegisterRule::Undefined => Rule::Undefined,
                RegisterRule::SameValue => Rule::Same,
                RegisterRule::Offset(n) => Rule::AtCfa(*n),
                RegisterRule::ValOffset(n) => Rule::ValCfa(*n),
                RegisterRule::Register(r) => Rule::Register(r.0 as usize),
                _ => Rule::Unknown,
            };
            (reg.0 as usize, rule)
        })
        .collect();
    Row { cfa, rules }
}

fn read_word(target: &dyn Target, addr: u64, size: usize) -> Option<u64> {
    if size == 0 || size > 8 {
        return None;
    }
    let mut bytes = [0u8; 8];
    target.read(addr, &mut bytes[..size]).ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// The registers of each frame of a stack: the thread's own for the
/// innermost, then each caller's from the row of the frame inside it.
/// Stops (the rest unknown) where CFI is missing or disagrees with the
/// frames the unwinder found.
fn frame_states(
    target: &dyn Target,
    index: &SymbolIndex,
    cfi: &mut Cfi,
    registers: &Registers,
    frames: &[FrameAddress],
) -> Vec<FrameState> {
    let mut regs: Regs = [None; 17];
    for (slot, name) in regs.iter_mut().zip(DWARF_REGISTERS) {
        *slot = registers.get(name);
    }
    let mut out = Vec::with_capacity(frames.len());
    for (i, frame) in frames.iter().enumerate() {
        let lookup = frame.address_for_lookup();
        let row = index
            .object_at(lookup)
            .and_then(|(object, bias)| cfi.row(&object, lookup.wrapping_sub(bias)));
        let cfa = row.as_ref().and_then(|row| {
            let (reg, offset) = row.cfa?;
            regs.get(reg).copied().flatten()?.checked_add_signed(offset)
        });
        out.push(FrameState { regs, cfa });
        let (Some(row), Some(cfa)) = (row, cfa) else {
            break;
        };
        let mut caller: Regs = [None; 17];
        for r in CALLEE_SAVED {
            caller[r] = regs[r];
        }
        for (reg, rule) in row.rules {
            let Some(slot) = caller.get_mut(reg) else {
                continue;
            };
            *slot = match rule {
                Rule::Same => regs[reg],
                Rule::Undefined | Rule::Unknown => None,
                Rule::AtCfa(n) => cfa
                    .checked_add_signed(n)
                    .and_then(|a| read_word(target, a, 8)),
                Rule::ValCfa(n) => cfa.checked_add_signed(n),
                Rule::Register(r) => regs.get(r).copied().flatten(),
            };
        }
        caller[RSP] = Some(cfa);
        // The next frame must be where this row says it returns to, or
        // the registers are not that frame's.
        match frames.get(i + 1) {
            Some(next) if caller[RETURN_ADDRESS] == Some(next.address()) => regs = caller,
            _ => break,
        }
    }
    out
}

/// The value an expression's result stands for: a register's content, a
/// computed value, or the word at a memory location.
fn evaluate(
    target: &dyn Target,
    state: &FrameState,
    bias: u64,
    expr: gimli::Expression<mqs_core::symbols::DwarfSlice<'_>>,
    frame_base: Option<gimli::Expression<mqs_core::symbols::DwarfSlice<'_>>>,
    encoding: gimli::Encoding,
    as_address: bool,
) -> Option<u64> {
    let mut eval = expr.evaluation(encoding);
    let mut result = eval.evaluate().ok()?;
    let mut steps = 0;
    loop {
        steps += 1;
        if steps > MAX_STEPS {
            return None;
        }
        result = match result {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let v = read_word(target, address, usize::from(size))?;
                eval.resume_with_memory(Value::Generic(v)).ok()?
            }
            EvaluationResult::RequiresRegister { register, .. } => {
                let v = state.regs.get(usize::from(register.0)).copied().flatten()?;
                eval.resume_with_register(Value::Generic(v)).ok()?
            }
            EvaluationResult::RequiresFrameBase => {
                let base = evaluate(target, state, bias, frame_base?, None, encoding, true)?;
                eval.resume_with_frame_base(base).ok()?
            }
            EvaluationResult::RequiresCallFrameCfa => {
                eval.resume_with_call_frame_cfa(state.cfa?).ok()?
            }
            EvaluationResult::RequiresRelocatedAddress(a) => eval
                .resume_with_relocated_address(a.wrapping_add(bias))
                .ok()?,
            // Entry values, TLS and the rest: not recovered.
            _ => return None,
        };
    }
    let pieces = eval.result();
    match &pieces.first()?.location {
        Location::Register { register } => state.regs.get(usize::from(register.0)).copied()?,
        Location::Value { value } => value.to_u64(u64::MAX).ok(),
        // A frame base is the address itself; an argument is what is there.
        Location::Address { address } if as_address => Some(*address),
        Location::Address { address } => read_word(target, *address, 8),
        _ => None,
    }
}

/// The communicator a frame's `comm` argument names, if this frame is of
/// a function whose DWARF places it at the frame's address.
fn communicator(
    target: &dyn Target,
    index: &SymbolIndex,
    frame: FrameAddress,
    state: &FrameState,
    members: &[&str],
) -> Option<FrameComm> {
    let lookup = frame.address_for_lookup();
    let (object, bias) = index.object_at(lookup)?;
    let svma = lookup.wrapping_sub(bias);
    let param = object.parameter_at(svma, &COMM_ARGUMENTS, members)?;
    let pointee = param.pointee.as_ref()?;
    let (_, fields) = COMM_TYPES.iter().find(|(name, _)| *name == pointee.name)?;
    let (_, offset, size) = fields
        .iter()
        .find_map(|f| pointee.members.iter().find(|(m, _, _)| m == f))?;
    let address = evaluate(
        target,
        state,
        bias,
        param.location,
        param.frame_base,
        param.encoding,
        false,
    )
    .filter(|a| *a != 0)?;
    let size = usize::try_from(*size).ok()?;
    let unique_id = read_word(target, address.checked_add(*offset)?, size)?;
    Some(FrameComm { unique_id, address })
}

/// For each frame of a stack: the communicator its `comm` argument names,
/// where the frame is an MPI function's and DWARF and CFI allow.
pub(super) fn communicators(
    target: &dyn Target,
    index: &SymbolIndex,
    cfi: &mut Cfi,
    registers: &Registers,
    frames: &[FrameAddress],
) -> Vec<Option<FrameComm>> {
    let mpi: Vec<bool> = frames
        .iter()
        .map(|f| {
            index
                .function_at(f.address_for_lookup())
                .is_some_and(|(name, _)| mqs_core::model::is_mpi_function(&name))
        })
        .collect();
    if !mpi.contains(&true) {
        return vec![None; frames.len()];
    }
    let states = frame_states(target, index, cfi, registers, frames);
    // The id members of every communicator type, asked of the pointee.
    let members: Vec<&str> = COMM_TYPES
        .iter()
        .flat_map(|(_, m)| m.iter().copied())
        .collect();
    frames
        .iter()
        .zip(&mpi)
        .enumerate()
        .map(|(i, (frame, is_mpi))| {
            let state = states.get(i).filter(|_| *is_mpi)?;
            communicator(target, index, *frame, state, &members)
        })
        .collect()
}
