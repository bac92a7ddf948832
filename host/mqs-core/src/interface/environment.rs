//! A process's environment: the `NAME=value` strings it was given.

use serde::{Deserialize, Serialize};

/// Environment variables in their original order. Values that are not
/// UTF-8 are kept lossily: the host only looks names up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    vars: Vec<(String, String)>,
}

impl Environment {
    /// Parses a NUL-separated block, as /proc/PID/environ holds it.
    pub fn parse(raw: &[u8]) -> Self {
        Self::from_strings(raw.split(|&b| b == 0).filter(|s| !s.is_empty()))
    }

    /// From `NAME=value` strings; strings without `=` are left out.
    pub fn from_strings<'a>(strings: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let vars = strings
            .into_iter()
            .filter_map(|s| {
                let eq = s.iter().position(|&b| b == b'=')?;
                Some((
                    String::from_utf8_lossy(&s[..eq]).into_owned(),
                    String::from_utf8_lossy(&s[eq + 1..]).into_owned(),
                ))
            })
            .collect();
        Self { vars }
    }

    /// The value of `name`, the first if it is set twice.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_odd_entries() {
        let env = Environment::parse(b"A=1\0B=x=y\0NOEQUALS\0\0A=2\0");
        assert_eq!(env.get("A"), Some("1"));
        assert_eq!(env.get("B"), Some("x=y"));
        assert_eq!(env.get("NOEQUALS"), None);
        assert_eq!(env.iter().count(), 3);
        assert!(Environment::parse(b"").is_empty());
    }
}
