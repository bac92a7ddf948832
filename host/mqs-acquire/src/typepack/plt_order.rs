//! The one difference a rebuild with a newer linker may show where the
//! compiler's output is the same: the order of the undefined symbols in
//! `.dynsym`, and so which PLT slot calls which imported function. Seen on
//! Debian 12's libucp.so.0 (built in 2022, rebuilt with bookworm's
//! binutils): two pairs of imports swapped, 414 bytes of `call` operands
//! changed with them, nothing else.
//!
//! Accepted only when proven to be exactly that, on x86-64: the sections
//! that differ are `.dynsym`, `.gnu.version` and code; every differing
//! symbol entry is an undefined one, and both tables hold the same entries;
//! every relocation names the same symbol in both files except the PLT
//! jump slots of the reordered symbols; every differing code byte is the
//! operand of a `call`/`jmp rel32` that calls, in both files, the PLT stub
//! of the same function; and every call or jump through a reordered slot,
//! changed or not, calls the same function in both. Then both files run
//! the same code on the same data, and the rebuild's DWARF describes the
//! library.

use std::collections::{BTreeSet, HashMap};

use object::elf;

/// A loaded section as `identity` reads it.
pub(super) struct Sec<'a> {
    pub name: &'a str,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub data: &'a [u8],
}

/// Who a symbol table entry is: name, info, other, section index, value,
/// size, version index.
type Identity = (Vec<u8>, u8, u8, u16, u64, u64, u16);

const SYM_SIZE: usize = 24;
const RELA_SIZE: usize = 24;
const CALL: u8 = 0xe8;
const JMP: u8 = 0xe9;

/// What [`explain`] proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reordered {
    /// Undefined symbols whose `.dynsym` index differs.
    pub symbols: usize,
    /// PLT slots whose function differs by index.
    pub slots: usize,
    /// Call and jump operands that differ, each to the same function.
    pub operands: usize,
    /// The sections that differ.
    pub sections: Vec<String>,
}

/// Proves that `a` (the library) and `b` (the rebuild), whose sections
/// have the same names, types, flags, addresses and sizes, differ only by
/// the order of their undefined dynamic symbols; or says why not.
pub(super) fn explain(a: &[Sec<'_>], b: &[Sec<'_>]) -> Result<Reordered, String> {
    let differing = differing_sections(a, b)?;
    let ids_a = identities(a)?;
    let ids_b = identities(b)?;
    let moved = moved_symbols(&ids_a, &ids_b)?;
    let renamed = renamed_slots(a, b, &ids_a, &ids_b)?;
    let stubs = plt_stubs(a, &ids_a, &ids_b, &renamed)?;
    let mut operands = 0;
    for (x, y) in a
        .iter()
        .zip(b)
        .filter(|(x, _)| x.flags & elf::SHF_EXECINSTR.0 != 0)
    {
        operands += explain_code(x, y, &renamed, &stubs)?;
    }
    Ok(Reordered {
        symbols: moved,
        slots: renamed.len(),
        operands,
        sections: differing.iter().map(|&i| a[i].name.to_owned()).collect(),
    })
}

/// Which function a PLT jump slot or stub calls, by address: in the
/// library and in the rebuild.
type Calls<'a> = HashMap<u64, (&'a Identity, &'a Identity)>;

/// The indices of the sections that differ, each one that may: code,
/// `.dynsym` or `.gnu.version`.
fn differing_sections(a: &[Sec<'_>], b: &[Sec<'_>]) -> Result<Vec<usize>, String> {
    let differing: Vec<usize> = (0..a.len()).filter(|&i| a[i].data != b[i].data).collect();
    for &i in &differing {
        let s = &a[i];
        let code = s.flags & elf::SHF_EXECINSTR.0 != 0;
        if !(code || s.name == ".dynsym" || s.name == ".gnu.version") {
            return Err(format!("section {} differs", s.name));
        }
    }
    Ok(differing)
}

