package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Registry returns a registry holding the agent's metrics and the agent's
// own process and Go runtime metrics (its memory and CPU are part of
// what it costs the node).
func (a *Agent) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return reg
}

// Handler serves every endpoint of the agent:
//
//	/metrics            Prometheus exposition
//	/recording?pid=PID[&start=T]  the job's ring as a recording (gpufeed report FILE)
//	/report?pid=PID[&start=T]     the ring judged, as gpufeed report prints it (&format=json)
//	/pids?slurm_job_id=N | ?pod_uid=U   the root pids of a scheduler job's trees, one a line
//	/                   the jobs watched, with their last verdicts
//
// A client of a Unix socket (its uid known from SO_PEERCRED) reads the
// detail of its own jobs only, unless it is root, and no kernel log line
// where the kernel would not show it one; any other client reads every
// job's detail: serve Handler only where the clients are authenticated.
func (a *Agent) Handler(reg *prometheus.Registry) http.Handler {
	mux := a.baseMux(reg)
	mux.HandleFunc("/recording", a.serveRecording)
	mux.HandleFunc("/report", a.serveReport)
	return mux
}

// MetricsHandler serves what the metrics already say, to any client:
// /metrics, / and /pids. /report and /recording answer 403 saying where
// they are served.
func (a *Agent) MetricsHandler(reg *prometheus.Registry) http.Handler {
	mux := a.baseMux(reg)
	for _, p := range []string{"/report", "/recording"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, p+": a job's details (its command line, environment, kernel log lines) are not served to "+
				"unauthenticated clients: read them on the agent's Unix socket (--detail-socket), or enable them here "+
				"with --web.config.file requiring basic authentication or client certificates", http.StatusForbidden)
		})
	}
	return mux
}

func (a *Agent) baseMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/pids", a.servePIDs)
	mux.HandleFunc("/", a.serveIndex)
	return mux
}

// maxEcho caps how much of a bad parameter a 400 response repeats.
const maxEcho = 64

// echo quotes a parameter for an error message, cut at maxEcho bytes.
func echo(s string) string {
	if len(s) > maxEcho {
		return strconv.Quote(s[:maxEcho]) + fmt.Sprintf(" (%d bytes, cut)", len(s))
	}
	return strconv.Quote(s)
}

// ringOf finds the job named by ?pid= (and ?start=, its root's start time
// as / lists it, when a pid was reused) and joins its ring, or writes the
// HTTP error and returns nil. A client that may not read the job's
// details gets 403; the kernel log lines it could not read itself are
// left out.
func (a *Agent) ringOf(w http.ResponseWriter, r *http.Request) (*timeline.Timeline, []string, int) {
	q := r.URL.Query()
	s := q.Get("pid")
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		http.Error(w, fmt.Sprintf("pid=%s: want the pid of a watched job's root process (see /)", echo(s)), http.StatusBadRequest)
		return nil, nil, 0
	}
	var j *job
	if st := q.Get("start"); st != "" {
		start, err := strconv.ParseUint(st, 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("start=%s: want the start time of the job's root process as / lists it (clock ticks since boot)", echo(st)), http.StatusBadRequest)
			return nil, nil, 0
		}
		j = a.jobAt(timeline.ProcKey{PID: pid, StartTime: start})
		if j == nil {
			http.Error(w, fmt.Sprintf("pid %d, start %d: no job rooted at this process is watched (see /)", pid, start), http.StatusNotFound)
			return nil, nil, 0
		}
	} else if j = a.Job(pid); j == nil {
		http.Error(w, fmt.Sprintf("pid %d: no job rooted at this pid is watched (see /)", pid), http.StatusNotFound)
		return nil, nil, 0
	}
	v := viewerOf(r)
	if !v.mayRead(j) {
		http.Error(w, fmt.Sprintf("pid %d: this job runs as another user; %s reads only the jobs it runs (root reads all)", pid, v), http.StatusForbidden)
		return nil, nil, 0
	}
	tl, notes, err := merge(j.chunks())
	if errors.Is(err, errEmptyRing) {
		http.Error(w, fmt.Sprintf("pid %d: %v (a window lasts %v)", pid, err, a.cfg.Window), http.StatusServiceUnavailable)
		return nil, nil, 0
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("pid %d: %v", pid, err), http.StatusInternalServerError)
		return nil, nil, 0
	}
	if !v.mayReadKernelLog(a.cfg.FS.Proc) {
		withoutKernelLog(tl, v)
	}
	return tl, notes, pid
}

