/*
 * The i386 inline counter_u64_add at run time (tests/c/i386_inline.sh): exact sums, with
 * carries into the high half, from threads the host simulation moves between CPUs, through
 * the header's fast path compiled without PCPU_COUNTER_SIM (i386_inline_add.c). With CX8 the
 * adds run the inline cmpxchg8b loop; with PCPU_COUNTER_FORCE_NO_CX8 set, pcpu_cx8 reads 1 and
 * they call out. pcpu_cx8 is 0 until the library first asks CPUID.
 */
#define PCPU_COUNTER_SIM 1
#include "pcpu_counter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void t_add(counter_u64_t c, int64_t v);
void t_add_protected(counter_u64_t c, int64_t v);
void t_inc(counter_u64_t c);
void t_dec_protected(counter_u64_t c);
unsigned t_cx8(void);

#define NCPUS 4u
#define NTHREADS 8u
#define ROUNDS 50u
#define ADDS 5000u

static counter_u64_t sum;
static int failures;

#define CHECK_EQ(what, got, want)                                                   \
	do {                                                                        \
		unsigned long long g_ = (got), w_ = (want);                         \
		if (g_ != w_) {                                                     \
			printf("FAIL %s: got %#llx, want %#llx\n", (what), g_, w_); \
			failures++;                                                 \
		}                                                                   \
	} while (0)

static void must(int rc, const char *what)
{
	if (rc != PCPU_OK) {
		printf("FAIL %s: %s (%d)\n", what, pcpu_strerror(rc), rc);
		exit(1);
	}
}

static void *body(void *arg)
{
	unsigned t = *(unsigned *)arg;
	for (unsigned r = 0; r < ROUNDS; r++) {
		must(pcpu_sim_bind((t + r) % NCPUS), "bind");
		for (unsigned i = 0; i < ADDS; i++)
			t_add(sum, (int64_t)0x100000001LL * (t + 1));
		t_inc(sum);
		counter_enter(); /* nested, as FreeBSD code may: the outer pair holds protection */
		t_add_protected(sum, -1);
		counter_enter();
		t_dec_protected(sum);
		counter_exit();
		counter_exit();
		pcpu_sim_unbind();
	}
	return NULL;
}

int main(void)
{
	CHECK_EQ("pcpu_cx8 before the library asks CPUID", t_cx8(), 0);
	must(pcpu_sim_machine_new(NCPUS, 64), "pcpu_sim_machine_new");
	sum = counter_u64_alloc(M_WAITOK);
	unsigned cx8 = t_cx8();
	unsigned want_cx8 = getenv("PCPU_COUNTER_FORCE_NO_CX8") ? 1 : 2;
	CHECK_EQ("pcpu_cx8", cx8, want_cx8);

	must(pcpu_sim_bind(1), "bind");
	t_add(sum, 0xffffffffLL);
	t_inc(sum);
	CHECK_EQ("carry into the high half", counter_u64_fetch(sum), 0x100000000ULL);
	t_add(sum, -0x100000001LL);
	pcpu_sim_unbind();
	CHECK_EQ("borrow", counter_u64_fetch(sum), ~0ULL);
	counter_u64_zero(sum);

	pthread_t threads[NTHREADS];
	static unsigned ids[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++) {
		ids[i] = i;
		if (pthread_create(&threads[i], NULL, body, &ids[i]) != 0) {
			printf("FAIL pthread_create\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(threads[i], NULL);
	unsigned long long want = 0;
	for (unsigned t = 0; t < NTHREADS; t++)
		want += (unsigned long long)ROUNDS * ADDS * 0x100000001ULL * (t + 1) - ROUNDS;
	CHECK_EQ("sum", counter_u64_fetch(sum), want);
	counter_u64_free(sum);
	printf("%s i386 inline counter_u64_add (pcpu_cx8 %u: %s), %u threads on %u CPUs\n",
	       failures ? "FAIL" : "ok  ", cx8, cx8 == 2 ? "cmpxchg8b loop" : "out of line",
	       NTHREADS, NCPUS);
	return failures != 0;
}
