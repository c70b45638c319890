// pingpong: the context-switch-heavy job for measuring what tracing the
// scheduler costs the traced: two threads pass a byte back and forth over
// two pipes for SECONDS, each waking the other every round trip. Prints its
// pid at start, waits DELAY seconds (for a tracer to attach), then prints
// at the end the round trips per second and the CPU time (user + system of
// both threads, getrusage) per round trip in ns: the second is what a
// tracer running in the threads' own switches and wake-ups adds, and moves
// less than the first with other load on the machine.
//
//   pingpong SECONDS [DELAY]
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static volatile int stop;

static void *echo(void *arg) {
	(void)arg;
	char c;
	while (read(ab[0], &c, 1) == 1) {
		if (write(ba[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	double secs = argc > 1 ? atof(argv[1]) : 5;
	if (pipe(ab) || pipe(ba)) {
		perror("pipe");
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, echo, NULL);
	printf("%d\n", getpid());
	fflush(stdout);
	if (argc > 2)
		usleep((useconds_t)(atof(argv[2]) * 1e6));
	char c = 1;
	unsigned long n = 0;
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double t0 = now(), t1 = t0;
	while (t1 - t0 < secs) {
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
		if (++n % 1024 == 0)
			t1 = now();
	}
	t1 = now();
	getrusage(RUSAGE_SELF, &r1);
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		     (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	printf("%.0f %.0f\n", n / (t1 - t0), cpu * 1e9 / n);
	return 0;
}
