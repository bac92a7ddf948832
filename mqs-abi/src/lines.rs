//! [`Lines`]: the lines of an operation's `extra_text`, kept in one
//! allocation. A dump holds hundreds of thousands of operations of three to
//! five short lines each; as a `Vec<String>` each line cost an allocation of
//! its own and the whole about 260 bytes, in one block about 130.

use std::fmt;

/// Lines of text, each ended by a NUL inside one boxed string (a line read
/// from a C string never holds a NUL). Serialised as a list of strings.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Lines(Box<str>);

impl Lines {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines already in the inner form: each one ended by a NUL, none
    /// holding one.
    pub(crate) fn from_nul_terminated(all: String) -> Self {
        debug_assert!(all.is_empty() || all.ends_with('\0'));
        Lines(all.into_boxed_str())
    }

    /// Appends `line` (a NUL in it would split it, so it becomes a space).
    pub fn push(&mut self, line: &str) {
        let mut all = std::mem::take(&mut self.0).into_string();
        all.reserve_exact(line.len() + 1);
        append(&mut all, line);
        self.0 = all.into_boxed_str();
    }

    pub fn iter(&self) -> std::str::SplitTerminator<'_, char> {
        self.0.split_terminator('\0')
    }

    pub fn len(&self) -> usize {
        self.0.bytes().filter(|&b| b == 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        self.iter().nth(i)
    }

    pub fn first(&self) -> Option<&str> {
        self.iter().next()
    }

    pub fn last(&self) -> Option<&str> {
        self.iter().next_back()
    }

    /// Keeps the first `n` lines.
    pub fn truncate(&mut self, n: usize) {
        let end = match n {
            0 => Some(0),
            // Bytes, not chars: NUL is one byte in UTF-8, and this runs
            // once per operation of queues of 100,000.
            n => self
                .0
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == 0)
                .nth(n - 1)
                .map(|(i, _)| i + 1),
        };
        if let Some(end) = end.filter(|&e| e < self.0.len()) {
            self.0 = self.0[..end].into();
        }
    }

    /// The lines joined by `sep`.
    pub fn join(&self, sep: &str) -> String {
        self.iter().collect::<Vec<_>>().join(sep)
    }

    /// Whether one of the lines is `line`.
    pub fn contains<S: AsRef<str> + ?Sized>(&self, line: &S) -> bool {
        self.iter().any(|l| l == line.as_ref())
    }

    /// Whether any line contains `needle`.
    pub fn any_contains(&self, needle: &str) -> bool {
        self.iter().any(|l| l.contains(needle))
    }
}

/// Lines written one after the other into one buffer, then made [`Lines`]
/// at once: no allocation per line.
#[derive(Debug, Default)]
pub struct LinesBuf(String);

impl LinesBuf {
    pub fn with_capacity(bytes: usize) -> Self {
        LinesBuf(String::with_capacity(bytes))
    }

    pub fn push(&mut self, line: &str) {
        append(&mut self.0, line);
    }

    /// Appends the line `format_args!` makes.
    pub fn push_fmt(&mut self, args: fmt::Arguments<'_>) {
        let start = self.0.len();
        // Writing into a String cannot fail.
        let _ = fmt::Write::write_fmt(&mut self.0, args);
        if self.0[start..].contains('\0') {
            let line: String = self.0[start..]
                .chars()
                .map(|c| if c == '\0' { ' ' } else { c })
                .collect();
            self.0.truncate(start);
            self.0.push_str(&line);
        }
        self.0.push('\0');
    }

    pub fn finish(self) -> Lines {
        Lines(self.0.into_boxed_str())
    }
}

/// Appends `line` and its end to `all`.
fn append(all: &mut String, line: &str) {
    if line.contains('\0') {
        all.extend(line.chars().map(|c| if c == '\0' { ' ' } else { c }));
    } else {
        all.push_str(line);
    }
    all.push('\0');
}

/// The lines of a slice, in one allocation of the exact size.
fn from_slice<S: AsRef<str>>(lines: &[S]) -> Lines {
    let size = lines.iter().map(|l| l.as_ref().len() + 1).sum();
    let mut all = String::with_capacity(size);
    for line in lines {
        append(&mut all, line.as_ref());
    }
    Lines(all.into_boxed_str())
}

impl<S: AsRef<str>> FromIterator<S> for Lines {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut all = String::with_capacity(128);
        for line in iter {
            append(&mut all, line.as_ref());
        }
        Lines(all.into_boxed_str())
    }
}

impl From<Vec<String>> for Lines {
    fn from(v: Vec<String>) -> Self {
        from_slice(&v)
    }
}

impl<const N: usize> From<[&str; N]> for Lines {
    fn from(v: [&str; N]) -> Self {
        from_slice(&v)
    }
}

impl<'a> IntoIterator for &'a Lines {
    type Item = &'a str;
    type IntoIter = std::str::SplitTerminator<'a, char>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Lines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for Lines {
    fn eq(&self, other: &Vec<S>) -> bool {
        self.iter().eq(other.iter().map(AsRef::as_ref))
    }
}

impl<S: AsRef<str>> PartialEq<&[S]> for Lines {
    fn eq(&self, other: &&[S]) -> bool {
        self.iter().eq(other.iter().map(AsRef::as_ref))
    }
}

impl<S: AsRef<str>, const N: usize> PartialEq<[S; N]> for Lines {
    fn eq(&self, other: &[S; N]) -> bool {
        self.iter().eq(other.iter().map(AsRef::as_ref))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Lines {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Lines {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Vec<String> = Vec::deserialize(d)?;
        Ok(v.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_in_order_and_counted() {
        let mut l = Lines::new();
        assert!(l.is_empty());
        assert_eq!(l.len(), 0);
        assert_eq!(l.first(), None);
        l.push("receive request 0x10");
        l.push("");
        l.push("8 x MPI_INT");
        assert_eq!(l.len(), 3);
        assert_eq!(l, ["receive request 0x10", "", "8 x MPI_INT"]);
        assert_eq!(l.get(1), Some(""));
        assert_eq!(l.last(), Some("8 x MPI_INT"));
        assert_eq!(l.join(" | "), "receive request 0x10 |  | 8 x MPI_INT");
        assert!(l.any_contains("MPI_INT"));
        l.truncate(1);
        assert_eq!(l, ["receive request 0x10"]);
        l.truncate(0);
        assert!(l.is_empty());
    }

    #[test]
    fn a_nul_inside_a_line_does_not_split_it() {
        let l: Lines = ["a\0b"].into();
        assert_eq!(l, ["a b"]);
        let mut b = LinesBuf::with_capacity(8);
        b.push_fmt(format_args!("x{}y", '\0'));
        b.push("request 0x10");
        b.push_fmt(format_args!("{} x {}", 4, "MPI_INT"));
        assert_eq!(b.finish(), ["x y", "request 0x10", "4 x MPI_INT"]);
    }

    #[test]
    fn one_empty_line_is_not_no_lines() {
        let l: Lines = [""].into();
        assert_eq!(l.len(), 1);
        assert!(!l.is_empty());
    }
}
