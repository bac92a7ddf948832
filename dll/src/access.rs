//! What the DLL reads the target through: symbol and type lookups in an
//! image, memory and facts of a process. The debugger's callbacks
//! implement these ([`crate::callbacks`]), and so do the in-memory fakes of
//! tests ([`crate::testing`]); everything above them is written against
//! the traits alone.

use std::cell::RefCell;

// ---------------------------------------------------------------------------

/// Symbol and type lookups in an image.
pub trait ImageAccess {
    /// A type handle, opaque to the DLL.
    type Type: Copy + PartialEq;

    /// Address of a data symbol.
    fn find_symbol(&self, name: &str) -> Option<u64>;
    /// Address of a function.
    fn find_function(&self, name: &str) -> Option<u64>;
    /// A type by typedef name or struct tag (C language).
    fn find_type(&self, name: &str) -> Option<Self::Type>;
    /// Offset of a top-level field, None when the type has no such field.
    fn field_offset(&self, ty: Self::Type, field: &str) -> Option<u64>;
    /// `sizeof` the type, None when unknown.
    fn size_of(&self, ty: Self::Type) -> Option<u64>;
}

/// An image whose answers are kept while one image's layouts are
/// resolved: several readers name the same types (MPICH's communicator,
/// request and object-pool types), and each question is a round trip in a
/// debugger that answers through another process, so each type, field,
/// size and symbol is asked for once.
pub struct Memo<'i, I: ImageAccess> {
    image: &'i I,
    /// (name, a function?, its address)
    symbols: RefCell<Vec<(String, bool, Option<u64>)>>,
    types: RefCell<Vec<(String, Option<I::Type>)>>,
    fields: RefCell<Vec<FieldAnswer<I::Type>>>,
    sizes: RefCell<Vec<(I::Type, Option<u64>)>>,
}

/// A field's offset in a type, as the debugger answered.
type FieldAnswer<T> = (T, String, Option<u64>);

impl<I: ImageAccess> std::fmt::Debug for Memo<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("types", &self.types.borrow().len())
            .field("fields", &self.fields.borrow().len())
            .finish()
    }
}

impl<'i, I: ImageAccess> Memo<'i, I> {
    pub fn new(image: &'i I) -> Self {
        Memo {
            image,
            symbols: RefCell::default(),
            types: RefCell::default(),
            fields: RefCell::default(),
            sizes: RefCell::default(),
        }
    }

    fn symbol(&self, name: &str, function: bool) -> Option<u64> {
        let known = self
            .symbols
            .borrow()
            .iter()
            .find(|(n, f, _)| n == name && *f == function)
            .map(|(_, _, a)| *a);
        known.unwrap_or_else(|| {
            let found = if function {
                self.image.find_function(name)
            } else {
                self.image.find_symbol(name)
            };
            self.symbols
                .borrow_mut()
                .push((name.to_string(), function, found));
            found
        })
    }
}

impl<I: ImageAccess> ImageAccess for Memo<'_, I> {
    type Type = I::Type;

    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbol(name, false)
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        self.symbol(name, true)
    }

    fn find_type(&self, name: &str) -> Option<I::Type> {
        let known = self
            .types
            .borrow()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| *t);
        known.unwrap_or_else(|| {
            let found = self.image.find_type(name);
            self.types.borrow_mut().push((name.to_string(), found));
            found
        })
    }

    fn field_offset(&self, ty: I::Type, field: &str) -> Option<u64> {
        let known = self
            .fields
            .borrow()
            .iter()
            .find(|(t, f, _)| *t == ty && f == field)
            .map(|(_, _, o)| *o);
        known.unwrap_or_else(|| {
            let found = self.image.field_offset(ty, field);
            self.fields
                .borrow_mut()
                .push((ty, field.to_string(), found));
            found
        })
    }

    fn size_of(&self, ty: I::Type) -> Option<u64> {
        let known = self
            .sizes
            .borrow()
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, s)| *s);
        known.unwrap_or_else(|| {
            let found = self.image.size_of(ty);
            self.sizes.borrow_mut().push((ty, found));
            found
        })
    }
}

/// The five basic sizes the debugger reports for a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeSizes {
    pub short: i32,
    pub int: i32,
    pub long: i32,
    pub long_long: i32,
    pub pointer: i32,
}

/// Memory and facts of one process.
pub trait ProcessAccess {
    /// Fills `buf` from target address `addr`; false unless every byte was read.
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> bool;
    /// Converts one target scalar (`input.len()` bytes) to host order.
    fn target_to_host(&self, input: &[u8], output: &mut [u8]);
    /// The process's rank in MPI_COMM_WORLD, as the debugger knows it
    /// (-1 when it does not).
    fn global_rank(&self) -> i32 {
        -1
    }
}
