package kernlog

import (
	"strconv"
	"strings"
	"time"
)

// Kind names what a kernel log line reports.
type Kind string

const (
	// OOMKill is "Killed process PID (comm) total-vm:...": the kernel killed
	// a process to free memory (global or memory-cgroup OOM, any format).
	OOMKill Kind = "oom-kill"
	// OOMSelected is the older "Out of memory: Kill process PID (comm) score S
	// or sacrifice child": the victim chosen; the OOMKill line that follows
	// names the process actually killed (it may be a child).
	OOMSelected Kind = "oom-selected"
	// OOMSummary is "oom-kill:constraint=...,task=comm,pid=PID,uid=UID"
	// (Linux 4.19 and later): which cgroup ran out and who was killed.
	OOMSummary Kind = "oom-summary"
	// OOMInvoked is "comm invoked oom-killer: gfp_mask=...": the task whose
	// allocation triggered the OOM killer (often not the victim).
	OOMInvoked Kind = "oom-invoked"
	// OOMMemcgUsage is "memory: usage NkB, limit NkB, failcnt N" printed with
	// a memory-cgroup OOM: the cgroup's usage and limit at that moment.
	OOMMemcgUsage Kind = "oom-memcg-usage"
	// OOMMemcgTask is the pre-4.19 "Task in /a killed as a result of limit of
	// /b": the victim's cgroup and the cgroup whose limit was hit.
	OOMMemcgTask Kind = "oom-memcg-task"
	// OOMReaped is "oom_reaper: reaped process PID (comm), now anon-rss:...":
	// the victim's memory was reclaimed.
	OOMReaped Kind = "oom-reaped"
	// HungTask is "INFO: task comm:PID blocked for more than N seconds.":
	// the hung-task detector saw a task in uninterruptible sleep (D) that long.
	HungTask Kind = "hung-task"
	// GPUXid is "NVRM: Xid (PCI:dddd:bb:dd): N, ...": an NVIDIA GPU error.
	GPUXid Kind = "gpu-xid"
	// NVRM is any other line of the NVIDIA kernel driver ("NVRM: ...").
	NVRM Kind = "nvrm"
	// Segfault is "comm[PID]: segfault at ADDR ip IP sp SP error N in obj[...]".
	Segfault Kind = "segfault"
	// Trap is "traps: comm[PID] general protection fault ..." or "... trap
	// invalid opcode / int3 / divide error ...": a fatal CPU exception.
	Trap Kind = "trap"
)

// Kinds lists every kind in the order documentation presents them.
var Kinds = []Kind{OOMKill, OOMSelected, OOMSummary, OOMInvoked, OOMMemcgUsage, OOMMemcgTask, OOMReaped,
	HungTask, GPUXid, NVRM, Segfault, Trap}

// Quantity is one memory figure of a line, as printed ("anon-rss:65280kB").
type Quantity struct {
	Name  string // "total-vm", "anon-rss", "file-rss", "shmem-rss", "pgtables", "usage", "limit"
	Value uint64 // as printed
	Unit  string // "kB" (the kernel's kB are KiB: 1024 bytes)
}

// Bytes is the quantity in bytes.
func (q Quantity) Bytes() uint64 {
	switch q.Unit {
	case "kB", "KB", "KiB":
		return q.Value << 10
	case "MB", "MiB":
		return q.Value << 20
	}
	return q.Value
}

