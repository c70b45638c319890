package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// A straggler named by rank: a real torch.distributed (gloo) job of 2-4
// ranks started by a plain launcher (RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR=127.0.0.1 and a free MASTER_PORT in each rank's environment),
// one rank spending 150 ms per step before its all_reduce while the others
// wait in it. gpufeed attaches to the launcher, repeatedly; the default first
// screen names the slow rank as the straggler and every other rank as
// waiting, and the JSON carries the same finding.
//
// The jobs of 3 and 4 ranks are started by torchrun itself (its elastic
// agent the ranks' parent, the test's launcher above it); Debian's torchrun
// (torch 1.13) on Python 3.11 needs --redirects and --tee given as a
// mapping to start any worker (see the workload's docstring).

func checkStraggler(t *testing.T, how string, rank1 string) {
	t.Helper()
	checkStragglerOf(t, 2, 1, how, rank1)
}

// checkStragglerOf: a job of world ranks whose rank slow is the straggler;
// with more than 2 ranks, started by torchrun.
func checkStragglerOf(t *testing.T, world, slow int, how string, slowRow string) {
	t.Helper()
	s := stragglerJob(t, world, slow, how)
	job, pids := s.run, s.pids
	var rows []*regexp.Regexp
	for r := range world {
		if r == slow {
			rows = append(rows, regexp.MustCompile(`(?m)^> rank `+strconv.Itoa(r)+`: pid `+strconv.Itoa(pids[strconv.Itoa(r)])+`, no GPU: `+slowRow))
		} else {
			rows = append(rows, regexp.MustCompile(`(?m)^  rank `+strconv.Itoa(r)+`: pid `+strconv.Itoa(pids[strconv.Itoa(r)])+`, no GPU: waits in a collective \d+ % of the window`))
		}
	}
	head := "RANKS: the straggler is rank " + strconv.Itoa(slow) + ", the others wait for it"
	windows := []string{"3s", "3s", "4s"}
	if world > 2 { // one attach: each rank is a Python process to read
		windows = []string{"4s"}
	}
	var wg sync.WaitGroup
	for i, window := range windows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out string
			for attempt := 0; ; attempt++ {
				o, stderr, code := run(t, "diagnose", "--device", "none", "--pid", strconv.Itoa(job.PID), "--duration", window)
				if code != 0 {
					t.Errorf("run %d: exit %d: %s", i, code, stderr)
					return
				}
				out = o
				if !starved(out) || attempt == 2 {
					break
				}
				t.Logf("run %d (%s): the loaded host kept gpufeed from sampling the window (it says so); taken again:\n%s", i, window, out)
			}
			ok := strings.Contains(out, head)
			for _, row := range rows {
				ok = ok && row.MatchString(out)
			}
			if !ok {
				t.Errorf("run %d (%s): the first screen does not name rank %d of %d the straggler and the others waiting:\n%s", i, window, slow, world, out)
			}
		}()
	}
	// The JSON report's observer attaches beside the text ones (they read
	// the job, not each other).
	r := diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", "3s")
	for attempt := 0; attempt < 2 && r.Verdict != nil && starved(r.Verdict.Missing); attempt++ {
		t.Logf("JSON run: the loaded host kept gpufeed from sampling the window (%s); taken again", r.Verdict.Missing)
		r = diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", "3s")
	}
	wg.Wait()
	fs := findingsWith(r, "rank-straggler")
	if len(fs) != 1 || fs[0].Subject != "rank "+strconv.Itoa(slow)+" (pid "+strconv.Itoa(pids[strconv.Itoa(slow)])+")" ||
		!strings.HasPrefix(fs[0].Claim, "rank "+strconv.Itoa(slow)+" of "+strconv.Itoa(world)+" (pid ") {
		t.Errorf("JSON findings:\n%s", claims(r))
	}
	// The same table in numbers: one row per rank, by rank, the slow one
	// the straggler and each other waiting in the collective.
	if r.Job == nil || len(r.Job.Ranks) != world {
		t.Fatalf("JSON job.ranks: %+v", r.Job)
	}
	for i, row := range r.Job.Ranks {
		if row.Rank != strconv.Itoa(i) || row.PID != pids[row.Rank] || row.Straggler != (i == slow) || row.DemandPct == nil || row.AsleepPct == nil ||
			(i != slow && row.State != "waits in a collective") || (i == slow && row.State == "waits in a collective") {
			t.Errorf("JSON job.ranks[%d] = %+v (demand %v, asleep %v)", i, row, row.DemandPct, row.AsleepPct)
		}
	}
}

// starved says gpufeed refused the window itself because the loaded host
// kept it from sampling enough intervals (its "to conclude" says so, as in
// make test's second lane beside the saturated light group: 6 samples in
// 3.4 s). Such a window tests nothing of the straggler rule: it is taken
// again, twice at most.
func starved(report string) bool { return holds(report, "a loaded host delays the sampler") }

