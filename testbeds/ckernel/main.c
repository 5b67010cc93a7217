/*
 * The C-only test kernel: C and assembly, linking libpcpu_counter.a and its header and no
 * Rust of its own. Booted SMP under QEMU by `cargo xtask qemu` (c-x86_64, c-aarch64), it runs
 * the checks the Rust kernels run (exact sums from every CPU, protected batches,
 * fetch_and_zero racing adds, zero, alloc/free to a full zone and back, adds from the timer
 * interrupt), then tests/c/freebsd_style.c and tests/c/kernel_check.c. CPU 0 prints one
 * PASS or FAIL line per check and `DONE n checks, k failed`.
 *
 * The kernel owns its per-CPU blocks; the zone is hosted in them (pcpu_zone_init), and the
 * library's four hooks are defined at the end of this file.
 */
#include "pcpu_counter.h"
#include "kernel.h"
#include "freebsd_style.h"

int pcpu_c_kernel_check(unsigned cpu, unsigned ncpus); /* tests/c/kernel_check.c */

#define SUM_ADDS 20000u
#define BATCHES 10000u
#define RACE_ADDS 20000u
#define RACE_EVERY 61u
#define ZERO_ADDS 5000u
#define ALLOC_ROUNDS 300u
#define ALLOC_HELD 4u
#define TIMER_MIN_ADDS 20000u
#define TIMER_MIN_TICKS 300u
#define TIMER_MAX_ADDS 200000000u
#define HANDLER_ADD 1000u
#define FBSD_ROUNDS 2000u

_Static_assert(sizeof(struct block) == BLOCK, "one block per page");

struct block kernel_blocks[MAX_CPUS];
static uint64_t meta[PCPU_META_WORDS(SLOTS)];

static counter_u64_t sum_a, sum_b, batched, raced, zeroed, timed;
static unsigned ncpus;
static volatile int go;
static uint64_t report[MAX_CPUS];
static volatile uint64_t ticks[MAX_CPUS];
static unsigned checks, failed;

/* Console: only CPU 0 prints, except a failing CPU on its way out. */
void kernel_print(const char *s)
{
	while (*s)
		arch_putc(*s++);
}

static void print_u64(uint64_t v)
{
	char digits[21];
	int i = 20;
	digits[i] = 0;
	do {
		digits[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	kernel_print(&digits[i]);
}

void kernel_fail(const char *what, uint64_t a, uint64_t b)
{
	kernel_print("\nFAIL ");
	kernel_print(what);
	kernel_print(" ");
	print_u64(a);
	kernel_print(" ");
	print_u64(b);
	kernel_print("\n");
	arch_exit(0);
}

/* One verdict line, as the Rust kernels print them. */
static void check(const char *name, const char *label, uint64_t want, uint64_t got)
{
	checks++;
	if (want == got) {
		kernel_print("PASS ");
		kernel_print(name);
		kernel_print(" on ");
		print_u64(ncpus);
		kernel_print(" CPUs: ");
		kernel_print(label);
		kernel_print(" = ");
		print_u64(got);
		kernel_print(" exact\n");
	} else {
		failed++;
		kernel_print("FAIL ");
		kernel_print(name);
		kernel_print(" ");
		kernel_print(label);
		kernel_print(" expected ");
		print_u64(want);
		kernel_print(" got ");
		print_u64(got);
		kernel_print("\n");
	}
}

static void info(const char *text, uint64_t v)
{
	kernel_print("INFO ");
	kernel_print(text);
	print_u64(v);
	kernel_print("\n");
}

/* A sense-counting barrier over the running CPUs. */
static unsigned barrier_arrived, barrier_round;
static void barrier(void)
{
	unsigned round = __atomic_load_n(&barrier_round, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&barrier_arrived, 1, __ATOMIC_ACQ_REL) == ncpus) {
		__atomic_store_n(&barrier_arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&barrier_round, round + 1, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&barrier_round, __ATOMIC_ACQUIRE) == round)
			arch_relax();
	}
}

static uint64_t reports(void)
{
	uint64_t sum = 0;
	for (unsigned c = 0; c < ncpus; c++)
		sum += report[c];
	return sum;
}

static counter_u64_t must_alloc(void)
{
	counter_u64_t c = counter_u64_alloc(M_NOWAIT);
	if (c == NULL)
		kernel_fail("setup counter_u64_alloc", 0, 0);
	return c;
}