// Event is one recognised kernel log line.
type Event struct {
	Kind Kind
	// Time: Mono (with HasMono) and Wall as the entry gave them.
	Mono    time.Duration
	HasMono bool
	Wall    time.Time

	// PID and Comm name the process the line is about; 0 and "" when the
	// line names none (an Xid with pid='<unknown>').
	PID  int
	Comm string
	// UID of the killed process, when printed.
	UID *int

	// Memory holds the line's figures, in printed order.
	Memory []Quantity

	// OOM fields.
	Score       *int   // OOMSelected: the badness score
	OOMScoreAdj *int   // oom_score_adj, when printed
	Constraint  string // OOMSummary: CONSTRAINT_NONE, CONSTRAINT_MEMCG, CONSTRAINT_CPUSET ...
	Global      bool   // OOMSummary: global_oom
	MemCG       string // the cgroup whose limit was hit (oom_memcg=, "limit of")
	TaskMemCG   string // the victim's cgroup (task_memcg=, "Task in")

	// HungTask: how long the detector waited.
	Blocked time.Duration

	// GPU lines.
	PCI string // "0000:3b:00"
	Xid int

	// Segfault and Trap.
	Trap    string // "segfault", "general protection fault", "invalid opcode", "int3", "divide error"
	Addr    string // faulting address (segfault)
	IP, SP  string
	Error   string // the error code as printed
	Object  string // the mapped object the IP was in ("libc.so.6"), when printed
	Detail  string // the rest of the line: Xid text, NVRM text
	FellOff bool   // the line reports a GPU fallen off the bus

	// Raw is the whole message. It is attacker-controlled: Sanitize it
	// before printing.
	Raw string
}

// MemoryBytes returns the named figure in bytes and whether the line had it.
func (e Event) MemoryBytes(name string) (uint64, bool) {
	for _, q := range e.Memory {
		if q.Name == name {
			return q.Bytes(), true
		}
	}
	return 0, false
}

// ResidentBytes is the victim's resident memory at the kill: anon-rss +
// file-rss + shmem-rss, as the kill line printed them.
func (e Event) ResidentBytes() (uint64, bool) {
	var sum uint64
	found := false
	for _, n := range []string{"anon-rss", "file-rss", "shmem-rss"} {
		if v, ok := e.MemoryBytes(n); ok {
			sum += v
			found = true
		}
	}
	return sum, found
}

// maxLineBytes bounds the message a parser looks at: kernel lines are at
// most 1 KiB (LOG_LINE_MAX); anything longer was not written by the kernel.
const maxLineBytes = 4 << 10

// ParseMessage recognises one kernel log message. It returns false for a
// line of no kind this package knows.
func ParseMessage(msg string) (Event, bool) {
	if len(msg) > maxLineBytes {
		return Event{}, false
	}
	for _, p := range parsers {
		if ev, ok := p(msg); ok {
			ev.Raw = msg
			return ev, true
		}
	}
	return Event{}, false
}

// ParseEntry recognises an entry's message and carries its time over.
func ParseEntry(e Entry) (Event, bool) {
	ev, ok := ParseMessage(e.Message)
	if !ok {
		return Event{}, false
	}
	ev.Mono, ev.HasMono, ev.Wall = e.Mono, e.HasMono, e.Wall
	return ev, true
}

// Events recognises every entry that has a kind, oldest first.
func Events(entries []Entry) []Event {
	var out []Event
	for _, e := range entries {
		if ev, ok := ParseEntry(e); ok {
			out = append(out, ev)
		}
	}
	return out
}

var parsers = []func(string) (Event, bool){
	parseOOMKill, parseOOMSelected, parseOOMSummary, parseOOMInvoked, parseMemcgUsage,
	parseMemcgTask, parseOOMReaped, parseHungTask, parseXid, parseNVRM, parseSegfault, parseTrap,
}

