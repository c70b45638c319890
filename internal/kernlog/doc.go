// Package kernlog is gpufeed's one kernel-log package: it reads the kernel
// log and says what its lines mean.
//
// Recognising is pure text in, values out: ParseRecord, ParseLine and
// ParseMessage take text and return values, and recognise the lines that
// explain a frozen or dying job (OOM kills, global and memory-cgroup,
// current and older formats; hung-task reports; GPU Xid and other NVRM
// lines; segfaults and traps) in the framing of each source (a /dev/kmsg
// record, a dmesg, journalctl, `dmesg -T` or syslog line).
//
// Reading (Reader, Shared) is bounded, and never blocks: /dev/kmsg is read
// non-blocking until the kernel says there is nothing more buffered
// (EAGAIN), with caps on bytes and records; when /dev/kmsg cannot be read
// the reader falls back to `dmesg --raw` and then to `journalctl -k`, with
// the same caps. Every path and the command runner are injectable, so tests
// run the real read path over fixture files.
//
// ToTimeline keeps the recognised lines in the kernel's own words as
// timeline events, and FromTimeline recognises them again when it is
// judged, so a recording judged later reads exactly what the kernel wrote.
// The package imports only the standard library and vocabulary packages
// (timeline, safetext), so every layer may use it: the rules and the
// renderers read the kernel's words, the sources read the log. Kernel log
// lines are attacker-controlled (a process chooses its own name): Sanitize
// them before showing them.
package kernlog
