/*
 * counter(9) written as FreeBSD kernel code writes it, unchanged but for the include line:
 * an early counter at file scope, M_WAITOK | M_ZERO allocations, counter_enter() and
 * counter_exit() without arguments (nested too), the array macros and struct counter_rate.
 * Freestanding: no libc. See freebsd_style.h for who calls what.
 */
#include "pcpu_counter.h" /* FreeBSD: <sys/counter.h> */
#include "freebsd_style.h"

#define EARLY_EVENTS 3
#define NSTATS 4
#define RATE_LIMIT 3

static COUNTER_U64_DEFINE_EARLY(boot_events);
static counter_u64_t rx_packets;
static counter_u64_t rx_bytes;
static counter_u64_t stats[NSTATS];
static struct counter_rate log_rate;

/* FreeBSD's `ticks` and `hz`, for counter_ratecheck. */
static volatile uint32_t ticks_now = 1000;
#define HZ 100
static uint32_t ticks(void)
{
	return ticks_now;
}

void fbsd_boot(void)
{
	for (int i = 0; i < EARLY_EVENTS; i++)
		counter_u64_add(boot_events, 1);
}

int fbsd_attach(void)
{
	rx_packets = counter_u64_alloc(M_WAITOK | M_ZERO);
	rx_bytes = counter_u64_alloc(M_WAITOK);
	if (rx_packets == NULL || rx_bytes == NULL)
		return 1;
	if (COUNTER_ARRAY_ALLOC(stats, NSTATS, M_WAITOK) != 0)
		return 2;
	log_rate.cr_rate = counter_u64_alloc(M_WAITOK | M_ZERO);
	if (log_rate.cr_rate == NULL)
		return 3;
	pcpu_set_ticks(ticks, HZ);
	return 0;
}

void fbsd_work(unsigned lane, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		counter_enter();
		counter_u64_add_protected(rx_packets, 1);
		counter_u64_add_protected(rx_bytes, 64 + lane);
		counter_enter(); /* nested, as a called function would */
		counter_u64_add_protected(stats[0], 1);
		counter_exit();
		counter_u64_add_protected(stats[1], 2);
		counter_exit();
		counter_u64_add(stats[2 + lane % 2], 1);
		counter_u64_add(boot_events, 1);
	}
}

int fbsd_verify(unsigned nlanes, unsigned rounds)
{
	uint64_t n = (uint64_t)nlanes * rounds, odd = (uint64_t)(nlanes / 2) * rounds;
	uint64_t want[NSTATS] = { n, 2 * n, n - odd, odd }, got[NSTATS];

	if (counter_u64_fetch(boot_events) != EARLY_EVENTS + n)
		return 10;
	if (counter_u64_fetch(rx_packets) != n)
		return 11;
	if (counter_u64_fetch(rx_bytes) != rounds * (64 * (uint64_t)nlanes + nlanes * (nlanes - 1) / 2))
		return 12;
	COUNTER_ARRAY_COPY(stats, got, NSTATS);
	for (int i = 0; i < NSTATS; i++)
		if (got[i] != want[i])
			return 13 + i;
	COUNTER_ARRAY_ZERO(stats, NSTATS);
	COUNTER_ARRAY_COPY(stats, got, NSTATS);
	for (int i = 0; i < NSTATS; i++)
		if (got[i] != 0)
			return 20 + i;
	counter_u64_zero(rx_bytes);
	if (counter_u64_fetch(rx_bytes) != 0 || counter_u64_fetch(rx_packets) != n)
		return 25;

	/* counter_ratecheck: RATE_LIMIT events a second pass, more are refused; the next
	 * second's first event reports the last second's count. */
	static const int64_t rate_want[] = { 0, 0, 0, -1, -1 };
	for (int i = 0; i < 5; i++)
		if (counter_ratecheck(&log_rate, RATE_LIMIT) != rate_want[i])
			return 30 + i;
	ticks_now += HZ;
	if (counter_ratecheck(&log_rate, RATE_LIMIT) != 5)
		return 35;
	if (counter_ratecheck(&log_rate, RATE_LIMIT) != 0)
		return 36;

	counter_u64_free(rx_packets);
	counter_u64_free(rx_bytes);
	counter_u64_free(log_rate.cr_rate);
	COUNTER_ARRAY_FREE(stats, NSTATS);
	return 0;
}
