/*
 * The C-only test kernel: C and assembly, linking libpcpu_counter.a and its header and no
 * Rust of its own. Booted SMP under QEMU by `cargo xtask qemu` (c-x86_64, c-aarch64, c-i386,
 * c-riscv64), it runs the test beds' check protocol (testbeds/protocol/protocol.h: the phases,
 * numbers and exact totals the Rust kernels run from testbeds/protocol/src/lib.rs, with the
 * same PASS and FAIL lines), then its own: the zone filled to the last slot, the FreeBSD-style
 * driver (tests/c/freebsd_style.c), tests/c/kernel_check.c, and the registry (its largest
 * array walked and exported), and the zone grown past GROW_LIVE live counters through this
 * kernel's own chunk allocator (check_grow). CPU 0 prints one PASS or FAIL line per check and
 * `DONE n checks, k failed`.
 *
 * Every CPU runs on a CKERNEL_CPU_STACK-byte stack (4 KiB, as xv6's), interrupts included:
 * the stacks are filled with a pattern at boot, and the last check fails if any CPU wrote
 * into the lowest STACK_GUARD bytes of its stack (and says how much each CPU used).
 *
 * The kernel owns its per-CPU blocks; the zone is hosted in them (pcpu_zone_init) and grows
 * into chunks from the kernel's own allocator (pcpu_zone_grow: kernel_chunk_alloc and
 * kernel_chunk_free over kernel_memory.chunk_arena), and the library's four hooks are defined
 * at the end of this file.
 */
#include "pcpu_counter.h"
#include "kernel.h"
#include "freebsd_style.h"
#include "protocol.h"

int pcpu_c_kernel_check(unsigned cpu, unsigned ncpus); /* tests/c/kernel_check.c */

/* The protocol's numbers: the kernels' profile. */
#define SUM_ADDS PROTO_KERNEL_SUM_ADDS
#define BATCHES PROTO_KERNEL_BATCHES
#define RACE_ADDS PROTO_KERNEL_RACE_ADDS
#define RACE_EVERY PROTO_KERNEL_RACE_EVERY
#define ZERO_ADDS PROTO_KERNEL_ZERO_ADDS
#define ALLOC_ROUNDS PROTO_KERNEL_ALLOC_ROUNDS
#define ALLOC_HELD PROTO_KERNEL_ALLOC_HELD
#define TIMER_MIN_ADDS PROTO_KERNEL_TIMER_MIN_ADDS
#define TIMER_MIN_TICKS PROTO_KERNEL_TIMER_MIN_TICKS
#define TIMER_MAX_ADDS PROTO_KERNEL_TIMER_MAX_ADDS
_Static_assert(PROTO_KERNEL_RACE_HANDLER_ADD == 0, "the kernels' race runs with the timer off");
#define FBSD_ROUNDS 2000u

_Static_assert(sizeof(struct block) == BLOCK, "one block per page");

struct kernel_memory kernel_memory;
static uint64_t meta[PCPU_META_WORDS(SLOTS)];

/* The protocol's counters. */
static counter_u64_t sums[4], packets, bytes, raced, zeroed, timed;
static unsigned ncpus;
static volatile int go;
/* What each CPU reports for a phase (two figures), read by CPU 0 after a barrier. */
static uint64_t report_of[MAX_CPUS][2];
static volatile uint64_t ticks[MAX_CPUS];
static unsigned checks, failed;

/* The registry's counters: one, and the largest array a name can hold. */
static counter_u64_t reg_one, reg_array[PCPU_SYSCTL_ARRAY_MAX];
/* The export's text: PCPU_SYSCTL_ARRAY_MAX + 1 sample lines and two names' headers. */
static char export_text[8192];

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

/* One figure of a check: what, the exact value, the value read. */
struct value {
	const char *what;
	uint64_t expected, got;
};

/* One check's line, as the protocol prints it: PASS if every value matches, else one FAIL line
 * per mismatch. */
static void report(const char *name, const struct value *v, unsigned count)
{
	int bad = 0;
	checks++;
	for (unsigned i = 0; i < count; i++) {
		if (v[i].expected == v[i].got)
			continue;
		bad = 1;
		kernel_print("FAIL ");
		kernel_print(name);
		kernel_print(" ");
		kernel_print(v[i].what);
		kernel_print(" expected ");
		print_u64(v[i].expected);
		kernel_print(" got ");
		print_u64(v[i].got);
		kernel_print("\n");
	}
	if (bad) {
		failed++;
		return;
	}
	kernel_print("PASS ");
	kernel_print(name);
	kernel_print(" on ");
	print_u64(ncpus);
	kernel_print(" CPUs: ");
	kernel_print(v[0].what);
	kernel_print(" = ");
	print_u64(v[0].got);
	kernel_print(" exact (");
	print_u64(count);
	kernel_print(" values checked)\n");
}

#define REPORT(name, ...)                                                                  \
	do {                                                                               \
		const struct value values_[] = { __VA_ARGS__ };                           \
		report(name, values_, sizeof(values_) / sizeof(values_[0]));               \
	} while (0)

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

/* The sum of figure i of every CPU's report. */
static uint64_t reports(unsigned i)
{
	uint64_t sum = 0;
	for (unsigned c = 0; c < ncpus; c++)
		sum += report_of[c][i];
	return sum;
}

/* CPU cpu's raw slot of c: a handle is its slot's offset in each CPU's block, and the blocks
 * are this kernel's own. */
