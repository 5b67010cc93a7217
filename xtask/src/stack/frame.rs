//! What one instruction does to the stack and to the call graph, per arch: the frame
//! allocations (`sub rsp`, pushes; `sub sp` and `stp ..., [sp, #-N]!`; `addi sp, sp, -N`,
//! also in several steps or through a register loaded with `lui`/`li`), the frame pointer,
//! calls, tail jumps, returns and indirect transfers.

use std::collections::HashMap;

use super::objdump::{strip_addend, Insn};

/// The architectures the checker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    I386,
    Aarch64,
    Riscv64,
}

impl Arch {
    /// The arch of a Rust target name (`x86_64-unknown-none`, `i586-unknown-none`, ...).
    pub fn of_target(target: &str) -> Option<Arch> {
        let cpu = target.split('-').next()?;
        match cpu {
            "x86_64" => Some(Arch::X86_64),
            "i386" | "i486" | "i586" | "i686" => Some(Arch::I386),
            "aarch64" => Some(Arch::Aarch64),
            _ if cpu.starts_with("riscv64") => Some(Arch::Riscv64),
            _ => None,
        }
    }

    /// The objdump that reads this arch's objects.
    pub fn objdump(self) -> &'static str {
        match self {
            Arch::X86_64 | Arch::I386 => "objdump",
            Arch::Aarch64 => "aarch64-linux-gnu-objdump",
            Arch::Riscv64 => "riscv64-linux-gnu-objdump",
        }
    }

    /// Bytes of a pointer.
    pub fn word(self) -> usize {
        match self {
            Arch::I386 => 4,
            _ => 8,
        }
    }

    /// Bytes a call pushes (the return address): the callee's frame on x86 includes it.
    pub fn call_push(self) -> u64 {
        match self {
            Arch::X86_64 => 8,
            Arch::I386 => 4,
            Arch::Aarch64 | Arch::Riscv64 => 0,
        }
    }
}

/// The effect of one instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The stack grows by this many bytes (a frame allocation).
    Alloc(u64),
    /// The stack grows by this many bytes through a push (x86: saved registers, or a call's
    /// arguments on i386).
    Push(u64),
    /// The stack shrinks by this many bytes.
    Free(u64),
    /// The frame pointer is set to the stack pointer plus this many bytes.
    SetFp(u64),
    /// The stack pointer is set to the frame pointer minus this many bytes.
    SpFromFp(u64),
    /// The stack pointer moves by an amount the checker cannot know.
    SpUnknown,
    /// A call of a named function (also through the GOT).
    Call(String),
    /// A jump to a named function that ends this one (a tail call).
    Tail(String),
    /// A call through a register or memory.
    IndirectCall,
    /// A jump through a register or memory (a jump table, or a tail call through a pointer).
    IndirectJump,
    /// The end of a path: a return, or a trap.
    Return,
    /// Nothing the checker follows.
    Other,
}

/// Classifies instructions of one function in order (riscv64 keeps the constants that
/// `lui`/`li`/`addi` put in registers, for `sub sp, sp, t0`, and the pending `auipc` of a call;
/// x86_64 the callee-saved registers that hold a function's address from the GOT).
pub struct Classifier {
    arch: Arch,
    consts: HashMap<String, i64>,
    call_pending: bool,
    got_regs: HashMap<String, String>,
}

/// x86_64's callee-saved registers (but `%rbp`, which `leave` writes) with the names of
/// their lower parts: a call leaves them as they were, so one loaded from the GOT before a
/// loop still holds the function's address at each call in it.
const X86_64_KEPT: &[(&str, &[&str])] = &[
    ("%rbx", &["%rbx", "%ebx", "%bx", "%bl", "%bh"]),
    ("%r12", &["%r12", "%r12d", "%r12w", "%r12b"]),
    ("%r13", &["%r13", "%r13d", "%r13w", "%r13b"]),
    ("%r14", &["%r14", "%r14d", "%r14w", "%r14b"]),
    ("%r15", &["%r15", "%r15d", "%r15w", "%r15b"]),
];

impl Classifier {
    pub fn new(arch: Arch) -> Self {
        Classifier {
            arch,
            consts: HashMap::new(),
            call_pending: false,
            got_regs: HashMap::new(),
        }
    }

