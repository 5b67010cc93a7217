/*
 * A freestanding check of the C API for test kernels: no libc, only the header.
 *
 *   int pcpu_c_kernel_check(unsigned cpu, unsigned ncpus);
 *
 * Call it once on every CPU 0..ncpus-1 at the same time, after the zone is installed
 * (pcpu_zone_init, or install() from Rust) and each CPU's per-CPU register is set
 * (pcpu_set_cpu_base(cpu), or arch::set_cpu_base). CPU 0 allocates a counter and a
 * 4-counter array, every CPU adds to them through the C API (plain and protected adds),
 * and CPU 0 waits for all of them and checks the exact sums. CPU 0's return value is the
 * verdict: 0 when every check passed, else the number of the first check that failed.
 * The other CPUs return 0 once their adds are done. One run per boot (static state).
 *
 * Build for an x86_64 kernel:
 *   gcc -c -ffreestanding -fno-pic -mno-red-zone -mcmodel=kernel -mno-sse -O2 \
 *       -Wall -Werror -Iinclude tests/c/kernel_check.c -o kernel_check.o
 */
#include "pcpu_counter.h"

#define ROUNDS 1000u
#define NARRAY 4u

static counter_u64_t total;
static counter_u64_t by_lane[NARRAY];
static unsigned ready;
static unsigned finished;

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("pause");
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

int pcpu_c_kernel_check(unsigned cpu, unsigned ncpus)
{
	if (cpu >= ncpus)
		return 1;
	if (cpu == 0) {
		total = counter_u64_alloc(M_WAITOK);
		if (total == 0)
			return 2;
		if (COUNTER_ARRAY_ALLOC(by_lane, NARRAY, M_NOWAIT) != PCPU_OK)
			return 3;
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	} else {
		while (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
			relax();
	}

	for (unsigned i = 0; i < ROUNDS; i++)
		counter_u64_add(total, (int64_t)cpu + 1);
	counter_enter();
	for (unsigned i = 0; i < ROUNDS; i++)
		counter_u64_add_protected(by_lane[cpu % NARRAY], 1);
	counter_exit();
	__atomic_add_fetch(&finished, 1, __ATOMIC_ACQ_REL);
	if (cpu != 0)
		return 0;

	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < ncpus)
		relax();
	/* Every CPU c added c + 1, ROUNDS times. */
	uint64_t want = (uint64_t)ROUNDS * ncpus * (ncpus + 1) / 2;
	if (counter_u64_fetch(total) != want)
		return 4;
	uint64_t lanes[NARRAY];
	COUNTER_ARRAY_COPY(by_lane, lanes, NARRAY);
	for (unsigned lane = 0; lane < NARRAY; lane++) {
		unsigned cpus = ncpus / NARRAY + (lane < ncpus % NARRAY ? 1 : 0);
		if (lanes[lane] != (uint64_t)ROUNDS * cpus)
			return 5;
	}
	counter_u64_zero(total);
	COUNTER_ARRAY_ZERO(by_lane, NARRAY);
	COUNTER_ARRAY_COPY(by_lane, lanes, NARRAY);
	if (counter_u64_fetch(total) != 0 || lanes[0] != 0 || lanes[NARRAY - 1] != 0)
		return 6;
	counter_u64_add(total, 7);
	if (counter_u64_fetch(total) != 7)
		return 7;
	COUNTER_ARRAY_FREE(by_lane, NARRAY);
	counter_u64_free(total);
	return 0;
}
