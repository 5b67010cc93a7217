/*
 * What the x86_64 and i386 glue of the C-only test kernel share (included by
 * boot/x86_64/ckernel.c and boot/i386/ckernel.c, as testbeds/kernel/boot/x86/pc.rs and lapic.rs
 * are by the Rust kernels): port I/O, COM1, isa-debug-exit, the interrupt flag
 * (arch_irq_save/arch_irq_restore), fw_cfg's CPU count, and the local APIC
 * (xAPIC at 0xFEE00000: identity mapped on x86_64, paging off on i386): enable, EOI, the
 * periodic timer, INIT/SIPI to the trampoline at 0x8000.
 */
#ifndef CKERNEL_X86_PC_H
#define CKERNEL_X86_PC_H

#include "kernel.h"

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
	__asm__ volatile("pause"); /* rep; nop: a plain nop on a 486 */
}

/* Interrupts off; returns the flags from before (pushfq on x86_64, pushfl on i386). */
uintptr_t arch_irq_save(void)
{
	uintptr_t flags;
#if defined(__x86_64__)
	__asm__ volatile("pushfq; popq %0; cli" : "=r"(flags) : : "memory");
#else
	__asm__ volatile("pushfl; popl %0; cli" : "=r"(flags) : : "memory");
#endif
	return flags;
}

/* Interrupts back on if IF was set at the matching arch_irq_save. */
void arch_irq_restore(uintptr_t flags)
{
	if (flags & 0x200)
		__asm__ volatile("sti" : : : "memory");
}

/* fw_cfg selector 0x05: FW_CFG_NB_CPUS, 16 bits little-endian. */
static inline unsigned fw_cfg_cpu_count(void)
{
	outw(0x510, 0x05);
	unsigned low = inb(0x511);
	return low | (unsigned)inb(0x511) << 8;
}

/* The local APIC. */
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

static inline uint32_t lapic_read(unsigned reg)
{
	return *(volatile uint32_t *)(uintptr_t)(LAPIC + reg);
}
static inline void lapic_write(unsigned reg, uint32_t v)
{
	*(volatile uint32_t *)(uintptr_t)(LAPIC + reg) = v;
}

static inline void lapic_enable(void)
{
	lapic_write(LAPIC_SVR, 0x100 | SPURIOUS_VECTOR);
}

static inline void lapic_ipi(uint32_t apic_id, uint32_t command)
{
	lapic_write(LAPIC_ICR_HIGH, apic_id << 24);
	lapic_write(LAPIC_ICR_LOW, command);
	while (lapic_read(LAPIC_ICR_LOW) & (1u << 12))
		arch_relax();
}

static inline void lapic_timer_start(void)
{
	lapic_write(LAPIC_TIMER_DIVIDE, 0xB);
	lapic_write(LAPIC_LVT_TIMER, TIMER_VECTOR | 1u << 17);
	lapic_write(LAPIC_TIMER_INITIAL, TIMER_PERIOD);
}

static inline void lapic_timer_stop(void)
{
	lapic_write(LAPIC_LVT_TIMER, 1u << 16);
	lapic_write(LAPIC_TIMER_INITIAL, 0);
}

/* INIT, SIPI to the trampoline, and a second SIPI if the first went unanswered (the MP
 * protocol); returns once the CPU set *up. */
static inline void lapic_start_ap(uint32_t apic_id, volatile int *up)
{
	lapic_ipi(apic_id, 0x4500);
	lapic_ipi(apic_id, 0x4600 | TRAMPOLINE >> 12);
	unsigned spins = 0;
	while (!__atomic_load_n(up, __ATOMIC_ACQUIRE) && spins < 50000000u)
		spins++;
	if (!__atomic_load_n(up, __ATOMIC_ACQUIRE)) {
		lapic_ipi(apic_id, 0x4600 | TRAMPOLINE >> 12);
		while (!__atomic_load_n(up, __ATOMIC_ACQUIRE))
			arch_relax();
	}
}

#endif
