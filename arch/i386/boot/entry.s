/* i386 test kernel entry (multiboot1: 32-bit protected mode, paging off), the kernel's GDT,
 * and the interrupt entries (32 exception stubs 16 bytes apart, the PIT's IRQ 0, the PIC's
 * spurious IRQ 7). */
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
    .word 31
    .long I386_GDT

.section .bss
.balign 16
boot_stack:
    .skip 65536
boot_stack_top:
