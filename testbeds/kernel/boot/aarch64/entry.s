/* aarch64 test kernel entry: the boot CPU (from QEMU's -kernel) and the secondaries (from
 * PSCI CPU_ON, x0 = the CPU's index), both at EL1 with the MMU off. */
/* Each CPU's stack: 1 << PCPU_CPU_STACK_SHIFT bytes, 64 KiB unless the assembler is given the
 * symbol (`--defsym`: the C-only kernels run on 4 KiB, xtask/src/ckernel.rs). */
.ifndef PCPU_CPU_STACK_SHIFT
.set PCPU_CPU_STACK_SHIFT, 16
.endif
.section .text.boot, "ax"
.global _start
_start:
    msr daifset, #0xf
    /* The per-CPU register starts at 0 (its reset value is UNKNOWN): until the zone exists,
     * C's early counters are reached through it (COUNTER_U64_DEFINE_EARLY). */
    msr tpidr_el1, xzr
    ldr x1, =__bss_start
    ldr x2, =__bss_end
1:  cmp x1, x2
    b.hs 2f
    str xzr, [x1], #8
    b 1b
2:  ldr x1, =boot_stack_top
    mov sp, x1
    ldr x1, =aarch64_vectors
    msr vbar_el1, x1
    isb
    bl aarch64_bsp_entry
3:  wfe
    b 3b

.global aarch64_secondary_entry
aarch64_secondary_entry:
    msr daifset, #0xf
    ldr x1, =ap_stacks
    add x2, x0, #1
    lsl x2, x2, #PCPU_CPU_STACK_SHIFT
    add x1, x1, x2
    mov sp, x1
    ldr x1, =aarch64_vectors
    msr vbar_el1, x1
    isb
    bl aarch64_ap_entry
4:  wfe
    b 4b

/* The exception vectors: IRQs (current EL, SP0 or SPx) go to the handler, everything else
 * reports the exception and fails the run. */
.section .text
.balign 0x800
.global aarch64_vectors
aarch64_vectors:
.irp kind, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
.balign 0x80
    .if (\kind == 1) || (\kind == 5)
    b irq_entry
    .else
    mov x0, #\kind
    b fault_entry
    .endif
.endr

fault_entry:
    mrs x1, esr_el1
    mrs x2, elr_el1
    mrs x3, far_el1
    bl aarch64_fault
5:  wfe
    b 5b

/* Save the caller-saved registers (the kernel has no FP/SIMD state), call the handler. The
 * handler never enables interrupts, so ELR_EL1 and SPSR_EL1 survive it. */
irq_entry:
    sub sp, sp, #176
    stp x0, x1, [sp, #0]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x29, [sp, #144]
    str x30, [sp, #160]
    bl aarch64_irq
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    ldp x16, x17, [sp, #128]
    ldp x18, x29, [sp, #144]
    ldr x30, [sp, #160]
    add sp, sp, #176
    clrex
    eret

.section .bss
.balign 16
.global boot_stack, ap_stacks
boot_stack:
    .skip 1 << PCPU_CPU_STACK_SHIFT
boot_stack_top:
ap_stacks:
    .skip 5 << PCPU_CPU_STACK_SHIFT
