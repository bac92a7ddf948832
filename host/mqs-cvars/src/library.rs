//! An MPI library loaded with dlopen, and its MPI_T entry points: the
//! helper subprocess's side. Nothing here runs in `mqs-dump` itself: a
//! library that crashes, aborts or hangs takes only the helper with it.
//!
//! The calls are thin: they return the library's codes and let the caller
//! (the listing below, `--set`, and the conformance checks in `check`)
//! decide what a code means.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

use crate::abi::{Abi, DatatypeHandles, MpiTError, MPI_SUCCESS, MPI_THREAD_SINGLE};
use crate::model::{
    Bind, Datatype, DatatypeName, EnumItem, Enumeration, Family, Listing, Scope, Value, Variable,
    VariableError, SCHEMA_VERSION,
};
use crate::protocol::{FailureKind, SetResult, SetVerdict};

pub(crate) type FnInitThread = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
pub(crate) type FnVoid = unsafe extern "C" fn() -> c_int;
pub(crate) type FnGetNum = unsafe extern "C" fn(*mut c_int) -> c_int;
pub(crate) type FnCvarGetInfo = unsafe extern "C" fn(
    c_int,
    *mut c_char,
    *mut c_int,
    *mut c_int,
    *mut c_void,
    *mut *mut c_void,
    *mut c_char,
    *mut c_int,
    *mut c_int,
    *mut c_int,
) -> c_int;
pub(crate) type FnGetIndex = unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int;
pub(crate) type FnHandleAlloc =
    unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, *mut c_int) -> c_int;
pub(crate) type FnHandleFree = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
pub(crate) type FnRead = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
pub(crate) type FnWrite = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
pub(crate) type FnEnumGetInfo =
    unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_char, *mut c_int) -> c_int;
pub(crate) type FnEnumGetItem =
    unsafe extern "C" fn(*mut c_void, c_int, *mut c_int, *mut c_char, *mut c_int) -> c_int;
pub(crate) type FnLibraryVersion = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;

/// The MPI_T entry points of the control-variable part of the interface.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fns {
    pub init_thread: FnInitThread,
    pub finalize: FnVoid,
    pub cvar_get_num: FnGetNum,
    pub cvar_get_info: FnCvarGetInfo,
    pub cvar_get_index: FnGetIndex,
    pub cvar_handle_alloc: FnHandleAlloc,
    pub cvar_handle_free: FnHandleFree,
    pub cvar_read: FnRead,
    pub cvar_write: FnWrite,
    pub enum_get_info: FnEnumGetInfo,
    pub enum_get_item: FnEnumGetItem,
}

/// Bytes past a value's end that a read must leave alone; a guard against
/// libraries that write more than `count` elements.
pub(crate) const SLACK: usize = 256;
pub(crate) const CANARY: u8 = 0xa5;
/// Most elements believed from MPI_T_cvar_handle_alloc.
const MAX_COUNT: i32 = 1 << 20;
/// Longest string believed from a length query.
const MAX_STRING: i32 = 1 << 20;

/// Why a library cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError {
    pub kind: FailureKind,
    pub message: String,
}

/// A loaded MPI library.
#[derive(Debug)]
pub struct MpiT {
    pub path: PathBuf,
    pub abi: &'static Abi,
    pub(crate) f: Fns,
    library_version: Option<FnLibraryVersion>,
    /// Each known datatype's handle bits in this library.
    datatypes: Vec<(Datatype, u64)>,
    _library: Library,
}

/// What MPI_T_cvar_get_info said about a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    pub description: String,
    pub verbosity: i32,
    /// The MPI_Datatype handle's bits (a pointer in Open MPI, an int in
    /// MPICH).
    pub datatype: u64,
    /// The MPI_T_enum handle (NULL is MPI_T_ENUM_NULL).
    pub enumtype: usize,
    pub bind: i32,
    pub scope: i32,
}

