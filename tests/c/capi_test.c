/*
 * The C API on the host simulation: multi-CPU exact sums through libpcpu_counter_capi.a.
 *
 *   gcc -Wall -Werror -Iinclude tests/c/capi_test.c tests/c/kernel_check.c \
 *       target/capi/debug/libpcpu_counter_capi.a -lpthread -ldl -lm -o capi_test
 *
 * Each check prints one line; the exit status is 0 only if every check passed.
 */
#define PCPU_COUNTER_SIM 1
#include "pcpu_counter.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCPUS 8u
#define NTHREADS 16u
#define ROUNDS 200u
#define ADDS 500u

int pcpu_c_kernel_check(unsigned cpu, unsigned ncpus);

/* PCPU_META_WORDS: baselines, bitmap words and summary levels, the same table as
 * ZoneLayout::meta_words_for's test in src/layout.rs (a constant expression). */
_Static_assert(PCPU_META_WORDS(0) == 0, "no counters");
_Static_assert(PCPU_META_WORDS(1) == 1 + 1, "one word of bitmap");
_Static_assert(PCPU_META_WORDS(64) == 64 + 1, "one full word, no summary");
_Static_assert(PCPU_META_WORDS(65) == 65 + 2 + 1, "two words and their summary word");
_Static_assert(PCPU_META_WORDS(4096) == 4096 + 64 + 1, "two levels");
_Static_assert(PCPU_META_WORDS(4097) == 4097 + 65 + 2 + 1, "three levels");
_Static_assert(PCPU_META_WORDS(1000001) == 1000001 + 15626 + 245 + 4 + 1, "four levels");

static int failures;

#define CHECK_EQ(what, got, want)                                                         \
	do {                                                                              \
		unsigned long long g_ = (unsigned long long)(got);                        \
		unsigned long long w_ = (unsigned long long)(want);                       \
		if (g_ != w_) {                                                           \
			printf("FAIL %s:%d %s: got %llu, want %llu\n", __FILE__, __LINE__, \
			       (what), g_, w_);                                           \
			failures++;                                                       \
		}                                                                         \
	} while (0)

static void must(int rc, const char *what)
{
	if (rc != PCPU_OK) {
		printf("FAIL %s: %s (%d)\n", what, pcpu_strerror(rc), rc);
		exit(1);
	}
}

