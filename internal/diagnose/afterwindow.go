package diagnose

import (
	"context"
	"time"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// readChannelsAndChecks adds to a live timeline, once sampling has ended and before it
// is judged or its recording closed, the facts read once per run:
//
//   - each live process's device channels (procfs.ChannelProber), so the
//     rules can tell a thread waiting on the GPU from one waiting on input;
//   - gpufeed check's outcomes for the target, with the same GPU source
//     (diagnose runs the same checks) and the window's GPU samples (the
//     clocks are judged over the run), kept in the timeline so gpufeed
//     report reproduces them without re-running them.
func readChannelsAndChecks(ctx context.Context, tl *timeline.Timeline, fs procfs.FS, src gpu.Source) {
	var simPaths []string
	if s, ok := src.(interface{ Path() string }); ok {
		simPaths = append(simPaths, s.Path())
	}
	dc := procfs.NewChannelProber(fs, simPaths...)
	for _, p := range tl.Procs {
		if p.Exited {
			continue
		}
		res, err := dc.Channels(p.Key.PID)
		if err != nil {
			continue // gone since its last sample
		}
		p.DeviceChannels = &timeline.DeviceChannels{T: sinceStart(tl), Channels: res.Channels, NotVisible: res.NotVisible}
	}

	opts := check.Options{ProcRoot: fs.Proc, SysRoot: fs.Sys, PID: tl.Meta.Target.PID, GPU: src, GPUWindow: gpuWindow(tl)}
	if tl.Meta.Ended == "target exited" {
		opts.PID = 0 // nothing left to check per process; the platform still is
	}
	results := check.Run(ctx, opts)
	c := &timeline.Checks{T: sinceStart(tl), Statuses: map[string]int{}, Findings: check.Findings(results)}
	for _, r := range results {
		c.Statuses[string(r.Status)]++
	}
	tl.Meta.Checks = c
}

func sinceStart(tl *timeline.Timeline) int64 {
	if tl.Meta.Started.IsZero() {
		return 0
	}
	return time.Since(tl.Meta.Started).Nanoseconds()
}

// gpuWindow gathers each GPU's samples over the window, so gpu-clocks
// judges the clock over the job's run, not over the one reading taken
// after it (a GPU busy 6 % of the window can read 100 % in that instant).
func gpuWindow(tl *timeline.Timeline) map[int][]gpu.Sample {
	out := map[int][]gpu.Sample{}
	for _, tk := range tl.Ticks {
		for _, s := range tk.GPUs {
			if s.Lost == "" {
				out[s.Index] = append(out[s.Index], s)
			}
		}
	}
	return out
}
