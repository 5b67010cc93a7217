/*
 * A deliberately broken counter_u64_add for the C-only kernels' failing runs
 * (`cargo xtask qemu` builds c-x86_64-broken and c-aarch64-broken with `-include` of this
 * file): the per-CPU slot is loaded, added to and stored back in three instructions, so a
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
#else
#error "broken_add.h: x86_64 and aarch64 only"
#endif
}

#define counter_u64_add pcpu_broken_add

#endif