/* Every CPU's rounds of alloc, add, check, free: a reused slot reads 0, then its own adds. */
static uint64_t alloc_free(unsigned cpu)
{
	uint64_t wrong = 0;
	for (uint64_t round = 0; round < ALLOC_ROUNDS; round++) {
		counter_u64_t held[ALLOC_HELD];
		for (unsigned h = 0; h < ALLOC_HELD; h++) {
			held[h] = counter_u64_alloc(M_WAITOK);
			wrong += counter_u64_fetch(held[h]) != 0;
			counter_u64_add(held[h], (int64_t)((cpu + 1) * 100000 + round * 10 + h));
		}
		for (unsigned h = 0; h < ALLOC_HELD; h++) {
			wrong += counter_u64_fetch(held[h]) != (cpu + 1) * 100000 + round * 10 + h;
			counter_u64_free(held[h]);
		}
	}
	return wrong;
}

/* CPU 0 alone: allocate until the zone is full, free everything, and again. */
static void fill_zone(void)
{
	static counter_u64_t all[SLOTS];
	size_t before = pcpu_zone_in_use(), room = pcpu_zone_capacity() - before;
	uint64_t got[2];
	for (int pass = 0; pass < 2; pass++) {
		size_t n = 0;
		while (n < SLOTS && (all[n] = counter_u64_alloc(M_NOWAIT)) != NULL)
			n++;
		got[pass] = n;
		if (pcpu_zone_in_use() != pcpu_zone_capacity())
			got[pass] = 0;
		for (size_t i = 0; i < n; i++)
			counter_u64_free(all[i]);
	}
	check("alloc_free", "first fill", room, got[0]);
	check("alloc_free", "fill after freeing all", room, got[1]);
	check("alloc_free", "slots in use after", before, pcpu_zone_in_use());
}

void kernel_timer_tick(void)
{
	unsigned cpu = arch_cpu_self();
	ticks[cpu]++;
	counter_u64_add(timed, HANDLER_ADD);
}

static void run_checks(unsigned cpu)
{
	barrier();
	for (unsigned i = 0; i < SUM_ADDS; i++) {
		counter_u64_add(sum_a, cpu + 1);
		counter_u64_add(sum_b, 1);
	}
	barrier();
	if (cpu == 0) {
		check("sums", "sum of (cpu + 1) adds", (uint64_t)SUM_ADDS * ncpus * (ncpus + 1) / 2,
		      counter_u64_fetch(sum_a));
		check("sums", "unit adds", (uint64_t)SUM_ADDS * ncpus, counter_u64_fetch(sum_b));
	}

	for (unsigned i = 0; i < BATCHES; i++) {
		counter_enter();
		counter_u64_add_protected(batched, 1);
		counter_u64_add_protected(batched, 2);
		counter_exit();
	}
	barrier();
	if (cpu == 0)
		check("protected", "3 per batch", 3ull * BATCHES * ncpus, counter_u64_fetch(batched));

	uint64_t taken = 0;
	for (unsigned i = 1; i <= RACE_ADDS; i++) {
		counter_u64_add(raced, 1);
		if (i % RACE_EVERY == 0)
			taken += pcpu_counter_fetch_and_zero(raced);
	}
	report[cpu] = taken;
	barrier();
	if (cpu == 0)
		check("fetch_and_zero", "taken + left", (uint64_t)RACE_ADDS * ncpus,
		      reports() + counter_u64_fetch(raced));

	for (unsigned i = 0; i < ZERO_ADDS; i++)
		counter_u64_add(zeroed, 7);
	barrier();
	if (cpu == 0)
		counter_u64_zero(zeroed);
	barrier();
	for (unsigned i = 0; i < ZERO_ADDS; i++)
		counter_u64_add(zeroed, 1);
	barrier();
	if (cpu == 0)
		check("zero", "adds after the zero", (uint64_t)ZERO_ADDS * ncpus, counter_u64_fetch(zeroed));

	report[cpu] = alloc_free(cpu);
	barrier();
	if (cpu == 0) {
		check("alloc_free", "wrong reads in racing rounds", 0, reports());
		fill_zone();
	}
	barrier();

	uint64_t adds = 0;
	arch_timer_start();
	while (adds < TIMER_MAX_ADDS && (adds < TIMER_MIN_ADDS || ticks[cpu] < TIMER_MIN_TICKS)) {
		counter_u64_add(timed, 1);
		adds++;
	}
	arch_timer_stop();
	report[cpu] = adds;
	barrier();
	if (cpu == 0) {
		uint64_t handled = 0, fewest = ~0ull;
		for (unsigned c = 0; c < ncpus; c++) {
			handled += ticks[c];
			fewest = ticks[c] < fewest ? ticks[c] : fewest;
		}
		check("timer", "adds + 1000 x handler runs", reports() + HANDLER_ADD * handled,
		      counter_u64_fetch(timed));
		check("timer", "fewest ticks on a CPU >= 300", 1, fewest >= TIMER_MIN_TICKS);
		info("timer: handler runs ", handled);
	}

	fbsd_work(cpu, FBSD_ROUNDS);
	barrier();
	if (cpu == 0)
		check("freebsd_style", "fbsd_verify", 0, (uint64_t)fbsd_verify(ncpus, FBSD_ROUNDS));

	barrier();
	int rc = pcpu_c_kernel_check(cpu, ncpus);
	barrier();
	if (cpu == 0)
		check("c_api", "pcpu_c_kernel_check", 0, (uint64_t)rc);
}

