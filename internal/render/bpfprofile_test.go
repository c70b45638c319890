package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/profile"
)

func bpfTimeline() (*profile.SyscallSummary, *profile.DriverCalls) {
	sc := &profile.SyscallSummary{State: profile.StateOn, WindowNS: 4e9, PIDs: []int{7, 9},
		Totals: []profile.SyscallStat{{Name: "futex", Nr: 202, Calls: 1623, Errors: 45, TimeNS: 4187687000, MaxNS: 9e8},
			{Name: "poll", Nr: 7, Calls: 234, TimeNS: 842909000}},
		Threads: []profile.ThreadSyscalls{{PID: 7, TID: 7, Comm: "python3", Calls: 1857, Errors: 45, TimeNS: 5030596000,
			Syscalls:   []profile.SyscallStat{{Name: "futex", Nr: 202, Calls: 1623, Errors: 45, TimeNS: 4187687000}, {Name: "poll", Nr: 7, Calls: 234, TimeNS: 842909000}},
			InProgress: &profile.PendingSyscall{Name: "poll", Nr: 7, SinceNS: 4453352}}},
		Futexes: []profile.FutexWord{{PID: 7, Addr: 0x7f0010, WaitNS: 4e9, Waiters: []profile.FutexThread{{TID: 7, Comm: "python3", Calls: 10, TimeNS: 4e9}},
			Wakers: []profile.FutexThread{{TID: 8, Comm: "pt_pin", Calls: 10}}}}}
	dr := &profile.DriverCalls{State: profile.StateOn, WindowNS: 4e9, LaunchProbedNS: 2e8,
		Libraries: []profile.DriverLibrary{{Path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", Probes: 30, Absent: []string{"cuMemcpy_ptds"}}},
		Threads: []profile.ThreadDriver{{PID: 7, TID: 7, Comm: "python3",
			Calls: []profile.DriverCall{{Symbol: "cuLaunchKernel", Class: profile.CallLaunch, Calls: 2400},
				{Symbol: "cuMemcpyHtoDAsync_v2", Class: profile.CallCopy, Copy: "HtoD", Async: true, Calls: 40, Bytes: 40 << 20},
				{Symbol: "cuStreamSynchronize", Class: profile.CallSync, Calls: 120, TimeNS: 3e9, MaxNS: 4e7}},
			InSync: &profile.PendingCall{Symbol: "cuStreamSynchronize", SinceNS: 1e7}}}}
	for i := range dr.Threads {
		dr.Threads[i].Sum()
	}
	return sc, dr
}

// A diagnose report that carries the syscall summary and the driver calls
// follows the contract, and the verbose text shows both tables.
func TestBPFProfileFollowsTheContract(t *testing.T) {
	schema := compileSchema(t)
	tl := hostile()
	tl.Meta.Syscalls, tl.Meta.DriverCalls = bpfTimeline()
	r := Build(tl, derive.New(tl), nil, nil)
	r.Header.Command = "diagnose"
	out := jsonOf(t, r)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("a report with the syscall summary and driver calls does not follow the schema:\n%v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"syscalls", "driver_calls"} {
		if _, ok := m[k].(map[string]any); !ok {
			t.Errorf("no %s:\n%s", k, out)
		}
	}
	checkKeys(t, "bpf", m, "")

	tw := &textWriter{}
	tw.driverCalls(r.DriverCalls)
	tw.syscalls(r.Syscalls)
	text := tw.buf.String()
	for _, want := range []string{
		"CUDA DRIVER CALLS (uprobes on the driver library over 4s; launches counted in bursts, 200ms of it)",
		"tid 7 python3 (pid 7): at least 12000 launches/s; 40 HtoD copies async (40.0 MiB); 120 syncs, 3.01s inside (75% of the window), inside cuStreamSynchronize at the end",
		"% time     seconds  usecs/call     calls    errors syscall",
		" 83.24    4.187687        2580      1623        45 futex",
		"100.00    5.030596        2708      1857        45 total",
		"tid 7 python3 (pid 7): 1857 calls, 5.031s in syscalls: futex 1623 (4.188s), 45 failed, poll 234 (843ms); inside poll for 4ms at the end",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	// Not taken: absent (the notes say why).
	tl.Meta.Syscalls = &profile.SyscallSummary{State: profile.StateUnavailable, Missing: "CAP_BPF"}
	tl.Meta.DriverCalls = &profile.DriverCalls{State: profile.StateUnavailable, Missing: "CAP_BPF"}
	if out := jsonOf(t, Build(tl, derive.New(tl), nil, nil)); bytes.Contains(out, []byte(`"syscalls"`)) || bytes.Contains(out, []byte(`"driver_calls"`)) {
		t.Errorf("an unavailable measurement is written:\n%s", out)
	}
}