    /// Reads function `f` once before its instructions are classified: on x86_64, a
    /// callee-saved register whose every write in `f` is a load of one function's GOT entry
    /// (`mov 0x0(%rip),%r14` with an `R_X86_64_*GOTPCREL*` relocation, as position-independent
    /// code calls a function in a loop) holds that function: `call *%r14` is a call of it.
    pub fn prepare(&mut self, f: &super::objdump::Function) {
        self.got_regs.clear();
        if self.arch != Arch::X86_64 {
            return;
        }
        for (reg, names) in X86_64_KEPT {
            let mut loaded: Option<&str> = None;
            let mut other_write = false;
            for insn in &f.insns {
                let ops = insn.operands.as_str();
                let dst = ops.rsplit_once(',').map_or(ops, |(_, d)| d);
                let got = insn
                    .reloc
                    .as_ref()
                    .filter(|(kind, _)| kind.contains("GOTPCREL"))
                    .map(|(_, sym)| strip_addend(sym));
                let names_reg = |o: &str| names.iter().any(|n| o.contains(n));
                // These read their last operand, and write none; a `pop` of a callee-saved
                // register is an epilogue's, restoring the caller's value on a path that
                // then returns (compiled code calls nothing through the caller's value).
                let reads_only = ["push", "pop", "cmp", "test", "bt", "call", "jmp"]
                    .iter()
                    .any(|r| insn.mnemonic.starts_with(r));
                match got {
                    Some(sym) if insn.mnemonic.starts_with("mov") && dst == *reg => {
                        other_write |= loaded.is_some_and(|l| l != sym);
                        loaded = Some(sym);
                    }
                    _ if (names.contains(&dst) && !reads_only)
                        || (insn.mnemonic.starts_with("xchg") && names_reg(ops))
                        || (insn.mnemonic.starts_with("xadd") && names_reg(ops)) =>
                    {
                        other_write = true
                    }
                    _ => {}
                }
            }
            if let (Some(sym), false) = (loaded, other_write) {
                self.got_regs.insert(reg.to_string(), sym.to_string());
            }
        }
    }

    /// The effects of `insn`, an instruction of function `own`.
    pub fn classify(&mut self, insn: &Insn, own: &str) -> Vec<Effect> {
        let through = insn.operands.strip_prefix('*');
        if let Some(sym) = through.and_then(|reg| self.got_regs.get(reg)) {
            if insn.mnemonic.starts_with("call") {
                return vec![Effect::Call(sym.clone())];
            }
            if insn.mnemonic.starts_with("jmp") {
                return vec![Effect::Tail(sym.clone())];
            }
        }
        match self.arch {
            Arch::X86_64 => x86(insn, own, 8, "%rsp", "%rbp"),
            Arch::I386 => x86(insn, own, 4, "%esp", "%ebp"),
            Arch::Aarch64 => vec![aarch64(insn, own)],
            Arch::Riscv64 => vec![self.riscv64(insn, own)],
        }
    }

