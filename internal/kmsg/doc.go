// Package kmsg reads the kernel log: bounded, and never blocking. /dev/kmsg
// is read non-blocking until the kernel says there is nothing more buffered
// (EAGAIN), with caps on bytes and records; when /dev/kmsg cannot be read
// the reader falls back to `dmesg --raw` and then to `journalctl -k`, with
// the same caps. Every path and the command runner are injectable, so tests
// run the real read path over fixture files.
//
// What the lines mean (OOM kills, hung tasks, GPU Xid and NVRM lines,
// segfaults, traps) is internal/kernlog's: it is pure text in, values out,
// so the rules and the renderers read the kernel's words without importing
// this reader. ToTimeline keeps the recognised lines, in the kernel's own
// words, as timeline events.
package kmsg