static uint64_t slot(counter_u64_t c, unsigned cpu)
{
	size_t base;
	if (pcpu_zone_cpu_base(cpu, &base) != 0)
		return ~0ull;
	return *(volatile uint64_t *)(base + (uintptr_t)c);
}

/* The sum of c's raw slots on the running CPUs. */
static uint64_t slots(counter_u64_t c)
{
	uint64_t sum = 0;
	for (unsigned cpu = 0; cpu < ncpus; cpu++)
		sum += slot(c, cpu);
	return sum;
}

static counter_u64_t must_alloc(void)
{
	counter_u64_t c = counter_u64_alloc(M_NOWAIT);
	if (c == NULL)
		kernel_fail("setup counter_u64_alloc", 0, 0);
	return c;
}

/*
 * The kernel's chunk allocator, the zone's chunk hooks (pcpu_zone_grow): chunks of the size
 * and alignment asked, from kernel_memory.chunk_arena. Chunks given back go on a free list
 * (each remembers its size in its first words: the zone no longer uses it) and are handed out
 * again first; else the bump pointer moves on. A spin lock, taken with interrupts off and
 * held for a few instructions, guards both. M_NOWAIT never waits: a spent arena fails at
 * once. M_WAITOK waits, the lock released, for another CPU to give a chunk back (as a
 * kernel's M_WAITOK sleeps until memory is freed); the check sizes the arena so that it never
 * has to.
 *
 * Built with -DPCPU_TESTBED_BROKEN_GROW the allocator ignores align (a kernel author's bug: 16
 * bytes, as a general-purpose malloc gives): the library must refuse the misaligned chunks,
 * giving each back at once, and the growth check must fail, naming them (`cargo xtask qemu`
 * runs c-<arch>-grow-broken).
 */
struct free_chunk {
	struct free_chunk *next;
	size_t size;
};

static struct {
	unsigned lock;
	uintptr_t bump;          /* the arena's first byte never handed out */
	struct free_chunk *free; /* chunks given back */
	/* What the hooks did (under the lock): calls of the alloc hook, chunks handed out (of
	 * them taken again from the free list), given back, out now and at most, given back
	 * misaligned (the library refused them), M_WAITOK calls that waited, refusals. */
	uint64_t calls, taken, reused, given_back, out, most_out, misaligned, waits, refused;
	int refuse_next; /* the next alloc call returns NULL (the check sets it, the hook clears it) */
	int page_next;   /* the next alloc call gives one page, as `return kalloc();` would */
	size_t last_free_size; /* the size the last chunk came back with */
	int last_wait;   /* the wait flag of the last alloc call */
} arena;

static uintptr_t arena_lock(void)
{
	uintptr_t irq = arch_irq_save();
	while (__atomic_exchange_n(&arena.lock, 1, __ATOMIC_ACQUIRE))
		arch_relax();
	return irq;
}

static void arena_unlock(uintptr_t irq)
{
	__atomic_store_n(&arena.lock, 0, __ATOMIC_RELEASE);
	arch_irq_restore(irq);
}

/* Calls of the alloc hook so far. */
static uint64_t arena_calls(void)
{
	uintptr_t irq = arena_lock();
	uint64_t calls = arena.calls;
	arena_unlock(irq);
	return calls;
}

/* A page, as a page allocator (xv6's kalloc) hands out. */
#define PAGE 4096u

#ifdef PCPU_TESTBED_BROKEN_GROW
#define ARENA_ALIGN(align) ((void)(align), (uintptr_t)16) /* the bug: align ignored */
#else
#define ARENA_ALIGN(align) ((uintptr_t)(align))
#endif

/* A chunk of the free list or the arena's rest, or 0; under the lock. */
static uintptr_t arena_take(size_t size, uintptr_t align)
{
	for (struct free_chunk **at = &arena.free; *at != NULL; at = &(*at)->next) {
		struct free_chunk *c = *at;
		if (c->size >= size && ((uintptr_t)c & (align - 1)) == 0) {
			*at = c->next;
			arena.reused++;
			return (uintptr_t)c;
		}
	}
	uintptr_t end = (uintptr_t)kernel_memory.chunk_arena + sizeof(kernel_memory.chunk_arena);
	uintptr_t chunk = (arena.bump + align - 1) & ~(align - 1);
	if (chunk < arena.bump || chunk > end || end - chunk < size)
		return 0;
	arena.bump = chunk + size;
	return chunk;
}

static void *kernel_chunk_alloc(size_t size, size_t align, int wait, size_t *given)
{
	*given = size; /* the arena hands out the bytes asked, */
	for (int waited = 0;; waited = 1) {
		uintptr_t irq = arena_lock();
		uintptr_t chunk = 0;
		arena.calls += !waited;
		arena.last_wait = wait;
		if (arena.refuse_next) {
			arena.refuse_next = 0;
			arena.refused++;
			arena_unlock(irq);
			return NULL;
		}
		if (arena.page_next) {
			/* but one page, and says so, when the check asks (the library must refuse it) */
			arena.page_next = 0;
			size = *given = PAGE;
			align = PAGE;
		}
		if (size >= sizeof(struct free_chunk))
			chunk = arena_take(size, ARENA_ALIGN(align));
		if (chunk != 0) {
			arena.taken++;
			arena.out++;
			arena.most_out = arena.out > arena.most_out ? arena.out : arena.most_out;
		}
		arena.waits += chunk == 0 && wait == M_WAITOK && !waited;
		arena_unlock(irq);
		if (chunk != 0 || wait != M_WAITOK)
			return (void *)chunk;
		while (__atomic_load_n(&arena.free, __ATOMIC_RELAXED) == NULL)
			arch_relax();
	}
}