    fn riscv64(&mut self, insn: &Insn, own: &str) -> Effect {
        let ops: Vec<&str> = insn.operands.split(',').map(str::trim).collect();
        let m = insn.mnemonic.as_str();
        if let Some((kind, sym)) = &insn.reloc {
            if kind.starts_with("R_RISCV_CALL") && m == "auipc" {
                self.call_pending = true;
                let target = strip_addend(sym).to_string();
                return if ops[0] == "ra" {
                    Effect::Call(target)
                } else {
                    Effect::Tail(target)
                };
            }
            if kind == "R_RISCV_JAL" && m == "jal" {
                return Effect::Call(strip_addend(sym).to_string());
            }
        }
        if self.call_pending && (m == "jalr" || m == "jr") {
            self.call_pending = false;
            return Effect::Other;
        }
        self.call_pending = false;
        match (m, ops.as_slice()) {
            ("add" | "addi", ["sp", "sp", imm]) => match imm_i64(imm) {
                Some(n) if n < 0 => Effect::Alloc(n.unsigned_abs()),
                Some(n) => Effect::Free(n as u64),
                None => match self.consts.get(*imm) {
                    Some(&n) if n < 0 => Effect::Alloc(n.unsigned_abs()),
                    Some(&n) => Effect::Free(n as u64),
                    None => Effect::SpUnknown,
                },
            },
            ("sub", ["sp", "sp", reg]) => match self.consts.get(*reg) {
                Some(&n) if n >= 0 => Effect::Alloc(n as u64),
                Some(&n) => Effect::Free(n.unsigned_abs()),
                None => Effect::SpUnknown,
            },
            ("mv", ["s0", "sp"]) => Effect::SetFp(0),
            ("add" | "addi", ["s0", "sp", imm]) => match imm_i64(imm) {
                Some(n) if n >= 0 => Effect::SetFp(n as u64),
                _ => Effect::Other,
            },
            ("mv", ["sp", "s0"]) => Effect::SpFromFp(0),
            ("add" | "addi", ["sp", "s0", imm]) => match imm_i64(imm) {
                Some(n) if n <= 0 => Effect::SpFromFp(n.unsigned_abs()),
                _ => Effect::SpUnknown,
            },
            (_, ["sp", ..]) if !m.starts_with('s') && !m.starts_with('b') => Effect::SpUnknown,
            ("lui", [rd, imm]) => {
                let v = imm_i64(imm).map(|v| ((v << 12) as i32) as i64);
                self.set_const(rd, v);
                Effect::Other
            }
            ("li", [rd, imm]) => {
                self.set_const(rd, imm_i64(imm));
                Effect::Other
            }
            ("add" | "addi" | "addiw" | "addw", [rd, rs, imm]) if rd == rs => {
                let v = self.consts.get(*rs).zip(imm_i64(imm)).map(|(a, b)| a + b);
                self.set_const(rd, v);
                Effect::Other
            }
            ("jal", [target]) | ("jal", ["ra", target]) => jump_to(target, own, true),
            ("jal", ["zero", target]) => jump_to(target, own, false),
            ("j", [target]) => jump_to(target, own, false),
            // A linked call or tail call: `auipc` then `jalr -94(ra)` / `jr 12(t1)`, the
            // target in objdump's comment.
            ("jalr" | "jr", [op]) if op.contains('(') && insn.comment_target.is_some() => {
                let target = format!("<{}>", insn.comment_target.as_deref().unwrap_or(""));
                jump_to(&target, own, m == "jalr")
            }
            ("jalr", [_]) => Effect::IndirectCall,
            ("jr", [_]) => Effect::IndirectJump,
            ("ret", _) | ("unimp", _) | ("ebreak", _) => Effect::Return,
            (_, [rd, ..]) if !m.starts_with('s') && !m.starts_with('b') => {
                self.consts.remove(*rd);
                Effect::Other
            }
            _ => Effect::Other,
        }
    }

    fn set_const(&mut self, reg: &str, v: Option<i64>) {
        match v {
            Some(v) => self.consts.insert(reg.to_string(), v),
            None => self.consts.remove(reg),
        };
    }
}

/// x86 (AT&T syntax), `w` bytes a push takes.
fn x86(insn: &Insn, own: &str, w: u64, sp: &str, fp: &str) -> Vec<Effect> {
    let m = insn.mnemonic.as_str();
    let ops = insn.operands.as_str();
    let named = insn
        .reloc
        .as_ref()
        .filter(|(kind, _)| kind.contains("PLT") || kind.contains("GOT") || kind.ends_with("PC32"))
        .map(|(_, sym)| strip_addend(sym).to_string());
    let one = |e| vec![e];
    if m.starts_with("call") {
        return one(match named {
            Some(sym) => Effect::Call(sym),
            None if ops.starts_with('*') => Effect::IndirectCall,
            None => jump_to(ops, own, true),
        });
    }
    // A conditional jump to a named function (`je g`, which LLVM emits for a call in tail
    // position on one path): the callee runs on this frame, and the other path goes on.
    if m.starts_with('j') && !m.starts_with("jmp") {
        if let Some(sym) = named {
            return one(Effect::Call(sym));
        }
    }
    if m.starts_with("jmp") {
        return one(match named {
            Some(sym) => Effect::Tail(sym),
            None if ops.starts_with('*') => Effect::IndirectJump,
            None => jump_to(ops, own, false),
        });
    }
    if m.starts_with("ret") || m == "ud2" || m == "hlt" {
        return one(Effect::Return);
    }
    if m == "leave" || m == "leavel" || m == "leaveq" {
        return vec![Effect::SpFromFp(0), Effect::Free(w)];
    }
    if m.starts_with("push") {
        return one(Effect::Push(if m == "pushw" { 2 } else { w }));
    }
    if m.starts_with("pop") {
        return one(Effect::Free(if m == "popw" { 2 } else { w }));
    }
    let Some((src, dst)) = ops.rsplit_once(',') else {
        return one(Effect::Other);
    };
    if dst == fp && src == sp && m.starts_with("mov") {
        return one(Effect::SetFp(0));
    }
    if dst != sp {
        return one(Effect::Other);
    }
    let imm = src.strip_prefix('$').and_then(imm_i64);
    one(match (m.trim_end_matches(['q', 'l']), imm) {
        ("sub", Some(n)) if n >= 0 => Effect::Alloc(n as u64),
        ("sub", Some(n)) => Effect::Free(n.unsigned_abs()),
        ("add", Some(n)) if n >= 0 => Effect::Free(n as u64),
        ("add", Some(n)) => Effect::Alloc(n.unsigned_abs()),
        // Realigning: at most alignment - 1 bytes more (the mask as a 32- or 64-bit value).
        ("and", Some(n)) => {
            let mask = n as u64
                | if n as u64 >> 32 == 0 {
                    0xffff_ffff_0000_0000
                } else {
                    0
                };
            Effect::Alloc((!mask).wrapping_add(1).saturating_sub(1))
        }
        ("mov", None) if src == fp => Effect::SpFromFp(0),
        ("lea", None) => lea(src, sp, fp),
        _ => Effect::SpUnknown,
    })
}