// withoutKernelLog removes the kernel log's lines from a timeline for a
// client that could not read them itself, and says so in their place: the
// judgement then treats the kernel log as not read (no death is claimed or
// ruled out from it).
func withoutKernelLog(tl *timeline.Timeline, v viewer) {
	kept := tl.Events[:0]
	var last int64
	if n := len(tl.Ticks); n > 0 {
		last = tl.Ticks[n-1].T
	}
	for _, e := range tl.Events {
		switch e.Kind {
		case timeline.EventKernelLog, timeline.EventKernelLogCapped, timeline.EventKernelLogUnavailable:
			continue
		}
		last = max(last, e.T)
		kept = append(kept, e)
	}
	tl.Events = append(kept, timeline.Event{T: last, Kind: timeline.EventKernelLogUnavailable,
		Text: "not shown to " + v.String() + ": kernel.dmesg_restrict=1 and the client lacks CAP_SYSLOG"})
}

func (a *Agent) serveRecording(w http.ResponseWriter, r *http.Request) {
	tl, _, pid := a.ringOf(w, r)
	if tl == nil {
		return
	}
	var buf bytes.Buffer
	if err := timeline.Encode(&buf, tl); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="gpufeed-%s-%d.gpufeed"`, safeName(a.cfg.Hostname), pid))
	_, _ = w.Write(buf.Bytes())
}

func (a *Agent) serveReport(w http.ResponseWriter, r *http.Request) {
	format := render.FormatText
	if q := r.URL.Query().Get("format"); q != "" {
		f, err := render.ParseFormat(q)
		if err != nil {
			http.Error(w, fmt.Sprintf("format=%s: want %s", echo(q), strings.Join(render.Formats(), " or ")), http.StatusBadRequest)
			return
		}
		format = f
	}
	tl, notes, _ := a.ringOf(w, r)
	if tl == nil {
		return
	}
	rep := diagnose.Judge(tl, notes)
	rep.Header = render.NewHeader("agent", a.cfg.Version, a.cfg.Hostname)
	if format == render.FormatJSON {
		w.Header().Set("Content-Type", "application/json")
	} else if format == render.FormatHTML {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	var buf bytes.Buffer
	err := render.Write(&buf, format, rep, render.Options{Verbose: r.URL.Query().Get("verbose") != ""})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(buf.Bytes())
}

func (a *Agent) serveIndex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	a.mu.Lock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	found := a.found
	a.mu.Unlock()
	sort.Slice(jobs, func(i, k int) bool {
		if jobs[i].key.PID != jobs[k].key.PID {
			return jobs[i].key.PID < jobs[k].key.PID
		}
		return jobs[i].key.StartTime < jobs[k].key.StartTime
	})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "gpufeed agent on %s: %d jobs; GPU processes %s\n", safetext.Escape(a.cfg.Hostname), len(jobs), found)
	fmt.Fprintf(w, "windows of %v, kept %v; /metrics, /report?pid=PID, /recording?pid=PID (&start=START when two jobs share a pid)\n\n", a.cfg.Window, a.cfg.Ring)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tSTART\tCOMM\tGPUS\tSLURM JOB\tPOD UID\tPOD\tVERDICT\tJUDGED\tKEPT\tSTATE")
	for _, j := range jobs {
		j.mu.Lock()
		verdict, judged := "-", "-"
		if j.verdict != nil {
			verdict = fmt.Sprintf("%s (%.0f%%)", j.verdict.Class, j.verdict.Confidence*100)
			judged = time.Since(j.judgedAt).Round(time.Second).String() + " ago"
		}
		kept := 0.0
		for _, c := range j.ring {
			kept += c.seconds
		}
		state := "watched"
		if j.done {
			state = "ended: " + j.doneWhy
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%v\t%s\t%s\t%s\t%s\t%s\t%.0f s\t%s\n", j.key.PID, j.key.StartTime, safetext.Escape(j.comm), j.devices,
			dash(j.id.SlurmJobID), dash(j.id.PodUID), podName(j.id), verdict, judged, kept, safetext.Escape(state))
		j.mu.Unlock()
	}
	_ = tw.Flush()
}

// servePIDs lists the roots of the trees whose job matches every filter
// given (slurm_job_id, pod_uid), one pid a line: what a Slurm epilog or a
// collection script asks for.
func (a *Agent) servePIDs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	slurm, pod := q.Get("slurm_job_id"), q.Get("pod_uid")
	a.mu.Lock()
	var pids []int
	for _, j := range a.jobs {
		j.mu.Lock()
		if (slurm == "" || j.id.SlurmJobID == slurm) && (pod == "" || j.id.PodUID == pod) {
			pids = append(pids, j.key.PID)
		}
		j.mu.Unlock()
	}
	a.mu.Unlock()
	sort.Ints(pids)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, p := range pids {
		fmt.Fprintln(w, p)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// safeName keeps letters, digits, dot and dash of a host name for a file name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// podName is namespace/pod/container as far as the node says them ("?"
// for what it does not: that part is known by the pod's UID only).
func podName(id JobID) string {
	if id.PodUID == "" {
		return "-"
	}
	q := func(s string) string {
		if s == "" {
			return "?"
		}
		return s
	}
	return q(id.Namespace) + "/" + q(id.Pod) + "/" + q(id.Container)
}