/// How many `.dynsym` entries differ by index, each an undefined one, both
/// tables holding the same entries.
fn moved_symbols(ids_a: &[Identity], ids_b: &[Identity]) -> Result<usize, String> {
    if ids_a.len() != ids_b.len() {
        return Err(".dynsym has another number of symbols".into());
    }
    let mut moved = 0;
    for (i, (x, y)) in ids_a.iter().zip(ids_b).enumerate() {
        if x != y {
            if x.3 != 0 || y.3 != 0 {
                return Err(format!(
                    "dynamic symbol {i} is {} in the library, {} in the rebuild, and is defined",
                    name(x),
                    name(y)
                ));
            }
            moved += 1;
        }
    }
    let (mut sa, mut sb) = (ids_a.to_vec(), ids_b.to_vec());
    sa.sort();
    sb.sort();
    if sa != sb {
        return Err(".dynsym holds other symbols, not the same ones in another order".into());
    }
    Ok(moved)
}

/// Every relocation names the same symbol in both, but the PLT jump
/// slots of the moved symbols: those are renamed, slot by slot.
fn renamed_slots<'i>(
    a: &[Sec<'_>],
    b: &[Sec<'_>],
    ids_a: &'i [Identity],
    ids_b: &'i [Identity],
) -> Result<Calls<'i>, String> {
    let mut renamed = HashMap::new();
    for (x, _) in a
        .iter()
        .zip(b)
        .filter(|(x, _)| x.sh_type == elf::SHT_RELA.0)
    {
        for entry in x.data.chunks_exact(RELA_SIZE) {
            let offset = u64_at(entry, 0);
            let info = u64_at(entry, 8);
            let (sym, kind) = ((info >> 32) as usize, info as u32);
            if sym == 0 {
                continue;
            }
            let (Some(p), Some(q)) = (ids_a.get(sym), ids_b.get(sym)) else {
                return Err(format!(
                    "a relocation in {} names symbol {sym}, past .dynsym",
                    x.name
                ));
            };
            if p == q {
                continue;
            }
            if kind != elf::R_X86_64_JUMP_SLOT.0 {
                return Err(format!(
                    "the relocation at {offset:#x} (type {kind}) names {} in the library, {} in \
                     the rebuild",
                    name(p),
                    name(q)
                ));
            }
            renamed.insert(offset, (p, q));
        }
    }
    Ok(renamed)
}

/// The PLT stubs, by address: which function each calls in each file.
/// Every renamed slot must have one.
fn plt_stubs<'i>(
    a: &[Sec<'_>],
    ids_a: &'i [Identity],
    ids_b: &'i [Identity],
    renamed: &Calls<'_>,
) -> Result<Calls<'i>, String> {
    let mut stubs = HashMap::new();
    let mut slot_stubs = BTreeSet::new();
    let jump_slots: HashMap<u64, usize> = a
        .iter()
        .filter(|x| x.sh_type == elf::SHT_RELA.0)
        .flat_map(|x| x.data.chunks_exact(RELA_SIZE))
        .filter(|e| u64_at(e, 8) as u32 == elf::R_X86_64_JUMP_SLOT.0)
        .map(|e| (u64_at(e, 0), (u64_at(e, 8) >> 32) as usize))
        .collect();
    for plt in a
        .iter()
        .filter(|x| x.name == ".plt" || x.name == ".plt.sec")
    {
        for (n, entry) in plt.data.chunks_exact(16).enumerate() {
            let at = plt.addr + 16 * n as u64;
            // jmp *slot(%rip), after endbr64 (4 bytes) and bnd (1) if any.
            let Some(o) = [0usize, 4, 5]
                .into_iter()
                .find(|&o| entry.get(o..o + 2) == Some(&[0xff, 0x25][..]))
            else {
                continue;
            };
            let slot = (at + o as u64 + 6).wrapping_add_signed(i64::from(i32_at(entry, o + 2)));
            if let Some(&sym) = jump_slots.get(&slot) {
                stubs.insert(at, (&ids_a[sym], &ids_b[sym]));
                if renamed.contains_key(&slot) {
                    slot_stubs.insert(slot);
                }
            }
        }
    }
    if let Some(slot) = renamed.keys().find(|s| !slot_stubs.contains(s)) {
        return Err(format!(
            "the PLT jump slot at {slot:#x} of a reordered symbol has no PLT stub"
        ));
    }
    Ok(stubs)
}

