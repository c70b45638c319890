// Package kmsg reads the kernel log and recognises the lines that explain a
// frozen or dying job: OOM kills (global and memory-cgroup, current and older
// formats), hung-task reports, GPU Xid and other NVRM lines, segfaults and
// traps.
//
// Reading is bounded and never blocks: /dev/kmsg is read non-blocking until
// the kernel says there is nothing more buffered (EAGAIN), with caps on bytes
// and records; when /dev/kmsg cannot be read the reader falls back to
// `dmesg --raw` and then to `journalctl -k`, with the same caps. Every path
// and the command runner are injectable, so tests run the real read path over
// fixture files.
//
// Parsing is pure: ParseRecord, ParseLine and ParseMessage take text and
// return values; nothing here prints. Kernel log lines are attacker-controlled
// (a process chooses its own name): Sanitize them before showing them.
package kmsg
