//! One function's own stack use, from its instructions' effects: the deepest the stack
//! pointer goes below its value at the call, return address included (x86), and what the
//! function calls.
//!
//! The walk is linear, in address order. The frame is what the prologue allocates (its
//! pushes and `sub`s, however many steps) and what any later allocation adds; pushes inside
//! the body (an i386 call's arguments) count on top of the frame. After the end of a path (a
//! return, a tail jump, a trap) the next instruction starts again at the frame's depth, so
//! a path that follows an early return is still counted inside the frame. Overestimates are
//! possible (never under): a shrink-wrapped function counts its frame everywhere.

use super::frame::{Classifier, Effect};
use super::objdump::Function;

/// What a function does, for the call graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Own {
    /// Bytes of its own frame (return address included on x86); `None` if the stack
    /// pointer moved in a way the checker cannot follow.
    pub frame: Option<u64>,
    /// Functions it calls or tail-jumps to, by the name the instruction names.
    pub calls: Vec<String>,
    /// Whether it calls or jumps through a pointer.
    pub indirect: bool,
    /// Whether it calls through a pointer (a jump through one may be a jump table).
    pub indirect_call: bool,
}

/// The own frame and calls of `f`, classified by `c`.
pub fn own(f: &Function, c: &mut Classifier, call_push: u64) -> Own {
    c.prepare(f);
    let mut out = Own::default();
    let (mut depth, mut max, mut frame) = (0u64, 0u64, 0u64);
    let mut fp: Option<u64> = None;
    let mut prologue = true;
    let mut unknown = false;
    for insn in &f.insns {
        for effect in c.classify(insn, &f.name) {
            let mut ends_path = false;
            match effect {
                Effect::Alloc(n) => {
                    depth += n;
                    frame = frame.max(depth);
                }
                Effect::Push(n) => {
                    depth += n;
                    if prologue {
                        frame = frame.max(depth);
                    }
                }
                Effect::Free(n) => depth = depth.saturating_sub(n),
                Effect::SetFp(k) => fp = Some(depth.saturating_sub(k)),
                Effect::SpFromFp(k) => match fp {
                    Some(at) => depth = at + k,
                    None => unknown = true,
                },
                Effect::SpUnknown => unknown = true,
                Effect::Call(name) => {
                    prologue = false;
                    out.calls.push(name);
                }
                Effect::Tail(name) => {
                    out.calls.push(name);
                    ends_path = true;
                }
                Effect::IndirectCall => {
                    prologue = false;
                    out.indirect = true;
                    out.indirect_call = true;
                }
                Effect::IndirectJump => {
                    out.indirect = true;
                    ends_path = true;
                }
                Effect::Return => ends_path = true,
                Effect::Other => prologue = false,
            }
            max = max.max(depth);
            if ends_path {
                prologue = false;
                depth = frame;
            }
        }
    }
    out.frame = (!unknown).then_some(max + call_push);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::frame::Arch;
    use crate::stack::objdump::parse_disassembly;

    fn own_of(arch: Arch, body: &str) -> Own {
        let text = format!("Disassembly of section .text.f:\n\n0000000000000000 <f>:\n{body}");
        let f = &parse_disassembly(&text)[0];
        own(f, &mut Classifier::new(arch), arch.call_push())
    }

    #[test]
    fn riscv64_multi_step_prologue() {
        // The 5,008-byte frame: three `addi`s.
        let o = own_of(
            Arch::Riscv64,
            "   0:\tadd\tsp,sp,-2032\n   4:\tsd\tra,2024(sp)\n   8:\tadd\tsp,sp,-2048\n   c:\tadd\tsp,sp,-928\n  10:\tret\n",
        );
        assert_eq!(o.frame, Some(5008));
    }

    #[test]
    fn i386_argument_pushes_after_an_early_return_count_on_the_frame() {
        let o = own_of(
            Arch::I386,
            "   0:\tpush   %ebp\n   1:\tmov    %esp,%ebp\n   3:\tpush   %ebx\n   4:\tsub    $0x14,%esp\n   7:\ttest   %eax,%eax\n   9:\tje     20 <f+0x20>\n   b:\tadd    $0x14,%esp\n   e:\tpop    %ebx\n   f:\tpop    %ebp\n  10:\tret\n  20:\tpush   %eax\n  21:\tpush   %ecx\n  22:\tcall   27 <f+0x27>\n\t\t\t23: R_386_PC32\tg\n  27:\tadd    $0x8,%esp\n  2a:\tlea    -0x4(%ebp),%esp\n  2d:\tpop    %ebx\n  2e:\tpop    %ebp\n  2f:\tret\n",
        );
        // Return address 4 + ebp 4 + ebx 4 + 0x14 + two argument pushes 8.
        assert_eq!(o.frame, Some(4 + 4 + 4 + 20 + 8));
        assert_eq!(o.calls, ["g"]);
        assert!(!o.indirect);
    }

    #[test]
    fn x86_64_probed_frame_and_indirect_call() {
        let o = own_of(
            Arch::X86_64,
            "   0:\tpush   %rbx\n   1:\tsub    $0x1000,%rsp\n   8:\tmovq   $0x0,(%rsp)\n  10:\tsub    $0x338,%rsp\n  17:\tcall   *0x18(%r15)\n  1b:\tadd    $0x1338,%rsp\n  22:\tpop    %rbx\n  23:\tret\n",
        );
        assert_eq!(o.frame, Some(8 + 8 + 0x1338));
        assert!(o.indirect);
    }

    /// Position-independent x86_64 code loads a function's GOT entry into a callee-saved
    /// register once and calls through it in a loop: a call of that function. Written once
    /// more with anything else, the register is a pointer again.
    #[test]
    fn x86_64_call_through_a_register_loaded_from_the_got() {
        let body = "   0:\tpush   %r14\n   2:\tmov    0x0(%rip),%r14\n\t\t\t5: R_X86_64_REX_GOTPCRELX\tg-0x4\n   9:\tcall   *%r14\n   c:\tjne    9 <f+0x9>\n   d:\tpop    %r14\n   e:\tret\n";
        let o = own_of(Arch::X86_64, body);
        assert_eq!(
            (o.calls.as_slice(), o.indirect),
            (["g".to_string()].as_slice(), false)
        );
        let overwritten = format!("{body}   f:\tmov    %rdi,%r14\n  11:\tret\n");
        let o = own_of(Arch::X86_64, &overwritten);
        assert_eq!((o.calls.len(), o.indirect), (0, true));
        let other_got = format!("{body}   f:\tmov    0x0(%rip),%r14\n\t\t\t11: R_X86_64_REX_GOTPCRELX\th-0x4\n  15:\tret\n");
        let o = own_of(Arch::X86_64, &other_got);
        assert_eq!((o.calls.len(), o.indirect), (0, true));
    }

    #[test]
    fn an_unknown_stack_move_has_no_frame() {
        let o = own_of(Arch::X86_64, "   0:\tsub    %r11,%rsp\n   3:\tret\n");
        assert_eq!(o.frame, None);
    }
}
