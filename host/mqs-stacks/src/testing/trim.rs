//! A system library cut down to what a recorded stack needs of it, so that
//! a recording carries it and replays the same on any machine, whatever
//! its own libc: the ELF, program and section headers; `.eh_frame_hdr`
//! with only the entries the recorded addresses look up, and the FDEs and
//! CIEs those point to in `.eh_frame`, at their offsets; a symbol table of
//! only the functions that name those addresses, taken from the library's
//! tables and its separate debug file's, as mqs-core takes them. Every
//! other byte is zero and every other section is taken out of the section
//! table (the build-id note among them: no debug file is looked for).

/// A section header, as far as cutting needs it.
#[derive(Debug, Clone)]
struct Section {
    index: usize,
    /// Where its 64-byte header is in the file.
    header: usize,
    name: String,
    kind: u32,
    addr: u64,
    offset: usize,
    size: usize,
    link: usize,
}

/// A function symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    name: Vec<u8>,
    info: u8,
    other: u8,
    value: u64,
    size: u64,
}

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;
const SYM_SIZE: usize = 24;
const SECTION_HEADER_SIZE: usize = 64;
/// `.eh_frame_hdr` as every GNU linker writes it: version 1, the
/// `.eh_frame` pointer pc-relative sdata4, the count udata4, the table
/// datarel sdata4.
const EH_FRAME_HDR_ENCODING: [u8; 4] = [1, 0x1b, 0x03, 0x3b];

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn sections(file: &[u8]) -> Vec<Section> {
    assert_eq!(&file[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let shoff = u64_at(file, 0x28) as usize;
    let count = usize::from(u16_at(file, 0x3c));
    let names = usize::from(u16_at(file, 0x3e));
    let raw: Vec<(usize, u32, u32, u64, usize, usize, usize)> = (0..count)
        .map(|i| {
            let h = shoff + i * SECTION_HEADER_SIZE;
            (
                h,
                u32_at(file, h),
                u32_at(file, h + 4),
                u64_at(file, h + 16),
                u64_at(file, h + 24) as usize,
                u64_at(file, h + 32) as usize,
                u32_at(file, h + 40) as usize,
            )
        })
        .collect();
    let strings = raw[names].4;
    raw.iter()
        .enumerate()
        .map(|(index, &(header, name, kind, addr, offset, size, link))| {
            let at = strings + name as usize;
            let end = at + file[at..].iter().position(|&b| b == 0).unwrap();
            Section {
                index,
                header,
                name: String::from_utf8_lossy(&file[at..end]).into_owned(),
                kind,
                addr,
                offset,
                size,
                link,
            }
        })
        .collect()
}

fn section<'a>(sections: &'a [Section], name: &str) -> Option<&'a Section> {
    sections.iter().find(|s| s.name == name)
}

/// The defined functions of every symbol table of `file`, as mqs-core's
/// table takes them.
fn functions(file: &[u8]) -> Vec<Function> {
    let sections = sections(file);
    let mut out = Vec::new();
    for table in sections
        .iter()
        .filter(|s| s.kind == SHT_SYMTAB || s.kind == SHT_DYNSYM)
    {
        let strings = &sections[table.link];
        for at in (table.offset..table.offset + table.size).step_by(SYM_SIZE) {
            let info = file[at + 4];
            let shndx = u16_at(file, at + 6);
            let defined = shndx != 0 && shndx < 0xff00;
            if !defined || !matches!(info & 0xf, STT_FUNC | STT_GNU_IFUNC) {
                continue;
            }
            let name_at = strings.offset + u32_at(file, at) as usize;
            let len = file[name_at..].iter().position(|&b| b == 0).unwrap();
            if len == 0 {
                continue;
            }
            out.push(Function {
                name: file[name_at..name_at + len].to_vec(),
                info,
                other: file[at + 5],
                value: u64_at(file, at + 8),
                size: u64_at(file, at + 16),
            });
        }
    }
    out
}

/// The functions that name `addresses`: for each, every symbol at the
/// closest start at or below it (mqs-core picks among those, and looks no
/// further).
fn naming(candidates: &[Function], addresses: &[u64]) -> Vec<Function> {
    let mut kept: Vec<Function> = Vec::new();
    for &a in addresses {
        let Some(start) = candidates.iter().map(|f| f.value).filter(|v| *v <= a).max() else {
            continue;
        };
        for f in candidates.iter().filter(|f| f.value == start) {
            if !kept.contains(f) {
                kept.push(f.clone());
            }
        }
    }
    kept
}

/// `file` cut down to what unwinding and naming `addresses` (link-time
/// addresses) read of it; `debug_file` is its separate debug file, whose
/// symbols count when `file` has no `.symtab`.
pub(crate) fn trim(file: &[u8], addresses: &[u64], debug_file: Option<&[u8]>) -> Vec<u8> {
    let sections = sections(file);
    let mut out = vec![0u8; file.len()];
    let copy = |out: &mut [u8], at: usize, len: usize| {
        out[at..at + len].copy_from_slice(&file[at..at + len]);
    };
    // The ELF header, program headers, section headers and their names.
    let phoff = u64_at(file, 0x20) as usize;
    let phsize = usize::from(u16_at(file, 0x36)) * usize::from(u16_at(file, 0x38));
    let shoff = u64_at(file, 0x28) as usize;
    copy(&mut out, 0, usize::from(u16_at(file, 0x34)));
    copy(&mut out, phoff, phsize);
    copy(&mut out, shoff, sections.len() * SECTION_HEADER_SIZE);
    let names = &sections[usize::from(u16_at(file, 0x3e))];
    copy(&mut out, names.offset, names.size);

    let mut kept = vec![0, names.index];
    kept.extend(cut_unwind_tables(file, &sections, addresses, &mut out));
    kept.extend(write_symbols(
        file, &sections, addresses, debug_file, &mut out,
    ));
    for s in &sections {
        if !kept.contains(&s.index) {
            out[s.header..s.header + SECTION_HEADER_SIZE].fill(0);
        }
    }
    out
}

