/* i386 test kernel entry (multiboot1: 32-bit protected mode, paging off), the real-mode
 * trampoline the application processors start in (copied to 0x8000), the kernel's GDT
 * pointer, and the interrupt entries (32 exception stubs 16 bytes apart, the timer, the
 * spurious vectors). */
/* Each CPU's stack: 1 << PCPU_CPU_STACK_SHIFT bytes, 64 KiB unless the assembler is given the
 * symbol (`--defsym`: the C-only kernels run on 4 KiB, xtask/src/ckernel.rs). */
.ifndef PCPU_CPU_STACK_SHIFT
.set PCPU_CPU_STACK_SHIFT, 16
.endif
.section .multiboot, "a"
.balign 4
    .long 0x1BADB002
    .long 0x00000003
    .long -(0x1BADB002 + 0x00000003)

.section .text.boot, "ax"
.code32
.global _start
_start:
    cli
    cld
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    xorl %eax, %eax
    rep stosb
    lgdt i386_gdt_ptr
    ljmp $0x08, $1f
1:  movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movl $boot_stack_top, %esp
    xorl %ebp, %ebp
    call i386_bsp_entry
2:  hlt
    jmp 2b

/* Application processors start here in real mode at 0x8000 (SIPI vector 0x08): load the
 * kernel's GDT (its pointer copied along), enter protected mode, jump to the kernel. */
.code16
.global i386_tramp_start
.global i386_tramp_end
i386_tramp_start:
    cli
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl tramp_gdt_ptr - i386_tramp_start + 0x8000
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $ap_start32
.balign 4
tramp_gdt_ptr:
    .word 55
    .long I386_GDT
i386_tramp_end:
.code32

ap_start32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movl I386_AP_STACK_TOP, %esp
    xorl %ebp, %ebp
    pushl I386_AP_CPU
    call i386_ap_entry
4:  hlt
    jmp 4b

.balign 16
.global i386_fault_stubs
i386_fault_stubs:
.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
.balign 16
    pushl $\v
    jmp i386_fault_common
.endr

i386_fault_common:
    movl (%esp), %eax           /* vector */
    movl 4(%esp), %ecx          /* error code, or eip */
    movl 8(%esp), %edx          /* eip, or cs */
    andl $-16, %esp
    pushl %edx
    pushl %ecx
    pushl %eax
    call i386_fault
3:  hlt
    jmp 3b

/* The timer: save every general register, call the handler on a 16-byte aligned stack. */
.global i386_timer_stub
i386_timer_stub:
    pushal
    movl %esp, %esi
    andl $-16, %esp
    cld
    call i386_timer_irq
    movl %esi, %esp
    popal
    iretl

.global i386_spurious_stub
i386_spurious_stub:
    iretl

.section .rodata
.balign 8
i386_gdt_ptr:
    .word 55
    .long I386_GDT

.section .bss
.balign 16
.global boot_stack
boot_stack:
    .skip 1 << PCPU_CPU_STACK_SHIFT
boot_stack_top:
