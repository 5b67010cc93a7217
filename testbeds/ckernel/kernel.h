/*
 * The C-only test kernel (testbeds/ckernel/): what its portable part (main.c) needs from each
 * arch's boot glue (boot/<arch>/ckernel.c). The glue's entry points call kernel_bsp_main on the
 * boot CPU and kernel_ap_main on every other CPU, and kernel_timer_tick from the timer
 * interrupt. No libc.
 */
#ifndef CKERNEL_KERNEL_H
#define CKERNEL_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define MAX_CPUS 4

/* One CPU's per-CPU block: the per-CPU register points here. Word 0 is the CPU's index; the
 * counter zone is hosted in the rest (offset 64), as in a kernel that owns its pcpu area. */
#define BLOCK 4096
#define COUNTER_AREA 64
#define SLOTS ((BLOCK - COUNTER_AREA) / 8)

/* The glue. */
extern const char arch_banner[];   /* names the add the header inlines (checked by xtask) */
void arch_putc(char c);
__attribute__((noreturn)) void arch_exit(int pass);
unsigned arch_cpu_count(void);
unsigned arch_start_secondaries(unsigned wanted); /* CPUs 1..wanted-1; returns CPUs running */
unsigned arch_cpu_self(void);      /* word 0 of this CPU's block, through the register */
uintptr_t arch_irq_save(void);     /* interrupts off; returns the state from before */
void arch_irq_restore(uintptr_t state);
void arch_timer_start(void);       /* this CPU's periodic timer on, interrupts on */
void arch_timer_stop(void);        /* interrupts off, timer off */
void arch_relax(void);

/* The portable part. */
__attribute__((noreturn)) void kernel_bsp_main(void);
__attribute__((noreturn)) void kernel_ap_main(unsigned cpu);
void kernel_timer_tick(void);
void kernel_print(const char *s);
__attribute__((noreturn)) void kernel_fail(const char *what, uint64_t a, uint64_t b);

#endif