static void kernel_chunk_free(void *chunk, size_t size, size_t align)
{
	uintptr_t at = (uintptr_t)chunk, start = (uintptr_t)kernel_memory.chunk_arena;
	if (at < start || at - start >= sizeof(kernel_memory.chunk_arena))
		kernel_fail("kernel_chunk_free: not a chunk of the arena (address, size)", at, size);
	struct free_chunk *c = chunk;
	uintptr_t irq = arena_lock();
	arena.given_back++;
	arena.out--;
	arena.misaligned += (at & (align - 1)) != 0;
	arena.last_free_size = size;
	c->size = size;
	c->next = arena.free;
	__atomic_store_n(&arena.free, c, __ATOMIC_RELAXED);
	arena_unlock(irq);
}

/* The zone grows through the hooks above; a chunk fits the arena's sizing (CHUNK_MAX), and
 * the arena lies in the memory the boot code maps (arch_memory_end). */
static void grow_install(void)
{
	size_t size = pcpu_zone_chunk_size(), align = pcpu_zone_chunk_align();
	uintptr_t arena_end = (uintptr_t)kernel_memory.chunk_arena + sizeof(kernel_memory.chunk_arena);
	if (align == 0 || align > BLOCK || ((size + align - 1) & ~(align - 1)) > CHUNK_MAX)
		kernel_fail("chunk size and alignment beyond the arena's CHUNK_MAX", size, align);
	if (arena_end > arch_memory_end)
		kernel_fail("chunk arena past the memory the boot code maps (end, mapped)", arena_end,
			    arch_memory_end);
	arena.bump = (uintptr_t)kernel_memory.chunk_arena;
	int rc = pcpu_zone_grow(kernel_chunk_alloc, kernel_chunk_free);
	if (rc != 0) {
		kernel_print("FAIL pcpu_zone_grow: ");
		kernel_print(pcpu_strerror(rc));
		kernel_print("\n");
		arch_exit(0);
	}
}

static void check_sums(void)
{
	static const char *const slot_name[MAX_CPUS] = { "slot cpu0", "slot cpu1", "slot cpu2",
							  "slot cpu3" };
	struct value v[4 + MAX_CPUS] = {
		{ "sums[0]", PROTO_SUM0(ncpus, SUM_ADDS), counter_u64_fetch(sums[0]) },
		{ "sums[1]", PROTO_SUM1(ncpus, SUM_ADDS), counter_u64_fetch(sums[1]) },
		{ "sums[2]", PROTO_SUM2(ncpus, SUM_ADDS), counter_u64_fetch(sums[2]) },
		{ "sums[3]", PROTO_SUM3(ncpus, SUM_ADDS), counter_u64_fetch(sums[3]) },
	};
	/* Each CPU's own slot holds exactly its own adds: its per-CPU register was its block. */
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++) {
		uint64_t own = cpu < ncpus ? (uint64_t)(cpu + 1) * SUM_ADDS : 0;
		v[4 + cpu] = (struct value){ slot_name[cpu], own, slot(sums[1], cpu) };
	}
	report("sums", v, 4 + MAX_CPUS);
}

/* Every CPU's rounds of alloc, add, check, free: every new counter reads 0, holds exactly
 * what this CPU added to it while others allocate, and is freed. Returns the failures. */
static uint64_t alloc_rounds(unsigned cpu)
{
	uint64_t bad = 0;
	for (uint64_t round = 0; round < ALLOC_ROUNDS; round++) {
		counter_u64_t held[ALLOC_HELD];
		for (unsigned h = 0; h < ALLOC_HELD; h++) {
			held[h] = counter_u64_alloc(M_NOWAIT);
			if (held[h] == NULL) {
				bad++;
				continue;
			}
			for (unsigned i = 0; i < MAX_CPUS; i++)
				bad += slot(held[h], i) != 0;
			bad += counter_u64_fetch(held[h]) != 0;
			counter_u64_add(held[h], (int64_t)PROTO_TAG(cpu, round, h));
		}
		for (unsigned h = 0; h < ALLOC_HELD; h++) {
			if (held[h] == NULL)
				continue;
			bad += counter_u64_fetch(held[h]) != PROTO_TAG(cpu, round, h);
			counter_u64_free(held[h]);
		}
	}
	return bad;
}

/* CPU 0 alone (this kernel's own check): allocate until the zone's first blocks are full
 * (every slot in use, no chunk asked for: the earlier checks fit in them), then one more,
 * which grows the zone by a chunk from the kernel's allocator; free everything, and again:
 * the second time the chunk is the zone's spare (the allocator is not asked). */
static void fill_zone(void)
{
	static counter_u64_t all[SLOTS + 1];
	size_t before = pcpu_zone_in_use(), room = pcpu_zone_capacity() - before;
	uint64_t got[2], past[2], asked[2];
	for (int pass = 0; pass < 2; pass++) {
		uint64_t calls = arena_calls();
		size_t n = 0;
		while (n < room && (all[n] = counter_u64_alloc(M_NOWAIT)) != NULL)
			n++;
		got[pass] = n;
		if (pcpu_zone_in_use() != pcpu_zone_capacity() || arena_calls() != calls)
			got[pass] = 0;
		past[pass] = (all[n] = counter_u64_alloc(M_NOWAIT)) != NULL;
		n += past[pass];
		asked[pass] = arena_calls() - calls;
		for (size_t i = 0; i < n; i++)
			counter_u64_free(all[i]);
	}
	REPORT("fill_zone", { "first fill", room, got[0] }, { "fill after freeing all", room, got[1] },
	       { "allocs past the last slot", 2, past[0] + past[1] },
	       { "chunks asked for past the last slot", 1, asked[0] },
	       { "chunks asked for past it again (the spare)", 0, asked[1] },
	       { "slots in use after", before, pcpu_zone_in_use() });
}

