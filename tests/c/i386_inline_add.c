/*
 * i386 without PCPU_COUNTER_SIM: the header's inline fast path, as a kernel compiles it (the
 * cmpxchg8b loop on %fs: where pcpu_cx8 says CX8, else pcpu_counter_add). Linked into
 * i386_inline_test.c, whose threads the simulation binds to CPUs through %fs.
 */
#include "pcpu_counter.h"

void t_add(counter_u64_t c, int64_t v);
void t_add_protected(counter_u64_t c, int64_t v);
unsigned t_cx8(void);

void t_add(counter_u64_t c, int64_t v) { counter_u64_add(c, v); }
void t_add_protected(counter_u64_t c, int64_t v) { counter_u64_add_protected(c, v); }
unsigned t_cx8(void) { return pcpu_cx8; }