// atoi parses a non-negative decimal int of at most 10 digits.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// signedAtoi parses a decimal int that may be negative (oom_score_adj).
func signedAtoi(s string) (int, bool) {
	if s == "" || len(s) > 11 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// memoryFigures reads "name:NNNkB" tokens out of a comma- or space-separated
// tail, and the UID and oom_score_adj where present. Unknown tokens are
// skipped; a figure whose number does not parse is left out.
func memoryFigures(tail string, ev *Event) {
	for _, tok := range strings.FieldsFunc(tail, func(r rune) bool { return r == ',' || r == ' ' }) {
		name, val, ok := strings.Cut(tok, ":")
		if !ok {
			continue
		}
		switch name {
		case "UID":
			if n, ok := atoi(val); ok {
				ev.UID = &n
			}
			continue
		case "oom_score_adj":
			if n, ok := signedAtoi(val); ok {
				ev.OOMScoreAdj = &n
			}
			continue
		}
		num := strings.TrimRight(val, "kBMGi")
		unit := val[len(num):]
		if unit == "" || num == "" {
			continue
		}
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil || v > 1<<50 {
			continue
		}
		ev.Memory = append(ev.Memory, Quantity{Name: name, Value: v, Unit: unit})
	}
	// Pre-4.x "UID 0" form.
	if ev.UID == nil {
		if i := strings.Index(tail, "UID "); i >= 0 {
			f := strings.FieldsFunc(tail[i+4:], func(r rune) bool { return r == ',' || r == ' ' })
			if len(f) > 0 {
				if n, ok := atoi(f[0]); ok {
					ev.UID = &n
				}
			}
		}
	}
}

// maxCommBytes bounds a process name in a kernel line: TASK_COMM_LEN is 16
// bytes; escaping can grow it four times (\xNN).
const maxCommBytes = 64

// cutComm reads "(comm)" at the start of s, where comm may itself hold
// parentheses ("(resolved)"): the name ends at the first ')' followed by
// one of the given continuations (or by the end of the line).
func cutComm(s string, next ...string) (comm, rest string, ok bool) {
	if !strings.HasPrefix(s, "(") {
		return "", s, false
	}
	limit := min(len(s), maxCommBytes+2)
	for i := 1; i < limit; i++ {
		if s[i] != ')' {
			continue
		}
		after := s[i+1:]
		if after == "" {
			return s[1:i], "", true
		}
		for _, n := range next {
			if strings.HasPrefix(after, n) {
				return s[1:i], after, true
			}
		}
	}
	return "", s, false
}

// cutPIDComm reads "PID (comm)" at the start of s, the name ending as
// cutComm says, and returns what follows it.
func cutPIDComm(s string, next ...string) (pid int, comm, rest string, ok bool) {
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 {
		return 0, "", "", false
	}
	if pid, ok = atoi(s[:sp]); !ok {
		return 0, "", "", false
	}
	if comm, rest, ok = cutComm(s[sp+1:], next...); !ok {
		return 0, "", "", false
	}
	return pid, comm, rest, true
}

// parseOOMKill reads every known form of the kill line:
//
//	Out of memory: Killed process 48213 (python3) total-vm:..kB, anon-rss:..kB, file-rss:..kB, shmem-rss:..kB, UID:0 pgtables:..kB oom_score_adj:0
//	Memory cgroup out of memory: Killed process 11571 (python3) total-vm:...
//	Out of memory (oom_kill_allocating_task): Killed process ...
//	Killed process 27438 (R) total-vm:38349780kB, anon-rss:1041924kB, file-rss:4kB, shmem-rss:0kB   (4.x)
//	Killed process 42452 (memcg_test_1), UID 0, total-vm:7296kB, anon-rss:96kB, ...               (3.10)
//	Killed process 28364, UID 0, (sh) total-vm:106064kB, anon-rss:180kB, file-rss:4kB              (2.6.32)
func parseOOMKill(msg string) (Event, bool) {
	i := strings.Index(msg, "Killed process ")
	if i < 0 {
		return Event{}, false
	}
	if prefix := msg[:i]; prefix != "" && !strings.HasSuffix(prefix, "out of memory: ") &&
		!strings.HasSuffix(prefix, "Out of memory: ") && !strings.HasSuffix(prefix, "): ") {
		return Event{}, false
	}
	rest := msg[i+len("Killed process "):]
	ev := Event{Kind: OOMKill}
	if strings.Contains(msg[:i], "cgroup") {
		ev.Constraint = "CONSTRAINT_MEMCG"
	}
	end := strings.IndexAny(rest, " ,")
	if end <= 0 {
		return Event{}, false
	}
	pid, ok := atoi(rest[:end])
	if !ok {
		return Event{}, false
	}
	ev.PID = pid
	rest = rest[end:]
	if strings.HasPrefix(rest, ", UID ") {
		// 2.6.32: "Killed process 28364, UID 0, (sh) total-vm:..."
		after := rest[len(", UID "):]
		c := strings.IndexByte(after, ',')
		if c <= 0 {
			return Event{}, false
		}
		if n, ok := atoi(after[:c]); ok {
			ev.UID = &n
		}
		rest = strings.TrimPrefix(after[c:], ", ")
	} else {
		rest = strings.TrimPrefix(rest, " ")
	}
	comm, tail, ok := cutComm(rest, " ", ",")
	if !ok {
		return Event{}, false
	}
	ev.Comm = comm
	memoryFigures(tail, &ev)
	return ev, true
}

// parseOOMSelected reads "Out of memory: Kill process 16929 (beam.smp) score
// 580 or sacrifice child" and its memory-cgroup twin.
func parseOOMSelected(msg string) (Event, bool) {
	i := strings.Index(msg, "Kill process ")
	if i < 0 || !(strings.HasSuffix(msg[:i], "out of memory: ") || strings.HasSuffix(msg[:i], "Out of memory: ")) {
		return Event{}, false
	}
	pid, comm, tail, ok := cutPIDComm(msg[i+len("Kill process "):], " score ")
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: OOMSelected, PID: pid, Comm: comm}
	if strings.Contains(msg[:i], "cgroup") {
		ev.Constraint = "CONSTRAINT_MEMCG"
	}
	f := strings.Fields(tail)
	if len(f) >= 2 {
		if n, ok := signedAtoi(f[1]); ok {
			ev.Score = &n
		}
	}
	return ev, true
}

