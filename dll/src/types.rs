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

/// How a debugger can find a struct known only by its tag (no typedef).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagForm {
    /// `struct TAG`: a C type expression (gdb, TotalView, mqs-dump).
    Keyword,
    /// `TAG` alone: debuggers that look tags up by their bare name.
    Bare,
}

/// Finds structs known only by their tag. The first one is asked for as
/// `struct TAG`, then as `TAG`; the form that worked is used for the
/// others, and if neither did, the others are not asked for at all (a
/// failing lookup is the slowest one in debuggers that ask gdb).
pub(crate) struct TagLookup<'r, I: ImageAccess> {
    image: &'r I,
    /// None: not learned yet; Some(None): this debugger finds no tags.
    form: Option<Option<TagForm>>,
}

impl<'r, I: ImageAccess> TagLookup<'r, I> {
    pub(crate) fn new(image: &'r I) -> Self {
        TagLookup { image, form: None }
    }

    pub(crate) fn find(&mut self, tag: &'static str) -> Option<Ty<'r, I>> {
        let forms: &[TagForm] = match self.form {
            Some(None) => return None,
            Some(Some(TagForm::Keyword)) => &[TagForm::Keyword],
            Some(Some(TagForm::Bare)) => &[TagForm::Bare],
            None => &[TagForm::Keyword, TagForm::Bare],
        };
        for &form in forms {
            let name = match form {
                TagForm::Keyword => format!("struct {tag}"),
                TagForm::Bare => tag.to_string(),
            };
            if let Some(handle) = self.image.find_type(&name) {
                self.form = Some(Some(form));
                return Some(Ty {
                    image: self.image,
                    name: tag,
                    handle,
                });
            }
        }
        self.form = Some(None);
        None
    }
}