void kernel_timer_tick(void)
{
	unsigned cpu = arch_cpu_self();
	ticks[cpu]++;
	counter_u64_add(timed, PROTO_HANDLER_ADD);
}

/* Adds (plain, and protected every PROTO_TIMER_BATCH_EVERY) with the timer on, until enough
 * adds and ticks happened. Returns this CPU's adds, in units of 1. */
static uint64_t timer_loop(unsigned cpu)
{
	uint64_t adds = 0;
	while (adds < TIMER_MAX_ADDS && (adds < TIMER_MIN_ADDS || ticks[cpu] < TIMER_MIN_TICKS)) {
		counter_u64_add(timed, 1);
		adds++;
		if (adds % PROTO_TIMER_BATCH_EVERY == 0) {
			counter_enter();
			counter_u64_add_protected(timed, 2);
			counter_u64_add_protected(timed, 3);
			counter_exit();
			adds += 5;
		}
	}
	return adds;
}

static void check_timer(void)
{
	uint64_t handled = 0, fewest = ~0ull;
	int slots_ok = 1;
	for (unsigned c = 0; c < ncpus; c++) {
		handled += ticks[c];
		fewest = ticks[c] < fewest ? ticks[c] : fewest;
		slots_ok &= slot(timed, c) == report_of[c][0] + PROTO_HANDLER_ADD * ticks[c];
	}
	REPORT("timer",
	       { "adds + 1000 x handler runs", reports(0) + PROTO_HANDLER_ADD * handled,
		 counter_u64_fetch(timed) },
	       { "every CPU's slot", 1, (uint64_t)slots_ok },
	       { "every CPU took enough ticks", 1, fewest >= TIMER_MIN_TICKS });
	kernel_print("INFO timer: ");
	print_u64(handled);
	kernel_print(" handler runs, ");
	print_u64(reports(0));
	kernel_print(" adds in the loop, fewest ticks on one CPU ");
	print_u64(fewest);
	kernel_print("\n");
}

/* What a registry walk saw: names, values and their sum. */
struct walked {
	uint64_t names, values, sum;
};

static int count_walked(const char *name, const char *descr, const uint64_t *v, size_t n,
			void *arg)
{
	struct walked *w = arg;
	(void)name;
	(void)descr;
	w->names++;
	w->values += n;
	for (size_t i = 0; i < n; i++)
		w->sum += v[i];
	return 0;
}

/* The registry, on this CPU's 4 KiB stack: a walk (the largest array handed over whole), a
 * delta export (every value taken: a second walk reads 0), and the export's line count. */
static void check_registry(void)
{
	uint64_t one = (uint64_t)ncpus * (ncpus + 1) / 2;
	uint64_t array = 0;
	for (unsigned i = 0; i < PCPU_SYSCTL_ARRAY_MAX; i++)
		array += (uint64_t)ncpus * (i + 1);
	struct walked before = { 0, 0, 0 }, after = { 0, 0, 0 };
	int walk_rc = pcpu_sysctl_walk(count_walked, &before);
	size_t len = sizeof(export_text);
	int export_rc = pcpu_sysctl_export(export_text, &len, PCPU_EXPORT_DELTAS);
	uint64_t lines = 0;
	for (size_t i = 0; export_rc == 0 && i < len; i++)
		lines += export_text[i] == '\n';
	pcpu_sysctl_walk(count_walked, &after);
	REPORT("registry", { "values walked", 1 + PCPU_SYSCTL_ARRAY_MAX, before.values },
	       { "walk rc", 0, (uint64_t)walk_rc }, { "names walked", 2, before.names },
	       { "sum walked", one + array, before.sum }, { "export rc", 0, (uint64_t)export_rc },
	       { "export lines", 2 * 2 + 1 + PCPU_SYSCTL_ARRAY_MAX, lines },
	       { "sum after the delta export", 0, after.sum });
}

/*
 * The growth check: CPU 0 allocates GROW_LIVE counters with M_WAITOK, far past the first
 * blocks (the zone takes a chunk through kernel_chunk_alloc every SLOTS_PER_CHUNK), while
 * the other CPUs churn: rounds of CHURN_ALL / ncpus counters each, allocated (every new one
 * reads 0), added to, checked and freed, with adds to GROW_LONG long-lived counters. Then
 * CPU 0 alone makes the allocator refuse once, for M_WAITOK (the alloc returns NULL, the hook
 * asked once) and for M_NOWAIT (the hook sees M_NOWAIT), filling the zone to its last slot
 * first; then
 * every CPU adds to every GROW_SPREAD-th of CPU 0's counters and churns on, round by round in
 * step, in chunks of their own that fill, empty, go back to the allocator and are taken again.
 * Every CPU reads (exactly) and frees its share of CPU 0's counters; CPU 0 checks the other
 * sums, frees the rest, and checks that the zone is back to its start and that every chunk went
 * back but the zone's spare.
 *
 * The kernels built with tests/c/broken_add.h skip it: they are for the timer check, and the
 * growth check is the longest of the boot (GROW_LIVE).
 */

