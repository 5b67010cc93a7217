//! Reading `objdump -dr --no-show-raw-insn` of a static library (or an ELF): its functions,
//! each with its instructions and the relocation attached to each, per archive member; and
//! `objdump -r`: which functions the data sections point at (vtables, function tables).

use std::collections::{BTreeMap, HashMap};

/// One instruction: its offset in the section, mnemonic, operands, the relocation
/// `objdump -r` printed under it, if any (type and symbol with its addend, as printed), and
/// the target objdump names in a comment (`jalr -94(ra) # 80200fe0 <f>`: a linked riscv64
/// call), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    pub addr: u64,
    pub mnemonic: String,
    pub operands: String,
    pub reloc: Option<(String, String)>,
    pub comment_target: Option<String>,
    /// The address in that comment (`call *0x7c8a(%rip) # 10dab8 <...>`: the word read).
    pub comment_addr: Option<u64>,
}

/// One function: its archive member, section and name, and its instructions in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub member: String,
    pub section: String,
    pub name: String,
    pub start: u64,
    pub insns: Vec<Insn>,
}

/// Parses the disassembly. A label that starts with `.L` (a local label, such as riscv64's
/// `.Lpcrel_hi12`) continues the function before it; every other label starts a function.
pub fn parse_disassembly(text: &str) -> Vec<Function> {
    let mut functions: Vec<Function> = Vec::new();
    let (mut member, mut section) = (String::new(), String::new());
    for line in text.lines() {
        if let Some(m) = member_line(line) {
            member = m.to_string();
        } else if let Some(s) = line.strip_prefix("Disassembly of section ") {
            section = s.trim_end_matches(':').to_string();
        } else if let Some((addr, label)) = label_line(line) {
            if label.starts_with(".L") && functions.last().is_some_and(|f| f.section == section) {
                continue;
            }
            functions.push(Function {
                member: member.clone(),
                section: section.clone(),
                name: label.to_string(),
                start: addr,
                insns: Vec::new(),
            });
        } else if let Some(reloc) = reloc_line(line) {
            if let Some(insn) = functions.last_mut().and_then(|f| f.insns.last_mut()) {
                insn.reloc.get_or_insert(reloc);
            }
        } else if let Some(insn) = insn_line(line) {
            if let Some(f) = functions.last_mut() {
                f.insns.push(insn);
            }
        }
    }
    functions
}

/// `name.o:     file format elf64-x86-64` -> `name.o`.
fn member_line(line: &str) -> Option<&str> {
    let (name, rest) = line.split_once(":     file format ")?;
    (!rest.is_empty()).then_some(name)
}

/// `0000000000000048 <name>:` -> (0x48, name).
fn label_line(line: &str) -> Option<(u64, &str)> {
    let (addr, rest) = line.split_once(' ')?;
    let name = rest.strip_prefix('<')?.strip_suffix(">:")?;
    Some((u64::from_str_radix(addr, 16).ok()?, name))
}

/// `\t\t\t48: R_RISCV_PCREL_HI20\t.L_MergedGlobals+0x20` -> (type, symbol).
fn reloc_line(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("\t\t\t")?;
    let (_, rest) = rest.split_once(": ")?;
    let mut parts = rest.split_whitespace();
    let kind = parts.next()?;
    if !kind.starts_with("R_") {
        return None;
    }
    Some((kind.to_string(), parts.next().unwrap_or("").to_string()))
}

/// `  4c:\tmv\ta4,a0` or `  2a:\ttest   %rdi,%rdi` -> an instruction (comments after `#` or
/// `//` dropped).
fn insn_line(line: &str) -> Option<Insn> {
    let (addr, rest) = line.split_once(":\t")?;
    let addr = u64::from_str_radix(addr.trim(), 16).ok()?;
    let comment = rest.split_once(" # ").map(|(_, c)| c.trim());
    let comment_target = comment
        .and_then(|c| c.split_once('<'))
        .map(|(_, t)| t.trim_end_matches('>').to_string());
    let comment_addr = comment
        .and_then(|c| c.split_whitespace().next())
        .and_then(|a| u64::from_str_radix(a, 16).ok());
    let rest = rest.split(" # ").next()?.split("\t// ").next()?;
    let rest = rest.split("    \t// ").next()?.trim();
    let (mnemonic, operands) = match rest.split_once([' ', '\t']) {
        Some((m, o)) => (m, o.trim()),
        None => (rest, ""),
    };
    if mnemonic.is_empty() || mnemonic == "..." {
        return None;
    }
    Some(Insn {
        addr,
        mnemonic: mnemonic.to_string(),
        operands: operands.to_string(),
        reloc: None,
        comment_target,
        comment_addr,
    })
}