/// One code section: every differing byte an operand of a call to the
/// same function, every call through a renamed stub to the same function;
/// how many operands differ.
fn explain_code(
    x: &Sec<'_>,
    y: &Sec<'_>,
    renamed: &Calls<'_>,
    stubs: &Calls<'_>,
) -> Result<usize, String> {
    let plt = x.name == ".plt" || x.name == ".plt.sec";
    let (da, db) = (x.data, y.data);
    let mut explained = vec![false; da.len()];
    let mut operands = 0;
    for s in 0..da.len().saturating_sub(4) {
        // Direct references to a renamed slot, outside its stub.
        if !plt && da[s] == 0xff && (da[s + 1] == 0x15 || da[s + 1] == 0x25) && s + 6 <= da.len() {
            let slot = (x.addr + s as u64 + 6).wrapping_add_signed(i64::from(i32_at(da, s + 2)));
            if renamed.contains_key(&slot) && da[s..s + 6] == db[s..s + 6] {
                return Err(format!(
                    "the code at {:#x} in {} reads the jump slot of a reordered symbol directly",
                    x.addr + s as u64,
                    x.name
                ));
            }
        }
        if !matches!(da[s], CALL | JMP) || da[s] != db[s] || s + 5 > da.len() {
            continue;
        }
        let target =
            |d: &[u8]| (x.addr + s as u64 + 5).wrapping_add_signed(i64::from(i32_at(d, s + 1)));
        let (ta, tb) = (target(da), target(db));
        let (Some(pa), Some(pb)) = (stubs.get(&ta), stubs.get(&tb)) else {
            continue;
        };
        let same = pa.0 == pb.1;
        let differs = da[s + 1..s + 5] != db[s + 1..s + 5];
        if same && differs {
            explained[s + 1..s + 5].iter_mut().for_each(|e| *e = true);
            operands += 1;
        } else if !same {
            return Err(format!(
                "the call at {:#x} in {} calls {} in the library, {} in the rebuild",
                x.addr + s as u64,
                x.name,
                name(pa.0),
                name(pb.1)
            ));
        }
    }
    if let Some(i) = (0..da.len()).find(|&i| da[i] != db[i] && !explained[i]) {
        return Err(format!(
            "section {} differs at {:#x}, not in the operand of a call to the same function",
            x.name,
            x.addr + i as u64
        ));
    }
    Ok(operands)
}

/// Every `.dynsym` entry's identity, with its `.gnu.version` index.
fn identities(secs: &[Sec<'_>]) -> Result<Vec<Identity>, String> {
    let find = |name: &str| secs.iter().find(|s| s.name == name).map(|s| s.data);
    let syms = find(".dynsym").ok_or("no .dynsym")?;
    let strs = find(".dynstr").ok_or("no .dynstr")?;
    let versions = find(".gnu.version");
    syms.chunks_exact(SYM_SIZE)
        .enumerate()
        .map(|(i, e)| {
            let at = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize;
            let rest = strs.get(at..).ok_or(".dynsym names past .dynstr")?;
            let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
            let version = versions
                .and_then(|v| v.get(2 * i..2 * i + 2))
                .map_or(0, |v| u16::from_le_bytes([v[0], v[1]]));
            Ok((
                rest[..end].to_vec(),
                e[4],
                e[5],
                u16::from_le_bytes([e[6], e[7]]),
                u64_at(e, 8),
                u64_at(e, 16),
                version,
            ))
        })
        .collect()
}

fn name(id: &Identity) -> String {
    String::from_utf8_lossy(&id.0).into_owned()
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[at..at + 8]);
    u64::from_le_bytes(b)
}

