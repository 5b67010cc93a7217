/*
 * Runs freebsd_style.c on the host simulation: the early adds before the machine exists,
 * then 8 threads (lanes) migrating over 4 simulated CPUs. Exit status 0 when every sum was
 * exact.
 */
#define PCPU_COUNTER_SIM
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "pcpu_counter.h"
#include "freebsd_style.h"

#define NCPUS 4
#define NLANES 8
#define CHUNKS 20
#define CHUNK_ROUNDS 500

static void *lane_main(void *arg)
{
	unsigned lane = (unsigned)(uintptr_t)arg;
	for (unsigned chunk = 0; chunk < CHUNKS; chunk++) {
		if (pcpu_sim_bind((lane + chunk) % NCPUS) != 0)
			return (void *)1;
		fbsd_work(lane, CHUNK_ROUNDS);
		pcpu_sim_unbind();
	}
	return NULL;
}

int main(void)
{
	fbsd_boot();
	int rc = pcpu_sim_machine_new(NCPUS, 64);
	if (rc != 0) {
		printf("FAIL freebsd_style: pcpu_sim_machine_new: %s\n", pcpu_strerror(rc));
		return 1;
	}
	if ((rc = fbsd_attach()) != 0) {
		printf("FAIL freebsd_style: fbsd_attach step %d\n", rc);
		return 1;
	}
	pthread_t threads[NLANES];
	for (uintptr_t lane = 0; lane < NLANES; lane++)
		pthread_create(&threads[lane], NULL, lane_main, (void *)lane);
	for (int lane = 0; lane < NLANES; lane++) {
		void *failed;
		pthread_join(threads[lane], &failed);
		if (failed) {
			printf("FAIL freebsd_style: lane %d could not bind\n", lane);
			return 1;
		}
	}
	pcpu_sim_bind(0); /* counter_ratecheck adds on the current CPU */
	rc = fbsd_verify(NLANES, CHUNKS * CHUNK_ROUNDS);
	pcpu_sim_unbind();
	printf("%s freebsd_style on %d simulated CPUs, %d lanes: fbsd_verify = %d\n",
	       rc == 0 ? "PASS" : "FAIL", NCPUS, NLANES, rc);
	return rc != 0;
}
