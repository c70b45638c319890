#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
	volatile int zero = 0;
	if (argc < 2) return 2;
	if (!strcmp(argv[1], "segv")) { volatile int *p = 0; return *p; }
	if (!strcmp(argv[1], "gpf")) { volatile long *p = (long *)0x8000000000000000UL; return (int)*p; }
	if (!strcmp(argv[1], "div")) { return 1 / zero; }
	if (!strcmp(argv[1], "ud2")) { __asm__ volatile("ud2"); }
	if (!strcmp(argv[1], "int3")) { __asm__ volatile("int3"); }
	return 0;
}
