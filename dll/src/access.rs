//! What the DLL reads the target through: symbol and type lookups in an
//! image, memory and facts of a process. The debugger's callbacks
//! implement these ([`crate::callbacks`]), and so do the in-memory fakes of
//! tests ([`crate::testing`]); everything above them is written against
//! the traits alone.

// ---------------------------------------------------------------------------

/// Symbol and type lookups in an image.
pub trait ImageAccess {
    /// A type handle, opaque to the DLL.
    type Type: Copy;

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
