//! A recorded process: the types and symbols a debugger would report, the
//! memory the DLL read, and the dump the DLL produced from it.

use std::collections::BTreeMap;
use std::path::Path;

use mqs_dll::testing::{FakeImage, FakeProcess};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TypeInfo {
    /// Known by its struct tag only, no typedef (Open MPI's sparse-group
    /// structs): a debugger that evaluates `sizeof(NAME)` finds it only
    /// as `struct NAME`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tag_only: bool,
    pub size: u64,
    pub fields: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Region {
    pub addr: u64,
    pub hex: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(default)]
    pub description: String,
    #[serde(default = "lp64")]
    pub type_sizes: [i32; 5],
    #[serde(default)]
    pub global_rank: i32,
    pub symbols: BTreeMap<String, u64>,
    pub types: BTreeMap<String, TypeInfo>,
    #[serde(default)]
    pub memory: Vec<Region>,
    /// The dump the DLL produced when the snapshot was recorded.
    #[serde(default)]
    pub expected: Option<serde_json::Value>,
}

fn lp64() -> [i32; 5] {
    [2, 4, 8, 8, 8]
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn from_hex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .filter_map(|c| std::str::from_utf8(c).ok())
        .filter_map(|s| u8::from_str_radix(s, 16).ok())
        .collect()
}

impl Snapshot {
    pub fn load(path: &Path) -> Result<Snapshot, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn fake_image(&self) -> FakeImage {
        let mut image = FakeImage::new();
        for (name, addr) in &self.symbols {
            image.symbols.insert(name.clone(), *addr);
        }
        for (name, t) in &self.types {
            let fields: Vec<(&str, u64)> = t.fields.iter().map(|(f, o)| (f.as_str(), *o)).collect();
            // As gdb or TotalView find it: a tag only with its keyword.
            let name = if t.tag_only {
                format!("struct {name}")
            } else {
                name.clone()
            };
            image.add_type(&name, t.size, &fields);
        }
        image
    }

    pub fn fake_process(&self) -> FakeProcess {
        let mut p = FakeProcess::new();
        for r in &self.memory {
            p.map(r.addr, from_hex(&r.hex));
        }
        p
    }

    /// Merges recorded reads (address, bytes) into regions.
    pub fn set_memory(&mut self, reads: &BTreeMap<u64, Vec<u8>>) {
        let mut merged: Vec<(u64, Vec<u8>)> = Vec::new();
        for (&addr, bytes) in reads {
            if let Some((start, data)) = merged.last_mut() {
                let end = *start + data.len() as u64;
                if addr <= end {
                    let skip = (end - addr) as usize;
                    if skip < bytes.len() {
                        data.extend_from_slice(&bytes[skip..]);
                    }
                    continue;
                }
            }
            merged.push((addr, bytes.clone()));
        }
        self.memory = merged
            .into_iter()
            .map(|(addr, data)| Region {
                addr,
                hex: to_hex(&data),
            })
            .collect();
    }
}

impl Snapshot {
    /// A process recorded by the real host (`super::session`), as this
    /// in-process view of it: what a C debugger's tables would hold. Types
    /// known only by their tag (asked as `struct NAME`) keep that mark.
    pub fn from_recorded(name: &str, p: &super::session::Recorded) -> Snapshot {
        let log = &p.symbols;
        let mut snap = Snapshot {
            description: format!("{name}, process {}", p.member.identity),
            type_sizes: lp64(),
            global_rank: p.member.identity,
            ..Snapshot::default()
        };
        for (n, addr) in log.symbols.iter().chain(&log.functions) {
            if let Some(addr) = addr {
                snap.symbols.insert(n.clone(), *addr);
            }
        }
        for (n, t) in &log.types {
            let Some(t) = t else { continue };
            let (tag_only, n) = match n.strip_prefix("struct ") {
                Some(tag) => (true, tag),
                None => (false, n.as_str()),
            };
            snap.types.insert(
                n.to_string(),
                TypeInfo {
                    tag_only,
                    size: t.size.unwrap_or(0),
                    fields: t.fields.iter().cloned().collect(),
                },
            );
        }
        let mut pages: Vec<_> = p.target.pages.iter().collect();
        pages.sort_unstable_by_key(|(n, _)| **n);
        let page = mqs_core::interface::PAGE_SIZE;
        let reads: BTreeMap<u64, Vec<u8>> = pages
            .into_iter()
            .map(|(n, b)| (n * page, b.to_vec()))
            .collect();
        snap.set_memory(&reads);
        snap
    }
}