fn i32_at(d: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny image: `.dynstr`, `.dynsym` (null, two undefined imports,
    /// one defined symbol), `.gnu.version`, `.rela.plt` (two jump slots),
    /// `.plt` (PLT0 and two stubs) and `.text` (calls to both stubs).
    struct Image {
        dynstr: Vec<u8>,
        dynsym: Vec<u8>,
        versym: Vec<u8>,
        rela: Vec<u8>,
        plt: Vec<u8>,
        text: Vec<u8>,
    }

    const PLT: u64 = 0x1000;
    const TEXT: u64 = 0x2000;
    const GOT: u64 = 0x3000;

    fn sym(name: u32, shndx: u16, value: u64) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend(name.to_le_bytes());
        e.extend([0x12, 0]);
        e.extend(shndx.to_le_bytes());
        e.extend(value.to_le_bytes());
        e.extend(0u64.to_le_bytes());
        e
    }

    fn call(from: u64, to: u64) -> Vec<u8> {
        let mut c = vec![CALL];
        c.extend(((to as i64 - (from as i64 + 5)) as i32).to_le_bytes());
        c
    }

    /// `swapped`: the two imports in the other order (as a newer linker
    /// might put them), the code calling the same functions.
    fn image(swapped: bool) -> Image {
        let dynstr = b"\0foo\0bar\0mine\0".to_vec();
        let (first, second) = if swapped { (5, 1) } else { (1, 5) };
        let mut dynsym = vec![0; SYM_SIZE];
        dynsym.extend(sym(first, 0, 0));
        dynsym.extend(sym(second, 0, 0));
        dynsym.extend(sym(9, 7, 0x2100));
        let versym = [0u8, 0, 2, 0, 2, 0, 1, 0].to_vec();
        let mut rela = Vec::new();
        for k in 0..2u64 {
            rela.extend((GOT + 8 * k).to_le_bytes());
            rela.extend(((k + 1) << 32 | u64::from(elf::R_X86_64_JUMP_SLOT.0)).to_le_bytes());
            rela.extend(0u64.to_le_bytes());
        }
        let mut plt = vec![0x90; 16];
        for k in 0..2u64 {
            let at = PLT + 16 * (k + 1);
            let mut stub = vec![0xff, 0x25];
            stub.extend((((GOT + 8 * k) as i64 - (at as i64 + 6)) as i32).to_le_bytes());
            stub.resize(16, 0x90);
            plt.extend(stub);
        }
        // foo's stub is the first in the library, the second if swapped.
        let (foo, bar) = if swapped {
            (PLT + 32, PLT + 16)
        } else {
            (PLT + 16, PLT + 32)
        };
        let mut text = call(TEXT, foo);
        text.extend(call(TEXT + 5, bar));
        text.extend(call(TEXT + 10, foo));
        text.push(0xc3);
        Image {
            dynstr,
            dynsym,
            versym,
            rela,
            plt,
            text,
        }
    }

    fn secs(i: &Image) -> Vec<Sec<'_>> {
        let s = |name, sh_type: elf::SectionType, flags: u64, addr, data| Sec {
            name,
            sh_type: sh_type.0,
            flags,
            addr,
            data,
        };
        let alloc = elf::SHF_ALLOC.0;
        let x = alloc | elf::SHF_EXECINSTR.0;
        vec![
            s(".dynsym", elf::SHT_DYNSYM, alloc, 0x100, &i.dynsym),
            s(".dynstr", elf::SHT_STRTAB, alloc, 0x200, &i.dynstr),
            s(".gnu.version", elf::SHT_GNU_VERSYM, alloc, 0x300, &i.versym),
            s(".rela.plt", elf::SHT_RELA, alloc, 0x400, &i.rela),
            s(".plt", elf::SHT_PROGBITS, x, PLT, &i.plt),
            s(".text", elf::SHT_PROGBITS, x, TEXT, &i.text),
        ]
    }

    #[test]
    fn imports_in_another_order_with_every_call_following_are_the_same_code() {
        let (a, b) = (image(false), image(true));
        let got = explain(&secs(&a), &secs(&b)).unwrap();
        assert_eq!(
            got,
            Reordered {
                symbols: 2,
                slots: 2,
                operands: 3,
                sections: vec![".dynsym".into(), ".text".into()],
            }
        );
    }

    #[test]
    fn a_call_that_does_not_follow_its_function_is_refused() {
        let a = image(false);
        // The third call still goes to the first stub: foo in the
        // library, bar in the rebuild.
        let mut b = image(true);
        b.text[10..15].copy_from_slice(&call(TEXT + 10, PLT + 16));
        let e = explain(&secs(&a), &secs(&b)).unwrap_err();
        assert!(
            e.contains("calls foo in the library, bar in the rebuild"),
            "{e}"
        );
    }

    #[test]
    fn any_other_difference_is_refused() {
        let a = image(false);
        let mut b = image(true);
        b.text[15] = 0xcc;
        let e = explain(&secs(&a), &secs(&b)).unwrap_err();
        assert!(e.contains("not in the operand of a call"), "{e}");
        // A defined symbol moved.
        let mut b = image(false);
        b.dynsym[3 * SYM_SIZE + 8] = 0x11;
        let e = explain(&secs(&a), &secs(&b)).unwrap_err();
        assert!(e.contains("is defined"), "{e}");
        // Data.
        let mut b = image(false);
        b.rela[16] = 1;
        let e = explain(&secs(&a), &secs(&b)).unwrap_err();
        assert_eq!(e, "section .rela.plt differs");
    }
}
