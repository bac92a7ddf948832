//! Types and fields asked of an image, for every backend's layout: a
//! type's fields and size asked for only when a layout needs them, and
//! what was missing when one is not there (named in `mqs_image_has_queues`
//! messages).

use std::fmt;

use crate::access::ImageAccess;
use crate::errors::DllError;

/// What could not be resolved, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Missing {
    Type(&'static str),
    Field(&'static str, &'static str),
    Symbol(&'static str),
}

impl Missing {
    pub fn error(self) -> DllError {
        match self {
            Missing::Type(_) => DllError::MissingType,
            Missing::Field(..) => DllError::MissingField,
            Missing::Symbol(_) => DllError::MissingSymbol,
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Type(t) => write!(f, "type {t}"),
            Missing::Field(t, field) => write!(f, "field {field} of {t}"),
            Missing::Symbol(s) => write!(f, "symbol {s}"),
        }
    }
}

/// A resolved type and a way to ask for its fields and size (each asked
/// when needed, once).
pub(crate) struct Ty<'r, I: ImageAccess> {
    image: &'r I,
    name: &'static str,
    handle: I::Type,
}

impl<I: ImageAccess> Ty<'_, I> {
    pub(crate) fn field(&self, field: &'static str) -> Result<u64, Missing> {
        self.image
            .field_offset(self.handle, field)
            .ok_or(Missing::Field(self.name, field))
    }

    pub(crate) fn opt(&self, field: &'static str) -> Option<u64> {
        self.image.field_offset(self.handle, field)
    }

    pub(crate) fn size(&self) -> Result<u64, Missing> {
        self.image
            .size_of(self.handle)
            .ok_or(Missing::Type(self.name))
    }
}

pub(crate) fn ty<'r, I: ImageAccess>(
    image: &'r I,
    name: &'static str,
) -> Result<Ty<'r, I>, Missing> {
    let handle = image.find_type(name).ok_or(Missing::Type(name))?;
    Ok(Ty {
        image,
        name,
        handle,
    })
}