// The straggler tests' jobs, one per world size, each serving its tests
// one after the other: the job moves to the straggler a test wants
// (torch_ranks.py's --phases and --control), pauses its rounds between
// tests and ends after its last phase. Most of a test's time was its job's
// start-up: importing torch in each rank (and torchrun's agent) and
// joining the group, about 2 CPU-seconds a process.
var stragglerPhases = map[int][]struct {
	slow int
	how  string
}{
	2: {{1, "cpu"}, {1, "cpu:gpu"}, {1, "sleep"}, {1, "data"}},
	3: {{2, "cpu"}, {2, "data"}},
	4: {{1, "cpu"}, {3, "sleep"}},
}

type sharedStraggler struct {
	run     *testjob.Run
	control string // the file the ranks read before each round
	phase   int    // the phase last asked for (-1: none yet)
	pids    map[string]int
	simdev  string // the simulated device's socket, for phases with a GPU side ("cpu:gpu")
}

var stragglerJobs struct {
	sync.Mutex
	byWorld    map[int]*sharedStraggler
	prestarted bool
}

// startStraggler starts the shared job of world ranks, its rounds paused
// until a test asks for a phase.
func startStraggler(world int) (*sharedStraggler, error) {
	dir, err := os.MkdirTemp("", "gpufeed-straggler-")
	if err != nil {
		return nil, err
	}
	s := &sharedStraggler{control: filepath.Join(dir, "phase"), phase: -1}
	if err := s.set("pause"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var spec []string
	gpu := false
	for _, p := range stragglerPhases[world] {
		spec = append(spec, strconv.Itoa(p.slow)+":"+p.how)
		gpu = gpu || strings.HasSuffix(p.how, ":gpu")
	}
	args := []string{"--world", strconv.Itoa(world), "--phases", strings.Join(spec, ","), "--control", s.control,
		"--pause", "0", "--rounds", "5"}
	if world > 2 {
		args = append(args, "--torchrun")
	}
	var env []string
	stopSimdev := func() {}
	if gpu {
		// A GPU side for the phases that have one: a 2 ms kernel a step on
		// a simulated device that lives as long as the job.
		pydir, _ := filepath.Abs("../../python")
		sock, stop, err := serveSimdev(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.simdev, stopSimdev = sock, stop
		env = []string{"GPUFEED_SIMDEV=" + sock}
		args = append(args, "--simdev", pydir)
	}
	// The job outlives the test that started it.
	r, err := testjob.Start(context.Background(), testjob.TorchRanks, env, args...)
	if err != nil {
		stopSimdev()
		os.RemoveAll(dir)
		return nil, err
	}
	r.OnStop(func() error { stopSimdev(); return os.RemoveAll(dir) })
	s.run = r
	return s, nil
}

// set writes the control file whole: a phase's index, or pause.
func (s *sharedStraggler) set(v string) error {
	if err := os.WriteFile(s.control+".new", []byte(v), 0o644); err != nil {
		return err
	}
	return os.Rename(s.control+".new", s.control)
}

// stragglerJob returns the shared job of world ranks once every rank has
// made 5 rounds with rank slow the straggler (how), and the ranks' pids.
// The first call starts every world size's job at once (each paused until
// used): a torchrun job's start took 15 to 65 s beside the light tests,
// and the three start-ups overlap while the first tests run.
func stragglerJob(t *testing.T, world, slow int, how string) *sharedStraggler {
	t.Helper()
	phases := stragglerPhases[world]
	k := slices.IndexFunc(phases, func(p struct {
		slow int
		how  string
	}) bool {
		return p.slow == slow && p.how == how
	})
	if k < 0 {
		t.Fatalf("no phase of the %d-rank straggler job has rank %d slow by %s", world, slow, how)
	}
	j := &stragglerJobs
	j.Lock()
	defer j.Unlock()
	if j.byWorld == nil {
		j.byWorld = map[int]*sharedStraggler{}
	}
	if !j.prestarted {
		j.prestarted = true
		for w := range stragglerPhases {
			if w == world || j.byWorld[w] != nil {
				continue
			}
			if s, err := startStraggler(w); err == nil {
				j.byWorld[w] = s
			} // else: started (and its error reported) when a test asks for it
		}
	}
	s := j.byWorld[world]
	if s != nil && s.phase > k { // run again (-count) or out of order: a new job
		s.stop()
		delete(j.byWorld, world)
		s = nil
	}
	if s == nil {
		var err error
		s, err = startStraggler(world)
		if errors.Is(err, testjob.ErrUnavailable) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		j.byWorld[world] = s
	}
	if s.pids == nil {
		m, err := s.run.Await(t.Context(), "ranks", 120*time.Second)
		if err != nil {
			s.stop()
			delete(j.byWorld, world)
			t.Fatal(err)
		}
		s.pids = m.IntMap("ranks")
	}
	s.phase = k
	if err := s.set(strconv.Itoa(k)); err != nil {
		t.Fatal(err)
	}
	// Every rank's 5 rounds with this straggler (each rank says so once per
	// phase it enters).
	done := map[int]bool{}
	for len(done) < world {
		m, err := s.run.Await(t.Context(), "rounds-done", 120*time.Second)
		if err != nil {
			s.stop()
			delete(j.byWorld, world)
			t.Fatal(err)
		}
		if p, _ := m.Int("phase"); p == k {
			r, _ := m.Int("rank")
			done[r] = true
		}
	}
	t.Cleanup(func() {
		j.Lock()
		defer j.Unlock()
		if j.byWorld[world] != s {
			return
		}
		if k == len(phases)-1 {
			s.stop()
			delete(j.byWorld, world)
			return
		}
		_ = s.set("pause") // no rounds (no CPU) until the next test moves it on
	})
	return s
}

func (s *sharedStraggler) stop() { s.run.Stop() }

// stopStragglerJobs ends the jobs a run of some of the tests left.
func stopStragglerJobs() {
	j := &stragglerJobs
	j.Lock()
	defer j.Unlock()
	for w, s := range j.byWorld {
		s.stop()
		delete(j.byWorld, w)
	}
}

func TestStragglerByCPUNamedByRank(t *testing.T) {
	livetest.Need(t)
	checkStraggler(t, "cpu", `busy, its launch thread wants \d+ % of a core`)
}

// TestStragglerVerdictOnSimulatedGPU: the same job with a GPU side (each
// step a 2 ms kernel on gpufeed's simulated device): the job's verdict is
// the straggler's, says which rank it is, and carries rank 0's wait.
func TestStragglerVerdictOnSimulatedGPU(t *testing.T) {
	livetest.Need(t)
	requireTorch(t)
	s := stragglerJob(t, 2, 1, "cpu:gpu")
	job, pids, sock := s.run, s.pids, s.simdev
	windows := []string{"3s", "4s"}
	for i, r := range diagnoseJSONAtOnce(t, windows, "--device", "sim:"+sock, "--pid", strconv.Itoa(job.PID)) {
		window := windows[i]
		if r.Verdict == nil || !strings.HasPrefix(r.Verdict.Summary, "rank 1 of 2, the straggler the other ranks wait for: ") ||
			!strings.Contains(r.Verdict.Summary, "pid "+strconv.Itoa(pids["1"])) {
			t.Errorf("%s: verdict %+v\n%s", window, r.Verdict, claims(r))
			continue
		}
		waits := false
		for _, f := range r.Findings {
			if len(r.Verdict.Because) > 0 && f.ID == r.Verdict.Because[0] {
				for _, e := range f.Evidence {
					waits = waits || strings.HasPrefix(e.What, "rank 0 (pid "+strconv.Itoa(pids["0"])+") waits for rank 1 in a collective")
				}
			}
		}
		if !waits {
			t.Errorf("%s: the verdict's finding does not carry rank 0's wait:\n%s", window, claims(r))
		}
	}
}

func TestStragglerBySleepNamedByRank(t *testing.T) {
	livetest.Need(t)
	// A second's readings sometimes catch it in the collective too: its row
	// may then say its waits are mixed, but it is still the straggler.
	checkStraggler(t, "sleep", `(sleeps \d+ % of the window|neither busy nor waiting on one thing)`)
}

// TestStragglerByDataNamedByRank: rank 1 waits for its DataLoader's one
// slow worker before each all_reduce (a slow input pipeline).
func TestStragglerByDataNamedByRank(t *testing.T) {
	livetest.Need(t)
	// As with the sleep, a second's readings may catch it in the collective.
	checkStraggler(t, "data", `(waits for data \d+ % of the window|neither busy nor waiting on one thing)`)
}

// TestStragglerByCPUAmongThreeAndFourRanks: the same straggler among 3 and
// 4 ranks started by torchrun, a different rank each time.
func TestStragglerByCPUAmongThreeAndFourRanks(t *testing.T) {
	livetest.Need(t)
	for _, c := range []struct{ world, slow int }{{3, 2}, {4, 1}} {
		t.Run(strconv.Itoa(c.world)+"ranks", func(t *testing.T) {
			checkStragglerOf(t, c.world, c.slow, "cpu", `busy, its launch thread wants \d+ % of a core`)
		})
	}
}

// TestStragglersUnderTorchrunNamedByRank: a slow input pipeline among 3
// ranks and a sleeping rank among 4, each job started by torchrun.
func TestStragglersUnderTorchrunNamedByRank(t *testing.T) {
	livetest.Need(t)
	t.Run("data-3ranks", func(t *testing.T) {
		checkStragglerOf(t, 3, 2, "data", `(waits for data \d+ % of the window|neither busy nor waiting on one thing)`)
	})
	t.Run("sleep-4ranks", func(t *testing.T) {
		checkStragglerOf(t, 4, 3, "sleep", `(sleeps \d+ % of the window|neither busy nor waiting on one thing)`)
	})
}
