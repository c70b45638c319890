package render

import (
	"strings"
	"testing"
	"time"
)

func TestBytesSigns(t *testing.T) {
	for v, want := range map[float64]string{-0.3: "0 B", 0.4: "0 B", -2: "-2 B", -2048: "-2.0 KiB", 1536: "1.5 KiB", 11834: "11.6 KiB"} {
		if got := Bytes(v); got != want {
			t.Errorf("Bytes(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestNumbersAndUnits(t *testing.T) {
	for v, s := range map[float64]string{8: "8", 7.875: "7.88", 31.5: "31.5", 1203: "1203", 0.48: "0.48", 92.06: "92.1", 0.004: "0.004"} {
		if got := Number(v); got != s {
			t.Errorf("Number(%v) = %s, want %s", v, got, s)
		}
	}
	for d, s := range map[time.Duration]string{850: "850 ns", 98 * time.Microsecond: "98 µs", 6453 * time.Microsecond: "6.45 ms",
		10 * time.Second: "10.0 s", 17 * time.Minute: "17 min"} {
		if got := Duration(d); got != s {
			t.Errorf("Duration(%v) = %s, want %s", d, got, s)
		}
	}
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{90938, "us", "90.9 ms"}, {2010.2, "us", "2.01 ms"}, {0.098, "ms", "98 µs"}, {11834, "B", "11.6 KiB"},
		{8, "MiB", "8.0 MiB"}, {42, "%", "42%"}, {21.8, "% of wall time", "21.8% of wall time"}, {269, "/s", "269/s"},
		{1022, "operations", "1022 operations"}, {16, "GT/s", "16 GT/s"},
	} {
		if got := Quantity(c.v, c.unit); got != c.want {
			t.Errorf("Quantity(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("DECISION: one two three four five six", 16, "", "  ", 0)
	want := []string{"DECISION: one", "  two three four", "  five six"}
	if len(got) != len(want) {
		t.Fatalf("wrap: %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wrap line %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"text": FormatText, "JSON": FormatJSON, " Json ": FormatJSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || err.Error() != `-o "xml": want text, json, html or jsonl` {
		t.Errorf("ParseFormat(xml): %v", err)
	}
}

// TestObserverSaysWhatWasCarried: the per-thread-sample cost is over every
// sample the report holds, so the line says how many were carried from
// dormant threads rather than read; none carried, nothing said.
func TestObserverSaysWhatWasCarried(t *testing.T) {
	pctv, per := 2.6, 2600.0
	o := &Observer{CPUPercentOfCore: &pctv, CPUNS: 260e6, NSPerThreadSample: &per, ThreadSamples: 101000,
		ThreadSamplesCarried: 87576, TickP50NS: 700e3, TickMaxNS: 80e6}
	tw := &textWriter{}
	tw.facts(&Report{Observer: o})
	want := "over 101000 thread-samples (87576 of them carried from threads asleep since their last reading); tick p50"
	if got := tw.buf.String(); !strings.Contains(got, want) {
		t.Errorf("the observer line lacks %q:\n%s", want, got)
	}
	o.ThreadSamplesCarried = 0
	tw = &textWriter{}
	tw.facts(&Report{Observer: o})
	if got := tw.buf.String(); strings.Contains(got, "carried") || !strings.Contains(got, "over 101000 thread-samples; tick p50") {
		t.Errorf("nothing carried, yet:\n%s", got)
	}
}

// TestSchedulingLineCountsMissedEvents: events the kernel skipped the
// counting program for (a recording made when the events were counted on
// every switch) are said on the SCHEDULING line; none: the line names the
// kernel's counters.
func TestSchedulingLineCountsMissedEvents(t *testing.T) {
	pctv, per := 1.0, 900.0
	o := &Observer{CPUPercentOfCore: &pctv, CPUNS: 1e8, NSPerThreadSample: &per, ThreadSamples: 1000,
		TickP50NS: 700e3, TickMaxNS: 2e6, Sched: "bpf", SchedMissed: 3}
	tw := &textWriter{}
	tw.facts(&Report{Observer: o})
	want := "counted in the kernel; 3 switches not seen whole (the kernel skipped the counting program, or ran it for a switch-out and not the switch-in before it): each loses at most a slice and its time\n"
	if got := tw.buf.String(); !strings.Contains(got, want) {
		t.Errorf("the scheduling line lacks %q:\n%s", want, got)
	}
	o.SchedMissed = 0
	tw = &textWriter{}
	tw.facts(&Report{Observer: o})
	if got := tw.buf.String(); strings.Contains(got, "not seen whole") ||
		!strings.Contains(got, "from the kernel's own counters (what schedstat and status show), read for all threads at once each tick by a BPF task iterator") {
		t.Errorf("nothing missed (the kernel's counters), yet:\n%s", got)
	}
}

// TestSchedulingLineSaysWhyNotBPF: under --sched auto without the
// capabilities the line says /proc was read and why the counters were not.
func TestSchedulingLineSaysWhyNotBPF(t *testing.T) {
	pctv, per := 1.0, 900.0
	o := &Observer{CPUPercentOfCore: &pctv, CPUNS: 1e8, NSPerThreadSample: &per, ThreadSamples: 1000,
		TickP50NS: 700e3, TickMaxNS: 2e6, Sched: "proc", SchedNotBPF: "loading eBPF programs needs CAP_BPF"}
	tw := &textWriter{}
	tw.facts(&Report{Observer: o})
	want := "SCHEDULING: threads' run time, run-queue wait and switches from /proc (the kernel's counters by eBPF not used: loading eBPF programs needs CAP_BPF)\n"
	if got := tw.buf.String(); !strings.Contains(got, want) {
		t.Errorf("the scheduling line lacks %q:\n%s", want, got)
	}
}
