/*
 * x86_64 glue of the C-only test kernel (testbeds/ckernel/): the same entry.s, vectors.s and
 * link.ld as the Rust kernel, used from testbeds/kernel/boot/x86_64/ (multiboot, 4 GiB
 * identity map, the AP trampoline at 0x8000), and in C what testbeds/kernel/boot/x86_64/mod.rs
 * and testbeds/kernel/boot/x86/lapic.rs do in Rust: COM1, isa-debug-exit, fw_cfg's CPU count,
 * the IDT, the LAPIC timer and INIT/SIPI. GS base is each CPU's block (pcpu_set_cpu_base), so
 * the header's counter_u64_add is one addq to %gs:.
 */
#include "kernel.h"

const char arch_banner[] = "x86_64 (inline addq to %gs: from pcpu_counter.h)";

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}
static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}
static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}
static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

void arch_putc(char c)
{
	while (!(inb(0x3FD) & 0x20))
		;
	outb(0x3F8, (uint8_t)c);
}

/* isa-debug-exit at 0xf4: QEMU exits with (v << 1) | 1, 33 on pass, 35 on fail. */
void arch_exit(int pass)
{
	outl(0xF4, pass ? 0x10 : 0x11);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void arch_relax(void)
{
	__asm__ volatile("pause");
}

/* fw_cfg selector 0x05: FW_CFG_NB_CPUS, 16 bits little-endian. */
unsigned arch_cpu_count(void)
{
	outw(0x510, 0x05);
	unsigned low = inb(0x511);
	return low | (unsigned)inb(0x511) << 8;
}

unsigned arch_cpu_self(void)
{
	uint64_t id;
	__asm__ volatile("movq %%gs:0, %0" : "=r"(id));
	return (unsigned)id;
}

uintptr_t arch_irq_save(void)
{
	uintptr_t flags;
	__asm__ volatile("pushfq; popq %0; cli" : "=r"(flags) : : "memory");
	return flags;
}

void arch_irq_restore(uintptr_t flags)
{
	if (flags & 0x200)
		__asm__ volatile("sti" : : : "memory");
}

/* The local APIC (xAPIC, identity mapped). */
#define LAPIC 0xFEE00000u
#define LAPIC_ID 0x20
#define LAPIC_EOI 0xB0
#define LAPIC_SVR 0xF0
#define LAPIC_ICR_LOW 0x300
#define LAPIC_ICR_HIGH 0x310
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_TIMER_INITIAL 0x380
#define LAPIC_TIMER_DIVIDE 0x3E0
#define TIMER_VECTOR 0x40
#define SPURIOUS_VECTOR 0xFF
#define TIMER_PERIOD 50000 /* bus clocks at divide-by-1: 50 us at QEMU's 1 GHz */
#define TRAMPOLINE 0x8000

static uint32_t lapic_read(unsigned reg)
{
	return *(volatile uint32_t *)(uintptr_t)(LAPIC + reg);
}
static void lapic_write(unsigned reg, uint32_t v)
{
	*(volatile uint32_t *)(uintptr_t)(LAPIC + reg) = v;
}

static void lapic_ipi(uint32_t apic_id, uint32_t command)
{
	lapic_write(LAPIC_ICR_HIGH, apic_id << 24);
	lapic_write(LAPIC_ICR_LOW, command);
	while (lapic_read(LAPIC_ICR_LOW) & (1u << 12))
		arch_relax();
}

void arch_timer_start(void)
{
	lapic_write(LAPIC_TIMER_DIVIDE, 0xB);
	lapic_write(LAPIC_LVT_TIMER, TIMER_VECTOR | 1u << 17);
	lapic_write(LAPIC_TIMER_INITIAL, TIMER_PERIOD);
	__asm__ volatile("sti" : : : "memory");
}

void arch_timer_stop(void)
{
	__asm__ volatile("cli" : : : "memory");
	lapic_write(LAPIC_LVT_TIMER, 1u << 16);
	lapic_write(LAPIC_TIMER_INITIAL, 0);
}

/* The IDT: every exception fails the run; the timer and spurious vectors (vectors.s). */
struct gate {
	uint16_t offset_low, selector;
	uint8_t ist, kind;
	uint16_t offset_mid;
	uint32_t offset_high, reserved;
};
static struct gate idt[256] __attribute__((aligned(16)));
extern char x86_fault_stubs[], x86_timer_stub[], x86_spurious_stub[];

static void set_gate(unsigned vector, void *handler)
{
	uintptr_t h = (uintptr_t)handler;
	idt[vector] = (struct gate){ (uint16_t)h, 0x08, 0, 0x8E, (uint16_t)(h >> 16), (uint32_t)(h >> 32), 0 };
}

static void load_idt(void)
{
	struct __attribute__((packed)) {
		uint16_t limit;
		uint64_t base;
	} pointer = { sizeof(idt) - 1, (uintptr_t)idt };
	__asm__ volatile("lidt %0" : : "m"(pointer));
}

void x86_64_fault(uint64_t vector, uint64_t word1, uint64_t word2)
{
	(void)word2;
	kernel_fail("exception (vector, error code or rip)", vector, word1);
}

void x86_64_timer_irq(void)
{
	kernel_timer_tick();
	lapic_write(LAPIC_EOI, 0);
}

/* The trampoline (entry.s) takes its stack and CPU index from these. */
uint64_t AP_STACK_TOP, AP_CPU;
static volatile int ap_up;
static uint8_t ap_stacks[MAX_CPUS][64 * 1024] __attribute__((aligned(16)));
extern char ap_tramp_start[], ap_tramp_end[];

unsigned arch_start_secondaries(unsigned wanted)
{
	for (char *from = ap_tramp_start, *to = (char *)TRAMPOLINE; from < ap_tramp_end;)
		*to++ = *from++;
	for (unsigned cpu = 1; cpu < wanted; cpu++) {
		AP_STACK_TOP = (uintptr_t)&ap_stacks[cpu][sizeof(ap_stacks[cpu])];
		AP_CPU = cpu;
		__atomic_store_n(&ap_up, 0, __ATOMIC_SEQ_CST);
		/* INIT, SIPI, and a second SIPI if the first went unanswered (the MP protocol). */
		lapic_ipi(cpu, 0x4500);
		lapic_ipi(cpu, 0x4600 | TRAMPOLINE >> 12);
		unsigned spins = 0;
		while (!__atomic_load_n(&ap_up, __ATOMIC_ACQUIRE) && spins < 50000000u)
			spins++;
		if (!__atomic_load_n(&ap_up, __ATOMIC_ACQUIRE)) {
			lapic_ipi(cpu, 0x4600 | TRAMPOLINE >> 12);
			while (!__atomic_load_n(&ap_up, __ATOMIC_ACQUIRE))
				arch_relax();
		}
	}
	return wanted;
}

void x86_64_bsp_entry(void)
{
	outb(0x21, 0xFF); /* mask the 8259 PICs */
	outb(0xA1, 0xFF);
	for (unsigned v = 0; v < 32; v++)
		set_gate(v, x86_fault_stubs + 16 * v);
	set_gate(TIMER_VECTOR, x86_timer_stub);
	set_gate(SPURIOUS_VECTOR, x86_spurious_stub);
	load_idt();
	lapic_write(LAPIC_SVR, 0x100 | SPURIOUS_VECTOR);
	kernel_bsp_main();
}

void x86_64_ap_entry(uint64_t cpu)
{
	__atomic_store_n(&ap_up, 1, __ATOMIC_RELEASE);
	load_idt();
	lapic_write(LAPIC_SVR, 0x100 | SPURIOUS_VECTOR);
	kernel_ap_main((unsigned)cpu);
}
