//! What may be looked up in a process's images: symbols and the layouts of
//! types, the questions a message-queue DLL asks its debugger.

use std::rc::Rc;
use std::sync::Arc;

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

forward_symbols!(Arc);
forward_symbols!(Rc);

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
