/*
 * A minimal C kernel object that uses the whole C API (every function of pcpu_counter.h but
 * the host simulation's), for tests/c/footprint.sh: linked with libpcpu_counter.a, the
 * kernel's text grows by what the library brings. Never run; only linked. The reading calls
 * (group reads, the Prometheus export, approximate counters) are built only with
 * -DFOOTPRINT_READING, and the per-CPU statics (PCPU_COUNTER_DEFINE, pcpu_statics_install,
 * pcpu_static_*) only with -DFOOTPRINT_STATICS, and a zone that grows (pcpu_zone_grow and its
 * hooks) only with -DFOOTPRINT_GROW; footprint.sh measures the three as a second figure.
 */
#include "pcpu_counter.h"

static uint64_t blocks[2][64] __attribute__((aligned(64)));
static uint64_t meta[PCPU_META_WORDS(32)];
static volatile uint32_t now_ticks;
#ifdef FOOTPRINT_READING
static char text[1024];
static size_t text_len = sizeof text;
static struct pcpu_approx approx;
#endif
static COUNTER_U64_DEFINE_EARLY(early);
#ifdef FOOTPRINT_GROW
static unsigned char arena[1 << 16] __attribute__((aligned(4096)));
static void *chunk_alloc(size_t size, size_t align, int wait, size_t *given)
{
	(void)wait;
	*given = sizeof arena;
	return size <= sizeof arena && align <= 4096 ? arena : 0;
}
static void chunk_free(void *chunk, size_t size, size_t align)
{
	(void)chunk, (void)size, (void)align;
}
#endif
#ifdef FOOTPRINT_STATICS
PCPU_COUNTER_DEFINE(irqs);
static uint64_t static_blocks[2][8] __attribute__((aligned(64)));
#endif

uintptr_t pcpu_platform_protect(void) { return 0; }
void pcpu_platform_unprotect(uintptr_t s) { (void)s; }
size_t pcpu_platform_current_cpu(void) { return 0; }
void pcpu_platform_panic(const char *msg, size_t len)
{
	(void)msg;
	(void)len;
	for (;;) {
	}
}

static uint32_t ticks_now(void) { return now_ticks; }

static int walk(const char *name, const char *descr, const uint64_t *values, size_t n, void *arg)
{
	(void)name;
	(void)descr;
	*(uint64_t *)arg += n ? values[0] : 0;
	return 0;
}

/* The sum keeps every call's result alive. */
uint64_t kmain(void)
{
	struct pcpu_zone_layout layout = { (size_t)blocks, sizeof blocks[0], 0, 256, 2 };
	counter_u64_t a[4];
	uint64_t copy[4];
	size_t base = 0;
	uint64_t sum = 0;
	struct counter_rate cr = { 0, 0, 0, 0 };
	counter_u64_t c;
	struct pcpu_protect_t s;

	sum += (uint64_t)pcpu_early_base(0);
	counter_u64_add(early, 1);
	sum += counter_u64_fetch(early);
#ifdef FOOTPRINT_STATICS
	PCPU_COUNTER_INC(irqs);
	pcpu_static_add(&irqs_pcpu_slot, 2);
	sum += (uint64_t)pcpu_statics_install((size_t)static_blocks, sizeof static_blocks[0], 2);
	sum += pcpu_static_fetch(&irqs) + pcpu_static_fetch_and_zero(&irqs);
	sum += (uint64_t)pcpu_static_zero(&irqs);
#endif
	sum += (uint64_t)pcpu_zone_init(&layout, meta, PCPU_META_WORDS(32));
	sum += (uint64_t)pcpu_set_cpu_base(0);
	sum += (uint64_t)pcpu_cpu_check(0);
	sum += (uint64_t)pcpu_zone_cpu_base(1, &base) + base;
	c = counter_u64_alloc(M_WAITOK);
	counter_u64_add(c, 1);
	pcpu_counter_add(c, 2);
	counter_enter();
	counter_u64_add_protected(c, 3);
	pcpu_counter_add_protected(c, 4);
	counter_exit();
	s = pcpu_counter_enter_state();
	pcpu_counter_exit_state(s);
	sum += counter_u64_fetch(c) + pcpu_counter_fetch_and_zero(c);
	counter_u64_zero(c);
	sum += (uint64_t)COUNTER_ARRAY_ALLOC(a, 4, M_NOWAIT);
	COUNTER_ARRAY_ZERO(a, 4);
	COUNTER_ARRAY_COPY(a, copy, 4);
	sum += copy[3];
	pcpu_set_ticks(ticks_now, 100);
	cr.cr_rate = c;
	sum += (uint64_t)counter_ratecheck(&cr, 10);
	sum += (uint64_t)pcpu_sysctl_add_counter("c", "a counter", c);
	sum += (uint64_t)pcpu_sysctl_add_counter_array("a", "an array", a, 4);
	sum += (uint64_t)pcpu_sysctl_walk(walk, &sum);
	sum += (uint64_t)pcpu_sysctl_zero("c") + (uint64_t)pcpu_sysctl_remove("a");
	sum += pcpu_zone_capacity() + pcpu_zone_in_use() + pcpu_zone_ncpus();
	sum += (uint64_t)(uintptr_t)pcpu_strerror(PCPU_EFULL);
#ifdef FOOTPRINT_GROW /* a zone that grows (issue 31), measured apart */
	sum += (uint64_t)pcpu_zone_grow(chunk_alloc, chunk_free);
	sum += pcpu_zone_chunk_size() + pcpu_zone_chunk_align();
	sum += pcpu_chunk_size(2, 512) + pcpu_chunk_align(2, 512) + pcpu_zone_spare() + pcpu_zone_trim();
#endif
#ifdef FOOTPRINT_READING /* the reading calls of issue 21, measured apart */
	sum += (uint64_t)pcpu_counter_group_fetch(a[0], 4, copy);
	sum += (uint64_t)pcpu_counter_group_fetch_and_zero(a[0], 4, copy);
	sum += (uint64_t)pcpu_sysctl_export(text, &text_len, PCPU_EXPORT_DELTAS);
	if (pcpu_approx_init(&approx, 64) == 0) {
		uint64_t under, over;
		pcpu_approx_add(&approx, 1);
		pcpu_approx_accuracy(&approx, &under, &over);
		sum += pcpu_approx_read(&approx) + pcpu_approx_precise(&approx) + under + over;
		sum += (uint64_t)pcpu_approx_compare(&approx, 10) + pcpu_approx_fetch_and_zero(&approx);
		pcpu_approx_free(&approx);
	}
#endif
	COUNTER_ARRAY_FREE(a, 4);
	counter_u64_free(c);
	return sum;
}

void _start(void)
{
	now_ticks = (uint32_t)kmain();
	for (;;) {
	}
}
