// Package pysample samples the Python stacks of a job's threads: it reads
// each CPython interpreter's memory (process_vm_readv and /proc, with the
// offsets CPython publishes for debuggers), the way `py-spy top` does, and
// never stops the target. What it returns is internal/profile's model
// (profile.PySamples: per thread, the stacks seen, running and holding the
// GIL); internal/pyspy is the other Python reader, which runs py-spy for one
// snapshot.
package pysample
