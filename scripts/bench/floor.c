// floor: the least any sampler can pay per thread-sample on this kernel.
// It opens /proc/PID/task/TID/{stat,schedstat} once for every thread of PID,
// then preads each at offset 0 into one buffer, ROUNDS times, parsing
// nothing, and prints the CPU microseconds per thread-sample it used.
//
//   floor PID ROUNDS
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_us(void) {
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: floor PID ROUNDS\n");
		return 2;
	}
	int pid = atoi(argv[1]), rounds = atoi(argv[2]);
	char path[256];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d) {
		perror(path);
		return 1;
	}
	int cap = 1024, n = 0;
	int *fds = malloc(sizeof(int) * cap * 2);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (n == cap) {
			cap *= 2;
			fds = realloc(fds, sizeof(int) * cap * 2);
		}
		snprintf(path, sizeof path, "/proc/%d/task/%s/stat", pid, e->d_name);
		fds[2 * n] = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", pid, e->d_name);
		fds[2 * n + 1] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[2 * n] >= 0 && fds[2 * n + 1] >= 0)
			n++;
	}
	closedir(d);
	char buf[4096];
	long bytes = 0;
	double c0 = cpu_us();
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 2 * n; i++)
			bytes += pread(fds[i], buf, sizeof buf, 0);
	double c1 = cpu_us();
	printf("threads %d rounds %d cpu_us %.0f us_per_thread_sample %.3f bytes %ld\n", n, rounds, c1 - c0,
	       (c1 - c0) / ((double)n * rounds), bytes);
	return 0;
}
