/* x86_64 test kernel interrupt entries: 32 exception stubs (16 bytes apart), the LAPIC timer
 * and the spurious vector. */
.section .text
.code64
.balign 16
.global x86_fault_stubs
x86_fault_stubs:
.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
.balign 16
    pushq $\v
    jmp x86_fault_common
.endr

x86_fault_common:
    movq (%rsp), %rdi           /* vector */
    movq 8(%rsp), %rsi          /* error code, or rip */
    movq 16(%rsp), %rdx         /* rip, or cs */
    andq $-16, %rsp
    call x86_64_fault
5:  hlt
    jmp 5b

/* The timer: save the caller-saved registers (no SSE in this kernel), call the handler. The
 * CPU aligned the stack before pushing its 5-word frame; 9 pushes re-align it for the call. */
.global x86_timer_stub
x86_timer_stub:
    pushq %rax
    pushq %rcx
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    cld
    call x86_64_timer_irq
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdi
    popq %rsi
    popq %rdx
    popq %rcx
    popq %rax
    iretq

.global x86_spurious_stub
x86_spurious_stub:
    iretq
