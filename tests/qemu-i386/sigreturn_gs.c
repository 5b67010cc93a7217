/* qemu-i386 (QEMU 7.2 linux-user) restores the wrong %gs base on sigreturn once a later
 * thread exists: set_thread_area / CLONE_SETTLS write one GDT shared by all threads, and
 * sigreturn reloads %gs (and %fs) from that shared descriptor, which holds the TLS base of
 * the thread created last. Natively each thread's TLS descriptors are its own.
 *
 * Thread W reads %gs:0 (glibc's TCB self pointer, i.e. its TLS base) before and after one
 * signal; thread X is created after W and only waits. Exit 0 when they match, 1 when not.
 *
 *   i686-linux-gnu-gcc -O2 -static -pthread sigreturn_gs.c -o sigreturn_gs
 *   ./sigreturn_gs                                  # native: ok
 *   qemu-i386 -L /usr/i686-linux-gnu ./sigreturn_gs # QEMU 7.2: %gs base changed
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static volatile int x_started;

static void on_signal(int sig) { (void)sig; handled = 1; }

static void *gs_base(void) {
    void *p;
    __asm__ volatile("movl %%gs:0, %0" : "=r"(p));
    return p;
}

static void *thread_x(void *arg) {
    (void)arg;
    x_started = 1;
    for (;;) pause();
    return NULL;
}

static void *thread_w(void *arg) {
    (void)arg;
    void *before = gs_base();
    pthread_t x;
    pthread_create(&x, NULL, thread_x, NULL); /* a thread created after W */
    while (!x_started) usleep(1000);
    pthread_kill(pthread_self(), SIGUSR1);
    while (!handled) ; /* taken here at the latest */
    void *after = gs_base();
    unsigned short sel;
    __asm__ volatile("movw %%gs, %0" : "=r"(sel));
    printf("%%gs selector 0x%x, TLS base before the signal %p, after %p: %s\n", sel, before,
           after, before == after ? "ok" : "CHANGED (another thread's TLS)");
    fflush(stdout);
    _exit(before != after); /* now, before anything else uses the wrong TLS */
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w;
    pthread_create(&w, NULL, thread_w, NULL);
    pthread_join(w, NULL);
    return 2; /* not reached */
}
