/*
 * The C-only test kernel (testbeds/ckernel/): what its portable part (main.c) needs from each
 * arch's boot glue (boot/<arch>/ckernel.c). The glue's entry points call kernel_bsp_main on the
 * boot CPU and kernel_ap_main on every other CPU, and kernel_timer_tick from the timer
 * interrupt. No libc.
 */
#ifndef CKERNEL_KERNEL_H
#define CKERNEL_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define MAX_CPUS 4

/* One CPU's per-CPU block: the per-CPU register points here (pcpu_zone_cpu_base(cpu) names
 * it). Word 0 is the CPU's id as its arch names it: the CPU index on x86_64, aarch64 and i386
 * (main.c writes it), the hart id on riscv64 (the glue writes it at reset, before any counter
 * exists: arch_block_id_from_reset). Word 1 is the kernel's CPU index (main.c writes it). The
 * counter zone is hosted in the rest (offset 64), as in a kernel that owns its pcpu area. */
#define BLOCK 4096
#define COUNTER_AREA 64
#define SLOTS ((BLOCK - COUNTER_AREA) / 8)

struct block {
	uint64_t id;
	uint64_t cpu;
	uint64_t reserved[COUNTER_AREA / 8 - 2];
	uint64_t slots[SLOTS];
} __attribute__((aligned(BLOCK)));

/* The counters CPU 0 holds at once in the growth check (main.c), far past the first blocks:
 * 100,000 on x86_64 and riscv64; a tenth on aarch64 and i386, whose boots add their own
 * paths to it (the chunks' wrapping offsets through TPIDR_EL1 and %fs) without doubling the
 * QEMU time of `cargo xtask qemu c` again. */
#if defined(__x86_64__) || defined(__riscv)
#define GROW_LIVE 100000u
#else
#define GROW_LIVE 10000u
#endif

/* The bytes a chunk takes in the arena at most: its CPUs' parts, then its metadata (header,
 * a baseline word and a bitmap bit per slot: under two blocks), rounded up to the alignment
 * (at most BLOCK: the power of two at or above the stride). main.c checks
 * pcpu_zone_chunk_size() and pcpu_zone_chunk_align() against it at boot. */
#define CHUNK_MAX ((MAX_CPUS + 2) * BLOCK)
/* The chunks the arena holds: GROW_LIVE counters of SLOTS_PER_CHUNK each, the churn's and
 * everything else's (a chunk is only taken when every other is full), and a margin. */
#define SLOTS_PER_CHUNK (BLOCK / 8)
#define ARENA_CHUNKS (GROW_LIVE / SLOTS_PER_CHUNK + 24)

/* The kernel's own memory, in .bss: the arena its chunk allocator hands out (the zone grows
 * into it: pcpu_zone_grow), then the per-CPU blocks. The blocks come last so that x86_64's
 * per-CPU statics' copies (a block's address plus the section's) lie past the image. */
struct kernel_memory {
	uint8_t chunk_arena[ARENA_CHUNKS * CHUNK_MAX] __attribute__((aligned(BLOCK)));
	struct block blocks[MAX_CPUS];
};

extern struct kernel_memory kernel_memory;
#define kernel_blocks (kernel_memory.blocks)

/* The glue. */
extern const char arch_banner[];   /* names the add the header inlines (checked by xtask) */
void arch_putc(char c);
__attribute__((noreturn)) void arch_exit(int pass);
unsigned arch_cpu_count(void);
unsigned arch_start_secondaries(unsigned wanted); /* CPUs 1..wanted-1; returns CPUs running */
extern const int arch_block_id_from_reset; /* 1: the glue writes word 0, main.c must not */
int arch_set_cpu_base(unsigned block); /* register = pcpu_zone_cpu_base(block) (riscv64: set from reset); 0 or a PCPU_E* code */
unsigned arch_cpu_self(void);      /* the CPU index, read through the register */
uintptr_t arch_irq_save(void);     /* interrupts off; returns the state from before */
void arch_irq_restore(uintptr_t state);
void arch_timer_start(void);       /* this CPU's periodic timer on, interrupts on */
void arch_timer_stop(void);        /* interrupts off, timer off */
void arch_relax(void);
uint8_t *arch_stack_bottom(unsigned cpu); /* the lowest byte of the CPU's stack */
/* The end of the memory the kernel may use as it is mapped at boot: QEMU's default 128 MiB of
 * RAM (x86_64: within the boot code's 4 GiB identity map; the others run unpaged). */
extern const uintptr_t arch_memory_end;

/* Each CPU's stack, in bytes (xtask/src/ckernel.rs: 4096, as xv6's kernel stacks). */
#ifndef CKERNEL_CPU_STACK
#error "CKERNEL_CPU_STACK: build with cargo xtask qemu c-<arch>"
#endif

/* The portable part. */
__attribute__((noreturn)) void kernel_bsp_main(void);
__attribute__((noreturn)) void kernel_ap_main(unsigned cpu);
void kernel_timer_tick(void);
void kernel_print(const char *s);
__attribute__((noreturn)) void kernel_fail(const char *what, uint64_t a, uint64_t b);

#endif