/* The counters a churn round holds, over all running CPUs (each CPU CHURN_ALL / ncpus): more
 * than four chunks' slots, so that a round fills chunks, and when they empty all but the
 * zone's spare go back to the allocator, on one CPU as on four. */
#define CHURN_ALL 2400u
#define CHURN_ROUNDS 4u  /* per phase */
#define GROW_LONG 4u
#define GROW_SPREAD 16u
#define GROW_EXTRA 4096u /* the zone's free slots when the refusals start, at most */
#ifdef PCPU_BROKEN_ADD_H
static const int grow_check = 0;
#else
static const int grow_check = 1;
#endif
_Static_assert(CHURN_ALL % (GROW_LONG * 2 * 3) == 0,
	       "one to four CPUs: every long-lived counter gets as many adds from a CPU");
_Static_assert(CHURN_ALL > 4 * SLOTS_PER_CHUNK, "a churn round fills more than four chunks");

static counter_u64_t grow_held[GROW_LIVE], grow_extra[GROW_EXTRA], grow_long[GROW_LONG];
static counter_u64_t churn_held[CHURN_ALL];

/* This CPU's churn rounds first..first+rounds-1; with `together`, every CPU's round allocates
 * before any frees, and frees all before the next round allocates (barriers), so that the
 * chunks they filled empty and go back, and are taken again. Returns the bad counters (NULL,
 * not 0 when new, not what this CPU added). */
static uint64_t churn(unsigned cpu, unsigned first, unsigned rounds, int together)
{
	unsigned n = CHURN_ALL / ncpus;
	counter_u64_t *held = &churn_held[cpu * n];
	uint64_t bad = 0;
	for (unsigned round = first; round < first + rounds; round++) {
		for (unsigned h = 0; h < n; h++) {
			held[h] = counter_u64_alloc(h % 2 ? M_NOWAIT : M_WAITOK);
			if (held[h] == NULL) {
				bad++;
				continue;
			}
			bad += counter_u64_fetch(held[h]) != 0 || slots(held[h]) != 0;
			counter_u64_add(held[h], (int64_t)PROTO_TAG(cpu, round, h));
			counter_u64_add(grow_long[h % GROW_LONG], cpu + 1);
		}
		if (together)
			barrier();
		for (unsigned h = 0; h < n; h++) {
			if (held[h] == NULL)
				continue;
			bad += counter_u64_fetch(held[h]) != PROTO_TAG(cpu, round, h);
			counter_u64_free(held[h]);
		}
		if (together)
			barrier();
	}
	return bad;
}

/* What the refusals showed (CPU 0 alone). */
struct refusals {
	uint64_t waitok_null, waitok_calls, waitok_flag, nowait_null, nowait_calls, nowait_flag;
	uint64_t granted, granted_flag;
	uint64_t short_rc, short_out, short_size, short_capacity;
	size_t extra;
};

/* Fills the zone to its last slot with M_WAITOK while the allocator refuses its next call:
 * the alloc that needs a chunk returns NULL and asks once (it does not retry: a retry would
 * get a chunk). The same for M_NOWAIT, which the hook must see; then an M_NOWAIT alloc takes a
 * chunk. The counters stay allocated (grow_extra) until the end. */
static struct refusals refuse_once(void)
{
	struct refusals r = { 0 };
	uint64_t calls = arena_calls();
	arena.refuse_next = 1;
	while (r.extra < GROW_EXTRA && (grow_extra[r.extra] = counter_u64_alloc(M_WAITOK)) != NULL)
		r.extra++;
	r.waitok_null = r.extra < GROW_EXTRA;
	r.waitok_calls = arena_calls() - calls;
	r.waitok_flag = (uint64_t)arena.last_wait;
	calls = arena_calls();
	arena.refuse_next = 1;
	r.nowait_null = counter_u64_alloc(M_NOWAIT) == NULL;
	r.nowait_calls = arena_calls() - calls;
	r.nowait_flag = (uint64_t)arena.last_wait;
	/* A hook that gives one page for a bigger chunk, and says so: PCPU_ESHORTCHUNK, the page
	 * back at once with the size it gave, the zone unchanged. */
	uint64_t out = arena.out;
	size_t capacity = pcpu_zone_capacity();
	arena.page_next = 1;
	r.short_rc = (uint64_t)(int64_t)counter_u64_array_alloc(&grow_extra[r.extra], 1, M_NOWAIT);
	r.short_out = arena.out - out;
	r.short_size = arena.last_free_size;
	r.short_capacity = pcpu_zone_capacity() == capacity;
	arena.page_next = 0;
	if (r.extra < GROW_EXTRA && (grow_extra[r.extra] = counter_u64_alloc(M_NOWAIT)) != NULL) {
		r.extra++;
		r.granted = 1;
	}
	r.granted_flag = (uint64_t)arena.last_wait;
	arena.refuse_next = 0;
	return r;
}

