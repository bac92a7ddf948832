//! The communicator iterator the interface asks every backend for
//! (`mqs_setup_communicator_iterator`, `mqs_get_communicator`,
//! `mqs_next_communicator`): a position in the backend's list of
//! communicators, kept here once.

use mqs_abi::ReturnCode;

use crate::errors::DllError;

/// Where the iterator is: on one communicator, or nowhere (not set up, or
/// past the end: a debugger that calls again gets an error, not a crash).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cursor(Option<usize>);

impl Cursor {
    /// Nowhere: the list it indexes was rebuilt.
    pub fn reset(&mut self) {
        self.0 = None;
    }

    /// On the first of `len` communicators, or ended if there are none.
    pub fn start(&mut self, len: usize) -> ReturnCode {
        if len == 0 {
            self.0 = None;
            ReturnCode::EndOfList
        } else {
            self.0 = Some(0);
            ReturnCode::Ok
        }
    }

    /// The communicator it is on.
    pub fn get<'l, T>(&self, list: &'l [T]) -> Result<&'l T, DllError> {
        self.0
            .and_then(|i| list.get(i))
            .ok_or(DllError::NoCurrentCommunicator)
    }

    /// To the next of `len` communicators; past the last it ends.
    pub fn advance(&mut self, len: usize) -> Result<ReturnCode, DllError> {
        let cur = self.0.ok_or(DllError::NoCurrentCommunicator)?;
        if cur + 1 < len {
            self.0 = Some(cur + 1);
            Ok(ReturnCode::Ok)
        } else {
            self.0 = None;
            Ok(ReturnCode::EndOfList)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_a_list_once_and_stays_ended() {
        let list = ["a", "b"];
        let mut c = Cursor::default();
        assert!(c.get(&list).is_err());
        assert!(c.advance(2).is_err());
        assert_eq!(c.start(2), ReturnCode::Ok);
        assert_eq!(c.get(&list).ok(), Some(&"a"));
        assert_eq!(c.advance(2).ok(), Some(ReturnCode::Ok));
        assert_eq!(c.get(&list).ok(), Some(&"b"));
        assert_eq!(c.advance(2).ok(), Some(ReturnCode::EndOfList));
        assert!(c.get(&list).is_err());
        assert!(c.advance(2).is_err());
        assert_eq!(c.start(0), ReturnCode::EndOfList);
        c.start(2);
        c.reset();
        assert!(c.get(&list).is_err());
    }
}
