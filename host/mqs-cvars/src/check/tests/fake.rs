//! A stand-in MPI_T library inside the test process: functions with
//! MPI_T's C signatures over a library that [`Lib`] describes, in MPICH's
//! ABI. By default it follows every rule; each [`Fault`] breaks one of them
//! in one place. The description is thread-local, so tests run in
//! parallel, each with its own library.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::{MpiTError, MPICH, MPI_SUCCESS};
use crate::library::{Fns, MpiT};
use crate::model::{Bind, Datatype, Scope, Verbosity};

/// One control variable.
#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The raw MPI_T constants and datatype handle the library answers.
    pub(crate) verbosity: i32,
    pub(crate) datatype: i32,
    pub(crate) bind: i32,
    pub(crate) scope: i32,
    /// An index into [`Lib::enums`].
    pub(crate) enumeration: Option<usize>,
    pub(crate) count: i32,
    /// `count` elements, native-endian.
    pub(crate) value: Vec<u8>,
}

#[derive(Debug, Clone)]
pub(crate) struct Enum {
    pub(crate) name: String,
    pub(crate) items: Vec<(i32, String)>,
}

/// Which strings a [`StringFault`] applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Text {
    CvarName,
    Description,
    EnumName,
    ItemName,
}

/// Ways to get the convention for returning strings wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringFault {
    /// A NULL buffer gives the length without the NUL.
    LengthWithoutNul,
    /// An empty string's length is 0 (a NULL buffer asked).
    EmptyLengthZero,
    /// A length of 0 still writes a NUL into the buffer.
    ZeroLengthWrites,
    /// A cut string fills the buffer without a NUL.
    CutWithoutNul,
    /// A cut string gets its NUL one byte past the buffer.
    NulPastEnd,
    /// A cut string gives the buffer's length back.
    CutGivesBufferLength,
    /// A NULL length still writes the string.
    NullLengthWrites,
}

/// One rule broken in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    NumBeforeInit,
    FinalizeBeforeInit,
    InitFails,
    /// MPI_T_init_thread sets provided to 7.
    ProvidedBogus,
    /// Each successful MPI_T_cvar_get_num answers one fewer.
    NumShrinks,
    NumNegative,
    InfoAcceptsBadIndex,
    AllocAcceptsBadIndex,
    /// MPI_T_cvar_get_info refuses this index.
    InfoFails(i32),
    /// MPI_T_cvar_get_info with every OUT parameter NULL fails.
    AllNullFails,
    /// With a NULL datatype, the scope comes back one higher.
    NullDatatypeMovesScope,
    String(StringFault, Text),
    /// MPI_T_cvar_get_index gives the next variable's index.
    IndexOfNext,
    IndexOfUnknownName,
    EnumInfoFails,
    ItemFails(i32),
    ItemPastEndAccepted,
    ItemMinusOneAccepted,
    AllocFails(i32),
    AllocNullHandle(i32),
    AllocHugeCount(i32),
    /// MPI_T_cvar_read writes one element more than the count.
    ReadOverruns(i32),
    ReadFails(i32),
    /// Each read of this variable answers one more than the last.
    ReadsChange(i32),
    FreeFails(i32),
    FreeKeepsHandle(i32),
    ReadOnlyWritable,
    NullHandleAccepted,
    /// Finalizing once undoes every initialisation.
    NoNesting,
    /// Initialising again after the last MPI_T_finalize fails.
    ReinitFails,
    /// Initialised again, the variables come in reverse order.
    ReinitReverses,
}

/// A library: its variables and enumerations, the faults it has, and its
/// state.
#[derive(Debug, Clone)]
pub(crate) struct Lib {
    pub(crate) vars: Vec<Var>,
    pub(crate) enums: Vec<Enum>,
    pub(crate) faults: Vec<Fault>,
    /// Initialisations not yet finalized.
    depth: i32,
    /// Whether it was initialised and finalized to the end before.
    finalized: bool,
    /// Successful MPI_T_cvar_get_num calls so far.
    nums: i32,
    /// Handles allocated and not freed: variable indices.
    handles: Vec<usize>,
}

