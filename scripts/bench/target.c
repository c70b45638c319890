// target: a process with N idle threads (blocked in pause), the subject the
// sampler benchmarks measure. Prints its pid, then waits to be killed.
//
//   target N
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *idle(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 500;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, idle, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	printf("%d\n", getpid());
	fflush(stdout);
	for (;;)
		pause();
}
