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
use mqs_core::model::{CallArgs, FrameComm};
use mqs_core::symbols::{ObjectSymbols, Parameter, SymbolIndex, UnwindSections};

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

/// The integer arguments that say what a blocking MPI call waits for, by
/// their names in both MPIs' sources.
const INT_ARGUMENTS: [&str; 7] = [
    "source", "dest", "tag", "sendtag", "recvtag", "count", "incount",
];
/// The request arguments of `MPI_Wait*`: one request's address (`MPI_Wait`),
/// or an array of them (Open MPI names it `requests`, MPICH
/// `array_of_requests`).
const REQUEST_ARGUMENTS: [&str; 3] = ["request", "requests", "array_of_requests"];
/// Requests read from one array at most.
const MAX_REQUESTS: i64 = 4096;

/// MPICH's communicator handles (`mpir_objects.h`): the kind in the top two
/// bits, the index below, the objects in `MPIR_Comm_builtin` and
/// `MPIR_Comm_direct` (indirect ones, past MPICH's preallocated handful,
/// are not followed).
const MPICH_HANDLE_KIND_SHIFT: u32 = 30;
const MPICH_HANDLE_INDEX_MASK: u64 = 0x03ff_ffff;
const MPICH_COMM_ARRAYS: [(u64, &str); 2] = [(1, "MPIR_Comm_builtin"), (2, "MPIR_Comm_direct")];

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
    let (object, bias) = index.object_with_parameters_at(lookup)?;
    let svma = lookup.wrapping_sub(bias);
    let param = object.parameter_at(svma, &COMM_ARGUMENTS, members)?;
    let pointee = param.pointee.clone();
    let value = value_of(target, state, bias, param)?;
    let Some(pointee) = pointee else {
        // MPICH's `MPI_Comm` is an integer handle, not a pointer.
        return mpich_communicator(target, index, value);
    };
    let (_, fields) = COMM_TYPES.iter().find(|(name, _)| *name == pointee.name)?;
    let (_, offset, size) = fields
        .iter()
        .find_map(|f| pointee.members.iter().find(|(m, _, _)| m == f))?;
    let address = Some(value).filter(|a| *a != 0)?;
    let size = usize::try_from(*size).ok()?;
    let unique_id = read_word(target, address.checked_add(*offset)?, size)?;
    Some(FrameComm { unique_id, address })
}

/// A parameter's value where DWARF places it in a frame.
fn value_of(
    target: &dyn Target,
    state: &FrameState,
    bias: u64,
    param: Parameter<'_>,
) -> Option<u64> {
    evaluate(
        target,
        state,
        bias,
        param.location,
        param.frame_base,
        param.encoding,
        false,
    )
}

/// The communicator behind an MPICH handle: the object in MPICH's builtin
/// or preallocated array, and its id as MPICH's DLLs give it.
fn mpich_communicator(target: &dyn Target, index: &SymbolIndex, handle: u64) -> Option<FrameComm> {
    let handle = handle & 0xffff_ffff;
    let kind = handle >> MPICH_HANDLE_KIND_SHIFT;
    let (_, array) = MPICH_COMM_ARRAYS.iter().find(|(k, _)| *k == kind)?;
    let base = index.find_symbol(array)?;
    let layout = index.find_type("MPIR_Comm")?;
    let size = layout.size.filter(|s| *s > 0)?;
    let (_, fields) = COMM_TYPES.iter().find(|(name, _)| *name == "MPIR_Comm")?;
    let offset = fields.iter().find_map(|f| layout.field_offset(f))?;
    let address = base.checked_add((handle & MPICH_HANDLE_INDEX_MASK).checked_mul(size)?)?;
    // MPICH's context ids are 16 bits wide.
    let unique_id = read_word(target, address.checked_add(offset)?, 2)?;
    Some(FrameComm { unique_id, address })
}

/// Which MPI's constants a process's arguments are in, from the symbols
/// each one's library always has.
fn family(index: &SymbolIndex) -> Option<&'static str> {
    if index.find_symbol("ompi_mpi_communicators").is_some() {
        Some("openmpi")
    } else if index.find_symbol("MPIR_Comm_builtin").is_some() {
        Some("mpich")
    } else {
        None
    }
}

