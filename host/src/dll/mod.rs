//! Everything about message-queue DLLs: finding and trusting one
//! (`locate`), loading and checking it (`library`), the callbacks it calls
//! (`callbacks`, over the handle objects in `handles`), and driving it
//! through a dump (`session`).

mod callbacks;
pub mod capture;
mod handles;
pub mod library;
pub mod locate;
pub mod session;
pub mod watchdog;

pub use callbacks::{codes as host_codes, is_verbose, set_verbose};
pub use library::Dll;
pub use session::{ImageId, ProcessId, Session};

/// DLLs keep global state (Open MPI's does) and the output capture moves the
/// process's stdout and stderr: one session at a time in a process. Held
/// for a whole dump; a poisoned lock is still a lock.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    crate::sync::lock(&LOCK)
}

/// What the DLL may look up in an image: the host's symbol tables and DWARF
/// behind a small interface, so the DLL layer does not depend on how they
/// are read (and unit tests can give fixed answers).
pub trait ImageSymbols {
    /// Runtime address of a data symbol (file-static ones included).
    fn find_symbol(&self, name: &str) -> Option<u64>;
    /// Runtime address of a function.
    fn find_function(&self, name: &str) -> Option<u64>;
    /// Layout of a named type (typedef name or struct tag).
    fn find_type(&self, name: &str) -> Option<TypeLayout>;
}

/// Shared symbol sources are symbol sources.
macro_rules! forward_symbols {
    ($ptr:ident) => {
        impl<T: ImageSymbols + ?Sized> ImageSymbols for $ptr<T> {
            fn find_symbol(&self, name: &str) -> Option<u64> {
                (**self).find_symbol(name)
            }
            fn find_function(&self, name: &str) -> Option<u64> {
                (**self).find_function(name)
            }
            fn find_type(&self, name: &str) -> Option<TypeLayout> {
                (**self).find_type(name)
            }
        }
    };
}

use std::rc::Rc;
use std::sync::Arc;
forward_symbols!(Arc);
forward_symbols!(Rc);

/// The host's own symbol tables and DWARF.
impl ImageSymbols for crate::symbols::SymbolIndex {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        crate::symbols::SymbolIndex::find_symbol(self, name)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        crate::symbols::SymbolIndex::find_function(self, name)
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        let info = crate::symbols::SymbolIndex::find_type(self, name)?;
        Some(TypeLayout {
            size: info.size,
            fields: info.fields.clone(),
        })
    }
}

/// What the DLL can learn about a type: its size and top-level members.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TypeLayout {
    pub size: Option<u64>,
    pub fields: Vec<(String, u64)>,
}

impl TypeLayout {
    pub fn field_offset(&self, name: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|&(_, offset)| offset)
    }
}
