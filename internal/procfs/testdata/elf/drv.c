/* exports the CUDA driver's entry point, as a driver library does */
int cuInit(unsigned int flags) { return flags ? 1 : 0; }
static int cuInitHidden(void) { return 0; }
int cuDeviceGetCount(int *n) { *n = 1 + cuInitHidden(); return 0; }
