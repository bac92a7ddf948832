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
    /// Offset of a member of a type this image gave: from the layout's own
    /// list, unless the source answers members as they are asked (a
    /// debugger, through [`TypeLayout::handle`]).
    fn field_offset(&self, ty: &TypeLayout, name: &str) -> Option<u64> {
        ty.field_offset(name)
    }
    /// Size of a type this image gave, likewise.
    fn type_size(&self, ty: &TypeLayout) -> Option<u64> {
        ty.size
    }
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
            fn field_offset(&self, ty: &TypeLayout, name: &str) -> Option<u64> {
                (**self).field_offset(ty, name)
            }
            fn type_size(&self, ty: &TypeLayout) -> Option<u64> {
                (**self).type_size(ty)
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
    /// The source's own name for the type when it lists no members and
    /// answers them one by one ([`ImageSymbols::field_offset`]): a
    /// debugger's type, asked only for the members a DLL wants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<u64>,
}

impl TypeLayout {
    pub fn field_offset(&self, name: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|&(_, offset)| offset)
    }
}