/// `lea -0x10(%rsp),%rsp` and `lea -0xc(%ebp),%esp`.
fn lea(src: &str, sp: &str, fp: &str) -> Effect {
    let Some((disp, base)) = src.split_once('(') else {
        return Effect::SpUnknown;
    };
    let base = base.trim_end_matches(')');
    let disp = if disp.is_empty() {
        Some(0)
    } else {
        imm_i64(disp)
    };
    match (disp, base) {
        (Some(d), b) if b == sp && d < 0 => Effect::Alloc(d.unsigned_abs()),
        (Some(d), b) if b == sp => Effect::Free(d as u64),
        (Some(d), b) if b == fp && d <= 0 => Effect::SpFromFp(d.unsigned_abs()),
        _ => Effect::SpUnknown,
    }
}

fn aarch64(insn: &Insn, own: &str) -> Effect {
    let m = insn.mnemonic.as_str();
    let ops: Vec<&str> = insn.operands.split(", ").map(str::trim).collect();
    let named = insn
        .reloc
        .as_ref()
        .filter(|(kind, _)| kind.ends_with("CALL26") || kind.ends_with("JUMP26"))
        .map(|(_, sym)| strip_addend(sym).to_string());
    match (m, ops.as_slice()) {
        ("bl", _) => named.map_or_else(|| jump_to(&insn.operands, own, true), Effect::Call),
        ("b", _) => named.map_or_else(|| jump_to(&insn.operands, own, false), Effect::Tail),
        ("blr", _) => Effect::IndirectCall,
        ("br", _) => Effect::IndirectJump,
        ("ret" | "brk" | "udf" | "hlt", _) => Effect::Return,
        ("sub", ["sp", "sp", imm, rest @ ..]) => {
            imm_shifted(imm, rest).map_or(Effect::SpUnknown, Effect::Alloc)
        }
        ("add", ["sp", "sp", imm, rest @ ..]) => {
            imm_shifted(imm, rest).map_or(Effect::SpUnknown, Effect::Free)
        }
        ("mov", ["x29", "sp"]) => Effect::SetFp(0),
        ("add", ["x29", "sp", imm]) => imm_shifted(imm, &[]).map_or(Effect::Other, Effect::SetFp),
        ("mov", ["sp", "x29"]) => Effect::SpFromFp(0),
        ("sub", ["sp", "x29", imm]) => {
            imm_shifted(imm, &[]).map_or(Effect::SpUnknown, Effect::SpFromFp)
        }
        (_, ["sp", ..]) => Effect::SpUnknown,
        _ => {
            // Pre-index stores allocate (`stp x29, x30, [sp, #-96]!`), post-index loads free
            // (`ldp x29, x30, [sp], #96`).
            let o = insn.operands.as_str();
            if let Some(i) = o.find("[sp, #-").filter(|_| o.ends_with("]!")) {
                let n = o[i + 7..o.len() - 2].trim();
                return imm_i64(n).map_or(Effect::SpUnknown, |n| Effect::Alloc(n as u64));
            }
            if let Some(i) = o.find("[sp], #") {
                return imm_i64(&o[i + 7..]).map_or(Effect::SpUnknown, |n| Effect::Free(n as u64));
            }
            Effect::Other
        }
    }
}