fn position<T: PartialEq + Copy>(all: &[T], x: T) -> usize {
    all.iter().position(|v| *v == x).expect("a named constant")
}

/// MPICH's numbers for the constants.
pub(crate) fn verbosity(v: Verbosity) -> i32 {
    MPICH.verbosity[position(Verbosity::ALL, v)]
}

pub(crate) fn scope(s: Scope) -> i32 {
    MPICH.scope[position(Scope::ALL, s)]
}

pub(crate) fn bind(b: Bind) -> i32 {
    MPICH.bind[position(Bind::ALL, b)]
}

pub(crate) fn datatype(d: Datatype) -> i32 {
    let crate::abi::DatatypeHandles::Ints(table) = MPICH.datatypes else {
        unreachable!("MPICH's datatypes are integers")
    };
    table.iter().find(|(x, _)| *x == d).expect("a datatype").1
}

pub(crate) fn code(e: MpiTError) -> c_int {
    MPICH.code(e)
}

impl Var {
    fn new(name: &str, description: &str, d: Datatype, s: Scope, value: Vec<u8>) -> Var {
        Var {
            name: name.into(),
            description: description.into(),
            verbosity: verbosity(Verbosity::UserBasic),
            datatype: datatype(d),
            bind: bind(Bind::NoObject),
            scope: scope(s),
            enumeration: None,
            count: (value.len() / d.size()) as i32,
            value,
        }
    }
}

impl Default for Lib {
    /// Six variables (one of each kind the rules treat apart) and one
    /// enumeration, every rule followed.
    fn default() -> Lib {
        let int = |v: i32| v.to_ne_bytes().to_vec();
        let mut device = b"ch3:nemesis".to_vec();
        device.resize(16, 0);
        let mut protocol = Var::new(
            "protocol",
            "How messages go",
            Datatype::Int,
            Scope::AllEq,
            int(2),
        );
        protocol.enumeration = Some(0);
        let mut hint = Var::new(
            "comm_hint",
            "A hint per communicator",
            Datatype::Int,
            Scope::Local,
            int(0),
        );
        hint.bind = bind(Bind::Comm);
        Lib {
            vars: vec![
                Var::new(
                    "eager_limit",
                    "Eager up to this size",
                    Datatype::Int,
                    Scope::Local,
                    int(4096),
                ),
                protocol,
                Var::new(
                    "device",
                    "The device",
                    Datatype::Char,
                    Scope::Readonly,
                    device,
                ),
                Var::new("version", "", Datatype::Int, Scope::Constant, int(3)),
                hint,
                Var::new(
                    "backoff",
                    "Seconds between polls",
                    Datatype::Double,
                    Scope::Local,
                    0.25f64.to_ne_bytes().to_vec(),
                ),
            ],
            enums: vec![Enum {
                name: "protocols".into(),
                items: vec![
                    (0, "eager".into()),
                    (1, "rendezvous".into()),
                    (2, "auto".into()),
                ],
            }],
            faults: Vec::new(),
            depth: 0,
            finalized: false,
            nums: 0,
            handles: Vec::new(),
        }
    }
}

thread_local! {
    static LIB: RefCell<Lib> = RefCell::new(Lib::default());
}

/// Makes `lib` this thread's library and returns it loaded.
pub(crate) fn install(lib: Lib) -> MpiT {
    LIB.with(|l| *l.borrow_mut() = lib);
    MpiT::with_fns(
        &MPICH,
        Fns {
            init_thread,
            finalize,
            cvar_get_num,
            cvar_get_info,
            cvar_get_index,
            cvar_handle_alloc,
            cvar_handle_free,
            cvar_read,
            cvar_write,
            enum_get_info,
            enum_get_item,
        },
    )
}

fn with<R>(f: impl FnOnce(&mut Lib) -> R) -> R {
    LIB.with(|l| f(&mut l.borrow_mut()))
}

/// Stores `v` where `p` points, unless it is NULL.
fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the caller of the entry point (MpiT or a rule) passes
        // NULL or storage of the type MPI_T names.
        unsafe { p.write(v) }
    }
}

/// Variable handles are their index plus one, in units of 16; enumeration
/// handles likewise in units of 256: never NULL, never confused.
fn var_handle(index: usize) -> *mut c_void {
    ((index + 1) * 16) as *mut c_void
}