static void check_grow(unsigned cpu)
{
	static size_t in_use, capacity, live;
	static struct refusals r;
	int checker = cpu == 0;
	if (checker) {
		in_use = pcpu_zone_in_use();
		capacity = pcpu_zone_capacity();
		for (unsigned j = 0; j < GROW_LONG; j++)
			if ((grow_long[j] = counter_u64_alloc(M_WAITOK)) == NULL)
				kernel_fail("grow: a long-lived counter_u64_alloc(M_WAITOK)", j, 0);
	}
	report_of[cpu][0] = 0;

	/* CPU 0 grows the zone while the others churn. */
	barrier();
	if (checker) {
		while (live < GROW_LIVE && (grow_held[live] = counter_u64_alloc(M_WAITOK)) != NULL) {
			counter_u64_add(grow_held[live], (int64_t)live + 1);
			live++;
		}
	} else {
		report_of[cpu][0] += churn(cpu, 0, CHURN_ROUNDS, 0);
	}
	barrier();
	if (checker)
		r = refuse_once();

	/* Every CPU adds to CPU 0's counters and churns in chunks of its own. */
	barrier();
	for (size_t i = 0; i < live; i += GROW_SPREAD)
		counter_u64_add(grow_held[i], cpu + 1);
	report_of[cpu][0] += churn(cpu, CHURN_ROUNDS, CHURN_ROUNDS, 1);

	/* Every CPU reads and frees its share of CPU 0's counters. */
	barrier();
	uint64_t exact = 0, spread = PROTO_CPUS_SUM(ncpus);
	for (size_t i = cpu; i < live; i += ncpus) {
		exact += counter_u64_fetch(grow_held[i]) == i + 1 + (i % GROW_SPREAD ? 0 : spread);
		counter_u64_free(grow_held[i]);
	}
	report_of[cpu][1] = exact;
	barrier();
	if (!checker)
		return;
	for (size_t i = 0; i < r.extra; i++)
		counter_u64_free(grow_extra[i]);
	/* Each long-lived counter: CHURN_ALL / ncpus / GROW_LONG adds of cpu + 1 a round, by CPUs
	 * 1..n-1 in the first phase and by every CPU in the second. */
	uint64_t per_round = CHURN_ALL / ncpus / GROW_LONG, long_ok = 0;
	uint64_t long_sum = per_round * CHURN_ROUNDS * (spread - 1 + spread);
	for (unsigned j = 0; j < GROW_LONG; j++) {
		long_ok += counter_u64_fetch(grow_long[j]) == long_sum;
		counter_u64_free(grow_long[j]);
	}
	uint64_t taken = arena.taken, reused = arena.reused, back = arena.given_back;
	uint64_t out = arena.out, spare = pcpu_zone_spare(), trimmed = pcpu_zone_trim();
	REPORT("grow", { "counters live at once on CPU 0", GROW_LIVE, live },
	       { "chunks the library gave back misaligned", 0, arena.misaligned },
	       { "CPU 0's counters exact", GROW_LIVE, reports(1) },
	       { "long-lived counters exact", GROW_LONG, long_ok },
	       { "bad churned counters", 0, reports(0) },
	       { "chunks taken for them", 1, taken >= GROW_LIVE / SLOTS_PER_CHUNK },
	       { "chunks given back and taken again", 1, back > 0 && reused > 0 },
	       { "M_WAITOK alloc refused: NULL", 1, r.waitok_null },
	       { "M_WAITOK alloc refused: hook calls", 1, r.waitok_calls },
	       { "M_WAITOK alloc refused: flag", M_WAITOK, r.waitok_flag },
	       { "M_NOWAIT alloc refused: NULL", 1, r.nowait_null },
	       { "M_NOWAIT alloc refused: hook calls", 1, r.nowait_calls },
	       { "M_NOWAIT alloc refused: flag", M_NOWAIT, r.nowait_flag },
	       { "M_NOWAIT alloc granted", 1, r.granted },
	       { "M_NOWAIT alloc granted: flag", M_NOWAIT, r.granted_flag },
	       { "one page for a chunk: PCPU_ESHORTCHUNK", (uint64_t)(int64_t)PCPU_ESHORTCHUNK, r.short_rc },
	       { "one page for a chunk: chunks out more", 0, r.short_out },
	       { "one page for a chunk: given back with its size", PAGE, r.short_size },
	       { "one page for a chunk: capacity unchanged", 1, r.short_capacity },
	       { "slots in use after", in_use, pcpu_zone_in_use() },
	       { "capacity after", capacity, pcpu_zone_capacity() },
	       { "chunks out after (the zone's spare)", 1, out },
	       { "spare chunks after (pcpu_zone_spare)", 1, spare },
	       { "spare chunks given back (pcpu_zone_trim)", 1, trimmed },
	       { "chunks out after pcpu_zone_trim", 0, arena.out });
	kernel_print("INFO grow: ");
	print_u64(taken);
	kernel_print(" chunks taken (");
	print_u64(reused);
	kernel_print(" again after going back), ");
	print_u64(back);
	kernel_print(" given back, ");
	print_u64(arena.most_out);
	kernel_print(" out at most (");
	print_u64(pcpu_zone_chunk_size());
	kernel_print(" bytes each), ");
	print_u64(arena.waits);
	kernel_print(" M_WAITOK waits; ");
	print_u64((uint64_t)CHURN_ROUNDS * (CHURN_ALL / ncpus) * (2 * ncpus - 1));
	kernel_print(" counters churned\n");
}

/* The stacks: filled with STACK_PATTERN at boot (the boot CPU's below where it runs then),
 * so that the bytes never written show how deep each CPU went. */
#define STACK_PATTERN 0x5a
#define STACK_GUARD 64

static void paint_stack(unsigned cpu, size_t len)
{
	volatile uint8_t *bottom = arch_stack_bottom(cpu);
	for (size_t i = 0; i < len; i++)
		bottom[i] = STACK_PATTERN;
}