/// Rewrites `.eh_frame_hdr` with the table entries `addresses` look up,
/// and copies the FDEs they point to and those FDEs' CIEs; returns the
/// sections kept.
fn cut_unwind_tables(
    file: &[u8],
    sections: &[Section],
    addresses: &[u64],
    out: &mut [u8],
) -> Vec<usize> {
    let (Some(hdr), Some(eh)) = (
        section(sections, ".eh_frame_hdr"),
        section(sections, ".eh_frame"),
    ) else {
        panic!("no .eh_frame_hdr and .eh_frame: only those are cut down");
    };
    let data = &file[hdr.offset..hdr.offset + hdr.size];
    assert_eq!(
        data[..4],
        EH_FRAME_HDR_ENCODING,
        "an .eh_frame_hdr encoded as GNU ld does"
    );
    let count = u32_at(data, 8) as usize;
    // (initial location, FDE), both relative to the header's address.
    let table: Vec<(i32, i32)> = (0..count)
        .map(|i| {
            let at = 12 + i * 8;
            (u32_at(data, at) as i32, u32_at(data, at + 4) as i32)
        })
        .collect();
    let mut entries: Vec<(i32, i32)> = addresses
        .iter()
        .filter_map(|&a| {
            let i = table.partition_point(|e| hdr.addr.wrapping_add_signed(e.0.into()) <= a);
            table.get(i.checked_sub(1)?).copied()
        })
        .collect();
    entries.sort();
    entries.dedup();
    let at = hdr.offset;
    out[at..at + 8].copy_from_slice(&data[..8]);
    out[at + 8..at + 12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    for (i, (location, fde)) in entries.iter().enumerate() {
        let slot = at + 12 + i * 8;
        out[slot..slot + 4].copy_from_slice(&location.to_le_bytes());
        out[slot + 4..slot + 8].copy_from_slice(&fde.to_le_bytes());
        let fde = (hdr.addr.wrapping_add_signed((*fde).into()) - eh.addr) as usize;
        // The CIE pointer counts back from its own field.
        let cie = fde + 4 - u32_at(file, eh.offset + fde + 4) as usize;
        for entry in [fde, cie] {
            let len = u32_at(file, eh.offset + entry) as usize;
            assert_ne!(len, 0xffff_ffff, "64-bit CFI entries are not cut");
            let start = eh.offset + entry;
            out[start..start + 4 + len].copy_from_slice(&file[start..start + 4 + len]);
        }
    }
    let text = section(sections, ".text").map(|s| s.index);
    let got = section(sections, ".got").map(|s| s.index);
    [hdr.index, eh.index]
        .into_iter()
        .chain(text)
        .chain(got)
        .collect()
}

/// Writes the functions that name `addresses` into the first slots of
/// `.dynsym` (else `.symtab`) and their names into its string table;
/// returns the sections kept.
fn write_symbols(
    file: &[u8],
    sections: &[Section],
    addresses: &[u64],
    debug_file: Option<&[u8]>,
    out: &mut [u8],
) -> Vec<usize> {
    let mut candidates = functions(file);
    let has_symtab = sections.iter().any(|s| s.kind == SHT_SYMTAB);
    if let (false, Some(debug)) = (has_symtab, debug_file) {
        candidates.extend(functions(debug));
    }
    let chosen = naming(&candidates, addresses);
    let table = sections
        .iter()
        .find(|s| s.kind == SHT_DYNSYM)
        .or_else(|| sections.iter().find(|s| s.kind == SHT_SYMTAB))
        .expect("a symbol table");
    let strings = &sections[table.link];
    let text = section(sections, ".text").expect("a .text section").index;
    assert!(
        (chosen.len() + 1) * SYM_SIZE <= table.size,
        "room for the symbols"
    );
    let mut name_at = 1;
    for (i, f) in chosen.iter().enumerate() {
        assert!(name_at + f.name.len() < strings.size, "room for the names");
        let s = strings.offset + name_at;
        out[s..s + f.name.len()].copy_from_slice(&f.name);
        let sym = table.offset + (i + 1) * SYM_SIZE;
        out[sym..sym + 4].copy_from_slice(&(name_at as u32).to_le_bytes());
        out[sym + 4] = f.info;
        out[sym + 5] = f.other;
        out[sym + 6..sym + 8].copy_from_slice(&(text as u16).to_le_bytes());
        out[sym + 8..sym + 16].copy_from_slice(&f.value.to_le_bytes());
        out[sym + 16..sym + 24].copy_from_slice(&f.size.to_le_bytes());
        name_at += f.name.len() + 1;
    }
    vec![table.index, strings.index]
}
