// Package kernlog says what kernel log lines mean: it recognises the ones
// that explain a frozen or dying job (OOM kills, global and memory-cgroup,
// current and older formats; hung-task reports; GPU Xid and other NVRM
// lines; segfaults and traps) and reads the framing of each source (a
// /dev/kmsg record, a dmesg, journalctl, `dmesg -T` or syslog line).
//
// Everything here is pure: ParseRecord, ParseLine and ParseMessage take text
// and return values; nothing reads a file or prints. The reader is
// internal/kernlog; a timeline keeps the recognised lines in the kernel's own
// words, and FromTimeline recognises them again when it is judged, so a
// recording judged later reads exactly what the kernel wrote. Kernel log
// lines are attacker-controlled (a process chooses its own name): Sanitize
// them before showing them.
package kernlog
