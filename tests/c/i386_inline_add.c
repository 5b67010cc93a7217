/*
 * i386 without PCPU_COUNTER_SIM: the header's inline fast path, as a kernel compiles it (the
 * cmpxchg8b loop on %fs: where pcpu_cx8 says CX8, else pcpu_counter_add). Linked into
 * i386_inline_test.c, whose threads the simulation binds to CPUs through %fs.
 */
#include "pcpu_counter.h"

void t_add(counter_u64_t c, int64_t v);
void t_add_protected(counter_u64_t c, int64_t v);
void t_inc(counter_u64_t c);
void t_dec_protected(counter_u64_t c);
unsigned t_cx8(void);

void t_add(counter_u64_t c, int64_t v) { counter_u64_add(c, v); }
void t_add_protected(counter_u64_t c, int64_t v) { counter_u64_add_protected(c, v); }
/* Constant increments: immediates in the loop (compiled with a frame pointer too). */
void t_inc(counter_u64_t c) { counter_u64_add(c, 1); }
void t_dec_protected(counter_u64_t c) { counter_u64_add_protected(c, -1); }
unsigned t_cx8(void) { return pcpu_cx8; }
