/* A per-CPU counter in plain C with glibc's rseq registration, independent of pcpu-counter:
 * the same aarch64 critical section as arch/aarch64/rseq.rs (arm rseq_cs; load the index;
 * ldr/add/str commit; abort handler behind brk #0x45e0 that retries), or on x86_64 the one of
 * arch/x86_64/rseq.rs (one non-locked add commits; ud1 + 0x53053053), on blocks of a page each
 * in a fresh lazily backed mapping, so that a block's first add faults inside the section.
 * Threads re-pin themselves to the next CPU every `every` adds.
 *
 * Usage: rseq_add THREADS ADDS EVERY INDEX_OFFSET (4: cpu_id, 24: mm_cid). Prints
 * `rseq_add: ... lost N` and exits 1 when an add was lost: testbeds/linux-vm/init runs it on
 * the kernel before tests/rseq.rs, so that a kernel that loses adds on its own is told apart
 * from a bug of the crate (Debian's 6.19.11 arm64 kernel does; see docs/linux.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <unistd.h>

#define BLOCKS 64
static char *blocks;
static long adds, every, index_offset;

static void pin(long cpu) {
    cpu_set_t set;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(&set);
    CPU_SET(cpu % n, &set);
    sched_setaffinity(0, sizeof set, &set);
}

#if defined(__aarch64__)
static void add(long v) {
    char *area = (char *)__builtin_thread_pointer() + __rseq_offset;
    uint64_t d, t;
    __asm__ volatile(
        "6: adrp %[d], 3f\n"
        "   add %[d], %[d], :lo12:3f\n"
        "   str %[d], [%[a], #8]\n"
        "2: ldr %w[d], [%[a], %[ioff]]\n"
        "   cmp %[d], %[n]\n"
        "   b.hs 6b\n" /* an unregistered area: never here (glibc registered it) */
        "   lsl %[d], %[d], #12\n"
        "   add %[d], %[d], %[base]\n"
        "   ldr %[t], [%[d]]\n"
        "   add %[t], %[t], %[v]\n"
        "   str %[t], [%[d]]\n"
        "4:\n"
        "   .pushsection __rseq_cs, \"aw\"\n"
        "   .balign 32\n"
        "3: .long 0, 0\n"
        "   .quad 2b, 4b - 2b, 5f\n"
        "   .popsection\n"
        "   .pushsection __rseq_failure, \"ax\"\n"
        "   .inst 0xd428bc00\n"
        "5: b 6b\n"
        "   .popsection\n"
        : [d] "=&r"(d), [t] "=&r"(t)
        : [a] "r"(area), [base] "r"(blocks), [v] "r"(v), [ioff] "r"(index_offset),
          [n] "r"((uint64_t)BLOCKS)
        : "memory", "cc");
}
#elif defined(__x86_64__)
/* The crate's x86_64 section (arch/x86_64/rseq.rs): the commit is one non-locked add to
 * memory; the abort handler sits behind ud1 + the signature 0x53053053. */
static void add(long v) {
    char *area;
    __asm__("mov %%fs:0, %0" : "=r"(area));
    area += __rseq_offset;
    uint64_t d;
    __asm__ volatile(
        "6: leaq 3f(%%rip), %[d]\n"
        "   movq %[d], 8(%[a])\n"
        "2: movl (%[a],%[ioff]), %k[d]\n"
        "   cmpq %[n], %[d]\n"
        "   jae 6b\n" /* an unregistered area: never here (glibc registered it) */
        "   shlq $12, %[d]\n"
        "   addq %[base], %[d]\n"
        "   addq %[v], (%[d])\n"
        "4:\n"
        "   .pushsection __rseq_cs, \"aw\"\n"
        "   .balign 32\n"
        "3: .long 0, 0\n"
        "   .quad 2b, 4b - 2b, 5f\n"
        "   .popsection\n"
        "   .pushsection __rseq_failure, \"ax\"\n"
        "   .byte 0x0f, 0xb9, 0x3d\n"
        "   .long 0x53053053\n"
        "5: jmp 6b\n"
        "   .popsection\n"
        : [d] "=&r"(d)
        : [a] "r"(area), [base] "r"(blocks), [v] "r"(v), [ioff] "r"(index_offset),
          [n] "r"((uint64_t)BLOCKS)
        : "memory", "cc");
}
#else
#error "rseq_add: aarch64 or x86_64"
#endif

static void *run(void *arg) {
    long i = (long)arg;
    for (long k = 0; k < adds; k++) {
        if (k % every == 0)
            pin(i + k / every);
        add(1);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: rseq_add THREADS ADDS EVERY INDEX_OFFSET\n");
        return 2;
    }
    long threads = atol(argv[1]);
    adds = atol(argv[2]);
    every = atol(argv[3]);
    index_offset = atol(argv[4]);
    if (threads < 1 || threads > 64 || adds < 1 || every < 1 || (index_offset != 4 && index_offset != 24)) {
        fprintf(stderr, "rseq_add: THREADS 1..64, ADDS and EVERY >= 1, INDEX_OFFSET 4 or 24\n");
        return 2;
    }
    if (__rseq_size == 0) {
        fprintf(stderr, "rseq_add: glibc did not register rseq\n");
        return 2;
    }
    blocks = mmap(0, BLOCKS * 4096, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (blocks == MAP_FAILED) {
        perror("rseq_add: mmap");
        return 2;
    }
    pthread_t t[64];
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], 0, run, (void *)i);
    for (long i = 0; i < threads; i++)
        pthread_join(t[i], 0);
    uint64_t sum = 0;
    for (int b = 0; b < BLOCKS; b++)
        sum += *(uint64_t *)(blocks + 4096 * b);
    long lost = threads * adds - (long)sum;
    printf("rseq_add: %s index, %ld threads x %ld adds re-pinned every %ld: counted %lu, lost %ld\n",
           index_offset == 4 ? "cpu_id" : "mm_cid", threads, adds, every, (unsigned long)sum, lost);
    return lost != 0;
}
