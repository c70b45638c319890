package profile

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// SyscallSummary is what the kernel counted of a set of processes' system
// calls over one window, per thread and per syscall: strace -c's table
// (calls, errors, time between entry and exit, wall clock as strace -c -w
// and perf trace -s count it), aggregated in the kernel.
type SyscallSummary struct {
	// State is "on", "off" or "unavailable"; Missing then says what would
	// show it (a capability, a kernel setting).
	State   string `json:"state"`
	Missing string `json:"missing,omitempty"`
	// WindowNS is how long it counted; PIDs the processes watched (the
	// ones asked for and the children they forked in the window).
	WindowNS int64 `json:"window_ns,omitempty"`
	PIDs     []int `json:"pids,omitempty"`
	// Dropped counts syscall exits whose (thread, syscall) row the kernel's
	// bounded table could not hold: counted, never guessed.
	Dropped uint64 `json:"dropped"`
	// Totals is the table over all threads, most time first.
	Totals []SyscallStat `json:"totals,omitempty"`
	// Threads are the threads that made syscalls in the window, most time
	// in syscalls first.
	Threads []ThreadSyscalls `json:"threads,omitempty"`
	// Futexes are the futex words the job's threads waited on longest (at
	// most MaxFutexWords), with who waited and who woke them; FutexDropped
	// counts futex calls the kernel's bounded table could not hold.
	Futexes      []FutexWord `json:"futexes,omitempty"`
	FutexDropped uint64      `json:"futex_dropped"`
}

// MaxFutexWords bounds SyscallSummary.Futexes.
const MaxFutexWords = 32

// FutexWord is one futex word of a process (a lock, a condition variable,
// a queue's semaphore): the threads that waited on it, with their time
// inside the waits (a wait still going at the end included), and the
// threads that woke it.
type FutexWord struct {
	PID     int           `json:"pid"`
	Addr    uint64        `json:"addr"`
	WaitNS  int64         `json:"wait_ns"`
	Waiters []FutexThread `json:"waiters,omitempty"`
	Wakers  []FutexThread `json:"wakers,omitempty"`
}

// FutexThread is one thread's calls on a futex word.
type FutexThread struct {
	TID    int    `json:"tid"`
	Comm   string `json:"comm,omitempty"`
	Calls  uint64 `json:"calls"`
	TimeNS int64  `json:"time_ns,omitempty"`
}

// SyscallStat is one syscall's row: calls that returned in the window,
// how many failed (-4095..-1), their time in the kernel summed and the
// longest one.
type SyscallStat struct {
	Name   string `json:"name"`
	Nr     int    `json:"nr"`
	Calls  uint64 `json:"calls"`
	Errors uint64 `json:"errors,omitempty"`
	TimeNS int64  `json:"time_ns"`
	MaxNS  int64  `json:"max_ns,omitempty"`
}

// ThreadSyscalls is one thread's table, and the syscall it was inside
// when the window ended (a thread blocked in futex the whole window has
// no call that returned, only this).
type ThreadSyscalls struct {
	PID      int           `json:"pid"`
	TID      int           `json:"tid"`
	Comm     string        `json:"comm,omitempty"`
	Calls    uint64        `json:"calls"`
	Errors   uint64        `json:"errors,omitempty"`
	TimeNS   int64         `json:"time_ns"`
	Syscalls []SyscallStat `json:"syscalls"`
	// InProgress is the call not yet returned at the window's end, and
	// how long it had been in it (clipped to the window).
	InProgress *PendingSyscall `json:"in_progress,omitempty"`
}

// PendingSyscall is a syscall a thread was still inside.
type PendingSyscall struct {
	Name    string `json:"name"`
	Nr      int    `json:"nr"`
	SinceNS int64  `json:"since_ns"`
}

// Stat returns the thread's row of syscall name (zero when none).
func (t ThreadSyscalls) Stat(name string) SyscallStat {
	for _, s := range t.Syscalls {
		if s.Name == name {
			return s
		}
	}
	return SyscallStat{Name: name}
}

// Total returns the row of syscall name over all threads (zero when none).
func (s *SyscallSummary) Total(name string) SyscallStat {
	if s == nil {
		return SyscallStat{Name: name}
	}
	for _, r := range s.Totals {
		if r.Name == name {
			return r
		}
	}
	return SyscallStat{Name: name}
}

// Thread returns thread tid's table, or false.
func (s *SyscallSummary) Thread(tid int) (ThreadSyscalls, bool) {
	if s == nil {
		return ThreadSyscalls{}, false
	}
	for _, t := range s.Threads {
		if t.TID == tid {
			return t, true
		}
	}
	return ThreadSyscalls{}, false
}

// SortSyscalls orders rows as strace -c does: most time first, then most
// calls, then by name.
func SortSyscalls(rows []SyscallStat) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.TimeNS != b.TimeNS {
			return a.TimeNS > b.TimeNS
		}
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return a.Name < b.Name
	})
}

// WriteSyscallTable writes rows as strace -c does: share of the time,
// seconds, microseconds per call, calls, errors, name, and a total line
// over all rows; limit > 0 shows only the first limit rows (and says how
// many more there were).
func WriteSyscallTable(w io.Writer, rows []SyscallStat, limit int) error {
	var total SyscallStat
	for _, r := range rows {
		total.Calls += r.Calls
		total.Errors += r.Errors
		total.TimeNS += r.TimeNS
	}
	rule := "------ ----------- ----------- --------- --------- ----------------"
	line := func(r SyscallStat, name string) string {
		share := 0.0
		if total.TimeNS > 0 {
			share = 100 * float64(r.TimeNS) / float64(total.TimeNS)
		}
		per := int64(0)
		if r.Calls > 0 {
			per = r.TimeNS / 1000 / int64(r.Calls)
		}
		errs := ""
		if r.Errors > 0 {
			errs = strconv.FormatUint(r.Errors, 10)
		}
		return fmt.Sprintf("%6.2f %11.6f %11d %9d %9s %s\n", share, float64(r.TimeNS)/1e9, per, r.Calls, errs, name)
	}
	var b strings.Builder
	b.WriteString("% time     seconds  usecs/call     calls    errors syscall\n" + rule + "\n")
	for i, r := range rows {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, "%66s(%d more)\n", "", len(rows)-limit)
			break
		}
		b.WriteString(line(r, r.Name))
	}
	b.WriteString(rule + "\n" + line(total, "total"))
	_, err := io.WriteString(w, b.String())
	return err
}
