/*
 * A deliberately broken counter_u64_add for the C-only kernels' failing runs
 * (`cargo xtask qemu` builds c-x86_64-broken, c-aarch64-broken, c-i386-broken (booted on a
 * CX8 CPU and on a 486) and c-riscv64-broken with `-include` of this file): the per-CPU slot is loaded, added to and stored back in three instructions, so a
 * timer interrupt that adds between the load and the store is lost. The kernels' timer
 * check must then fail. Not part of the product's header.
 */
#ifndef PCPU_BROKEN_ADD_H
#define PCPU_BROKEN_ADD_H

#include "pcpu_counter.h"

static inline void pcpu_broken_add(counter_u64_t c, int64_t v)
{
#if defined(__x86_64__)
	uint64_t t;
	__asm__ __volatile__("movq %%gs:(%1), %0\n\t"
			     "addq %2, %0\n\t"
			     "movq %0, %%gs:(%1)"
			     : "=&r"(t)
			     : "r"(c), "r"(v)
			     : "memory", "cc");
#elif defined(__aarch64__)
	uint64_t t;
	uintptr_t base;
	__asm__ __volatile__("mrs %0, tpidr_el1" : "=r"(base));
	__asm__ __volatile__("ldr %0, [%1]\n\t"
			     "add %0, %0, %2\n\t"
			     "str %0, [%1]"
			     : "=&r"(t)
			     : "r"(base + (uintptr_t)c), "r"(v)
			     : "memory");
#elif defined(__i386__)
	/* Both halves through %fs, no cmpxchg8b and no protection, on every CPU. */
	uint32_t lo, hi;
	__asm__ __volatile__("movl %%fs:(%2), %0\n\t"
			     "movl %%fs:4(%2), %1\n\t"
			     "addl %3, %0\n\t"
			     "adcl %4, %1\n\t"
			     "movl %0, %%fs:(%2)\n\t"
			     "movl %1, %%fs:4(%2)"
			     : "=&r"(lo), "=&r"(hi)
			     : "r"(c), "g"((uint32_t)v), "g"((uint32_t)((uint64_t)v >> 32))
			     : "memory", "cc");
	(void)lo;
	(void)hi;
#elif defined(__riscv) && __riscv_xlen == 64
	/* The slot is tp + c: ld, add, sd instead of one amoadd.d. The C-only riscv64 kernel
	 * points tp at its per-CPU block from reset, so before the zone exists an early counter
	 * (the address of its word, not an offset) goes to the library, as the header's add does
	 * today; broken is what runs once the zone is installed. */
	if (pcpu_zone_capacity() == 0) {
		pcpu_counter_add(c, v);
		return;
	}
	uint64_t t;
	__asm__ __volatile__("add %0, tp, %1\n\t"
			     "ld %1, 0(%0)\n\t"
			     "add %1, %1, %2\n\t"
			     "sd %1, 0(%0)"
			     : "=&r"(t), "+&r"(c)
			     : "r"(v)
			     : "memory");
#else
#error "broken_add.h: x86_64, aarch64, i386 and riscv64 only"
#endif
}

#define counter_u64_add pcpu_broken_add

#endif