static void run_threads(void *(*body)(void *), unsigned n)
{
	pthread_t threads[NTHREADS];
	static unsigned ids[NTHREADS];
	for (unsigned i = 0; i < n; i++) {
		ids[i] = i;
		if (pthread_create(&threads[i], NULL, body, &ids[i]) != 0) {
			printf("FAIL pthread_create\n");
			exit(1);
		}
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
}

/* 1. Plain adds from 16 threads migrating over 8 CPUs; thread t adds t + 1. */
static counter_u64_t sum;

static void *add_migrating(void *arg)
{
	unsigned t = *(unsigned *)arg;
	for (unsigned r = 0; r < ROUNDS; r++) {
		must(pcpu_sim_bind((t + r) % NCPUS), "bind");
		for (unsigned i = 0; i < ADDS; i++)
			counter_u64_add(sum, (int64_t)t + 1);
		pcpu_sim_unbind();
	}
	return NULL;
}

/* The same harness on a racy shared counter (load, add, store: no RMW): it must lose. */
static uint64_t racy;

static void *add_racy(void *arg)
{
	unsigned t = *(unsigned *)arg;
	for (unsigned r = 0; r < ROUNDS; r++) {
		must(pcpu_sim_bind((t + r) % NCPUS), "bind");
		for (unsigned i = 0; i < ADDS; i++)
			__atomic_store_n(&racy, __atomic_load_n(&racy, __ATOMIC_RELAXED) + t + 1,
					 __ATOMIC_RELAXED);
		pcpu_sim_unbind();
	}
	return NULL;
}

static void check_harness_catches_a_racy_counter(void)
{
	uint64_t want = (uint64_t)ROUNDS * ADDS * NTHREADS * (NTHREADS + 1) / 2;
	for (int attempt = 0; attempt < 10; attempt++) {
		racy = 0;
		run_threads(add_racy, NTHREADS);
		if (racy != want) {
			printf("ok   harness: a racy shared counter lost %llu of %llu\n",
			       (unsigned long long)(want - racy), (unsigned long long)want);
			return;
		}
	}
	printf("FAIL harness: a racy shared counter never lost an update in 10 runs\n");
	failures++;
}

static void check_sum(void)
{
	sum = counter_u64_alloc(M_WAITOK);
	CHECK_EQ("alloc", sum != NULL, 1);
	CHECK_EQ("new counter", counter_u64_fetch(sum), 0);
	run_threads(add_migrating, NTHREADS);
	CHECK_EQ("sum", counter_u64_fetch(sum),
		 (uint64_t)ROUNDS * ADDS * NTHREADS * (NTHREADS + 1) / 2);
	counter_u64_zero(sum);
	CHECK_EQ("zeroed", counter_u64_fetch(sum), 0);
	must(pcpu_sim_bind(3), "bind");
	counter_u64_add(sum, -5);
	pcpu_sim_unbind();
	CHECK_EQ("negative", (int64_t)counter_u64_fetch(sum), -5);
	counter_u64_free(sum);
	counter_u64_free(NULL);
	printf("ok   sum: %u threads on %u CPUs\n", NTHREADS, NCPUS);
}

/* 2. Protected adds and arrays: element t % 4 gets t + 1 per add. */
static counter_u64_t lanes[4];

static void *add_protected(void *arg)
{
	unsigned t = *(unsigned *)arg;
	for (unsigned r = 0; r < ROUNDS; r++) {
		must(pcpu_sim_bind((t * 3 + r) % NCPUS), "bind");
		pcpu_protect_t state = pcpu_counter_enter_state();
		for (unsigned i = 0; i < ADDS; i++)
			counter_u64_add_protected(lanes[t % 4], (int64_t)t + 1);
		pcpu_counter_exit_state(state);
		pcpu_sim_unbind();
	}
	return NULL;
}

static void check_arrays(void)
{
	size_t used = pcpu_zone_in_use();
	must(COUNTER_ARRAY_ALLOC(lanes, 4, M_NOWAIT), "array alloc");
	CHECK_EQ("array slots", pcpu_zone_in_use(), used + 4);
	run_threads(add_protected, NTHREADS);
	uint64_t got[4], want[4] = {0, 0, 0, 0};
	for (unsigned t = 0; t < NTHREADS; t++)
		want[t % 4] += (uint64_t)ROUNDS * ADDS * (t + 1);
	COUNTER_ARRAY_COPY(lanes, got, 4);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ("lane", got[i], want[i]);
	COUNTER_ARRAY_ZERO(lanes, 4);
	COUNTER_ARRAY_COPY(lanes, got, 4);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ("zeroed lane", got[i], 0);

	/* A run that does not fit fails whole and leaves nothing allocated. */
	size_t free_slots = pcpu_zone_capacity() - pcpu_zone_in_use();
	static counter_u64_t big[8192];
	CHECK_EQ("too big", counter_u64_array_alloc(big, free_slots + 1, M_NOWAIT), (unsigned long long)(long long)PCPU_EFULL);
	CHECK_EQ("slots after failure", pcpu_zone_in_use(), used + 4);
	CHECK_EQ("bad flags", counter_u64_array_alloc(big, 2, 0), (unsigned long long)(long long)PCPU_EINVAL);
	CHECK_EQ("bad flags alloc", counter_u64_alloc(M_NOWAIT | M_WAITOK) == NULL, 1);

	COUNTER_ARRAY_FREE(lanes, 4);
	CHECK_EQ("slots after free", pcpu_zone_in_use(), used);
	printf("ok   arrays and protected adds\n");
}

/* 3. counter_ratecheck with a tick hook the test drives. */
static uint32_t now_ticks = 1000;
static uint32_t ticks(void) { return __atomic_load_n(&now_ticks, __ATOMIC_RELAXED); }
static struct counter_rate rate;
static int64_t results[NTHREADS][ROUNDS];

static void *check_rate(void *arg)
{
	unsigned t = *(unsigned *)arg;
	must(pcpu_sim_bind(t % NCPUS), "bind");
	results[t][0] = counter_ratecheck(&rate, 10);
	pcpu_sim_unbind();
	return NULL;
}

static void check_ratecheck(void)
{
	pcpu_set_ticks(ticks, 100);
	rate.cr_rate = counter_u64_alloc(M_WAITOK);
	must(pcpu_sim_bind(0), "bind");
	for (int i = 0; i < 10; i++)
		CHECK_EQ("under limit", counter_ratecheck(&rate, 10), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ("over limit", (unsigned long long)counter_ratecheck(&rate, 10),
			 (unsigned long long)-1LL);
	now_ticks += 99; /* still the same second */
	CHECK_EQ("same second", (unsigned long long)counter_ratecheck(&rate, 10),
		 (unsigned long long)-1LL);
	now_ticks += 1; /* next second: the last one's 16 events come back once */
	CHECK_EQ("new second", counter_ratecheck(&rate, 10), 16);
	CHECK_EQ("after reset", counter_ratecheck(&rate, 10), 0);
	pcpu_sim_unbind();

	/* 16 CPUs at the start of a second: exactly one wins the reset. */
	for (unsigned i = 0; i < 20; i++) {
		must(pcpu_sim_bind(1), "bind");
		counter_ratecheck(&rate, 10);
		pcpu_sim_unbind();
	}
	now_ticks += 100;
	run_threads(check_rate, NTHREADS);
	unsigned winners = 0;
	for (unsigned t = 0; t < NTHREADS; t++)
		if (results[t][0] > 0) {
			winners++;
			CHECK_EQ("reported count", results[t][0], 22);
		}
	CHECK_EQ("reset winners", winners, 1);
	counter_u64_free(rate.cr_rate);
	printf("ok   counter_ratecheck\n");
}

/* 4. The freestanding kernel check, one thread per simulated CPU. */
static int kernel_rc[NCPUS];

static void *kernel_cpu(void *arg)
{
	unsigned cpu = *(unsigned *)arg;
	must(pcpu_sim_bind(cpu), "bind");
	kernel_rc[cpu] = pcpu_c_kernel_check(cpu, NCPUS);
	pcpu_sim_unbind();
	return NULL;
}

static void check_kernel(void)
{
	run_threads(kernel_cpu, NCPUS);
	for (unsigned cpu = 0; cpu < NCPUS; cpu++)
		CHECK_EQ("pcpu_c_kernel_check", kernel_rc[cpu], 0);
	printf("ok   pcpu_c_kernel_check on %u CPUs\n", NCPUS);
}

/* 5. Setup errors are codes, not crashes. */
static void check_errors(void)
{
	size_t base = 0;
	CHECK_EQ("cpu base", pcpu_zone_cpu_base(NCPUS, &base), (unsigned long long)(long long)PCPU_ECPU);
	CHECK_EQ("cpu base null", pcpu_zone_cpu_base(0, NULL), (unsigned long long)(long long)PCPU_EINVAL);
	must(pcpu_zone_cpu_base(1, &base), "cpu base");
	CHECK_EQ("bind out of range", pcpu_sim_bind(NCPUS), (unsigned long long)(long long)PCPU_ECPU);
	must(pcpu_sim_bind(0), "bind");
	CHECK_EQ("bind twice", pcpu_sim_bind(1), (unsigned long long)(long long)PCPU_EBOUND);
	pcpu_sim_unbind();
	struct pcpu_zone_layout bad = {.base = 0x1004, .stride = 64, .offset = 0, .len = 64, .ncpus = 2};
	uint64_t meta[1];
	CHECK_EQ("misaligned zone", pcpu_zone_init(&bad, meta, 1), (unsigned long long)(long long)PCPU_EMISALIGNED);
	CHECK_EQ("strerror", strcmp(pcpu_strerror(PCPU_EFULL), "zone full"), 0);
	printf("ok   error codes\n");
}

/* 6. The registry (SYSCTL_ADD_COUNTER_U64[_ARRAY]): exact values read back through the walk. */
struct seen {
	unsigned calls;
	int rx_found, err_found;
	uint64_t rx;
	uint64_t err[3];
	size_t err_n;
	char err_descr[32];
};

static int collect(const char *name, const char *descr, const uint64_t *values, size_t n,
		   void *arg)
{
	struct seen *s = arg;
	s->calls++;
	if (strcmp(name, "c.rx") == 0 && n == 1) {
		s->rx_found++;
		s->rx = values[0];
	} else if (strcmp(name, "c.err") == 0 && n <= 3) {
		s->err_found++;
		s->err_n = n;
		memcpy(s->err, values, n * sizeof values[0]);
		snprintf(s->err_descr, sizeof s->err_descr, "%s", descr);
	}
	return 0;
}

static int stop_at_first(const char *name, const char *descr, const uint64_t *values, size_t n,
			 void *arg)
{
	(void)name;
	(void)descr;
	(void)values;
	(void)n;
	++*(unsigned *)arg;
	return 7;
}

static counter_u64_t reg_rx, reg_err[3];

static void *add_registered(void *arg)
{
	unsigned t = *(unsigned *)arg;
	for (unsigned r = 0; r < ROUNDS; r++) {
		must(pcpu_sim_bind((t + r) % NCPUS), "bind");
		for (unsigned i = 0; i < ADDS; i++) {
			counter_u64_add(reg_rx, 1);
			counter_u64_add(reg_err[t % 3], (int64_t)t);
		}
		pcpu_sim_unbind();
	}
	return NULL;
}

static void check_registry(void)
{
	reg_rx = counter_u64_alloc(M_WAITOK);
	must(COUNTER_ARRAY_ALLOC(reg_err, 3, M_WAITOK), "array alloc");
	must(pcpu_sysctl_add_counter("c.rx", "packets received", reg_rx), "add counter");
	must(pcpu_sysctl_add_counter_array("c.err", "errors by kind", reg_err, 3), "add array");
	CHECK_EQ("duplicate name", pcpu_sysctl_add_counter("c.rx", "again", reg_err[0]),
		 (unsigned long long)(long long)PCPU_EEXIST);
	CHECK_EQ("duplicate array name", pcpu_sysctl_add_counter_array("c.rx", "", reg_err, 3),
		 (unsigned long long)(long long)PCPU_EEXIST);
	CHECK_EQ("empty name", pcpu_sysctl_add_counter("", "", reg_rx),
		 (unsigned long long)(long long)PCPU_ENAME);
	CHECK_EQ("bad UTF-8", pcpu_sysctl_add_counter("c.\xff", "", reg_rx),
		 (unsigned long long)(long long)PCPU_ENAME);
	CHECK_EQ("NULL counter", pcpu_sysctl_add_counter("c.null", "", NULL),
		 (unsigned long long)(long long)PCPU_EINVAL);
	CHECK_EQ("strerror dup", strcmp(pcpu_strerror(PCPU_EEXIST),
					"a counter with this name is registered"), 0);

	run_threads(add_registered, NTHREADS);
	uint64_t want_err[3] = {0, 0, 0};
	for (unsigned t = 0; t < NTHREADS; t++)
		want_err[t % 3] += (uint64_t)ROUNDS * ADDS * t;
	struct seen s = {0};
	must(pcpu_sysctl_walk(collect, &s), "walk");
	CHECK_EQ("walk rx found", s.rx_found, 1);
	CHECK_EQ("walk rx", s.rx, (uint64_t)ROUNDS * ADDS * NTHREADS);
	CHECK_EQ("walk err found", s.err_found, 1);
	CHECK_EQ("walk err n", s.err_n, 3);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ("walk err", s.err[i], want_err[i]);
	CHECK_EQ("walk err descr", strcmp(s.err_descr, "errors by kind"), 0);

	unsigned calls = 0;
	CHECK_EQ("stopped walk", pcpu_sysctl_walk(stop_at_first, &calls), 7);
	CHECK_EQ("stopped walk calls", calls, 1);

	/* The group calls: the array's run in one pass; deltas taken as one step. */
	uint64_t group[3];
	must(pcpu_counter_group_fetch(reg_err[0], 3, group), "group fetch");
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ("group fetch", group[i], want_err[i]);
	CHECK_EQ("group fetch past the zone", pcpu_counter_group_fetch(reg_err[0], 1u << 20, group),
		 (unsigned long long)(long long)PCPU_EINVAL);
	/* An empty run from a counter of the zone: 0, nothing read, zeroed or written. */
	uint64_t untouched = 7;
	CHECK_EQ("group fetch of no counters", pcpu_counter_group_fetch(reg_err[0], 0, &untouched), 0);
	CHECK_EQ("group deltas of no counters",
		 pcpu_counter_group_fetch_and_zero(reg_err[0], 0, &untouched), 0);
	CHECK_EQ("an empty run wrote nothing", untouched, 7);
	CHECK_EQ("an empty run zeroed nothing", counter_u64_fetch(reg_err[2]), want_err[2]);

	/* The export: the size first (nothing taken), then the text. */
	size_t len = 0;
	CHECK_EQ("export size", pcpu_sysctl_export(NULL, &len, PCPU_EXPORT_DELTAS),
		 (unsigned long long)(long long)PCPU_ENOSPC);
	CHECK_EQ("size check took nothing", counter_u64_fetch(reg_rx), (uint64_t)ROUNDS * ADDS * NTHREADS);
	char text[1024];
	CHECK_EQ("export fits", len <= sizeof text, 1);
	len = sizeof text;
	must(pcpu_sysctl_export(text, &len, 0), "export");
	char want_line[64];
	snprintf(want_line, sizeof want_line, "\nc_rx_total %llu\n",
		 (unsigned long long)ROUNDS * ADDS * NTHREADS);
	CHECK_EQ("export has c_rx_total", strstr(text, want_line) != NULL, 1);
	CHECK_EQ("export has the array", strstr(text, "c_err_total{index=\"2\"} ") != NULL, 1);
	CHECK_EQ("export length", strlen(text), len);

	/* Zero by name: the array's values, not the other name's. */
	must(pcpu_sysctl_zero("c.err"), "zero by name");
	memset(&s, 0, sizeof s);
	must(pcpu_sysctl_walk(collect, &s), "walk");
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ("zeroed err", s.err[i], 0);
	CHECK_EQ("rx not zeroed", s.rx, (uint64_t)ROUNDS * ADDS * NTHREADS);
	CHECK_EQ("zero unknown", pcpu_sysctl_zero("c.none"),
		 (unsigned long long)(long long)PCPU_ENOENT);

	/* Remove: gone from the walk, the name free again, the counters still allocated. */
	must(pcpu_sysctl_remove("c.rx"), "remove");
	CHECK_EQ("remove twice", pcpu_sysctl_remove("c.rx"),
		 (unsigned long long)(long long)PCPU_ENOENT);
	memset(&s, 0, sizeof s);
	must(pcpu_sysctl_walk(collect, &s), "walk");
	CHECK_EQ("removed rx", s.rx_found, 0);
	CHECK_EQ("err still there", s.err_found, 1);
	CHECK_EQ("counter kept", counter_u64_fetch(reg_rx), (uint64_t)ROUNDS * ADDS * NTHREADS);
	must(pcpu_sysctl_add_counter("c.rx", "packets received", reg_rx), "add again");
	must(pcpu_sysctl_remove("c.rx"), "remove");
	must(pcpu_sysctl_remove("c.err"), "remove array");
	memset(&s, 0, sizeof s);
	must(pcpu_sysctl_walk(collect, &s), "walk");
	CHECK_EQ("walk after removal", s.calls, 0);

	COUNTER_ARRAY_FREE(reg_err, 3);
	counter_u64_free(reg_rx);
	printf("ok   registry: walk, duplicate, zero and remove by name, group fetch, export\n");
}

/* 7. A zone that grows through chunk hooks (pcpu_zone_grow). The hook can say it gave one
 * 4 KiB page for a bigger chunk (the chunk behind it is whole, so that a library that used it
 * would not corrupt the test's heap): the alloc must fail with PCPU_ESHORTCHUNK, the page go
 * back through the free hook with the size it gave, the zone stay as it was. Then the zone
 * grows, shrinks, keeps its spare (pcpu_zone_spare, outside pcpu_zone_capacity), and
 * pcpu_zone_trim gives it back: the hooks' live count returns to 0. Last: the hooks stay
 * installed for the process. */
static struct {
	int short_page;    /* the alloc hook says it gave 4096 bytes */
	size_t taken, given_back, last_free_size;
	void *last_taken, *last_freed;
} hooks;

static void *test_chunk_alloc(size_t size, size_t align, int wait, size_t *given)
{
	(void)wait;
	void *chunk = aligned_alloc(align, (size + align - 1) / align * align);
	if (chunk == NULL)
		return NULL;
	memset(chunk, 0, size); /* initialised, as the hook's contract asks */
	hooks.taken++;
	hooks.last_taken = chunk;
	*given = hooks.short_page ? 4096 : size;
	return chunk;
}

static void test_chunk_free(void *chunk, size_t size, size_t align)
{
	(void)align;
	hooks.given_back++;
	hooks.last_freed = chunk;
	hooks.last_free_size = size;
	free(chunk);
}

static void check_growth(void)
{
	static counter_u64_t fill[8192];
	size_t first = pcpu_zone_capacity(), n = 0;
	size_t base0 = 0, base1 = 0;
	must(pcpu_zone_cpu_base(0, &base0), "cpu base 0");
	must(pcpu_zone_cpu_base(1, &base1), "cpu base 1");
	size_t stride = base1 - base0;
	/* The chunk is known before a zone exists, from the layout alone. */
	CHECK_EQ("chunk size", pcpu_chunk_size(NCPUS, stride), pcpu_zone_chunk_size());
	CHECK_EQ("chunk align", pcpu_chunk_align(NCPUS, stride), pcpu_zone_chunk_align());
	CHECK_EQ("no chunk for 0 CPUs", pcpu_chunk_size(0, stride), 0);
	CHECK_EQ("no chunk for a stride of 12", pcpu_chunk_align(NCPUS, 12), 0);
	if (pcpu_zone_chunk_size() <= 4096) {
		printf("FAIL growth: a chunk of %zu bytes fits a page\n", pcpu_zone_chunk_size());
		failures++;
		return;
	}
	while (n < sizeof fill / sizeof fill[0] && (fill[n] = counter_u64_alloc(M_NOWAIT)) != NULL)
		n++;
	CHECK_EQ("full", pcpu_zone_in_use(), first);
	must(pcpu_zone_grow(test_chunk_alloc, test_chunk_free), "grow");

	hooks.short_page = 1;
	counter_u64_t one[1];
	CHECK_EQ("short chunk", counter_u64_array_alloc(one, 1, M_NOWAIT),
		 (unsigned long long)(long long)PCPU_ESHORTCHUNK);
	CHECK_EQ("short chunk, counter_u64_alloc", counter_u64_alloc(M_WAITOK) == NULL, 1);
	CHECK_EQ("short chunks taken", hooks.taken, 2);
	CHECK_EQ("short chunks given back", hooks.given_back, 2);
	CHECK_EQ("the page given back", hooks.last_freed == hooks.last_taken, 1);
	CHECK_EQ("with the size it gave", hooks.last_free_size, 4096);
	CHECK_EQ("capacity unchanged", pcpu_zone_capacity(), first);
	CHECK_EQ("in use unchanged", pcpu_zone_in_use(), first);
	CHECK_EQ("no spare", pcpu_zone_spare(), 0);
	CHECK_EQ("strerror", strcmp(pcpu_strerror(PCPU_ESHORTCHUNK), "the chunk hook gave less than asked"), 0);

	hooks.short_page = 0;
	counter_u64_t grown = counter_u64_alloc(M_NOWAIT);
	CHECK_EQ("grown", grown != NULL, 1);
	size_t per_chunk = stride / 8;
	CHECK_EQ("capacity grown", pcpu_zone_capacity(), first + per_chunk);
	CHECK_EQ("live chunks", hooks.taken - hooks.given_back, 1);
	if (grown != NULL) {
		must(pcpu_sim_bind(NCPUS - 1), "bind");
		counter_u64_add(grown, 9);
		pcpu_sim_unbind();
		CHECK_EQ("grown counts", counter_u64_fetch(grown), 9);
		counter_u64_free(grown);
	}
	CHECK_EQ("the spare, outside the capacity", pcpu_zone_capacity(), first);
	CHECK_EQ("one spare", pcpu_zone_spare(), 1);
	CHECK_EQ("the spare is still out", hooks.taken - hooks.given_back, 1);
	CHECK_EQ("trim", pcpu_zone_trim(), 1);
	CHECK_EQ("every chunk back", hooks.taken - hooks.given_back, 0);
	CHECK_EQ("no spare after trim", pcpu_zone_spare(), 0);
	CHECK_EQ("trim again", pcpu_zone_trim(), 0);
	for (size_t i = 0; i < n; i++)
		counter_u64_free(fill[i]);
	printf("ok   growth: a short chunk refused and given back, the spare counted and trimmed\n");
}

int main(void)
{
	must(pcpu_sim_machine_new(NCPUS, 4096), "machine");
	CHECK_EQ("ncpus", pcpu_zone_ncpus(), NCPUS);
	check_harness_catches_a_racy_counter();
	check_sum();
	check_arrays();
	check_ratecheck();
	check_kernel();
	check_errors();
	check_registry();
	check_growth();
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("all C API checks passed\n");
	return 0;
}
