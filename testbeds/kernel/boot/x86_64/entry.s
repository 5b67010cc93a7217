/* x86_64 test kernel entry: multiboot1 header, 32-bit to 64-bit switch of the boot CPU, and
 * the real-mode trampoline the application processors start in (copied to 0x8000). */

/* Multiboot1 with the address fields (flags bit 16): QEMU only loads a 64-bit ELF that way. */
/* Each CPU's stack: 1 << PCPU_CPU_STACK_SHIFT bytes, 64 KiB unless the assembler is given the
 * symbol (`--defsym`: the C-only kernels run on 4 KiB, xtask/src/ckernel.rs). */
.ifndef PCPU_CPU_STACK_SHIFT
.set PCPU_CPU_STACK_SHIFT, 16
.endif
.section .multiboot, "a"
.balign 4
mb_header:
    .long 0x1BADB002
    .long 0x00010000
    .long -(0x1BADB002 + 0x00010000)
    .long mb_header
    .long __kernel_start
    .long __load_end
    .long __bss_end
    .long _start32

.section .text.boot, "ax"
.code32
.global _start32
_start32:
    cli
    cld
    /* Clear .bss (page tables and stacks live there). */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    xorl %eax, %eax
    rep stosb
    /* Identity map 4 GiB with 2 MiB pages: PML4[0] -> PDPT, PDPT[0..4] -> four PDs. */
    movl $boot_pdpt, %eax
    orl $3, %eax
    movl %eax, boot_pml4
    movl $boot_pd, %eax
    orl $3, %eax
    movl $boot_pdpt, %edi
    movl $4, %ecx
1:  movl %eax, (%edi)
    addl $0x1000, %eax
    addl $8, %edi
    loop 1b
    movl $0x83, %eax            /* present, writable, 2 MiB page */
    movl $boot_pd, %edi
    movl $2048, %ecx
2:  movl %eax, (%edi)
    addl $0x200000, %eax
    addl $8, %edi
    loop 2b
    /* Long mode: PAE, CR3, EFER.LME, paging + protection, then a 64-bit code segment. */
    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80000001, %eax
    movl %eax, %cr0
    lgdt gdt64_ptr
    ljmp $0x08, $start64

/* Application processors start here in real mode, at 0x8000 (SIPI vector 0x08): straight to
 * long mode with the boot CPU's page tables. Only position-independent or absolute
 * addressing: the code runs from the copy. */
.code16
.global ap_tramp_start
.global ap_tramp_end
ap_tramp_start:
    cli
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl ap_gdt_ptr - ap_tramp_start + 0x8000
    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80000001, %eax
    movl %eax, %cr0
    ljmpl $0x08, $ap_start64
.balign 8
ap_gdt:
    .quad 0
    .quad 0x00209A0000000000    /* 0x08: 64-bit code */
    .quad 0x0000920000000000    /* 0x10: data */
ap_gdt_ptr:
    .word 23
    .long ap_gdt - ap_tramp_start + 0x8000
ap_tramp_end:

.code64
start64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movq $boot_stack_top, %rsp
    xorl %ebp, %ebp
    call x86_64_bsp_entry
3:  hlt
    jmp 3b

ap_start64:
    lgdt gdt64_ptr
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movq AP_STACK_TOP(%rip), %rsp
    movq AP_CPU(%rip), %rdi
    xorl %ebp, %ebp
    call x86_64_ap_entry
4:  hlt
    jmp 4b

.section .rodata
.balign 16
gdt64:
    .quad 0
    .quad 0x00209A0000000000    /* 0x08: 64-bit code */
    .quad 0x0000920000000000    /* 0x10: data */
gdt64_ptr:
    .word 23
    .quad gdt64

.section .bss.boot, "aw", @nobits
.balign 4096
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4 * 4096
.global boot_stack
boot_stack:
    .skip 1 << PCPU_CPU_STACK_SHIFT
boot_stack_top:

.section .text
.code64
