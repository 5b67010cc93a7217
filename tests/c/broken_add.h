/*
 * A deliberately broken counter_u64_add for the C-only kernels' failing runs
 * (`cargo xtask qemu` builds the c-*-broken kernels with `-include` of this file): the per-CPU slot is loaded, added to and stored back in three instructions, so a
 * timer interrupt that adds between the load and the store is lost. The kernels' timer
 * check must then fail. Not part of the product's header.
 */
#ifndef PCPU_BROKEN_ADD_H
#define PCPU_BROKEN_ADD_H

#include "pcpu_counter.h"

static inline void pcpu_broken_add(counter_u64_t c, int64_t v)
{
	uint64_t t;
#if defined(__x86_64__)
	__asm__ __volatile__("movq %%gs:(%1), %0\n\t"
			     "addq %2, %0\n\t"
			     "movq %0, %%gs:(%1)"
			     : "=&r"(t)
			     : "r"(c), "r"(v)
			     : "memory", "cc");
#elif defined(__aarch64__)
	uintptr_t base;
	__asm__ __volatile__("mrs %0, tpidr_el1" : "=r"(base));
	__asm__ __volatile__("ldr %0, [%1]\n\t"
			     "add %0, %0, %2\n\t"
			     "str %0, [%1]"
			     : "=&r"(t)
			     : "r"(base + (uintptr_t)c), "r"(v)
			     : "memory");
#elif defined(__riscv) && __riscv_xlen == 64
	uintptr_t slot;
	__asm__ __volatile__("add %1, tp, %2\n\t"
			     "ld %0, 0(%1)\n\t"
			     "add %0, %0, %3\n\t"
			     "sd %0, 0(%1)"
			     : "=&r"(t), "=&r"(slot)
			     : "r"(c), "r"(v)
			     : "memory");
#elif defined(__i386__)
	/* Both halves loaded, added and stored back: an interrupt in between is lost. */
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
	t = ((uint64_t)hi << 32) | lo;
#else
#error "broken_add.h: x86_64, aarch64, riscv64 and i386 only"
#endif
	(void)t;
}

#define counter_u64_add pcpu_broken_add

#endif
