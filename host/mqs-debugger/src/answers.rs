//! What the debugger answers: its table of C functions, and the
//! process ([`Target`]) and image ([`ImageSymbols`]) the core's session
//! sees through it.
//!
//! Processes and images are named by their index in the job the debugger
//! described; types by the debugger's own number for them. Members and
//! sizes of a type are asked when the DLL asks for them, never listed
//! ahead: each question may be a round trip for the debugger.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use mqs_core::interface::{
    read_c_string, read_word, Environment, ImageSymbols, Liveness, MappedObject, Target, Thread,
    TypeLayout,
};
use mqs_core::process::{environment_of, in_process_root};
use mqs_core::{Error, Result};

/// The debugger's answers, as a C table (the `Answers` ctypes structure of
/// `debuggers/mqs_host/library.py`). Every function returns 0 when it
/// answered, anything else when it did not (no such symbol, type or
/// member; memory that cannot be read); a missing function never answers.
/// The functions may be called only while `mqs_debugger_dump` runs, on its
/// thread.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Answers {
    /// Passed back to every function as it was given.
    pub context: *mut c_void,
    /// Fills `buf` with the `size` bytes at `addr` of process `process`;
    /// otherwise writes why, NUL-terminated, into `why` (`why_len` bytes).
    pub read: Option<
        unsafe extern "C" fn(
            context: *mut c_void,
            process: u32,
            addr: u64,
            size: u32,
            buf: *mut u8,
            why: *mut c_char,
            why_len: u32,
        ) -> c_int,
    >,
    /// The address of a data symbol (`function` 0) or a function (1) of
    /// image `image`, into `addr`.
    pub find_symbol: Option<
        unsafe extern "C" fn(
            context: *mut c_void,
            image: u32,
            name: *const c_char,
            function: c_int,
            addr: *mut u64,
        ) -> c_int,
    >,
    /// The debugger's number for a named type of image `image` (a typedef
    /// name, a struct tag, or `struct TAG`), into `id`.
    pub find_type: Option<
        unsafe extern "C" fn(
            context: *mut c_void,
            image: u32,
            name: *const c_char,
            id: *mut u64,
        ) -> c_int,
    >,
    /// The offset of a member of type `id` (a path `a.b` through untagged
    /// members), into `offset`.
    pub field_offset: Option<
        unsafe extern "C" fn(
            context: *mut c_void,
            id: u64,
            name: *const c_char,
            offset: *mut u64,
        ) -> c_int,
    >,
    /// The size of type `id` in bytes, into `size`.
    pub size_of:
        Option<unsafe extern "C" fn(context: *mut c_void, id: u64, size: *mut u64) -> c_int>,
    /// The DLL is entered at this entry point (told when it changes), so
    /// that a DLL that dies or hangs is placed.
    pub calling: Option<unsafe extern "C" fn(context: *mut c_void, entry_point: *const c_char)>,
}

/// Room for why a read failed.
const WHY_LEN: usize = 256;