// parseOOMSummary reads "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),
// cpuset=/,mems_allowed=0,oom_memcg=/a,task_memcg=/a,task=python3,pid=11571,uid=0"
// (and the global form with "global_oom" in place of oom_memcg). The task
// name may hold commas, so the tail is read from the right.
func parseOOMSummary(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "oom-kill:")
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: OOMSummary}
	rest, uid, ok := cutLast(rest, ",uid=")
	if !ok {
		return Event{}, false
	}
	if n, ok := atoi(uid); ok {
		ev.UID = &n
	}
	rest, pid, ok := cutLast(rest, ",pid=")
	if !ok {
		return Event{}, false
	}
	if ev.PID, ok = atoi(pid); !ok {
		return Event{}, false
	}
	if rest, ev.Comm, ok = cutLast(rest, ",task="); !ok {
		return Event{}, false
	}
	if m := strings.Index(rest, ",task_memcg="); m >= 0 {
		ev.TaskMemCG = rest[m+len(",task_memcg="):]
		rest = rest[:m]
	}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "constraint":
			ev.Constraint = v
		case "oom_memcg":
			ev.MemCG = v
		case "global_oom":
			ev.Global = true
		}
	}
	// oom_memcg may itself hold commas: take everything after its key.
	if m := strings.Index(rest, ",oom_memcg="); m >= 0 {
		ev.MemCG = rest[m+len(",oom_memcg="):]
	}
	return ev, true
}

// cutLast splits s around the last occurrence of sep (",pid="): what comes
// before it and what comes after.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// parseOOMInvoked reads "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL),
// order=0, oom_score_adj=0".
func parseOOMInvoked(msg string) (Event, bool) {
	i := strings.Index(msg, " invoked oom-killer: ")
	if i <= 0 || i > maxCommBytes {
		return Event{}, false
	}
	ev := Event{Kind: OOMInvoked, Comm: msg[:i]}
	tail := msg[i+len(" invoked oom-killer: "):]
	if j := strings.Index(tail, "oom_score_adj="); j >= 0 {
		f := strings.FieldsFunc(tail[j+len("oom_score_adj="):], func(r rune) bool { return r == ',' || r == ' ' })
		if len(f) > 0 {
			if n, ok := signedAtoi(f[0]); ok {
				ev.OOMScoreAdj = &n
			}
		}
	}
	return ev, true
}

// parseMemcgUsage reads "memory: usage 65536kB, limit 65536kB, failcnt 59".
func parseMemcgUsage(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "memory: usage ")
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: OOMMemcgUsage}
	parts := strings.Split("usage "+rest, ", ")
	for _, p := range parts {
		name, val, ok := strings.Cut(p, " ")
		if !ok || (name != "usage" && name != "limit") {
			continue
		}
		num := strings.TrimSuffix(val, "kB")
		if num == val {
			continue
		}
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil || v > 1<<50 {
			continue
		}
		ev.Memory = append(ev.Memory, Quantity{Name: name, Value: v, Unit: "kB"})
	}
	if len(ev.Memory) == 0 {
		return Event{}, false
	}
	return ev, true
}