fn enum_handle(index: usize) -> *mut c_void {
    ((index + 1) * 256) as *mut c_void
}

fn enum_index(handle: *mut c_void) -> Option<usize> {
    let raw = handle as usize;
    (raw != 0 && raw.is_multiple_of(256)).then(|| raw / 256 - 1)
}

impl Lib {
    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    fn var(&self, index: c_int) -> Option<&Var> {
        usize::try_from(index).ok().and_then(|i| self.vars.get(i))
    }

    /// The string `text` returned by the convention (or the fault on
    /// strings of kind `which`) into `buf` of `*len` bytes.
    fn put_string(&self, which: Text, text: &str, buf: *mut c_char, len: *mut c_int) {
        let fault = self.faults.iter().find_map(|f| match f {
            Fault::String(fault, w) if *w == which => Some(*fault),
            _ => None,
        });
        let bytes = text.as_bytes();
        let full = bytes.len() as c_int + 1;
        let copy = |n: usize, nul_at: Option<usize>| {
            // SAFETY: `buf` holds the length the caller gave (the faults
            // that write beyond it stay within the slack the rules give).
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
                if let Some(at) = nul_at {
                    *buf.add(at) = 0;
                }
            }
        };
        if len.is_null() {
            if fault == Some(StringFault::NullLengthWrites) && !buf.is_null() {
                copy(bytes.len(), Some(bytes.len()));
            }
            return;
        }
        // SAFETY: not NULL, and an int the caller owns.
        let given = unsafe { *len };
        if buf.is_null() {
            let n = match fault {
                Some(StringFault::LengthWithoutNul) => full - 1,
                Some(StringFault::EmptyLengthZero) if bytes.is_empty() => 0,
                _ => full,
            };
            put(len, n);
            return;
        }
        if given <= 0 {
            if fault == Some(StringFault::ZeroLengthWrites) {
                copy(0, Some(0));
            }
            put(len, full);
            return;
        }
        let room = given as usize;
        let cut = room <= bytes.len();
        match fault {
            Some(StringFault::CutWithoutNul) if cut => copy(room, None),
            Some(StringFault::NulPastEnd) if cut => copy(room, Some(room)),
            _ => {
                let n = bytes.len().min(room - 1);
                copy(n, Some(n));
            }
        }
        let back = match fault {
            Some(StringFault::CutGivesBufferLength) if cut => given,
            _ => full,
        };
        put(len, back);
    }

    fn not_initialized(&self) -> Option<c_int> {
        (self.depth == 0).then(|| code(MpiTError::NotInitialized))
    }
}

unsafe extern "C" fn init_thread(_required: c_int, provided: *mut c_int) -> c_int {
    with(|lib| {
        if lib.has(Fault::InitFails) || (lib.finalized && lib.has(Fault::ReinitFails)) {
            return code(MpiTError::CannotInit);
        }
        if lib.finalized && lib.depth == 0 && lib.has(Fault::ReinitReverses) {
            lib.vars.reverse();
        }
        lib.depth = if lib.has(Fault::NoNesting) {
            1
        } else {
            lib.depth + 1
        };
        put(provided, if lib.has(Fault::ProvidedBogus) { 7 } else { 0 });
        MPI_SUCCESS
    })
}

unsafe extern "C" fn finalize() -> c_int {
    with(|lib| {
        if lib.depth == 0 {
            return if lib.has(Fault::FinalizeBeforeInit) {
                MPI_SUCCESS
            } else {
                code(MpiTError::NotInitialized)
            };
        }
        lib.depth = if lib.has(Fault::NoNesting) {
            0
        } else {
            lib.depth - 1
        };
        lib.finalized |= lib.depth == 0;
        MPI_SUCCESS
    })
}

unsafe extern "C" fn cvar_get_num(num: *mut c_int) -> c_int {
    with(|lib| {
        if lib.depth == 0 && !lib.has(Fault::NumBeforeInit) {
            return code(MpiTError::NotInitialized);
        }
        let mut n = lib.vars.len() as c_int;
        if lib.has(Fault::NumShrinks) {
            n -= lib.nums;
        }
        if lib.has(Fault::NumNegative) {
            n = -1;
        }
        lib.nums += 1;
        put(num, n);
        MPI_SUCCESS
    })
}

