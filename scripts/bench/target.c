// target: the subject the sampler benchmarks measure. N threads in all:
// ACTIVE of them run briefly and sleep (0.2 ms of work every 2 ms, like a
// launch thread or a pin-memory thread), the rest stay blocked in pause()
// (like an idle OpenMP pool or NCCL helpers). Prints its pid, then runs
// until killed.
//
//   target N [ACTIVE]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void *active(void *arg) {
	(void)arg;
	volatile unsigned long x = 0;
	for (;;) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			x++;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000L);
		usleep(2000);
	}
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 500;
	int a = argc > 2 ? atoi(argv[2]) : 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, i <= a ? active : idle, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	printf("%d\n", getpid());
	fflush(stdout);
	for (;;)
		pause();
}