/// `#0x320` or `#0x1` with `lsl #12`.
fn imm_shifted(imm: &str, rest: &[&str]) -> Option<u64> {
    let n = imm_i64(imm.trim_start_matches('#'))? as u64;
    match rest {
        [] => Some(n),
        [shift] => Some(n << imm_i64(shift.strip_prefix("lsl #")?)?),
        _ => None,
    }
}

/// A direct jump or call without a relocation, to `<name>` or `<name+0x..>`: inside `own`
/// (or a local `.L` label of it) a branch, which the linear walk needs not follow, or
/// (a call of `own` itself) recursion; else a call of, or a tail jump to, `name`.
fn jump_to(operands: &str, own: &str, call: bool) -> Effect {
    let Some(label) = operands
        .split_once('<')
        .map(|(_, l)| l.trim_end_matches('>'))
    else {
        return if call {
            Effect::IndirectCall
        } else {
            Effect::IndirectJump
        };
    };
    let (name, inside) = match label.split_once('+') {
        Some((n, _)) => (n, true),
        None => (label, false),
    };
    if name.starts_with(".L") || (name == own && (inside || !call)) {
        Effect::Other
    } else if call {
        Effect::Call(name.to_string())
    } else {
        Effect::Tail(name.to_string())
    }
}

/// `-2032`, `0x338`, `-0x10`, `0xfffffffffffffff0` (as a signed 64-bit value).
fn imm_i64(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let v = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => s.parse::<i64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(text: &str, reloc: Option<(&str, &str)>) -> Insn {
        let (m, o) = text.split_once(' ').unwrap_or((text, ""));
        Insn {
            addr: 0,
            mnemonic: m.to_string(),
            operands: o.trim().to_string(),
            reloc: reloc.map(|(k, s)| (k.to_string(), s.to_string())),
            comment_target: None,
            comment_addr: None,
        }
    }

    fn one(arch: Arch, text: &str) -> Vec<Effect> {
        Classifier::new(arch).classify(&insn(text, None), "f")
    }

    #[test]
    fn x86_frames() {
        use Effect::*;
        assert_eq!(one(Arch::X86_64, "push %rbp"), [Push(8)]);
        assert_eq!(one(Arch::X86_64, "sub $0x1000,%rsp"), [Alloc(4096)]);
        assert_eq!(one(Arch::X86_64, "add $0x338,%rsp"), [Free(0x338)]);
        assert_eq!(
            one(Arch::X86_64, "add $0xffffffffffffff80,%rsp"),
            [Alloc(128)]
        );
        assert_eq!(one(Arch::X86_64, "sub %r11,%rsp"), [SpUnknown]);
        assert_eq!(one(Arch::I386, "push %ebx"), [Push(4)]);
        assert_eq!(one(Arch::I386, "and $0xfffffff0,%esp"), [Alloc(15)]);
        assert_eq!(one(Arch::I386, "and $0xfffffffffffffff0,%esp"), [Alloc(15)]);
        assert_eq!(one(Arch::I386, "lea -0xc(%ebp),%esp"), [SpFromFp(12)]);
        assert_eq!(one(Arch::I386, "mov %esp,%ebp"), [SetFp(0)]);
        assert_eq!(one(Arch::I386, "leave"), [SpFromFp(0), Free(4)]);
        assert_eq!(one(Arch::X86_64, "call *0x18(%r15)"), [IndirectCall]);
        assert_eq!(one(Arch::X86_64, "jmp *%rax"), [IndirectJump]);
        assert_eq!(one(Arch::X86_64, "jmp 3d <f+0x3d>"), [Other]);
        assert_eq!(one(Arch::X86_64, "ret"), [Return]);
        let got = insn("call *0x0(%rip)", Some(("R_X86_64_GOTPCREL", "memcpy-0x4")));
        assert_eq!(
            Classifier::new(Arch::X86_64).classify(&got, "f"),
            [Call("memcpy".into())]
        );
        let tail = insn("jmp 5 <f+0x5>", Some(("R_X86_64_PLT32", ".text.g-0x4")));
        assert_eq!(
            Classifier::new(Arch::X86_64).classify(&tail, "f"),
            [Tail(".text.g".into())]
        );
        // A conditional tail call (`pcpu_zone_trim`'s to `Grown::release_spare`) is a call: the
        // callee's stack counts, and the function goes on.
        let cond = insn("je 18 <f+0x18>", Some(("R_X86_64_PLT32", ".text.g-0x4")));
        assert_eq!(
            Classifier::new(Arch::X86_64).classify(&cond, "f"),
            [Call(".text.g".into())]
        );
        assert_eq!(one(Arch::X86_64, "jne 1f <f+0x1f>"), [Other]);
        let cond32 = insn("je 12 <f+0x12>", Some(("R_386_PC32", ".text.g")));
        assert_eq!(
            Classifier::new(Arch::I386).classify(&cond32, "f"),
            [Call(".text.g".into())]
        );
    }

    #[test]
    fn aarch64_frames() {
        use Effect::*;
        assert_eq!(one(Arch::Aarch64, "stp x29, x30, [sp, #-96]!"), [Alloc(96)]);
        assert_eq!(one(Arch::Aarch64, "str x19, [sp, #-16]!"), [Alloc(16)]);
        assert_eq!(one(Arch::Aarch64, "stp x28, x27, [sp, #16]"), [Other]);
        assert_eq!(
            one(Arch::Aarch64, "sub sp, sp, #0x1, lsl #12"),
            [Alloc(4096)]
        );
        assert_eq!(one(Arch::Aarch64, "sub sp, sp, #0x320"), [Alloc(0x320)]);
        assert_eq!(one(Arch::Aarch64, "add sp, sp, #0x320"), [Free(0x320)]);
        assert_eq!(one(Arch::Aarch64, "ldp x29, x30, [sp], #96"), [Free(96)]);
        assert_eq!(one(Arch::Aarch64, "mov x29, sp"), [SetFp(0)]);
        assert_eq!(one(Arch::Aarch64, "blr x8"), [IndirectCall]);
        let bl = insn(
            "bl 0 <f>",
            Some(("R_AARCH64_CALL26", "pcpu_platform_panic")),
        );
        assert_eq!(
            Classifier::new(Arch::Aarch64).classify(&bl, "f"),
            [Call("pcpu_platform_panic".into())]
        );
        let b = insn("b 0 <g>", Some(("R_AARCH64_JUMP26", "g")));
        assert_eq!(
            Classifier::new(Arch::Aarch64).classify(&b, "f"),
            [Tail("g".into())]
        );
    }

    #[test]
    fn riscv64_frames() {
        use Effect::*;
        assert_eq!(one(Arch::Riscv64, "add sp,sp,-2032"), [Alloc(2032)]);
        assert_eq!(one(Arch::Riscv64, "add sp,sp,928"), [Free(928)]);
        assert_eq!(one(Arch::Riscv64, "add s0,sp,32"), [SetFp(32)]);
        assert_eq!(one(Arch::Riscv64, "jalr a5"), [IndirectCall]);
        assert_eq!(one(Arch::Riscv64, "ret"), [Return]);
        // A big frame through a register: lui + addiw + sub.
        let mut c = Classifier::new(Arch::Riscv64);
        let seq = ["lui t0,0x1", "addiw t0,t0,-1104", "sub sp,sp,t0"];
        let effects: Vec<_> = seq
            .iter()
            .flat_map(|s| c.classify(&insn(s, None), "f"))
            .collect();
        assert_eq!(effects, [Other, Other, Alloc(4096 - 1104)]);
        // A call is auipc (with the relocation) + jalr; a tail call auipc t1 + jr t1.
        let mut c = Classifier::new(Arch::Riscv64);
        let call = insn("auipc ra,0x0", Some(("R_RISCV_CALL_PLT", "g")));
        assert_eq!(c.classify(&call, "f"), [Call("g".into())]);
        assert_eq!(c.classify(&insn("jalr ra", None), "f"), [Other]);
        let tail = insn("auipc t1,0x0", Some(("R_RISCV_CALL_PLT", "h")));
        assert_eq!(c.classify(&tail, "f"), [Tail("h".into())]);
        assert_eq!(c.classify(&insn("jr t1", None), "f"), [Other]);
        // Linked (no relocation): the target in the comment.
        let mut linked = insn("jalr -94(ra)", None);
        linked.comment_target = Some("g".into());
        assert_eq!(c.classify(&linked, "f"), [Call("g".into())]);
    }
}
