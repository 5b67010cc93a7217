/*
 * The test beds' check protocol, in C: the numbers the C-only kernels (testbeds/ckernel/)
 * count with. The Rust kernels and the firmware run the same protocol from the crate in this
 * folder (src/lib.rs: its `KERNEL` and `FIRMWARE` profiles); its build.rs reads this header
 * and refuses to compile when a number here differs from the Rust one of the same name
 * (PROTO_<PROFILE>_<FIELD> is `<PROFILE>.<field>`; PROTO_<NAME> is the constant `<NAME>`).
 *
 * The phases, in order, every CPU at once, CPU 0 checking each after a barrier:
 *   sums            four counters: +1, +(cpu + 1), -3, and +1 then +(2^33 + (k & 0xff))
 *   protected       counter_enter .. counter_exit batches: packets +1, bytes +1500
 *   fetch_and_zero  +(cpu + 1), and fetch_and_zero when k % RACE_EVERY == cpu
 *   zero            +(cpu + 1) ZERO_ADDS times, zero (CPU 0), then +7 ZERO_ADDS times
 *   alloc_free      ALLOC_ROUNDS rounds of ALLOC_HELD counters per CPU (kernels)
 *   timer           +1, every 8th add a protected +2 and +3, while the timer handler adds
 *                   HANDLER_ADD, until TIMER_MIN_ADDS adds and TIMER_MIN_TICKS ticks
 * A line per check: `PASS <name> on <n> CPUs: <what> = <got> exact (<k> values checked)`
 * or `FAIL <name> <what> expected <x> got <y>`, then `DONE <c> checks, <f> failed`.
 */
#ifndef PCPU_TESTBED_PROTOCOL_H
#define PCPU_TESTBED_PROTOCOL_H

#include <stdint.h>

/* What a CPU's timer handler adds to (PHASE): nothing, the race counter, the timer counter. */
#define PROTO_PHASE_NONE 0
#define PROTO_PHASE_RACE 1
#define PROTO_PHASE_TIMER 2

/* What the timer handler adds to the timer counter each time it runs. */
#define PROTO_HANDLER_ADD 1000
/* The timer loop's protected section, every this many adds. */
#define PROTO_TIMER_BATCH_EVERY 8

/* The kernels' profile (the Rust kernels and these C kernels). */
#define PROTO_KERNEL_SUM_ADDS 20000
#define PROTO_KERNEL_BATCHES 10000
#define PROTO_KERNEL_RACE_ADDS 20000
#define PROTO_KERNEL_RACE_EVERY 61
#define PROTO_KERNEL_RACE_HANDLER_ADD 0
#define PROTO_KERNEL_ZERO_ADDS 5000
#define PROTO_KERNEL_ALLOC_ROUNDS 300
#define PROTO_KERNEL_ALLOC_HELD 4
#define PROTO_KERNEL_TIMER_MIN_ADDS 20000
#define PROTO_KERNEL_TIMER_MIN_TICKS 300
#define PROTO_KERNEL_TIMER_MAX_ADDS 200000000

/* The Cortex-M firmware's profile (Rust only; stated here so that one file has them all). */
#define PROTO_FIRMWARE_SUM_ADDS 10000
#define PROTO_FIRMWARE_BATCHES 5000
#define PROTO_FIRMWARE_RACE_ADDS 20000
#define PROTO_FIRMWARE_RACE_EVERY 61
#define PROTO_FIRMWARE_RACE_HANDLER_ADD 7
#define PROTO_FIRMWARE_ZERO_ADDS 2000
#define PROTO_FIRMWARE_TIMER_MIN_ADDS 20000
#define PROTO_FIRMWARE_TIMER_MIN_TICKS 1000
#define PROTO_FIRMWARE_TIMER_MAX_ADDS 5000000

/* The exact totals, for n CPUs and a profile's numbers (as `expected_*` in src/lib.rs). */
#define PROTO_CPUS_SUM(n) ((uint64_t)(n) * ((uint64_t)(n) + 1) / 2)
#define PROTO_SUM0(n, adds) ((uint64_t)(n) * (adds))
#define PROTO_SUM1(n, adds) ((uint64_t)(adds) * PROTO_CPUS_SUM(n))
#define PROTO_SUM2(n, adds) (0 - 3 * (uint64_t)(n) * (adds))
/* Sum of (k & 0xff) for k in 0..adds. */
static inline uint64_t proto_low_bytes(uint64_t adds)
{
	uint64_t sum = 0;
	for (uint64_t k = 0; k < adds; k++)
		sum += k & 0xff;
	return sum;
}
#define PROTO_SUM3(n, adds) ((uint64_t)(n) * ((adds) * ((1ull << 33) + 1) + proto_low_bytes(adds)))
#define PROTO_RACE_TOTAL(n, adds) ((uint64_t)(adds) * PROTO_CPUS_SUM(n))
#define PROTO_ZERO_AFTER(n, adds) (7 * (uint64_t)(n) * (adds))
#define PROTO_ZERO_SLOTS(n, adds) ((uint64_t)(adds) * PROTO_CPUS_SUM(n) + PROTO_ZERO_AFTER(n, adds))
/* A value no other CPU, round or counter adds in alloc_free. */
#define PROTO_TAG(cpu, round, h) \
	((((uint64_t)(cpu) + 1) << 40) | ((uint64_t)(round) << 8) | (uint64_t)(h))

#endif
