//! MPI_T control variables: list them for an MPI library, read the values a
//! live job runs with, validate a setting, and check a library's MPI_T
//! against the standard.
//!
//! An MPI library is never loaded into the tool itself: a broken or
//! aborting libmpi must not take it down. `helper` starts a subprocess (our
//! own executable, told to act as the helper), which loads the library with
//! `library`, answers one [`protocol::Request`] and exits; `check` runs in
//! that subprocess too. `live` reads a running job's memory through the
//! host's symbols. The model below is what crosses the process boundary
//! and what `render` prints.
//!
//! Data flows one way: `abi` (the MPIs' constants) -> `library` (dlopen,
//! MPI_T calls) -> `check`; `protocol` and `helper` carry their answers to
//! the parent; `live` (target memory) and the listing meet in `compare`;
//! `render` prints.

pub mod abi;
pub mod check;
pub mod compare;
pub mod error;
pub mod helper;
pub mod library;
pub mod live;
pub mod model;
pub mod processes;
pub mod protocol;
pub mod render;

pub use error::{Error, Result};
pub use model::{
    describe_value, Bind, Datatype, DatatypeName, EnumItem, Enumeration, Filter, Listing, Number,
    Scope, Value, Variable, VariableError, Verbosity, SCHEMA_VERSION,
};
