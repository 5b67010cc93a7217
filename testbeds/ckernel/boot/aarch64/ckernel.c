/*
 * aarch64 glue of the C-only test kernel (testbeds/ckernel/): the same entry.s and link.ld as
 * the Rust kernel, used from testbeds/kernel/boot/aarch64/ (EL1, MMU off, PSCI CPU_ON for the
 * secondaries), and in C what testbeds/kernel/boot/aarch64/mod.rs and gic.rs do in Rust: the
 * PL011, semihosting exit, PSCI, the GICv2 and the virtual timer. TPIDR_EL1 is each CPU's
 * block (pcpu_set_cpu_base), so the header's counter_u64_add is mrs tpidr_el1 and the
 * ldxr/stxr loop.
 */
#include "pcpu_counter.h"
#include "kernel.h"

const char arch_banner[] = "aarch64 (inline ldxr/stxr on TPIDR_EL1 + c from pcpu_counter.h)";
const int arch_block_id_from_reset = 0;
/* The virt machine's default 128 MiB of RAM from 0x40000000 (MMU off). */
const uintptr_t arch_memory_end = 0x48000000;

int arch_set_cpu_base(unsigned cpu)
{
	return pcpu_set_cpu_base(cpu); /* msr tpidr_el1 */
}

#define UART 0x09000000u
#define GICD 0x08000000u
#define GICC 0x08010000u
#define TIMER_INTID 27
#define SPURIOUS 1023
#define TIMER_PERIOD 3125 /* counter ticks: 50 us at QEMU's 62.5 MHz */

static void write32(uintptr_t addr, uint32_t v)
{
	*(volatile uint32_t *)addr = v;
}
static uint32_t read32(uintptr_t addr)
{
	return *(volatile uint32_t *)addr;
}

void arch_putc(char c)
{
	while (read32(UART + 0x18) & 0x20)
		;
	write32(UART, (uint8_t)c);
}

/* Semihosting SYS_EXIT (ADP_Stopped_ApplicationExit): QEMU exits with 0 on pass, 1 on fail. */
void arch_exit(int pass)
{
	static uint64_t block[2];
	block[0] = 0x20026;
	block[1] = pass ? 0 : 1;
	register uint64_t w0 __asm__("x0") = 0x18;
	register uint64_t *x1 __asm__("x1") = block;
	__asm__ volatile("hlt #0xf000" : : "r"(w0), "r"(x1) : "memory");
	for (;;)
		__asm__ volatile("msr daifset, #2; wfe");
}

void arch_relax(void)
{
	__asm__ volatile("yield");
}

static int64_t psci(uint64_t function, uint64_t a, uint64_t b, uint64_t c)
{
	register uint64_t x0 __asm__("x0") = function;
	register uint64_t x1 __asm__("x1") = a;
	register uint64_t x2 __asm__("x2") = b;
	register uint64_t x3 __asm__("x3") = c;
	__asm__ volatile("hvc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x3) : "memory");
	return (int64_t)x0;
}
#define PSCI_CPU_ON 0xC4000003u
#define PSCI_AFFINITY_INFO 0xC4000004u

/* PSCI AFFINITY_INFO answers for every MPIDR that exists (Aff0 = 0..n-1 on virt). */
unsigned arch_cpu_count(void)
{
	unsigned n = 0;
	while (n <= MAX_CPUS && psci(PSCI_AFFINITY_INFO, n, 0, 0) >= 0)
		n++;
	return n;
}

unsigned arch_cpu_self(void)
{
	uint64_t *block;
	__asm__ volatile("mrs %0, tpidr_el1" : "=r"(block));
	return (unsigned)*block;
}

uintptr_t arch_irq_save(void)
{
	uintptr_t daif;
	__asm__ volatile("mrs %0, daif; msr daifset, #2" : "=r"(daif) : : "memory");
	return daif;
}

void arch_irq_restore(uintptr_t daif)
{
	__asm__ volatile("msr daif, %0" : : "r"(daif) : "memory");
}

void arch_timer_start(void)
{
	__asm__ volatile("msr cntv_tval_el0, %0; msr cntv_ctl_el0, %1; isb; msr daifclr, #2"
			 : : "r"((uint64_t)TIMER_PERIOD), "r"((uint64_t)1) : "memory");
}

void arch_timer_stop(void)
{
	__asm__ volatile("msr daifset, #2; msr cntv_ctl_el0, xzr; isb" : : : "memory");
}

static void gic_init_cpu(void)
{
	*(volatile uint8_t *)(uintptr_t)(GICD + 0x400 + TIMER_INTID) = 0x80; /* priority */
	write32(GICD + 0x100, 1u << TIMER_INTID);                             /* enable */
	write32(GICC + 0x004, 0xFF);                                          /* PMR */
	write32(GICC + 0x000, 1);                                             /* CTLR */
}

void aarch64_irq(void)
{
	uint32_t iar = read32(GICC + 0x00C);
	if ((iar & 0x3FF) == SPURIOUS)
		return;
	if ((iar & 0x3FF) == TIMER_INTID) {
		__asm__ volatile("msr cntv_tval_el0, %0" : : "r"((uint64_t)TIMER_PERIOD));
		kernel_timer_tick();
	}
	write32(GICC + 0x010, iar);
}

void aarch64_fault(uint64_t kind, uint64_t esr, uint64_t elr, uint64_t far)
{
	(void)elr;
	(void)far;
	kernel_fail("exception (vector kind, ESR)", kind, esr);
}

static volatile int ap_up;
/* entry.s: the boot CPU's stack, and CPU k > 0 on ap_stacks + k * CKERNEL_CPU_STACK. */
extern uint8_t boot_stack[], ap_stacks[];

uint8_t *arch_stack_bottom(unsigned cpu)
{
	return cpu == 0 ? boot_stack : ap_stacks + (size_t)cpu * CKERNEL_CPU_STACK;
}

extern char aarch64_secondary_entry[];

unsigned arch_start_secondaries(unsigned wanted)
{
	for (unsigned cpu = 1; cpu < wanted; cpu++) {
		__atomic_store_n(&ap_up, 0, __ATOMIC_SEQ_CST);
		if (psci(PSCI_CPU_ON, cpu, (uintptr_t)aarch64_secondary_entry, cpu) != 0)
			return cpu;
		while (!__atomic_load_n(&ap_up, __ATOMIC_ACQUIRE))
			arch_relax();
	}
	return wanted;
}

void aarch64_bsp_entry(void)
{
	write32(GICD + 0x000, 1); /* the distributor */
	gic_init_cpu();
	kernel_bsp_main();
}

void aarch64_ap_entry(uint64_t cpu)
{
	gic_init_cpu();
	__atomic_store_n(&ap_up, 1, __ATOMIC_RELEASE);
	kernel_ap_main((unsigned)cpu);
}
