/*
 * tests/c/freebsd_style.c: counter(9) used the way FreeBSD kernel code uses it, run by the
 * host driver (freebsd_host.c, on the simulation) and by the C-only test kernels.
 *
 *   fbsd_boot()                 before the zone exists: early adds (on CPU 0)
 *   fbsd_attach()               after pcpu_zone_init: allocations; 0 or a failed step's number
 *   fbsd_work(lane, rounds)     on any CPU, with its per-CPU register set; lanes 0..nlanes-1
 *   fbsd_verify(nlanes, rounds) after every fbsd_work returned: 0, or the failed check's number
 */
#ifndef FREEBSD_STYLE_H
#define FREEBSD_STYLE_H

void fbsd_boot(void);
int fbsd_attach(void);
void fbsd_work(unsigned lane, unsigned rounds);
int fbsd_verify(unsigned nlanes, unsigned rounds);

#endif