/* Bytes of the CPU's stack written since it was painted. */
static uint64_t stack_used(unsigned cpu)
{
	const volatile uint8_t *bottom = arch_stack_bottom(cpu);
	size_t untouched = 0;
	while (untouched < CKERNEL_CPU_STACK && bottom[untouched] == STACK_PATTERN)
		untouched++;
	return CKERNEL_CPU_STACK - untouched;
}

/* No CPU reached the lowest STACK_GUARD bytes of its stack; prints what each used. */
static void check_stacks(void)
{
	uint64_t within = 0;
	kernel_print("stack: bytes used of ");
	print_u64(CKERNEL_CPU_STACK);
	kernel_print(" per CPU:");
	for (unsigned cpu = 0; cpu < ncpus; cpu++) {
		uint64_t used = stack_used(cpu);
		kernel_print(" ");
		print_u64(used);
		within += used <= CKERNEL_CPU_STACK - STACK_GUARD;
	}
	kernel_print("\n");
	REPORT("stacks", { "CPUs within their stacks", ncpus, within });
}

#if defined(__x86_64__)
/*
 * Per-CPU statics (PCPU_COUNTER_DEFINE), x86_64: counted by CPU 0 before bring-up (GS base 0:
 * the section's template), then by every CPU through its copy of the section, which lies at
 * its GS block (the zone's register value) plus the section's address, past the image.
 */
#define STATIC_ADDS 100000u
PCPU_COUNTER_DEFINE(c_static_events);
extern char __start_pcpu_counter_statics[], __bss_end[];

static void statics_install(void)
{
	uintptr_t base = (uintptr_t)kernel_blocks;
	if (base + (uintptr_t)__start_pcpu_counter_statics < (uintptr_t)__bss_end)
		kernel_fail("statics copies inside the image (base, start)", base,
			    (uintptr_t)__start_pcpu_counter_statics);
	int rc = pcpu_statics_install(base, BLOCK, MAX_CPUS);
	if (rc != 0)
		kernel_fail("pcpu_statics_install (rc)", (uint64_t)-rc, 0);
}

static void statics_run(unsigned cpu)
{
	barrier();
	for (unsigned k = 0; k < STATIC_ADDS; k++)
		PCPU_COUNTER_ADD(c_static_events, cpu + 1);
	barrier();
	if (cpu == 0)
		REPORT("statics", { "events", 1 + STATIC_ADDS * ncpus * (ncpus + 1) / 2,
				    pcpu_static_fetch(&c_static_events) });
}
#endif

/* The protocol's phases (testbeds/protocol/protocol.h), then this kernel's own checks. */
static void run_checks(unsigned cpu)
{
	int checker = cpu == 0;

	/* Exact sums: several counters, positive, negative and above 2^32 adds. */
	barrier();
	for (uint64_t k = 0; k < SUM_ADDS; k++) {
		counter_u64_add(sums[0], 1);
		counter_u64_add(sums[1], cpu + 1);
		counter_u64_add(sums[2], -3);
		counter_u64_add(sums[3], 1);
		counter_u64_add(sums[3], (int64_t)((1ull << 33) + (k & 0xff)));
	}
	barrier();
	if (checker)
		check_sums();

	/* Protected batches. */
	barrier();
	for (unsigned i = 0; i < BATCHES; i++) {
		counter_enter();
		counter_u64_add_protected(packets, 1);
		counter_u64_add_protected(bytes, 1500);
		counter_exit();
	}
	barrier();
	if (checker)
		REPORT("protected", { "packets", (uint64_t)ncpus * BATCHES, counter_u64_fetch(packets) },
		       { "bytes", 1500ull * ncpus * BATCHES, counter_u64_fetch(bytes) });

	/* fetch_and_zero from every CPU, racing every CPU's adds. */
	barrier();
	uint64_t deltas = 0;
	for (uint64_t k = 0; k < RACE_ADDS; k++) {
		counter_u64_add(raced, cpu + 1);
		if (k % RACE_EVERY == cpu)
			deltas += pcpu_counter_fetch_and_zero(raced);
	}
	report_of[cpu][0] = deltas;
	barrier();
	if (checker)
		REPORT("fetch_and_zero",
		       { "deltas + final fetch", PROTO_RACE_TOTAL(ncpus, RACE_ADDS),
			 reports(0) + counter_u64_fetch(raced) },
		       { "raw slots (never written by zero)", PROTO_RACE_TOTAL(ncpus, RACE_ADDS),
			 slots(raced) });

	/* zero after adds, then more adds: only the later adds count, and no slot is written. */
	barrier();
	for (unsigned i = 0; i < ZERO_ADDS; i++)
		counter_u64_add(zeroed, cpu + 1);
	barrier();
	if (checker) {
		counter_u64_zero(zeroed);
		report_of[0][0] = counter_u64_fetch(zeroed);
	}
	barrier();
	for (unsigned i = 0; i < ZERO_ADDS; i++)
		counter_u64_add(zeroed, 7);
	barrier();
	if (checker)
		REPORT("zero",
		       { "fetch after later adds", PROTO_ZERO_AFTER(ncpus, ZERO_ADDS),
			 counter_u64_fetch(zeroed) },
		       { "fetch right after zero", 0, report_of[0][0] },
		       { "raw slots", PROTO_ZERO_SLOTS(ncpus, ZERO_ADDS), slots(zeroed) });

	/* alloc/free from every CPU. */
	size_t in_use = pcpu_zone_in_use();
	barrier();
	report_of[cpu][0] = alloc_rounds(cpu);
	barrier();
	if (checker) {
		REPORT("alloc_free", { "bad counters", 0, reports(0) },
		       { "in_use after", in_use, pcpu_zone_in_use() });
		fill_zone();
	}

	/* Adds with this CPU's timer firing: its handler adds to the same counter. */
	barrier();
	ticks[cpu] = 0;
	arch_timer_start();
	report_of[cpu][0] = timer_loop(cpu);
	arch_timer_stop();
	barrier();
	if (checker)
		check_timer();

	fbsd_work(cpu, FBSD_ROUNDS);
	barrier();
	if (checker)
		REPORT("freebsd_style", { "fbsd_verify", 0, (uint64_t)fbsd_verify(ncpus, FBSD_ROUNDS) });

	barrier();
	int rc = pcpu_c_kernel_check(cpu, ncpus);
	barrier();
	if (checker)
		REPORT("c_api", { "pcpu_c_kernel_check", 0, (uint64_t)rc });

	/* The registry: every CPU adds, CPU 0 walks and exports. */
	barrier();
	counter_u64_add(reg_one, cpu + 1);
	for (unsigned i = 0; i < PCPU_SYSCTL_ARRAY_MAX; i++)
		counter_u64_add(reg_array[i], i + 1);
	barrier();
	if (checker)
		check_registry();
	barrier();

	if (grow_check) {
		check_grow(cpu);
		barrier();
	}

#if defined(__x86_64__)
	statics_run(cpu);
#endif
}

