/*
 * i386 glue of the C-only test kernel (testbeds/ckernel/): the same entry.s (multiboot, the
 * AP trampoline at 0x8000, the interrupt stubs) and link.ld as the Rust i386 kernel, used from
 * testbeds/kernel/boot/i386/, and in C what its mod.rs, idt.rs and pic.rs do in Rust (the
 * COM1, isa-debug-exit, fw_cfg and local APIC parts are boot/x86/pc.h, shared with x86_64).
 *
 * Per-CPU register: %fs, as xv6-x86 does it. The GDT (I386_GDT, loaded by entry.s) has one data
 * segment per CPU (entries 3..3+MAX_CPUS-1); arch_set_cpu_base writes pcpu_zone_cpu_base(cpu)
 * into CPU cpu's entry and loads its selector into %fs (the library cannot: the GDT is the
 * kernel's). Until then %fs is the flat data segment (base 0), as the early counters need.
 *
 * The same binary runs on a CPU with CX8 and on a 486. It asks CPUID itself, as a kernel
 * does: with CX8 it runs SMP on the local APIC (its timer, INIT/SIPI, the CPU index from the
 * APIC ID); without CX8 it is a uniprocessor (FreeBSD's rule for i386 without cmpxchg8b) on
 * the PIT behind the 8259 PIC. The library caches its own CPUID answer in pcpu_cx8 on its
 * first add (the header declares it const: the library owns it); the header's inline
 * counter_u64_add runs the cmpxchg8b %fs: loop once pcpu_cx8 says 2, else it calls the
 * library's protected add. arch_start_secondaries checks that pcpu_cx8 agrees with the
 * kernel's own CPUID and prints which add runs.
 */
#include "pcpu_counter.h"
#include "boot/x86/pc.h"

const char arch_banner[] =
	"i386 (inline cmpxchg8b %fs: loop from pcpu_counter.h with CX8, else the library's protected add)";
const int arch_block_id_from_reset = 0;
/* QEMU's default 128 MiB of RAM from 0 (paging off). */
const uintptr_t arch_memory_end = 0x8000000;

/* The first CPU's FS entry in the GDT; CPU i has entry FS_ENTRY + i (entry.s: limit 55). */
#define FS_ENTRY 3
uint64_t I386_GDT[FS_ENTRY + MAX_CPUS] __attribute__((aligned(8))) = {
	0,
	0x00CF9A000000FFFFull, /* 0x08: flat code */
	0x00CF92000000FFFFull, /* 0x10: flat data */
	0x00CF92000000FFFFull, /* 0x18..0x30: FS of CPU 0..3, flat until arch_set_cpu_base */
	0x00CF92000000FFFFull,
	0x00CF92000000FFFFull,
	0x00CF92000000FFFFull,
};
_Static_assert(sizeof(I386_GDT) == 56, "entry.s loads the GDT with limit 55");

/* Whether the kernel runs on the local APIC (CPUID says CX8) or on the PIC alone (a 486). */
static int apic;
static int cpuid_cx8;

/* CPUID leaf 1 EDX bit 8, or 0 on a CPU without CPUID (EFLAGS.ID cannot be toggled). */
static int detect_cx8(void)
{
	uint32_t before, after;
	__asm__ volatile("pushfl; popl %0; movl %0, %1; xorl $0x200000, %1; pushl %1; popfl;"
			 "pushfl; popl %1; pushl %0; popfl"
			 : "=&r"(before), "=&r"(after)
			 :
			 : "cc");
	if (!((before ^ after) & 0x200000))
		return 0;
	uint32_t eax = 1, ebx, ecx = 0, edx;
	__asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
	return (edx >> 8) & 1;
}

unsigned arch_cpu_count(void)
{
	return apic ? fw_cfg_cpu_count() : 1;
}

/* Word 0 of this CPU's block through %fs: the CPU index (= its APIC ID on QEMU). */
unsigned arch_cpu_self(void)
{
	uint32_t id;
	__asm__ volatile("movl %%fs:0, %0" : "=r"(id));
	return id;
}

int arch_set_cpu_base(unsigned cpu)
{
	size_t base;
	int rc = pcpu_zone_cpu_base(cpu, &base);
	if (rc != 0)
		return rc;
	/* A flat 4 GiB read/write data segment (0x92, granularity 4 KiB, 32-bit) based at base. */
	uint64_t b = base;
	I386_GDT[FS_ENTRY + cpu] = 0x00CF92000000FFFFull | (b & 0xFFFFFF) << 16 | (b >> 24) << 56;
	uint16_t selector = (uint16_t)((FS_ENTRY + cpu) << 3);
	__asm__ volatile("movw %0, %%fs" : : "r"(selector) : "memory");
	return 0;
}

/* The 8259 PICs (vectors 0x20..0x2F, all masked) and the PIT on IRQ 0: the 486's timer. */
#define IRQ_BASE 0x20
#define PIC_SPURIOUS (IRQ_BASE + 7)
#define PIT_DIVISOR 120 /* 1.193182 MHz / 120: about 10 kHz */