// parseMemcgTask reads the pre-4.19 "Task in /a killed as a result of limit of /b".
func parseMemcgTask(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "Task in ")
	if !ok {
		return Event{}, false
	}
	task, limit, ok := strings.Cut(rest, " killed as a result of limit of ")
	if !ok {
		return Event{}, false
	}
	return Event{Kind: OOMMemcgTask, TaskMemCG: task, MemCG: limit}, true
}

// parseOOMReaped reads "oom_reaper: reaped process 1440763 (perl), now
// anon-rss:0kB, file-rss:0kB, shmem-rss:0kB".
func parseOOMReaped(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "oom_reaper: reaped process ")
	if !ok {
		return Event{}, false
	}
	pid, comm, tail, ok := cutPIDComm(rest, ", now ", ",")
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: OOMReaped, PID: pid, Comm: comm}
	memoryFigures(strings.TrimPrefix(tail, ", now "), &ev)
	return ev, true
}

// parseHungTask reads "INFO: task kworker/u32:2:113 blocked for more than 122
// seconds." The name may hold ':' itself, so the PID is after the last ':'.
func parseHungTask(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "INFO: task ")
	if !ok {
		return Event{}, false
	}
	head, tail, ok := strings.Cut(rest, " blocked for more than ")
	if !ok {
		return Event{}, false
	}
	c := strings.LastIndexByte(head, ':')
	if c <= 0 {
		return Event{}, false
	}
	pid, ok := atoi(head[c+1:])
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: HungTask, PID: pid, Comm: head[:c]}
	if secs, _, ok := strings.Cut(tail, " seconds"); ok {
		if n, ok := atoi(secs); ok {
			ev.Blocked = time.Duration(n) * time.Second
		}
	}
	return ev, true
}

// parseXid reads "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU
// has fallen off the bus." and the forms without pid/name (older drivers,
// errors with no process) or with pid='<unknown>'.
func parseXid(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "NVRM: Xid (PCI:")
	if !ok {
		return Event{}, false
	}
	pci, rest, ok := strings.Cut(rest, "): ")
	if !ok || len(pci) > 20 {
		return Event{}, false
	}
	codeStr, rest, _ := strings.Cut(rest, ",")
	code, ok := atoi(strings.TrimSpace(codeStr))
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: GPUXid, PCI: pci, Xid: code}
	rest = strings.TrimPrefix(rest, " ")
	if p, ok := strings.CutPrefix(rest, "pid="); ok {
		val, after, _ := strings.Cut(p, ",")
		if n, ok := atoi(strings.Trim(val, "'")); ok {
			ev.PID = n
		}
		rest = strings.TrimPrefix(after, " ")
	}
	if p, ok := strings.CutPrefix(rest, "name="); ok {
		val, after, _ := strings.Cut(p, ", ")
		if val != "<unknown>" && val != "'<unknown>'" {
			ev.Comm = val
		}
		rest = after
	}
	ev.Detail = rest
	ev.FellOff = code == 79 || strings.Contains(rest, "fallen off the bus")
	return ev, true
}

// parseNVRM reads every other NVIDIA driver line ("NVRM: GPU 0000:06:00.0: GPU
// has fallen off the bus.", "NVRM: The NVIDIA GPU 0000:b3:00.0 ...").
func parseNVRM(msg string) (Event, bool) {
	// dmesg indents the continuation lines of a multi-line driver message.
	rest, ok := strings.CutPrefix(strings.TrimLeft(msg, " \t"), "NVRM: ")
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: NVRM, Detail: rest, FellOff: strings.Contains(rest, "fallen off the bus")}
	if p, ok := strings.CutPrefix(rest, "GPU "); ok {
		p = strings.TrimPrefix(p, "at PCI:")
		if id, _, ok := strings.Cut(p, ": "); ok && len(id) <= 20 && strings.Count(id, ":") >= 1 && !strings.Contains(id, " ") {
			ev.PCI = id
		}
	}
	return ev, true
}

