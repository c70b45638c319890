package judge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// TestJudgementCarriesTheJobAsJudged: the Judgement names the launch
// thread the rules used, every member with its rank, the GPU processes,
// and the kernel lines recognised once (each with whether it concerns the
// job); its JSON carries them whole.
func TestJudgementCarriesTheJobAsJudged(t *testing.T) {
	s := pipeline(90, 'R', 2)
	s.procs[1].env = map[string]string{"RANK": "1", "LOCAL_RANK": "0"}
	s.procs[1].role = "rank"
	tl := s.timeline()
	tl.Events = append(tl.Events,
		timeline.Event{T: int64(time.Second), Kind: timeline.EventKernelLog, PID: 200,
			Text: "python3[200]: segfault at 0 ip 00007f1c2a8b1d3e sp 00007ffd6f1e8a50 error 4 in libc.so.6[7f1c2a830000+155000]"},
		timeline.Event{T: int64(time.Second), Kind: timeline.EventKernelLog, PID: 9999,
			Text: "Out of memory: Killed process 9999 (java) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0"},
		timeline.Event{T: int64(time.Second), Kind: timeline.EventKernelLog, Text: "a line of no kind gpufeed knows"})
	a := derive.New(tl)
	in := NewInput(tl, a)
	j := JudgeInput(in)

	if l := j.Job.LaunchThread; l == nil || l.PID != in.Job.Launch.T.PID || l.TID != in.Job.Launch.T.Key.TID || l.Comm != "python3" || l.How == "" {
		t.Fatalf("launch thread %+v: want the rules' own (tid %d)", j.Job.LaunchThread, in.Job.Launch.T.Key.TID)
	}
	if j.Series == nil || j.Series.LaunchTID != j.Job.LaunchThread.TID {
		t.Errorf("series %+v: want the launch thread's", j.Series)
	}
	names := map[int]string{}
	for _, m := range j.Job.Members {
		names[m.PID] = m.Name + "/" + m.LocalRank
	}
	if len(j.Job.Members) != 3 || names[200] != "rank 1/0" || names[100] != "/" || names[201] != "/" {
		t.Errorf("members %+v: want the trainer and two workers, pid 200 rank 1 (local rank 0)", j.Job.Members)
	}
	if len(j.Job.GPUProcesses) != 1 || j.Job.GPUProcesses[0] != 100 {
		t.Errorf("GPU processes %v: want the trainer", j.Job.GPUProcesses)
	}
	if len(j.Kernel) != 2 || j.Kernel[0].Kind != "segfault" || !j.Kernel[0].Job || j.Kernel[0].Member != "rank 1" ||
		j.Kernel[0].Where != "in libc.so.6" || j.Kernel[1].Kind != "oom-kill" || j.Kernel[1].Job {
		t.Errorf("kernel events %+v: want the job's segfault (rank 1, in libc.so.6) and another process's kill", j.Kernel)
	}
	n := len(tl.Events)
	if job, known := j.JobKernelLine(n - 3); !job || !known {
		t.Error("the job's segfault line is not the job's")
	}
	if job, _ := j.JobKernelLine(n - 2); job {
		t.Error("another process's kill is the job's")
	}
	if _, ok := j.KernelLine(n - 1); ok {
		t.Error("a line of no kind recognised")
	}

	b, err := json.Marshal(struct {
		Job    JobJudged     `json:"job"`
		Kernel []KernelEvent `json:"kernel_events"`
	}{j.Job, j.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"launch_thread":{"pid":100,"tid":100,"comm":"python3"`, `"name":"rank 1"`, `"local_rank":"0"`, `"kind":"segfault"`, `"member":"rank 1"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

// TestSettleBesideAStartUp: a window that holds only the job's start-up is
// inconclusive, resting on job-starting; the CPU-side rules' cause findings
// (imports read as batch preparation, a sleeping launcher as too little
// work) describe it as if it ran steps and are left out, as beside a
// stalled or idle job. Other findings stay, and an inconclusive verdict
// for another reason keeps the causes it weighed.
func TestSettleBesideAStartUp(t *testing.T) {
	fs := func() []finding.Finding {
		return []finding.Finding{
			{ID: "job-starting", Supports: finding.Inconclusive},
			{ID: CauseID[finding.TooLittleWork], Supports: finding.TooLittleWork},
			{ID: CauseID[finding.Preprocessing], Supports: finding.Preprocessing},
			{ID: "fd-limit-low"},
		}
	}
	starting := finding.Verdict{Class: finding.Inconclusive, Because: []string{"job-starting"}}
	var got []string
	for _, f := range settle(starting, fs()) {
		got = append(got, f.ID)
	}
	if want := []string{"job-starting", "fd-limit-low"}; !slices.Equal(got, want) {
		t.Errorf("beside a start-up: %v, want %v", got, want)
	}
	got = got[:0]
	for _, f := range settle(finding.Verdict{Class: finding.Inconclusive, Because: []string{}}, fs()) {
		got = append(got, f.ID)
	}
	if len(got) != 4 {
		t.Errorf("an inconclusive window for another reason keeps its causes: %v", got)
	}
}
