/*
 * riscv64 glue of the C-only test kernel (testbeds/ckernel/): the same entry.s (S-mode under
 * OpenSBI, `-bios default`; the trap entry) and link.ld as the Rust riscv64 kernel, used from
 * testbeds/kernel/boot/riscv64/, and in C what its mod.rs does in Rust: the virt machine's
 * 16550 UART, SBI HSM to count and start harts, the SBI timer, the sifive_test device to exit.
 *
 * The per-CPU register is tp, the library's default on riscv64, and it is set as kernels of
 * the xv6 family set it: from reset, first thing on each hart, before the zone exists. tp
 * points at the hart's per-CPU block (kernel_blocks[cpu]), whose word 0 is the hart id (as
 * xv6's struct cpu would hold it) and word 1 the kernel's CPU index. The boot hart is whichever
 * OpenSBI picked (a0): it is CPU 0, the others CPUs 1, 2, ... in hart id order. Since
 * pcpu_zone_init's layout names these very blocks, pcpu_zone_cpu_base(cpu) is the value tp
 * already holds: arch_set_cpu_base only checks that, as a kernel whose register already points
 * at its blocks does (it needs no pcpu_set_cpu_base).
 *
 * The header's counter_u64_add is add tp + c and one amoadd.d, early counters included:
 * riscv64_bsp_entry tells the library with pcpu_early_base what tp holds before the zone.
 *
 * Built for riscv64imac + lp64 with the riscv64imac-unknown-none-elf library: no floating
 * point anywhere, so the FPU stays off and the trap entry saves integer registers only.
 */
#include "pcpu_counter.h"
#include "kernel.h"

const char arch_banner[] =
	"riscv64 (inline amoadd.d on tp + c from pcpu_counter.h; tp = this hart's per-CPU block from reset, hart id in word 0)";
const int arch_block_id_from_reset = 1;
/* The virt machine's default 128 MiB of RAM from 0x80000000 (no paging), below where QEMU puts
 * the device tree (the last 16 MiB boundary under its end). */
const uintptr_t arch_memory_end = 0x87000000;

#define UART 0x10000000ul
#define UART_LSR (UART + 5)
#define SIFIVE_TEST 0x100000ul
#define SCAUSE_TIMER ((1ul << 63) | 5)
#define SIE_STIE (1ul << 5)
#define SSTATUS_SIE (1ul << 1)
#define PERIOD 500 /* time ticks at the 10 MHz timebase: 50 us */
#define MAX_HART_ID 32

void arch_putc(char c)
{
	while (!(*(volatile uint8_t *)UART_LSR & 0x20))
		;
	*(volatile uint8_t *)UART = (uint8_t)c;
}

/* sifive_test: 0x5555 exits QEMU with 0, (code << 16) | 0x3333 with code. */
void arch_exit(int pass)
{
	*(volatile uint32_t *)SIFIVE_TEST = pass ? 0x5555 : (1u << 16) | 0x3333;
	for (;;)
		__asm__ volatile("csrci sstatus, 2; wfi");
}

void arch_relax(void)
{
	__asm__ volatile("nop");
}

struct sbiret {
	long error;
	unsigned long value;
};

static struct sbiret sbi(unsigned long eid, unsigned long fid, unsigned long arg0,
			 unsigned long arg1, unsigned long arg2)
{
	register unsigned long a0 __asm__("a0") = arg0;
	register unsigned long a1 __asm__("a1") = arg1;
	register unsigned long a2 __asm__("a2") = arg2;
	register unsigned long a6 __asm__("a6") = fid;
	register unsigned long a7 __asm__("a7") = eid;
	__asm__ volatile("ecall" : "+r"(a0), "+r"(a1) : "r"(a2), "r"(a6), "r"(a7) : "memory");
	return (struct sbiret){ (long)a0, a1 };
}

#define SBI_HSM 0x48534Dul
#define HSM_HART_START 0
#define HSM_HART_GET_STATUS 2
#define SBI_TIME 0x54494D45ul

static int hart_exists(unsigned long hart)
{
	return sbi(SBI_HSM, HSM_HART_GET_STATUS, hart, 0, 0).error == 0;
}

unsigned arch_cpu_count(void)
{
	unsigned n = 0;
	for (unsigned long hart = 0; hart < MAX_HART_ID; hart++)
		n += hart_exists(hart);
	return n;
}

/* Word 1 of this hart's block, through tp. */
unsigned arch_cpu_self(void)
{
	uint64_t cpu;
	__asm__ volatile("ld %0, 8(tp)" : "=r"(cpu));
	return (unsigned)cpu;
}

static uintptr_t read_tp(void)
{
	uintptr_t tp;
	__asm__ volatile("mv %0, tp" : "=r"(tp));
	return tp;
}