/// The arguments of the MPI call a frame is (its peers, tags and
/// requests), where DWARF places them at the frame's address.
fn call_arguments(
    target: &dyn Target,
    index: &SymbolIndex,
    frame: FrameAddress,
    state: &FrameState,
) -> Option<CallArgs> {
    let mpi = family(index)?;
    let lookup = frame.address_for_lookup();
    let (object, bias) = index.object_with_parameters_at(lookup)?;
    let svma = lookup.wrapping_sub(bias);
    let mut ints = Vec::new();
    for param in object.parameters_at(svma, &INT_ARGUMENTS, &[]) {
        let name = param.name.clone();
        let Some(value) = value_of(target, state, bias, param) else {
            continue;
        };
        // C's int: the low 32 bits, signed (MPI_ANY_SOURCE is negative).
        ints.push((name, i64::from(value as u32 as i32)));
    }
    let count = ints
        .iter()
        .find(|(n, _)| n == "count" || n == "incount")
        .map(|(_, c)| *c);
    // Open MPI's handles are pointers, MPICH's ints.
    let handle_size = if mpi == "mpich" { 4 } else { 8 };
    let mut requests = Vec::new();
    for param in object.parameters_at(svma, &REQUEST_ARGUMENTS, &[]) {
        let many = param.name != "request";
        let Some(at) = value_of(target, state, bias, param).filter(|a| *a != 0) else {
            continue;
        };
        let n = if many {
            count
                .filter(|c| (1..=MAX_REQUESTS).contains(c))
                .unwrap_or(0)
        } else {
            1
        };
        for i in 0..n as u64 {
            let Some(handle) = at
                .checked_add(i * handle_size as u64)
                .and_then(|a| read_word(target, a, handle_size))
            else {
                break;
            };
            requests.push(handle);
        }
    }
    (!ints.is_empty() || !requests.is_empty()).then(|| CallArgs {
        mpi: mpi.to_owned(),
        ints,
        requests,
    })
}

/// What one frame's arguments tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameArguments {
    /// The communicator its `comm` argument names.
    pub comm: Option<FrameComm>,
    /// For the outermost MPI call of the stack (the user's): its peers,
    /// tags and requests.
    pub call: Option<CallArgs>,
}

/// For each frame of a stack: the communicator its `comm` argument names,
/// where the frame is an MPI function's, and the arguments of the
/// outermost MPI call, where DWARF and CFI allow.
pub(super) fn arguments(
    target: &dyn Target,
    index: &SymbolIndex,
    cfi: &mut Cfi,
    registers: &Registers,
    frames: &[FrameAddress],
) -> Vec<FrameArguments> {
    let names: Vec<Option<String>> = frames
        .iter()
        .map(|f| {
            index
                .function_at(f.address_for_lookup())
                .map(|(name, _)| name.to_string())
        })
        .collect();
    let mpi: Vec<bool> = names
        .iter()
        .map(|n| n.as_deref().is_some_and(mqs_core::model::is_mpi_function))
        .collect();
    if !mpi.contains(&true) {
        return vec![FrameArguments::default(); frames.len()];
    }
    // Frames are innermost first: the user's call is the last entry point.
    let entry = names.iter().rposition(|n| {
        n.as_deref()
            .is_some_and(|n| mqs_core::model::mpi_entry([n]).is_some())
    });
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
            let Some(state) = states.get(i).filter(|_| *is_mpi) else {
                return FrameArguments::default();
            };
            FrameArguments {
                comm: communicator(target, index, *frame, state, &members),
                call: (entry == Some(i))
                    .then(|| call_arguments(target, index, *frame, state))
                    .flatten(),
            }
        })
        .collect()
}

/// A parameter of a frame's function where its DWARF places it at the
/// frame's address, and the value read there.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParameterValue {
    pub(crate) name: String,
    /// The size of its type, where DWARF says: a value is read as a word,
    /// of which it is the low bytes.
    pub(crate) size: Option<u64>,
    /// The first operation of its location expression there (`DW_OP_fbreg`,
    /// `DW_OP_reg3`, `DW_OP_entry_value`...): which way it was found.
    pub(crate) op: Option<u8>,
    pub(crate) value: Option<u64>,
}

#[cfg(test)]
impl ParameterValue {
    /// The value as its type holds it: the low `size` bytes of the word.
    pub(crate) fn held(&self) -> Option<u64> {
        let bits = self.size? * 8;
        self.value
            .map(|v| if bits >= 64 { v } else { v & ((1 << bits) - 1) })
    }
}

/// Each frame's parameters named one of `names`, evaluated as the
/// arguments of MPI frames are, whatever the function: what the tests of
/// argument evaluation look at.
#[cfg(test)]
pub(crate) fn parameter_values(
    target: &dyn Target,
    index: &SymbolIndex,
    registers: &Registers,
    frames: &[FrameAddress],
    names: &[&str],
) -> Vec<Vec<ParameterValue>> {
    use gimli::Reader;
    let states = frame_states(target, index, &mut Cfi::default(), registers, frames);
    frames
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let lookup = frame.address_for_lookup();
            let (Some(state), Some((object, bias))) =
                (states.get(i), index.object_with_parameters_at(lookup))
            else {
                return Vec::new();
            };
            let params = object.parameters_at(lookup.wrapping_sub(bias), names, &[]);
            params
                .into_iter()
                .map(|param| ParameterValue {
                    name: param.name.clone(),
                    size: param.byte_size,
                    op: param.location.0.clone().read_u8().ok(),
                    value: value_of(target, state, bias, param),
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests;
