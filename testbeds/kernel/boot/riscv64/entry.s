/* riscv64 test kernel entry, in S-mode with paging off. OpenSBI (`-bios default`) jumps to
 * `_start` on the boot hart (random: a0 = its hart id, a1 = the DTB); SBI HSM `hart_start`
 * starts each secondary at `riscv64_secondary_entry` with a0 = hart id. The boot hart writes
 * each secondary's CPU index + 1 into `riscv64_hart_cpu[hart id]` before its `hart_start`;
 * `riscv64_ap_entry` gets (CPU index, hart id). `sscratch` holds the CPU index (the kernel
 * never enters U-mode, so nothing else uses it); `tp` is the per-CPU register, 0 until the
 * zone exists (the C-only kernel, testbeds/ckernel/, shares this file and points `tp` at its
 * per-CPU block first thing in C, as xv6-riscv's start() does).
 *
 * OpenSBI 1.1, the one QEMU ships here, marks a hart START_PENDING before it stores the start
 * address and opaque value (fixed in OpenSBI 1.3, "Set the state of a hart to START_PENDING
 * after the hart is ready"): a secondary whose `wfi` returns early leaves with the address
 * it had from cold boot, `_start`, and a stale a1. So `_start` is claimed once, and a hart
 * that comes second takes the secondary path; that path trusts only a0 (always the hart id)
 * and waits for its entry in `riscv64_hart_cpu`. The claim is in .data: the boot hart zeroes
 * .bss after it.
 *
 * `lla`, not `la`: this assembler is PIC by default and `la` would go through the GOT. */
.set RISCV64_MAX_HART_ID, 32
/* Each CPU's stack: 1 << PCPU_CPU_STACK_SHIFT bytes, 64 KiB unless the assembler is given the
 * symbol (`--defsym`: the C-only kernels run on 4 KiB, xtask/src/ckernel.rs). */
.ifndef PCPU_CPU_STACK_SHIFT
.set PCPU_CPU_STACK_SHIFT, 16
.endif
.section .text.boot, "ax"
.global _start
_start:
    csrw sie, zero
    csrci sstatus, 2
    lla t0, riscv64_boot_claimed
    li t1, 1
    /* Module-level asm gets no target features from rustc: name the A extension here. */
    .option push
    .option arch, +a
    amoswap.w.aq t1, t1, (t0)
    .option pop
    bnez t1, riscv64_secondary_entry
    mv tp, zero
    csrw sscratch, zero
    lla t0, __bss_start
    lla t1, __bss_end
1:  bgeu t0, t1, 2f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 1b
2:  lla sp, boot_stack_top
    lla t0, riscv64_trap_entry
    csrw stvec, t0
    call riscv64_bsp_entry
3:  wfi
    j 3b

.global riscv64_secondary_entry
riscv64_secondary_entry:
    csrw sie, zero
    csrci sstatus, 2
    li t0, RISCV64_MAX_HART_ID
    bgeu a0, t0, 4f
    lla t0, riscv64_hart_cpu
    slli t1, a0, 3
    add t0, t0, t1
5:  ld a1, 0(t0)
    beqz a1, 5b
    fence r, rw
    addi a1, a1, -1
    mv tp, zero
    csrw sscratch, a1
    lla sp, ap_stacks
    addi t0, a1, 1
    slli t0, t0, PCPU_CPU_STACK_SHIFT
    add sp, sp, t0
    lla t0, riscv64_trap_entry
    csrw stvec, t0
    /* riscv64_ap_entry(CPU index, hart id): the C-only kernel takes both. */
    mv t0, a0
    mv a0, a1
    mv a1, t0
    call riscv64_ap_entry
4:  wfi
    j 4b

/* Traps (direct mode, so 4-byte aligned): save the caller-saved registers (the kernel is
 * built without floating point, so there is no FP state), call the handler with scause,
 * sepc and stval, restore, `sret`. The handler never enables interrupts, so sepc and
 * sstatus survive it. */
.section .text
.balign 4
.global riscv64_trap_entry
riscv64_trap_entry:
    addi sp, sp, -128
    sd ra, 0(sp)
    sd t0, 8(sp)
    sd t1, 16(sp)
    sd t2, 24(sp)
    sd a0, 32(sp)
    sd a1, 40(sp)
    sd a2, 48(sp)
    sd a3, 56(sp)
    sd a4, 64(sp)
    sd a5, 72(sp)
    sd a6, 80(sp)
    sd a7, 88(sp)
    sd t3, 96(sp)
    sd t4, 104(sp)
    sd t5, 112(sp)
    sd t6, 120(sp)
    csrr a0, scause
    csrr a1, sepc
    csrr a2, stval
    call riscv64_trap
    ld ra, 0(sp)
    ld t0, 8(sp)
    ld t1, 16(sp)
    ld t2, 24(sp)
    ld a0, 32(sp)
    ld a1, 40(sp)
    ld a2, 48(sp)
    ld a3, 56(sp)
    ld a4, 64(sp)
    ld a5, 72(sp)
    ld a6, 80(sp)
    ld a7, 88(sp)
    ld t3, 96(sp)
    ld t4, 104(sp)
    ld t5, 112(sp)
    ld t6, 120(sp)
    addi sp, sp, 128
    sret

.section .data
.balign 4
riscv64_boot_claimed:
    .word 0

.section .bss
.balign 8
/* CPU index + 1 of each hart id, 0 until the boot hart starts it. */
.global riscv64_hart_cpu
riscv64_hart_cpu:
    .skip 8 * RISCV64_MAX_HART_ID
.balign 16
.global boot_stack, ap_stacks
boot_stack:
    .skip 1 << PCPU_CPU_STACK_SHIFT
boot_stack_top:
ap_stacks:
    .skip 5 << PCPU_CPU_STACK_SHIFT
