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

    /// The inner form: each line followed by a NUL.
    pub(crate) fn as_nul_terminated(&self) -> &str {
        &self.0
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
        // Asked of every operation of every rank by the analyses: one
        // byte search, no splitter set up.
        let end = self.0.as_bytes().iter().position(|&b| b == 0)?;
        Some(&self.0[..end])
    }

    pub fn last(&self) -> Option<&str> {
        self.iter().next_back()
    }

    /// Keeps the first `n` lines.
    pub fn truncate(&mut self, n: usize) {
        let end = match n {
            0 => Some(0),
            // A char pattern is found with memchr: this runs once per
            // operation of queues of 100,000.
            n => self.0.match_indices('\0').nth(n - 1).map(|(i, _)| i + 1),
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
/// at once: no allocation per line. A DLL makes one per operation, of
/// queues of 100,000s, so lines can also be built from [`Part`]s, without
/// the formatting machinery.
#[derive(Debug, Default)]
pub struct LinesBuf {
    text: String,
    lines: usize,
}

/// A piece of a line for [`LinesBuf::push_parts`].
#[derive(Debug, Clone, Copy)]
pub enum Part<'a> {
    /// Text that may hold a NUL (made a space, as [`LinesBuf::push`] does).
    Text(&'a str),
    /// A literal of the program: it holds no NUL, so it is not searched
    /// for one.
    Lit(&'static str),
    /// As `{:#x}` writes it: `0x` and lowercase digits.
    Hex(u64),
    /// In decimal.
    Dec(u64),
}

impl LinesBuf {
    pub fn with_capacity(bytes: usize) -> Self {
        LinesBuf {
            text: String::with_capacity(bytes),
            lines: 0,
        }
    }

    /// Lines so far.
    pub fn len(&self) -> usize {
        self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    pub fn push(&mut self, line: &str) {
        append(&mut self.text, line);
        self.lines += 1;
    }

    /// Appends the line the parts make, one after the other.
    pub fn push_parts(&mut self, parts: &[Part<'_>]) {
        let start = self.text.len();
        let mut checked = false;
        for part in parts {
            match *part {
                Part::Text(t) => {
                    checked = true;
                    self.text.push_str(t)
                }
                Part::Lit(t) => {
                    debug_assert!(!t.contains('\0'), "a literal part with a NUL: {t:?}");
                    self.text.push_str(t)
                }
                Part::Hex(v) => push_hex(&mut self.text, v),
                Part::Dec(v) => self.text.push_str(itoa::Buffer::new().format(v)),
            }
        }
        // A NUL would split the line, so it becomes a space. Numbers and
        // literals hold none: a line of them is not searched.
        if checked && self.text.as_bytes()[start..].contains(&0) {
            let line = self.text[start..].replace('\0', " ");
            self.text.truncate(start);
            self.text.push_str(&line);
        }
        self.text.push('\0');
        self.lines += 1;
    }

    pub fn finish(self) -> Lines {
        Lines(self.text.into_boxed_str())
    }

    /// The first `n` lines (all of them, without a scan, when there are no
    /// more).
    pub fn finish_first(mut self, n: usize) -> Lines {
        if self.lines > n {
            let end = match n {
                0 => 0,
                n => self
                    .text
                    .match_indices('\0')
                    .nth(n - 1)
                    .map_or(self.text.len(), |(i, _)| i + 1),
            };
            self.text.truncate(end);
        }
        self.finish()
    }
}

/// `{:#x}` of `v`.
fn push_hex(out: &mut String, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 18];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    i -= 2;
    buf[i] = b'0';
    buf[i + 1] = b'x';
    // Only ASCII digits and "0x" were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
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
        assert_eq!(l.first(), Some("receive request 0x10"));
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
        b.push_parts(&[Part::Text("x\0y")]);
        b.push("request 0x10");
        b.push_parts(&[Part::Dec(4), Part::Lit(" x "), Part::Text("MPI_INT")]);
        assert_eq!(b.finish(), ["x y", "request 0x10", "4 x MPI_INT"]);
    }

    #[test]
    fn parts_write_what_format_writes() {
        let mut b = LinesBuf::with_capacity(8);
        for v in [0u64, 1, 0xf, 0x10, 0xdead_beef, u64::MAX] {
            b.push_parts(&[Part::Lit("at "), Part::Hex(v)]);
        }
        for v in [0u64, 1, 42, 1 << 63, u64::MAX] {
            b.push_parts(&[Part::Dec(v), Part::Lit(" x "), Part::Dec(v / 2)]);
        }
        b.push_parts(&[Part::Text("a\0b"), Part::Dec(7)]);
        assert_eq!(b.len(), 12);
        let mut want: Vec<String> = [0u64, 1, 0xf, 0x10, 0xdead_beef, u64::MAX]
            .iter()
            .map(|v| format!("at {v:#x}"))
            .collect();
        want.extend(
            [0u64, 1, 42, 1 << 63, u64::MAX]
                .iter()
                .map(|&v| format!("{v} x {}", v / 2)),
        );
        want.push("a b7".into());
        assert_eq!(b.finish(), want);
    }

    #[test]
    fn finish_first_keeps_that_many_lines() {
        let make = || {
            let mut b = LinesBuf::with_capacity(8);
            for l in ["a", "", "c"] {
                b.push(l);
            }
            b
        };
        assert_eq!(make().finish_first(5), ["a", "", "c"]);
        assert_eq!(make().finish_first(3), ["a", "", "c"]);
        assert_eq!(make().finish_first(2), ["a", ""]);
        assert_eq!(make().finish_first(1), ["a"]);
        assert!(make().finish_first(0).is_empty());
    }

    #[test]
    fn one_empty_line_is_not_no_lines() {
        let l: Lines = [""].into();
        assert_eq!(l.len(), 1);
        assert!(!l.is_empty());
    }
}