static void become_cpu(unsigned cpu)
{
	kernel_blocks[cpu].cpu = cpu;
	if (!arch_block_id_from_reset)
		kernel_blocks[cpu].id = cpu;
	int rc = arch_set_cpu_base(cpu);
	if (rc != 0)
		kernel_fail("arch_set_cpu_base (cpu, rc)", cpu, (uint64_t)-rc);
	if (arch_cpu_self() != cpu)
		kernel_fail("per-CPU register (cpu, read back)", cpu, arch_cpu_self());
}

void kernel_bsp_main(void)
{
	kernel_print("pcpu-counter C-only test kernel: ");
	kernel_print(arch_banner);
#ifdef PCPU_BROKEN_ADD_H
	kernel_print(" with tests/c/broken_add.h: load, add, store");
#endif
	kernel_print("\n");
	fbsd_boot(); /* early counters, before the zone exists */

	struct pcpu_zone_layout layout = {
		.base = (uintptr_t)kernel_blocks,
		.stride = BLOCK,
		.offset = COUNTER_AREA,
		.len = SLOTS * 8,
		.ncpus = MAX_CPUS,
	};
	int rc = pcpu_zone_init(&layout, meta, PCPU_META_WORDS(SLOTS));
	if (rc != 0) {
		kernel_print("FAIL pcpu_zone_init: ");
		kernel_print(pcpu_strerror(rc));
		kernel_print("\n");
		arch_exit(0);
	}
	become_cpu(0);
	sum_a = must_alloc();
	sum_b = must_alloc();
	batched = must_alloc();
	raced = must_alloc();
	zeroed = must_alloc();
	timed = must_alloc();
	if ((rc = fbsd_attach()) != 0)
		kernel_fail("fbsd_attach step", (uint64_t)rc, 0);

	unsigned wanted = arch_cpu_count();
	wanted = wanted > MAX_CPUS ? MAX_CPUS : wanted;
	ncpus = arch_start_secondaries(wanted);
	check("cpus", "started", wanted, ncpus);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	run_checks(0);
	kernel_print("DONE ");
	print_u64(checks);
	kernel_print(" checks, ");
	print_u64(failed);
	kernel_print(" failed\n");
	arch_exit(failed == 0);
}

void kernel_ap_main(unsigned cpu)
{
	become_cpu(cpu);
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		arch_relax();
	run_checks(cpu);
	for (;;)
		arch_relax();
}

/* The library's hooks. */
uintptr_t pcpu_platform_protect(void)
{
	return arch_irq_save();
}

void pcpu_platform_unprotect(uintptr_t state)
{
	arch_irq_restore(state);
}

size_t pcpu_platform_current_cpu(void)
{
	return arch_cpu_self();
}

void pcpu_platform_panic(const char *msg, size_t len)
{
	kernel_print("\nFAIL library panic: ");
	for (size_t i = 0; i < len; i++)
		arch_putc(msg[i]);
	if (msg[len] != '\0')
		kernel_print(" (FAIL: the message is not NUL-terminated)");
	kernel_print("\n");
	arch_exit(0);
}