impl MpiT {
    /// Loads `path` and finds its family and MPI_T entry points.
    pub fn open(path: &Path) -> Result<MpiT, OpenError> {
        let fail = |kind, message: String| OpenError { kind, message };
        // GLOBAL: Open MPI's components, dlopened by libmpi, resolve their
        // references to libmpi's symbols through the global scope.
        // SAFETY: loading runs the library's initialisers; this process
        // exists to take that risk.
        let library =
            unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| {
                fail(
                    FailureKind::NotMpi,
                    format!("cannot be loaded: {}", error_chain(&e)),
                )
            })?;
        let has = |name: &str| {
            // SAFETY: only the symbol's presence is looked at.
            unsafe { library.get::<*const c_void>(name.as_bytes()) }.is_ok()
        };
        if !has("MPI_Init") && !has("MPI_Init_thread") {
            return Err(fail(
                FailureKind::NotMpi,
                "not an MPI library: it defines neither MPI_Init nor MPI_Init_thread".into(),
            ));
        }
        let Some(family) = [Family::OpenMpi, Family::Mpich]
            .into_iter()
            .find(|f| has(f.marker()))
        else {
            return Err(fail(
                FailureKind::NotMpi,
                format!(
                    "an MPI library of an ABI mqs does not know: it defines neither {} (Open MPI) \
                     nor {} (MPICH)",
                    Family::OpenMpi.marker(),
                    Family::Mpich.marker()
                ),
            ));
        };
        let f = resolve(&library).map_err(|missing| {
            fail(
                FailureKind::NoMpiT,
                format!(
                    "a {} library without the MPI tool interface: missing {}",
                    family.name(),
                    missing.join(", ")
                ),
            )
        })?;
        let abi = family.abi();
        let datatypes = match abi.datatypes {
            DatatypeHandles::Symbols(table) => table
                .iter()
                .filter_map(|(d, symbol)| {
                    // SAFETY: only the symbol's address is taken.
                    let s = unsafe { library.get::<*const c_void>(symbol.as_bytes()) }.ok()?;
                    Some((*d, s.into_raw() as usize as u64))
                })
                .collect(),
            DatatypeHandles::Ints(table) => int_handles(table),
        };
        let library_version = get::<FnLibraryVersion>(&library, "MPI_Get_library_version");
        Ok(MpiT {
            path: path.to_path_buf(),
            abi,
            f,
            library_version,
            datatypes,
            _library: library,
        })
    }

    pub fn family(&self) -> Family {
        self.abi.family
    }

    /// MPI_Get_library_version's first line (callable before MPI_Init).
    pub fn library_version(&self) -> Option<String> {
        let f = self.library_version?;
        // MPI_MAX_LIBRARY_VERSION_STRING is 256 (Open MPI) or 8192 (MPICH).
        let mut buf = vec![0u8; 8192 + 1];
        let mut len: c_int = 0;
        // SAFETY: the buffer is larger than both families' maximum.
        let rc = unsafe { f(buf.as_mut_ptr().cast(), &mut len) };
        if rc != MPI_SUCCESS {
            return None;
        }
        let text = c_text(&buf);
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    }

    /// MPI_T_init_thread(MPI_THREAD_SINGLE): (code, provided).
    pub fn init(&self) -> (i32, i32) {
        let mut provided: c_int = -1;
        // SAFETY: MPI_T_init_thread(int, int *).
        let rc = unsafe { (self.f.init_thread)(MPI_THREAD_SINGLE, &mut provided) };
        (rc, provided)
    }

    pub fn finalize(&self) -> i32 {
        // SAFETY: MPI_T_finalize(void).
        unsafe { (self.f.finalize)() }
    }

    pub fn num(&self) -> Result<i32, i32> {
        let mut n: c_int = -1;
        // SAFETY: MPI_T_cvar_get_num(int *).
        match unsafe { (self.f.cvar_get_num)(&mut n) } {
            MPI_SUCCESS => Ok(n),
            rc => Err(rc),
        }
    }

    /// MPI_T_cvar_get_info, strings fetched in full: their lengths first
    /// (NULL buffers), then buffers of that size.
    pub fn info(&self, index: i32) -> Result<Info, i32> {
        let mut info = Info {
            name: String::new(),
            description: String::new(),
            verbosity: 0,
            datatype: 0,
            enumtype: 0,
            bind: 0,
            scope: 0,
        };
        let (mut name_len, mut desc_len) = (0, 0);
        let rc = self.raw_info(
            index,
            None,
            Some(&mut name_len),
            None,
            Some(&mut desc_len),
            &mut info,
        );
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        let mut name = vec![0u8; buffer_len(name_len)];
        let mut desc = vec![0u8; buffer_len(desc_len)];
        let (mut name_len, mut desc_len) = (name.len() as c_int, desc.len() as c_int);
        let rc = self.raw_info(
            index,
            Some(&mut name),
            Some(&mut name_len),
            Some(&mut desc),
            Some(&mut desc_len),
            &mut info,
        );
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        info.name = c_text(&name);
        info.description = c_text(&desc);
        Ok(info)
    }

    /// One MPI_T_cvar_get_info call with every OUT parameter given; the
    /// strings go where the caller says (NULL when None).
    pub(crate) fn raw_info(
        &self,
        index: i32,
        name: Option<&mut [u8]>,
        name_len: Option<&mut c_int>,
        desc: Option<&mut [u8]>,
        desc_len: Option<&mut c_int>,
        out: &mut Info,
    ) -> i32 {
        let mut datatype: u64 = 0;
        let mut enumtype: *mut c_void = std::ptr::null_mut();
        let (mut verbosity, mut bind, mut scope): (c_int, c_int, c_int) = (0, 0, 0);
        // SAFETY: every pointer is NULL or points at storage of the type
        // the interface names (an MPI_Datatype fits in the u64 in both
        // families); the buffers' lengths are what name_len/desc_len say.
        let rc = unsafe {
            (self.f.cvar_get_info)(
                index,
                opt_buf(name),
                opt_ptr(name_len),
                &mut verbosity,
                (&raw mut datatype).cast(),
                &mut enumtype,
                opt_buf(desc),
                opt_ptr(desc_len),
                &mut bind,
                &mut scope,
            )
        };
        if rc == MPI_SUCCESS {
            out.verbosity = verbosity;
            out.datatype = self.handle_bits(datatype);
            out.enumtype = enumtype as usize;
            out.bind = bind;
            out.scope = scope;
        }
        rc
    }

    /// MPICH's datatype is an int written into the first four bytes.
    pub(crate) fn handle_bits(&self, raw: u64) -> u64 {
        match self.abi.datatypes {
            DatatypeHandles::Ints(_) => raw & 0xffff_ffff,
            DatatypeHandles::Symbols(_) => raw,
        }
    }

    pub fn datatype(&self, bits: u64) -> DatatypeName {
        self.datatypes
            .iter()
            .find(|(_, b)| *b == bits)
            .map_or(DatatypeName::Unknown(bits), |(d, _)| {
                DatatypeName::Known(*d)
            })
    }

    /// The MPI_Datatype handle bits of `d` in this library.
    pub fn datatype_bits(&self, d: Datatype) -> Option<u64> {
        self.datatypes
            .iter()
            .find(|(x, _)| *x == d)
            .map(|(_, bits)| *bits)
    }

    /// MPI_T_enum_get_info: (number of items, name).
    pub fn enum_info(&self, enumtype: usize) -> Result<(i32, String), i32> {
        let mut num: c_int = -1;
        let mut len: c_int = 0;
        // SAFETY: MPI_T_enum_get_info(MPI_T_enum, int *, char *, int *);
        // the handle came from MPI_T_cvar_get_info, the buffer is NULL.
        let rc = unsafe {
            (self.f.enum_get_info)(
                enumtype as *mut c_void,
                &mut num,
                std::ptr::null_mut(),
                &mut len,
            )
        };
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        let mut name = vec![0u8; buffer_len(len)];
        let mut len = name.len() as c_int;
        // SAFETY: as above, with a buffer of `len` bytes.
        let rc = unsafe {
            (self.f.enum_get_info)(
                enumtype as *mut c_void,
                &mut num,
                name.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        Ok((num, c_text(&name)))
    }

    /// MPI_T_enum_get_item: (value, name).
    pub fn enum_item(&self, enumtype: usize, index: i32) -> Result<(i32, String), i32> {
        let mut value: c_int = 0;
        let mut len: c_int = 0;
        // SAFETY: MPI_T_enum_get_item(MPI_T_enum, int, int *, char *, int *).
        let rc = unsafe {
            (self.f.enum_get_item)(
                enumtype as *mut c_void,
                index,
                &mut value,
                std::ptr::null_mut(),
                &mut len,
            )
        };
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        let mut name = vec![0u8; buffer_len(len)];
        let mut len = name.len() as c_int;
        // SAFETY: as above, with a buffer of `len` bytes.
        let rc = unsafe {
            (self.f.enum_get_item)(
                enumtype as *mut c_void,
                index,
                &mut value,
                name.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != MPI_SUCCESS {
            return Err(rc);
        }
        Ok((value, c_text(&name)))
    }

    pub fn get_index(&self, name: &str) -> Result<i32, i32> {
        let Ok(name) = CString::new(name) else {
            return Err(self.abi.code(MpiTError::InvalidName));
        };
        let mut index: c_int = -1;
        // SAFETY: MPI_T_cvar_get_index(const char *, int *).
        match unsafe { (self.f.cvar_get_index)(name.as_ptr(), &mut index) } {
            MPI_SUCCESS => Ok(index),
            rc => Err(rc),
        }
    }

    /// MPI_T_cvar_handle_alloc for an unbound variable: (handle, count).
    pub fn alloc(&self, index: i32) -> Result<(Handle, i32), i32> {
        // Not looked at for MPI_T_BIND_NO_OBJECT, but some libraries read
        // it anyway: give them a valid address of a NULL handle.
        let mut object: usize = 0;
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut count: c_int = -1;
        // SAFETY: MPI_T_cvar_handle_alloc(int, void *, MPI_T_cvar_handle *,
        // int *), every pointer valid.
        let rc = unsafe {
            (self.f.cvar_handle_alloc)(index, (&raw mut object).cast(), &mut handle, &mut count)
        };
        match rc {
            MPI_SUCCESS => Ok((Handle(handle), count)),
            rc => Err(rc),
        }
    }

    /// MPI_T_cvar_handle_free: (code, the handle as the library left it).
    pub fn free(&self, handle: Handle) -> (i32, usize) {
        let mut h = handle.0;
        // SAFETY: MPI_T_cvar_handle_free(MPI_T_cvar_handle *) on a handle
        // from alloc.
        let rc = unsafe { (self.f.cvar_handle_free)(&mut h) };
        (rc, h as usize)
    }

    /// MPI_T_cvar_read into `buf`, which the caller sized.
    pub(crate) fn read_into(&self, handle: Handle, buf: &mut [u8]) -> i32 {
        // SAFETY: MPI_T_cvar_read(MPI_T_cvar_handle, void *); the buffer
        // holds count elements plus SLACK.
        unsafe { (self.f.cvar_read)(handle.0, buf.as_mut_ptr().cast()) }
    }

    pub(crate) fn write_from(&self, handle: Handle, buf: &[u8]) -> i32 {
        // SAFETY: MPI_T_cvar_write(MPI_T_cvar_handle, const void *); the
        // buffer holds count elements.
        unsafe { (self.f.cvar_write)(handle.0, buf.as_ptr().cast()) }
    }

    /// Reads an allocated variable: its value, or the failing call's code.
    pub fn read(&self, handle: Handle, datatype: Datatype, count: i32) -> Result<Value, ReadError> {
        let count = checked_count(count)?;
        let mut buf = value_buffer(datatype, count);
        match self.read_into(handle, &mut buf) {
            MPI_SUCCESS => Ok(datatype.decode(&buf, count as usize)),
            rc => Err(ReadError::Code(rc)),
        }
    }

    /// The name of a code in this library.
    pub fn code_name(&self, code: i32) -> String {
        self.abi.code_name(code)
    }

    /// A [`VariableError`] for `call` failing with `code`.
    fn error(&self, index: i32, name: Option<&str>, call: &str, code: i32) -> VariableError {
        VariableError {
            index,
            name: name.map(str::to_owned),
            call: call.into(),
            code,
            error: self.code_name(code),
        }
    }
}

/// An ABI's integer datatype handles as handle bits.
fn int_handles(table: &[(Datatype, i32)]) -> Vec<(Datatype, u64)> {
    table
        .iter()
        .map(|(d, v)| (*d, u64::from(*v as u32)))
        .collect()
}

#[cfg(test)]
impl MpiT {
    /// A library whose MPI_T entry points are `f` (a stand-in's, in unit
    /// tests), of an ABI whose datatypes are integers (MPICH's).
    pub(crate) fn with_fns(abi: &'static Abi, f: Fns) -> MpiT {
        let DatatypeHandles::Ints(table) = abi.datatypes else {
            panic!("a stand-in library needs an ABI of integer datatypes");
        };
        MpiT {
            path: PathBuf::from("stand-in MPI_T"),
            abi,
            f,
            library_version: None,
            datatypes: int_handles(table),
            // Any library will do: the entry points are not looked up.
            _library: Library::this(),
        }
    }
}

/// An MPI_T_cvar_handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle(pub(crate) *mut c_void);

/// Why a value was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    Code(i32),
    BadCount(i32),
}

fn checked_count(count: i32) -> Result<i32, ReadError> {
    if (0..=MAX_COUNT).contains(&count) {
        Ok(count)
    } else {
        Err(ReadError::BadCount(count))
    }
}

/// A buffer for `count` elements plus SLACK canary bytes.
pub(crate) fn value_buffer(datatype: Datatype, count: i32) -> Vec<u8> {
    let len = datatype.size() * count.max(0) as usize;
    let mut buf = vec![0u8; len + SLACK];
    buf[len..].fill(CANARY);
    buf
}

fn buffer_len(returned: c_int) -> usize {
    // A returned length includes the NUL; keep room even when a library
    // says 0, and never believe more than MAX_STRING.
    returned.clamp(1, MAX_STRING) as usize + 1
}

/// Text up to the first NUL (the whole buffer if none).
pub(crate) fn c_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn opt_buf(buf: Option<&mut [u8]>) -> *mut c_char {
    buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast())
}

fn opt_ptr(p: Option<&mut c_int>) -> *mut c_int {
    p.map_or(std::ptr::null_mut(), |p| p as *mut c_int)
}

fn get<T: Copy>(lib: &Library, name: &str) -> Option<T> {
    // SAFETY: each symbol is used with the signature the MPI standard
    // gives it; the library stays loaded while the process lives.
    unsafe { lib.get::<T>(name.as_bytes()) }.ok().map(|s| *s)
}

fn resolve(lib: &Library) -> Result<Fns, Vec<&'static str>> {
    macro_rules! fns {
        ($($field:ident = $name:literal,)*) => {{
            $(let $field = get(lib, $name);)*
            let missing: Vec<&'static str> = [$(($name, $field.is_some()),)*]
                .iter()
                .filter(|(_, found)| !found)
                .map(|(name, _)| *name)
                .collect();
            match ($($field,)*) {
                ($(Some($field),)*) => Ok(Fns { $($field,)* }),
                _ => Err(missing),
            }
        }};
    }
    fns! {
        init_thread = "MPI_T_init_thread",
        finalize = "MPI_T_finalize",
        cvar_get_num = "MPI_T_cvar_get_num",
        cvar_get_info = "MPI_T_cvar_get_info",
        cvar_get_index = "MPI_T_cvar_get_index",
        cvar_handle_alloc = "MPI_T_cvar_handle_alloc",
        cvar_handle_free = "MPI_T_cvar_handle_free",
        cvar_read = "MPI_T_cvar_read",
        cvar_write = "MPI_T_cvar_write",
        enum_get_info = "MPI_T_enum_get_info",
        enum_get_item = "MPI_T_enum_get_item",
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Initialises MPI_T or says why it cannot be used.
pub fn initialise(mpi: &MpiT) -> Result<(), OpenError> {
    let (rc, _) = mpi.init();
    if rc == MPI_SUCCESS {
        return Ok(());
    }
    Err(OpenError {
        kind: FailureKind::NoMpiT,
        message: format!(
            "MPI_T_init_thread returned {} ({rc}): the library's tool interface cannot be used",
            mpi.code_name(rc)
        ),
    })
}

/// Every control variable with its value, or why it has none. `step` is
/// told what is about to be done to which variable (for crash reports).
pub fn list(mpi: &MpiT, step: &mut dyn FnMut(String)) -> Result<Listing, OpenError> {
    step("initialising the tool interface (MPI_T_init_thread)".into());
    initialise(mpi)?;
    let num = mpi.num().map_err(|rc| OpenError {
        kind: FailureKind::NoMpiT,
        message: format!("MPI_T_cvar_get_num returned {} ({rc})", mpi.code_name(rc)),
    })?;
    let mut listing = Listing {
        schema_version: SCHEMA_VERSION,
        library: mpi.path.display().to_string(),
        family: mpi.family(),
        mpi_version: mpi.library_version(),
        num_cvars: num,
        variables: Vec::new(),
        errors: Vec::new(),
        environment_cleared: Vec::new(),
    };
    for index in 0..num {
        if let Some(variable) = describe(mpi, index, &mut listing.errors, step) {
            listing.variables.push(variable);
        }
    }
    Ok(listing)
}

/// One variable: its info, enumeration and (unbound ones) value. MPI_T
/// errors go to `errors`; None if not even its info could be had.
pub fn describe(
    mpi: &MpiT,
    index: i32,
    errors: &mut Vec<VariableError>,
    step: &mut dyn FnMut(String),
) -> Option<Variable> {
    step(format!("asking for cvar {index} (MPI_T_cvar_get_info)"));
    let info = match mpi.info(index) {
        Ok(info) => info,
        Err(rc) => {
            errors.push(mpi.error(index, None, "MPI_T_cvar_get_info", rc));
            return None;
        }
    };
    let abi = mpi.abi;
    let mut variable = Variable {
        index,
        name: info.name.clone(),
        description: info.description.clone(),
        datatype: mpi.datatype(info.datatype),
        verbosity: abi.verbosity(info.verbosity),
        scope: abi.scope(info.scope),
        bind: abi.bind(info.bind),
        enumeration: None,
        count: None,
        value: None,
        value_name: None,
        no_value: None,
    };
    if info.enumtype != 0 {
        step(format!(
            "reading the enumeration of cvar {index} ({})",
            info.name
        ));
        variable.enumeration = enumeration(mpi, index, &info, errors);
    }
    if variable.bind != Bind::NoObject {
        variable.no_value = Some(format!(
            "bound to {}: it has a value per object",
            variable.bind
        ));
        return Some(variable);
    }
    let Some(datatype) = variable.datatype.known() else {
        variable.no_value = Some(format!(
            "{}: the size of its elements is unknown",
            variable.datatype
        ));
        return Some(variable);
    };
    step(format!("reading cvar {index} ({})", info.name));
    let (handle, count) = match mpi.alloc(index) {
        Ok(pair) => pair,
        Err(rc) => {
            errors.push(mpi.error(index, Some(&info.name), "MPI_T_cvar_handle_alloc", rc));
            variable.no_value = Some(format!(
                "MPI_T_cvar_handle_alloc returned {}",
                mpi.code_name(rc)
            ));
            return Some(variable);
        }
    };
    variable.count = Some(count);
    match mpi.read(handle, datatype, count) {
        Ok(value) => {
            variable.value_name = variable
                .enumeration
                .as_ref()
                .and_then(|e| e.name_of(&value));
            variable.value = Some(value);
        }
        Err(ReadError::Code(rc)) => {
            errors.push(mpi.error(index, Some(&info.name), "MPI_T_cvar_read", rc));
            variable.no_value = Some(format!("MPI_T_cvar_read returned {}", mpi.code_name(rc)));
        }
        Err(ReadError::BadCount(count)) => {
            variable.no_value = Some(format!(
                "MPI_T_cvar_handle_alloc gave a count of {count}, not believed"
            ));
        }
    }
    let (rc, _) = mpi.free(handle);
    if rc != MPI_SUCCESS {
        errors.push(mpi.error(index, Some(&info.name), "MPI_T_cvar_handle_free", rc));
    }
    Some(variable)
}

fn enumeration(
    mpi: &MpiT,
    index: i32,
    info: &Info,
    errors: &mut Vec<VariableError>,
) -> Option<Enumeration> {
    let (num, name) = match mpi.enum_info(info.enumtype) {
        Ok(pair) => pair,
        Err(rc) => {
            errors.push(mpi.error(index, Some(&info.name), "MPI_T_enum_get_info", rc));
            return None;
        }
    };
    let mut items = Vec::new();
    // An enumeration lists a handful of items; a huge count is a bug.
    for item in 0..num.clamp(0, 4096) {
        match mpi.enum_item(info.enumtype, item) {
            Ok((value, name)) => items.push(EnumItem { value, name }),
            Err(rc) => errors.push(mpi.error(index, Some(&info.name), "MPI_T_enum_get_item", rc)),
        }
    }
    Some(Enumeration { name, items })
}

/// Validates `name=value` by writing it in this process (the helper; never
/// a job), and says how to apply it.
pub fn validate(mpi: &MpiT, name: &str, text: &str) -> SetResult {
    let family = mpi.family();
    let mut result = SetResult {
        name: name.into(),
        value: text.into(),
        verdict: SetVerdict::Rejected,
        reason: String::new(),
        datatype: None,
        scope: None,
        apply: Vec::new(),
    };
    let index = match mpi.get_index(name) {
        Ok(index) => index,
        Err(rc) => {
            result.reason = format!(
                "no control variable of that name (MPI_T_cvar_get_index returned {})",
                mpi.code_name(rc)
            );
            return result;
        }
    };
    let mut errors = Vec::new();
    let Some(variable) = describe(mpi, index, &mut errors, &mut |_| {}) else {
        result.reason = errors
            .first()
            .map_or_else(|| "MPI_T_cvar_get_info failed".into(), ToString::to_string);
        return result;
    };
    result.datatype = Some(variable.datatype.clone());
    result.scope = Some(variable.scope);
    let Some(datatype) = variable.datatype.known() else {
        result.reason = format!("{}: cannot encode a value for it", variable.datatype);
        return result;
    };
    let value = match datatype.parse(text, variable.enumeration.as_ref()) {
        Ok(value) => value,
        Err(why) => {
            result.reason = format!("{why} ({datatype} expected)");
            return result;
        }
    };
    if let Some(e) = &variable.enumeration {
        if e.item_name(&value).is_none() && datatype != Datatype::CBool {
            result.reason = format!("not one of the items of {}: {}", e.name, e.item_list());
            return result;
        }
    }
    if variable.scope == Scope::Constant {
        result.reason = "its scope is constant: the library takes no setting for it".into();
        return result;
    }
    let env_value = variable
        .enumeration
        .as_ref()
        .and_then(|e| e.item_name(&value))
        .filter(|_| datatype != Datatype::CBool)
        .map_or_else(|| value.to_string(), str::to_owned);
    result.apply = family.how_to_set(name, &env_value);
    if variable.scope == Scope::Readonly {
        result.verdict = SetVerdict::StartupOnly;
        result.reason = "its type and items check out; MPI_T may not write it (scope \
                         readonly), so it takes effect only when set before the job starts"
            .into();
        return result;
    }
    if variable.bind != Bind::NoObject {
        result.verdict = SetVerdict::NotChecked;
        result.reason = format!(
            "bound to {}: MPI_T writes it per object, which only the job has",
            variable.bind
        );
        return result;
    }
    let (handle, count) = match mpi.alloc(index) {
        Ok(pair) => pair,
        Err(rc) => {
            result.reason = format!("MPI_T_cvar_handle_alloc returned {}", mpi.code_name(rc));
            return result;
        }
    };
    let Some(bytes) = datatype.encode(&value, count.max(0) as usize) else {
        result.reason = format!(
            "does not fit a {datatype} variable of {count} element{}",
            if count == 1 { "" } else { "s" }
        );
        mpi.free(handle);
        return result;
    };
    let rc = mpi.write_from(handle, &bytes);
    let abi = mpi.abi;
    match abi.error_of(rc) {
        _ if rc == MPI_SUCCESS => {
            let back = mpi.read(handle, datatype, count);
            result.verdict = SetVerdict::Accepted;
            result.reason = match back {
                Ok(back) if back == value => "MPI_T_cvar_write accepted it".into(),
                Ok(back) => format!("MPI_T_cvar_write accepted it, and it reads back as {back}"),
                Err(_) => "MPI_T_cvar_write accepted it".into(),
            };
        }
        Some(e @ (MpiTError::CvarSetNotNow | MpiTError::CvarSetNever)) => {
            result.verdict = SetVerdict::StartupOnly;
            result.reason = format!(
                "its type and items check out; the library will not change it while running \
                 ({}), so it takes effect only when set before the job starts",
                e.name()
            );
        }
        _ => {
            result.reason = format!("MPI_T_cvar_write returned {} ({rc})", abi.code_name(rc));
        }
    }
    mpi.free(handle);
    if result.verdict == SetVerdict::Rejected {
        result.apply.clear();
    }
    result
}