/// The symbols that relocations in data sections name (`objdump -r`), per member: what a
/// vtable or a table of function pointers points at. Jump tables (a section `.rodata.<f>`
/// pointing into `.text.<f>` or `.text.unlikely.<f>`) and unwind tables are left out.
pub fn data_references(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut refs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut member, mut section) = (String::new(), String::new());
    for line in text.lines() {
        if let Some(m) = member_line(line) {
            member = m.to_string();
        } else if let Some(s) = line.strip_prefix("RELOCATION RECORDS FOR [") {
            section = s.trim_end_matches("]:").to_string();
        } else if !section.starts_with(".text") && !section.contains("eh_frame") {
            let mut parts = line.split_whitespace();
            let (Some(_), Some(kind), Some(sym)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !kind.starts_with("R_") {
                continue;
            }
            let sym = strip_addend(sym);
            if is_jump_table(&section, sym) {
                continue;
            }
            refs.entry(member.clone())
                .or_default()
                .push(sym.to_string());
        }
    }
    refs
}

/// Whether data section `section` pointing at `sym` is a function's jump table.
fn is_jump_table(section: &str, sym: &str) -> bool {
    let Some(owner) = section.strip_prefix(".rodata.") else {
        return false;
    };
    let owner = owner.strip_prefix("unlikely.").unwrap_or(owner);
    let target = sym.strip_prefix(".text.").unwrap_or(sym);
    let target = target.strip_prefix("unlikely.").unwrap_or(target);
    owner == target
}

/// The little-endian words of `width` bytes in `objdump -s` output, by address.
pub fn words(text: &str, width: usize) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let Some(addr) = parts.next().and_then(|a| u64::from_str_radix(a, 16).ok()) else {
            continue;
        };
        // Up to four groups of 8 hex digits; the ASCII column after them is not hex of 8.
        let bytes: Vec<u8> = parts
            .take(4)
            .filter(|g| g.len() == 8 && g.bytes().all(|b| b.is_ascii_hexdigit()))
            .flat_map(|g| {
                (0..4).map(move |i| u8::from_str_radix(&g[2 * i..2 * i + 2], 16).unwrap_or(0))
            })
            .collect();
        for (i, word) in bytes.chunks_exact(width).enumerate() {
            let v = word.iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b));
            out.insert(addr + (i * width) as u64, v);
        }
    }
    out
}

/// `memcpy-0x4` -> `memcpy`; `.text.foo+0x8b` -> `.text.foo`.
pub fn strip_addend(sym: &str) -> &str {
    match sym.rfind(['+', '-']) {
        Some(i) if sym[i + 1..].starts_with("0x") => &sym[..i],
        _ => sym,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "
In archive lib.a:

k.o:     file format elf64-littleriscv


Disassembly of section .text.f:

0000000000000000 <f>:
   0:\tadd\tsp,sp,-2032
   4:\tsd\tra,2024(sp)

0000000000000008 <.Lpcrel_hi1>:
   8:\tauipc\tra,0x0
\t\t\t8: R_RISCV_CALL_PLT\tg
   c:\tjalr\tra # 8 <.Lpcrel_hi1>

Disassembly of section .text.g:

0000000000000000 <g>:
   0:\tret
";

    #[test]
    fn functions_labels_and_relocations() {
        let fs = parse_disassembly(SAMPLE);
        assert_eq!(fs.len(), 2);
        assert_eq!((fs[0].member.as_str(), fs[0].name.as_str()), ("k.o", "f"));
        assert_eq!(fs[0].section, ".text.f");
        assert_eq!(fs[0].insns.len(), 4);
        assert_eq!(fs[0].insns[0].operands, "sp,sp,-2032");
        assert_eq!(
            fs[0].insns[2].reloc,
            Some(("R_RISCV_CALL_PLT".to_string(), "g".to_string()))
        );
        assert_eq!(fs[0].insns[3].operands, "ra");
        assert_eq!((fs[1].name.as_str(), fs[1].insns.len()), ("g", 1));
    }

    #[test]
    fn data_references_skip_jump_tables() {
        let text = "
k.o:     file format elf64-x86-64

RELOCATION RECORDS FOR [.rodata..Lanon.1]:
OFFSET           TYPE              VALUE
0000000000000000 R_X86_64_64       .text.len
0000000000000008 R_X86_64_64       value+0x0000000000000000

RELOCATION RECORDS FOR [.rodata.f]:
OFFSET           TYPE              VALUE
0000000000000000 R_X86_64_PC32     .text.f+0x000000000000008b

RELOCATION RECORDS FOR [.text.g]:
OFFSET           TYPE              VALUE
0000000000000002 R_X86_64_PLT32    h-0x0000000000000004
";
        let refs = data_references(text);
        assert_eq!(refs["k.o"], [".text.len", "value"]);
        assert_eq!(strip_addend("memcpy-0x4"), "memcpy");
        let w = words(
            " 10dab0 00000000 00000000 90a31000 00000000  ................",
            8,
        );
        assert_eq!((w[&0x10dab0], w[&0x10dab8]), (0, 0x10a390));
    }
}