impl Answers {
    fn read(&self, process: u32, addr: u64, buf: &mut [u8]) -> std::result::Result<(), String> {
        let Some(read) = self.read else {
            return Err("the debugger reads no memory".into());
        };
        let Ok(size) = u32::try_from(buf.len()) else {
            return Err("read too large".into());
        };
        let mut why = [0 as c_char; WHY_LEN];
        // SAFETY: the debugger's function with the table's signature; the
        // buffers are ours, of the sizes passed.
        let rc = unsafe {
            read(
                self.context,
                process,
                addr,
                size,
                buf.as_mut_ptr(),
                why.as_mut_ptr(),
                WHY_LEN as u32,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        // The last byte stays NUL whatever the debugger wrote before it.
        why[WHY_LEN - 1] = 0;
        // SAFETY: NUL-terminated within the array (set just above).
        let text = unsafe { CStr::from_ptr(why.as_ptr()) }.to_string_lossy();
        Err(if text.is_empty() {
            "the debugger cannot read it".into()
        } else {
            text.into_owned()
        })
    }

    fn find_symbol(&self, image: u32, name: &str, function: bool) -> Option<u64> {
        let find = self.find_symbol?;
        let name = CString::new(name).ok()?;
        let mut addr = 0u64;
        // SAFETY: the debugger's function; a C string and an out-pointer of ours.
        let rc = unsafe {
            find(
                self.context,
                image,
                name.as_ptr(),
                c_int::from(function),
                &mut addr,
            )
        };
        (rc == 0).then_some(addr)
    }

    fn find_type(&self, image: u32, name: &str) -> Option<u64> {
        let find = self.find_type?;
        let name = CString::new(name).ok()?;
        let mut id = 0u64;
        // SAFETY: as find_symbol.
        let rc = unsafe { find(self.context, image, name.as_ptr(), &mut id) };
        (rc == 0).then_some(id)
    }

    fn field_offset(&self, id: u64, name: &str) -> Option<u64> {
        let find = self.field_offset?;
        let name = CString::new(name).ok()?;
        let mut offset = 0u64;
        // SAFETY: as find_symbol.
        let rc = unsafe { find(self.context, id, name.as_ptr(), &mut offset) };
        (rc == 0).then_some(offset)
    }

    fn size_of(&self, id: u64) -> Option<u64> {
        let size_of = self.size_of?;
        let mut size = 0u64;
        // SAFETY: the debugger's function; an out-pointer of ours.
        let rc = unsafe { size_of(self.context, id, &mut size) };
        (rc == 0).then_some(size)
    }

    /// Tells the debugger which entry point the DLL is entered at.
    pub(crate) fn calling(&self, entry_point: &str) {
        let (Some(calling), Ok(name)) = (self.calling, CString::new(entry_point)) else {
            return;
        };
        // SAFETY: the debugger's function; a C string of ours.
        unsafe { calling(self.context, name.as_ptr()) };
    }
}

/// One process as the debugger describes it.
#[derive(Debug, Deserialize)]
pub struct Described {
    pub pid: i32,
    pub executable: String,
    /// Its MPI_COMM_WORLD rank, -1 if the debugger cannot tell.
    #[serde(default = "unknown_rank")]
    pub global_rank: i32,
    /// The size of a pointer in bytes.
    #[serde(default = "pointer_bytes")]
    pub pointer_size: u32,
    /// A live process of this machine (not a core file, not remote).
    #[serde(default)]
    pub local_live: bool,
    /// How its DLL was chosen, when the user did not name it (the plan's).
    #[serde(default)]
    pub chosen: Option<String>,
}

fn unknown_rank() -> i32 {
    -1
}

fn pointer_bytes() -> u32 {
    8
}

/// One of the debugger's processes, as the session reads it.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) answers: Answers,
    pub(crate) index: u32,
    pub(crate) pid: i32,
    pub(crate) executable: PathBuf,
    pub(crate) pointer_size: u32,
    /// A live process of this machine: its environment and the paths it
    /// names are read through /proc, as mqs-dump reads them.
    pub(crate) local_live: bool,
}

/// Most entries of `environ` read from a process's memory.
const MAX_ENVIRON: u64 = 1 << 16;
/// Longest `NAME=value` read.
const MAX_VARIABLE: usize = 1 << 16;

impl Process {
    pub(crate) fn of(answers: Answers, index: u32, described: &Described) -> Self {
        Process {
            answers,
            index,
            pid: described.pid,
            executable: PathBuf::from(&described.executable),
            pointer_size: described.pointer_size,
            local_live: described.local_live,
        }
    }

    /// The environment as the C library holds it (`environ`): for a core
    /// file or a process elsewhere, which have no /proc here.
    fn environ(&self) -> Result<Environment> {
        let symbol = ["environ", "__environ"]
            .iter()
            .find_map(|name| self.answers.find_symbol(self.index, name, false));
        let Some(symbol) = symbol else {
            return Ok(Environment::default());
        };
        let word = self.pointer_size;
        let array = read_word(self, symbol, word)?;
        let mut strings = Vec::new();
        for i in 0..MAX_ENVIRON {
            let entry = read_word(self, array + i * u64::from(word), word)?;
            if entry == 0 {
                break;
            }
            strings.push(read_c_string(self, entry, MAX_VARIABLE)?.into_bytes());
        }
        Ok(Environment::from_strings(strings.iter().map(Vec::as_slice)))
    }
}

impl Target for Process {
    fn pid(&self) -> i32 {
        self.pid
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.answers
            .read(self.index, addr, buf)
            .map_err(|detail| Error::Read {
                pid: self.pid,
                addr,
                len: buf.len(),
                detail,
            })
    }

    // The debugger keeps these to itself: neither the DLL nor the choice
    // of a DLL needs them.
    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        Ok(Vec::new())
    }

    fn executable(&self) -> Result<PathBuf> {
        Ok(self.executable.clone())
    }

    fn environment(&self) -> Result<Environment> {
        if self.local_live {
            if let Ok(env) = environment_of(self.pid) {
                return Ok(env);
            }
        }
        self.environ()
    }

    fn path_in_root(&self, path: &Path) -> PathBuf {
        if self.local_live {
            in_process_root(self.pid, path)
        } else {
            path.to_path_buf()
        }
    }

    fn threads(&self) -> Result<Vec<Thread>> {
        Ok(Vec::new())
    }

    fn liveness(&self) -> Liveness {
        Liveness::Running
    }

    fn pointer_size(&self) -> u32 {
        self.pointer_size
    }
}

/// The symbols and types of one process's image, as the debugger has them.
#[derive(Debug)]
pub(crate) struct Image {
    pub(crate) answers: Answers,
    pub(crate) index: u32,
}

impl ImageSymbols for Image {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.answers.find_symbol(self.index, name, false)
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        self.answers.find_symbol(self.index, name, true)
    }

    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        let id = self.answers.find_type(self.index, name)?;
        Some(TypeLayout {
            size: None,
            fields: Vec::new(),
            handle: Some(id),
        })
    }

    fn field_offset(&self, ty: &TypeLayout, name: &str) -> Option<u64> {
        match ty.handle {
            Some(id) => self.answers.field_offset(id, name),
            None => ty.field_offset(name),
        }
    }

    fn type_size(&self, ty: &TypeLayout) -> Option<u64> {
        match ty.handle {
            Some(id) => self.answers.size_of(id),
            None => ty.size,
        }
    }
}