// MPI_T_cvar_get_info's C signature.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cvar_get_info(
    index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    datatype: *mut c_void,
    enumtype: *mut *mut c_void,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    scope: *mut c_int,
) -> c_int {
    with(|lib| {
        if let Some(rc) = lib.not_initialized() {
            return rc;
        }
        let outs: [*mut c_void; 9] = [
            name.cast(),
            name_len.cast(),
            verbosity.cast(),
            datatype,
            enumtype.cast(),
            desc.cast(),
            desc_len.cast(),
            bind.cast(),
            scope.cast(),
        ];
        let all_null = outs.iter().all(|p| p.is_null());
        if all_null && lib.has(Fault::AllNullFails) {
            return code(MpiTError::Invalid);
        }
        let blank = Var::new("", "", Datatype::Int, Scope::Local, Vec::new());
        let var = match lib.var(index) {
            Some(_) if lib.has(Fault::InfoFails(index)) => return code(MpiTError::InvalidIndex),
            Some(var) => var,
            None if lib.has(Fault::InfoAcceptsBadIndex) => &blank,
            None => return code(MpiTError::InvalidIndex),
        };
        lib.put_string(Text::CvarName, &var.name, name, name_len);
        lib.put_string(Text::Description, &var.description, desc, desc_len);
        put(verbosity, var.verbosity);
        // MPICH's MPI_Datatype is an int.
        put(datatype.cast::<c_int>(), var.datatype);
        put(
            enumtype,
            var.enumeration.map_or(std::ptr::null_mut(), enum_handle),
        );
        put(bind, var.bind);
        let moved = datatype.is_null() && lib.has(Fault::NullDatatypeMovesScope);
        put(scope, var.scope + i32::from(moved));
        MPI_SUCCESS
    })
}

unsafe extern "C" fn cvar_get_index(name: *const c_char, index: *mut c_int) -> c_int {
    // SAFETY: MpiT passes a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    with(|lib| {
        if let Some(rc) = lib.not_initialized() {
            return rc;
        }
        let n = lib.vars.len();
        let found = match lib.vars.iter().position(|v| v.name == name) {
            Some(i) if lib.has(Fault::IndexOfNext) => (i + 1) % n,
            Some(i) => i,
            None if lib.has(Fault::IndexOfUnknownName) => 0,
            None => return code(MpiTError::InvalidName),
        };
        put(index, found as c_int);
        MPI_SUCCESS
    })
}

unsafe extern "C" fn cvar_handle_alloc(
    index: c_int,
    _object: *mut c_void,
    handle: *mut *mut c_void,
    count: *mut c_int,
) -> c_int {
    with(|lib| {
        if let Some(rc) = lib.not_initialized() {
            return rc;
        }
        let i = match lib.var(index) {
            Some(_) if lib.has(Fault::AllocFails(index)) => return code(MpiTError::OutOfHandles),
            Some(_) => index as usize,
            // Any variable's handle stands for the one that is not there.
            None if lib.has(Fault::AllocAcceptsBadIndex) => 0,
            None => return code(MpiTError::InvalidIndex),
        };
        let n = if lib.has(Fault::AllocHugeCount(index)) {
            1 << 21
        } else {
            lib.vars[i].count
        };
        lib.handles.push(i);
        let h = if lib.has(Fault::AllocNullHandle(index)) {
            std::ptr::null_mut()
        } else {
            var_handle(i)
        };
        put(handle, h);
        put(count, n);
        MPI_SUCCESS
    })
}

impl Lib {
    /// The variable behind an allocated handle.
    fn handle(&self, handle: *mut c_void) -> Option<usize> {
        let raw = handle as usize;
        let i = (raw != 0 && raw.is_multiple_of(16)).then(|| raw / 16 - 1)?;
        self.handles.contains(&i).then_some(i)
    }
}