/*
 * Each CPU's bring-up: its register pointed at its block, then the library's bring-up check,
 * which proves that its adds land in its own block of the zone. Built with
 * -DPCPU_TESTBED_BROKEN_BRINGUP_SWAP (CPUs 0 and 1 take each other's blocks) or _NCPUS (the
 * zone made for the boot CPU alone), the check must stop the kernel with its message
 * (`cargo xtask qemu` runs c-<arch>-bringup-*).
 */
static void become_cpu(unsigned cpu)
{
	unsigned block = cpu;
#ifdef PCPU_TESTBED_BROKEN_BRINGUP_SWAP
	if (cpu < 2)
		block = cpu ^ 1;
#endif
	kernel_blocks[cpu].cpu = cpu;
	if (!arch_block_id_from_reset)
		kernel_blocks[cpu].id = cpu;
	int rc = arch_set_cpu_base(block);
	if (rc != 0)
		kernel_fail("arch_set_cpu_base (cpu, rc)", cpu, (uint64_t)-rc);
	rc = pcpu_cpu_check(cpu);
	if (rc != 0) {
		/* The first CPU to fail reports it; others that fail at once wait for the exit. */
		static int reported;
		if (__atomic_exchange_n(&reported, 1, __ATOMIC_ACQ_REL))
			for (;;)
				arch_relax();
		kernel_print("FAIL bring-up: CPU ");
		print_u64(cpu);
		kernel_print(": ");
		kernel_print(pcpu_strerror(rc));
		kernel_print("\n");
		arch_exit(0);
	}
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
	/* Every stack but the one this runs on, whole; this one below its frame, with room for
	 * paint_stack's own. */
	for (unsigned cpu = 1; cpu < MAX_CPUS; cpu++)
		paint_stack(cpu, CKERNEL_CPU_STACK);
	paint_stack(0, (size_t)((uint8_t *)__builtin_frame_address(0) - arch_stack_bottom(0)) - 256);
	fbsd_boot(); /* early counters, before the zone exists */
#if defined(__x86_64__)
	PCPU_COUNTER_INC(c_static_events); /* GS base 0: the template */
#endif

	struct pcpu_zone_layout layout = {
		.base = (uintptr_t)kernel_blocks,
		.stride = BLOCK,
		.offset = COUNTER_AREA,
		.len = SLOTS * 8,
#ifdef PCPU_TESTBED_BROKEN_BRINGUP_NCPUS
		.ncpus = 1, /* the CPUs known when the zone is made: a broken bring-up */
#else
		.ncpus = MAX_CPUS,
#endif
	};
	int rc = pcpu_zone_init(&layout, meta, PCPU_META_WORDS(SLOTS));
	if (rc != 0) {
		kernel_print("FAIL pcpu_zone_init: ");
		kernel_print(pcpu_strerror(rc));
		kernel_print("\n");
		arch_exit(0);
	}
	grow_install();
#if defined(__x86_64__)
	statics_install();
#endif
	become_cpu(0);
	for (unsigned i = 0; i < 4; i++)
		sums[i] = must_alloc();
	packets = must_alloc();
	bytes = must_alloc();
	raced = must_alloc();
	zeroed = must_alloc();
	timed = must_alloc();
	if ((rc = fbsd_attach()) != 0)
		kernel_fail("fbsd_attach step", (uint64_t)rc, 0);
	reg_one = must_alloc();
	if ((rc = counter_u64_array_alloc(reg_array, PCPU_SYSCTL_ARRAY_MAX, M_WAITOK)) != 0 ||
	    (rc = pcpu_sysctl_add_counter("ck.one", "one counter", reg_one)) != 0 ||
	    (rc = pcpu_sysctl_add_counter_array("ck.array", "the largest array",
						reg_array, PCPU_SYSCTL_ARRAY_MAX)) != 0)
		kernel_fail("registry setup (rc)", (uint64_t)-rc, 0);

	unsigned wanted = arch_cpu_count();
	wanted = wanted > MAX_CPUS ? MAX_CPUS : wanted;
	ncpus = arch_start_secondaries(wanted);
	REPORT("cpus", { "started", wanted, ncpus });
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	run_checks(0);
	check_stacks();
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