// parseSegfault reads "python3[1234]: segfault at 0 ip 00007f.. sp 00007ff..
// error 4 in libc.so.6[167ad8,7f7dca244000+156000] likely on CPU 1 (core 1,
// socket 0)" and the older form without the offset and CPU.
func parseSegfault(msg string) (Event, bool) {
	i := strings.LastIndex(msg, "]: segfault at ")
	if i <= 0 {
		return Event{}, false
	}
	comm, pid, ok := cutCommPID(msg[:i+1])
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: Segfault, Trap: "segfault", PID: pid, Comm: comm}
	f := strings.Fields(msg[i+len("]: segfault at "):])
	// ADDR ip IP sp SP error N [in OBJ[...]] [likely on CPU ...]
	if len(f) < 7 || f[1] != "ip" || f[3] != "sp" || f[5] != "error" {
		return Event{}, false
	}
	ev.Addr, ev.IP, ev.SP, ev.Error = f[0], f[2], f[4], f[6]
	if j := strings.Index(msg, " error "+f[6]+" in "); j >= 0 {
		ev.Object = mappedObject(msg[j+len(" error "+f[6]+" in "):])
	}
	return ev, true
}

// parseTrap reads "traps: crash[11555] general protection fault ip:55de.. sp:7ffe..
// error:0 in crash[11c6,55debaf42000+1000]" and "traps: a[23021] trap invalid
// opcode ip:... sp:... error:0 in a[...]" (older kernels: "general protection ip:").
func parseTrap(msg string) (Event, bool) {
	rest, ok := strings.CutPrefix(msg, "traps: ")
	if !ok {
		return Event{}, false
	}
	ipAt := strings.Index(rest, " ip:")
	if ipAt < 0 {
		return Event{}, false
	}
	head := rest[:ipAt]
	// head: "comm[PID] general protection fault" or "comm[PID] trap invalid opcode"
	b := strings.LastIndex(head, "] ")
	if b <= 0 {
		return Event{}, false
	}
	comm, pid, ok := cutCommPID(head[:b+1])
	if !ok {
		return Event{}, false
	}
	what := strings.TrimPrefix(head[b+2:], "trap ")
	if what == "" {
		return Event{}, false
	}
	if what == "general protection" {
		what = "general protection fault"
	}
	ev := Event{Kind: Trap, Trap: what, PID: pid, Comm: comm}
	for _, tok := range strings.Fields(rest[ipAt:]) {
		k, v, ok := strings.Cut(tok, ":")
		if !ok {
			continue
		}
		switch k {
		case "ip":
			ev.IP = v
		case "sp":
			ev.SP = v
		case "error":
			ev.Error = v
		}
	}
	if j := strings.Index(rest, " in "); j > ipAt {
		ev.Object = mappedObject(rest[j+len(" in "):])
	}
	return ev, true
}

// cutCommPID reads "comm[PID]" (the name may hold '[').
func cutCommPID(s string) (string, int, bool) {
	if !strings.HasSuffix(s, "]") {
		return "", 0, false
	}
	o := strings.LastIndexByte(s, '[')
	if o <= 0 || o > maxCommBytes {
		return "", 0, false
	}
	pid, ok := atoi(s[o+1 : len(s)-1])
	if !ok {
		return "", 0, false
	}
	return s[:o], pid, true
}

// mappedObject reads "libc.so.6[167ad8,7f..+156000] ..." and returns the
// object's name ("libc.so.6"); a name may hold spaces ("x (deleted)").
func mappedObject(s string) string {
	o := strings.LastIndexByte(s, '[')
	if c := strings.IndexByte(s, ']'); c >= 0 && c < len(s) {
		// the first "[...]" group after the name
		if o2 := strings.LastIndexByte(s[:c], '['); o2 > 0 {
			o = o2
		}
	}
	if o <= 0 {
		return ""
	}
	return s[:o]
}