unsafe extern "C" fn cvar_handle_free(handle: *mut *mut c_void) -> c_int {
    with(|lib| {
        // SAFETY: MpiT passes the address of a handle.
        let h = unsafe { *handle };
        let Some(i) = lib.handle(h) else {
            return code(MpiTError::InvalidHandle);
        };
        if lib.has(Fault::FreeFails(i as i32)) {
            return code(MpiTError::InvalidHandle);
        }
        if let Some(at) = lib.handles.iter().position(|x| *x == i) {
            lib.handles.remove(at);
        }
        if !lib.has(Fault::FreeKeepsHandle(i as i32)) {
            put(handle, std::ptr::null_mut());
        }
        MPI_SUCCESS
    })
}

unsafe extern "C" fn cvar_read(handle: *mut c_void, buf: *mut c_void) -> c_int {
    with(|lib| {
        if handle.is_null() && lib.has(Fault::NullHandleAccepted) {
            return MPI_SUCCESS;
        }
        let Some(i) = lib.handle(handle) else {
            return code(MpiTError::InvalidHandle);
        };
        let index = i as i32;
        if lib.has(Fault::ReadFails(index)) {
            return code(MpiTError::InvalidHandle);
        }
        let var = &mut lib.vars[i];
        let mut value = var.value.clone();
        if lib.faults.contains(&Fault::ReadOverruns(index)) {
            // One more element: the rules' buffers have slack past count.
            value.extend_from_within(..value.len() / var.count.max(1) as usize);
        }
        // SAFETY: the caller's buffer holds count elements (plus slack).
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buf.cast(), value.len()) };
        if lib.faults.contains(&Fault::ReadsChange(index)) {
            if let Some(b) = var.value.first_mut() {
                *b = b.wrapping_add(1);
            }
        }
        MPI_SUCCESS
    })
}

unsafe extern "C" fn cvar_write(handle: *mut c_void, buf: *const c_void) -> c_int {
    with(|lib| {
        if handle.is_null() && lib.has(Fault::NullHandleAccepted) {
            return MPI_SUCCESS;
        }
        let Some(i) = lib.handle(handle) else {
            return code(MpiTError::InvalidHandle);
        };
        let read_only = MPICH.scope(lib.vars[i].scope).read_only();
        if read_only && !lib.has(Fault::ReadOnlyWritable) {
            return code(MpiTError::CvarSetNever);
        }
        let value = &mut lib.vars[i].value;
        // SAFETY: the caller's buffer holds count elements.
        unsafe { std::ptr::copy_nonoverlapping(buf.cast(), value.as_mut_ptr(), value.len()) };
        MPI_SUCCESS
    })
}

unsafe extern "C" fn enum_get_info(
    handle: *mut c_void,
    num: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    with(|lib| {
        if handle.is_null() && lib.has(Fault::NullHandleAccepted) {
            return MPI_SUCCESS;
        }
        if lib.has(Fault::EnumInfoFails) {
            return code(MpiTError::InvalidHandle);
        }
        let Some(e) = enum_index(handle).and_then(|i| lib.enums.get(i)) else {
            return code(MpiTError::InvalidHandle);
        };
        put(num, e.items.len() as c_int);
        lib.put_string(Text::EnumName, &e.name, name, name_len);
        MPI_SUCCESS
    })
}

unsafe extern "C" fn enum_get_item(
    handle: *mut c_void,
    index: c_int,
    value: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    with(|lib| {
        let Some(e) = enum_index(handle).and_then(|i| lib.enums.get(i)) else {
            return code(MpiTError::InvalidHandle);
        };
        let n = e.items.len() as c_int;
        let beyond = (index == n && lib.has(Fault::ItemPastEndAccepted))
            || (index == -1 && lib.has(Fault::ItemMinusOneAccepted));
        if beyond {
            put(value, index);
            lib.put_string(Text::ItemName, "beyond", name, name_len);
            return MPI_SUCCESS;
        }
        let item = usize::try_from(index).ok().and_then(|i| e.items.get(i));
        let Some((v, item_name)) = item.filter(|_| !lib.has(Fault::ItemFails(index))) else {
            return code(MpiTError::InvalidItem);
        };
        put(value, *v);
        lib.put_string(Text::ItemName, item_name, name, name_len);
        MPI_SUCCESS
    })
}