static void pic_init(void)
{
	static const uint8_t init[][2] = {
		{ 0x20, 0x11 }, { 0xA0, 0x11 },         /* ICW1: init, ICW4 follows */
		{ 0x21, IRQ_BASE }, { 0xA1, IRQ_BASE + 8 }, /* ICW2: vector base */
		{ 0x21, 0x04 }, { 0xA1, 0x02 },         /* ICW3: slave on IRQ 2 */
		{ 0x21, 0x01 }, { 0xA1, 0x01 },         /* ICW4: 8086 mode */
		{ 0x21, 0xFF }, { 0xA1, 0xFF },         /* mask all */
	};
	for (size_t i = 0; i < sizeof(init) / sizeof(init[0]); i++)
		outb(init[i][0], init[i][1]);
}

void arch_timer_start(void)
{
	if (apic) {
		lapic_timer_start();
	} else {
		outb(0x43, 0x34); /* channel 0, lobyte/hibyte, mode 2 */
		outb(0x40, PIT_DIVISOR & 0xFF);
		outb(0x40, PIT_DIVISOR >> 8);
		outb(0x21, inb(0x21) & ~1);
	}
	__asm__ volatile("sti" : : : "memory");
}

void arch_timer_stop(void)
{
	__asm__ volatile("cli" : : : "memory");
	if (apic)
		lapic_timer_stop();
	else
		outb(0x21, inb(0x21) | 1);
}

/* The IDT: every exception fails the run; the timer and spurious vectors (entry.s). */
static uint64_t idt[256] __attribute__((aligned(8)));
extern char i386_fault_stubs[], i386_timer_stub[], i386_spurious_stub[];

static uint64_t gate(void *handler)
{
	uint64_t h = (uintptr_t)handler;
	return (h & 0xFFFF) | 0x08ull << 16 | 0x8Eull << 40 | (h >> 16) << 48;
}

static void load_idt(void)
{
	struct __attribute__((packed)) {
		uint16_t limit;
		uint32_t base;
	} pointer = { sizeof(idt) - 1, (uintptr_t)idt };
	__asm__ volatile("lidt %0" : : "m"(pointer));
}

void i386_fault(uint32_t vector, uint32_t word1, uint32_t word2)
{
	(void)word2;
	kernel_fail("exception (vector, error code or eip)", vector, word1);
}

void i386_timer_irq(void)
{
	kernel_timer_tick();
	if (apic)
		lapic_write(LAPIC_EOI, 0);
	else
		outb(0x20, 0x20);
}

/* The trampoline (entry.s) takes its stack and CPU index from these. */
uint32_t I386_AP_STACK_TOP, I386_AP_CPU;
static volatile int ap_up;
static uint8_t ap_stacks[MAX_CPUS][CKERNEL_CPU_STACK] __attribute__((aligned(16)));
extern uint8_t boot_stack[]; /* entry.s: the boot CPU's */

uint8_t *arch_stack_bottom(unsigned cpu)
{
	return cpu == 0 ? boot_stack : ap_stacks[cpu];
}
extern char i386_tramp_start[], i386_tramp_end[];

static void print_add_path(void)
{
	/* By now the early counters and the setup have added: the library has asked CPUID. */
	unsigned want = cpuid_cx8 ? 2 : 1;
	if (pcpu_cx8 != want)
		kernel_fail("pcpu_cx8 (kernel's CPUID answer, library's cache)", want, pcpu_cx8);
	kernel_print(cpuid_cx8 ? "i386: pcpu_cx8 = 2, CPUID says CX8: counter_u64_add is the "
				 "header's inline cmpxchg8b %fs: loop; SMP on the local APIC\n"
			       : "i386: pcpu_cx8 = 1, CPUID says no CX8: counter_u64_add calls the "
				 "library's protected add; uniprocessor on the PIT\n");
}

unsigned arch_start_secondaries(unsigned wanted)
{
	print_add_path();
	if (!apic)
		return 1;
	for (char *from = i386_tramp_start, *to = (char *)TRAMPOLINE; from < i386_tramp_end;)
		*to++ = *from++;
	for (unsigned cpu = 1; cpu < wanted; cpu++) {
		I386_AP_STACK_TOP = (uintptr_t)&ap_stacks[cpu][sizeof(ap_stacks[cpu])];
		I386_AP_CPU = cpu;
		__atomic_store_n(&ap_up, 0, __ATOMIC_SEQ_CST);
		lapic_start_ap(cpu, &ap_up);
	}
	return wanted;
}

void i386_bsp_entry(void)
{
	pic_init();
	for (unsigned v = 0; v < 32; v++)
		idt[v] = gate(i386_fault_stubs + 16 * v);
	idt[IRQ_BASE] = gate(i386_timer_stub);
	idt[PIC_SPURIOUS] = gate(i386_spurious_stub);
	idt[TIMER_VECTOR] = gate(i386_timer_stub);
	idt[SPURIOUS_VECTOR] = gate(i386_spurious_stub);
	load_idt();
	cpuid_cx8 = detect_cx8();
	apic = cpuid_cx8;
	if (apic)
		lapic_enable();
	kernel_bsp_main();
}

void i386_ap_entry(uint32_t cpu)
{
	__atomic_store_n(&ap_up, 1, __ATOMIC_RELEASE);
	load_idt();
	lapic_enable();
	kernel_ap_main(cpu);
}