/* tp has pointed at the hart's block since reset: nothing to set (main.c's pcpu_cpu_check
 * then proves it is the block the zone names). */
int arch_set_cpu_base(unsigned cpu)
{
	(void)cpu;
	return 0;
}

uintptr_t arch_irq_save(void)
{
	uintptr_t sstatus;
	__asm__ volatile("csrrci %0, sstatus, 2" : "=r"(sstatus) : : "memory");
	return sstatus;
}

void arch_irq_restore(uintptr_t sstatus)
{
	if (sstatus & SSTATUS_SIE)
		__asm__ volatile("csrsi sstatus, 2" : : : "memory");
}

static void arm_timer(void)
{
	uint64_t now;
	__asm__ volatile("rdtime %0" : "=r"(now));
	sbi(SBI_TIME, 0, now + PERIOD, 0, 0);
}

void arch_timer_start(void)
{
	arm_timer();
	__asm__ volatile("csrs sie, %0; csrsi sstatus, 2" : : "r"(SIE_STIE) : "memory");
}

void arch_timer_stop(void)
{
	__asm__ volatile("csrci sstatus, 2; csrc sie, %0" : : "r"(SIE_STIE) : "memory");
	sbi(SBI_TIME, 0, ~0ul, 0, 0); /* a deadline that never comes clears the pending bit */
}

/* From entry.s's trap entry (caller-saved registers saved, interrupts stay off). */
void riscv64_trap(uintptr_t scause, uintptr_t sepc, uintptr_t stval)
{
	if (scause == SCAUSE_TIMER) {
		arm_timer();
		kernel_timer_tick();
		return;
	}
	(void)stval;
	kernel_fail("trap (scause, sepc)", scause, sepc);
}

/* The first thing a hart does in C: tp = its block, the hart id in word 0, its index in word 1. */
static void per_cpu_from_reset(unsigned cpu, unsigned long hart)
{
	struct block *self = &kernel_blocks[cpu];
	self->id = hart;
	self->cpu = cpu;
	__asm__ volatile("mv tp, %0" : : "r"(self) : "memory");
}

static unsigned long boot_hart;
static volatile int ap_up;
/* entry.s: the boot CPU's stack, and CPU k > 0 on ap_stacks + k * CKERNEL_CPU_STACK. */
extern uint8_t boot_stack[], ap_stacks[];

uint8_t *arch_stack_bottom(unsigned cpu)
{
	return cpu == 0 ? boot_stack : ap_stacks + (size_t)cpu * CKERNEL_CPU_STACK;
}

extern char riscv64_secondary_entry[];
/* entry.s: each hart id's CPU index + 1, 0 until the hart is started. */
extern unsigned long riscv64_hart_cpu[MAX_HART_ID];

/* HSM hart_start for each hart but the boot hart, in hart id order, one at a time, until
 * wanted CPUs run. The CPU index goes to entry.s through riscv64_hart_cpu, not the opaque
 * value, which OpenSBI 1.1 may not have stored yet when the hart leaves (see entry.s). */
unsigned arch_start_secondaries(unsigned wanted)
{
	unsigned cpu = 1;
	for (unsigned long hart = 0; hart < MAX_HART_ID && cpu < wanted; hart++) {
		if (hart == boot_hart || !hart_exists(hart))
			continue;
		__atomic_store_n(&ap_up, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&riscv64_hart_cpu[hart], cpu + 1, __ATOMIC_RELEASE);
		struct sbiret r = sbi(SBI_HSM, HSM_HART_START, hart, (uintptr_t)riscv64_secondary_entry, 0);
		if (r.error != 0)
			kernel_fail("SBI HSM hart_start (hart, error)", hart, (uint64_t)r.error);
		while (!__atomic_load_n(&ap_up, __ATOMIC_ACQUIRE))
			arch_relax();
		cpu++;
	}
	return cpu;
}

void riscv64_bsp_entry(unsigned long hart)
{
	per_cpu_from_reset(0, hart);
	boot_hart = hart;
	/*
	 * tp is non-zero from here on, and kernel_bsp_main adds to early counters (fbsd_boot)
	 * before pcpu_zone_init with the header's inline add (tp + c): tell the library what tp
	 * holds until the zone exists, before the first early add, so that every early name is
	 * its word minus tp.
	 */
	int rc = pcpu_early_base((size_t)&kernel_blocks[0]);
	if (rc != 0)
		kernel_fail("pcpu_early_base (rc, tp)", (uint64_t)-rc, read_tp());
	kernel_bsp_main();
}

void riscv64_ap_entry(unsigned long cpu, unsigned long hart)
{
	per_cpu_from_reset((unsigned)cpu, hart);
	__atomic_store_n(&ap_up, 1, __ATOMIC_RELEASE);
	kernel_ap_main((unsigned)cpu);
}
