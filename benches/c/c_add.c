/*
 * The C fast path, measured side by side in one run on the host simulation (x86_64 and
 * aarch64 hosts): counter_u64_add inlined from pcpu_counter.h, the library's out-of-line
 * pcpu_counter_add, and a plain non-atomic add through a pointer (volatile load and store).
 * Every loop body is 8 adds; many short rounds, every variant once per round in turn, and
 * the median per variant, as benches/peers does. Each count is checked exactly afterwards.
 *
 * Usage: c_add [--quick]. Prints result lines `c <tab> name <tab> counters <tab> ns <tab> unit`
 * for `cargo xtask bench`, which builds and runs it (gcc -O2) and puts them in the report.
 */
#define PCPU_COUNTER_SIM
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pcpu_counter.h"

#define EIGHT(x) do { x; x; x; x; x; x; x; x; } while (0)

__attribute__((noinline)) static void inline_add(counter_u64_t c, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		EIGHT(counter_u64_add(c, 1));
}

__attribute__((noinline)) static void call_add(counter_u64_t c, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		EIGHT(pcpu_counter_add(c, 1));
}

__attribute__((noinline)) static void plain_add(volatile uint64_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		EIGHT(*p = *p + 1);
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#define VARIANTS 3
static const char *names[VARIANTS] = {
	"counter_u64_add (inline, header)",
	"pcpu_counter_add (out of line)",
	"plain add (volatile)",
};

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int rounds = quick ? 5 : 101;
	uint64_t n = quick ? 1u << 12 : 1u << 15;
	if (pcpu_sim_machine_new(1, 64) != 0 || pcpu_sim_bind(0) != 0) {
		fprintf(stderr, "c_add: no simulated machine\n");
		return 1;
	}
	counter_u64_t inline_c = counter_u64_alloc(M_WAITOK), call_c = counter_u64_alloc(M_WAITOK);
	static volatile uint64_t plain;
	double *samples = calloc((size_t)rounds * VARIANTS, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		for (int v = 0; v < VARIANTS; v++) {
			double start = now_ns();
			if (v == 0)
				inline_add(inline_c, n);
			else if (v == 1)
				call_add(call_c, n);
			else
				plain_add(&plain, n);
			samples[v * rounds + r] = (now_ns() - start) / (8.0 * n);
		}
	}
	uint64_t want = 8 * n * (uint64_t)rounds;
	if (counter_u64_fetch(inline_c) != want || counter_u64_fetch(call_c) != want || plain != want) {
		fprintf(stderr, "c_add: lost adds\n");
		return 1;
	}
	for (int v = 0; v < VARIANTS; v++) {
		qsort(&samples[v * rounds], (size_t)rounds, sizeof(double), by_value);
		printf("c\t%s\t1\t%.4f\tns/add\n", names[v], samples[v * rounds + rounds / 2]);
	}
	pcpu_sim_unbind();
	return 0;
}
