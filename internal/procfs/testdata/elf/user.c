/* calls cuInit without defining it: an importer, not a driver */
extern int cuInit(unsigned int flags);
int cuInitX(void) { return cuInit(0); }
