/*
 * x86_64 glue of the C-only test kernel (testbeds/ckernel/): the same entry.s, vectors.s and
 * link.ld as the Rust kernel, used from testbeds/kernel/boot/x86_64/ (multiboot, 4 GiB
 * identity map, the AP trampoline at 0x8000), and in C what testbeds/kernel/boot/x86_64/mod.rs
 * and testbeds/kernel/boot/x86/{pc,lapic}.rs do in Rust: the IDT here; COM1, isa-debug-exit,
 * the interrupt flag, fw_cfg's CPU count, the LAPIC timer and INIT/SIPI in boot/x86/pc.h,
 * shared with the i386 glue. GS base is each CPU's block (pcpu_set_cpu_base), so the
 * header's counter_u64_add is one addq to %gs:.
 */
#include "pcpu_counter.h"
#include "boot/x86/pc.h"

const char arch_banner[] = "x86_64 (inline addq to %gs: from pcpu_counter.h)";
const int arch_block_id_from_reset = 0;
/* QEMU's default 128 MiB of RAM, inside the boot code's 4 GiB identity map. */
const uintptr_t arch_memory_end = 0x8000000;

unsigned arch_cpu_count(void)
{
	return fw_cfg_cpu_count();
}

int arch_set_cpu_base(unsigned cpu)
{
	return pcpu_set_cpu_base(cpu); /* wrmsr IA32_GS_BASE */
}

unsigned arch_cpu_self(void)
{
	uint64_t id;
	__asm__ volatile("movq %%gs:0, %0" : "=r"(id));
	return (unsigned)id;
}

void arch_timer_start(void)
{
	lapic_timer_start();
	__asm__ volatile("sti" : : : "memory");
}

void arch_timer_stop(void)
{
	__asm__ volatile("cli" : : : "memory");
	lapic_timer_stop();
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
static uint8_t ap_stacks[MAX_CPUS][CKERNEL_CPU_STACK] __attribute__((aligned(16)));
extern uint8_t boot_stack[]; /* entry.s: the boot CPU's */

uint8_t *arch_stack_bottom(unsigned cpu)
{
	return cpu == 0 ? boot_stack : ap_stacks[cpu];
}
extern char ap_tramp_start[], ap_tramp_end[];

unsigned arch_start_secondaries(unsigned wanted)
{
	for (char *from = ap_tramp_start, *to = (char *)TRAMPOLINE; from < ap_tramp_end;)
		*to++ = *from++;
	for (unsigned cpu = 1; cpu < wanted; cpu++) {
		AP_STACK_TOP = (uintptr_t)&ap_stacks[cpu][sizeof(ap_stacks[cpu])];
		AP_CPU = cpu;
		__atomic_store_n(&ap_up, 0, __ATOMIC_SEQ_CST);
		lapic_start_ap(cpu, &ap_up);
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
	lapic_enable();
	kernel_bsp_main();
}

void x86_64_ap_entry(uint64_t cpu)
{
	__atomic_store_n(&ap_up, 1, __ATOMIC_RELEASE);
	load_idt();
	lapic_enable();
	kernel_ap_main((unsigned)cpu);
}
