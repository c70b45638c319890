package judge

import (
	"fmt"
	"math"
	"sort"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "input-waits-on-storage", Title: "GPU idle while its input waits on storage (storage-bound)",
		// Sources: 002 « Goulot I/O et stockage », Task 7, Task 8, Checklist D
		Run: runStorage})
}

// runStorage: the launch thread waited for input (or read itself) while the
// threads producing it sat in uninterruptible sleep on the disk.
func runStorage(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.StorageBound]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	_, disk, n := in.producerMeans()
	readers := diskWaiters(in)
	f := finding.Finding{
		ID: "input-waits-on-storage", Severity: in.causeSeverity(share), Supports: finding.StorageBound, Subject: threadSubject(launchThread.T),
		// Sources: 002 « Goulot I/O et stockage », Task 7, Task 8, Checklist D
		Claim: fmt.Sprintf("the job's input waits on storage: the threads that read it spent %.1f threads' worth of time blocked in disk I/O (state D)%s",
			(disk+100*float64(launchThread.Waits.Disk)/math.Max(1, float64(launchThread.Waits.Ticks)))/100, in.idleBecause(share)),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(),
		ev("the job's other threads in uninterruptible sleep (D: disk I/O), summed", disk, "% of one thread's time", in.window(n), "/proc/PID/task/TID/stat state"))
	if rate, size, ok := jobReads(in); ok {
		if !math.IsNaN(size) {
			f.Evidence = append(f.Evidence, ev("mean read size", size/1024, "KiB per read call", "over the window", "/proc/PID/io rchar / syscr"))
		}
		f.Evidence = append(f.Evidence, ev("job reads from storage", rate/1024, "KiB/s", "over the window", "/proc/PID/io read_bytes"))
	}
	f.Evidence = append(f.Evidence, in.shareEvidence(finding.StorageBound,
		fmt.Sprintf("launch thread or its input's producers in disk wait ≥ %.0f%% of a thread", thresholds.ProducerIOWaitPct)))
	if len(readers) > 0 {
		f.Evidence = append(f.Evidence, evText("readers most often in D", readers, in.window(n), "/proc/PID/task/TID/stat state"))
	}
	if h := in.View.Host; h != nil {
		if s := h.IOWaitPct.Stats(); s.N > 0 {
			f.Evidence = append(f.Evidence, ev("host iowait, mean", s.Mean, "% of CPU time", in.window(s.N), "/proc/stat"))
		}
		if h.PSI != nil {
			if s := h.PSI.IOSome.Stats(); s.N > 0 {
				f.Evidence = append(f.Evidence, ev("tasks stalled on I/O (PSI io some), mean", s.Mean, "% of time", in.window(s.N), "/proc/pressure/io"))
			}
		}
		if d := busiestDisk(h); d != nil {
			if !math.IsNaN(d.Reads) {
				f.Evidence = append(f.Evidence, ev("disk "+d.Name+" reads", d.Reads, "/s", "over the window", "/proc/diskstats"))
			}
			if !math.IsNaN(d.Await) {
				f.Evidence = append(f.Evidence, ev("disk "+d.Name+" await (time in the device queue; a throttled or remote store waits before it)",
					d.Await, "ms per I/O", "over the window", "/proc/diskstats"))
			}
		}
	}
	f.Evidence = append(f.Evidence, in.launchWaitsEvidence())
	f.Evidence = append(f.Evidence, in.launchWakersEvidence()...)
	do := "read less often and in bigger pieces: pack samples into large shards (tar/WebDataset, TFRecord, Parquet) read sequentially, " +
		"prefetch ahead of the GPU (more workers or prefetch_factor only while the disk has headroom), cache or stage the dataset on local NVMe, " +
		"and check that the storage is not throttled or shared."
	if _, size, ok := jobReads(in); ok && size < 64*1024 {
		f.Decision = fmt.Sprintf("Reads average %.1f KiB per call, so ", size/1024) + do
	} else {
		f.Decision = "R" + do[1:]
	}
	return []finding.Finding{f}
}

// diskWaiters names the job's threads most often in D.
func diskWaiters(in *Input) string {
	type tw struct {
		name string
		d    float64
	}
	var all []tw
	for _, p := range in.Job.Procs {
		for _, th := range p.Threads {
			d, k := 0, 0
			for i := range in.Timeline.Ticks {
				if s := th.Sample(i); s != nil {
					k++
					if s.State == 'D' {
						d++
					}
				}
			}
			if k > 0 && d > 0 {
				all = append(all, tw{threadName(th), float64(d) / float64(k) * 100})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].d > all[j].d })
	out := ""
	for i, x := range all {
		if i == 3 {
			break
		}
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%s %.0f%% of samples", x.name, x.d)
	}
	return out
}

// jobReads sums the job's storage reads per second and the mean read size.
func jobReads(in *Input) (rate, size float64, ok bool) {
	var rchar, calls float64
	for _, p := range in.Job.Procs {
		if !math.IsNaN(p.ReadBytesPerSec) {
			rate += p.ReadBytesPerSec
			ok = true
		}
		if !math.IsNaN(p.RCharPerSec) && !math.IsNaN(p.ReadCallsPerSec) {
			rchar += p.RCharPerSec
			calls += p.ReadCallsPerSec
		}
	}
	size = math.NaN()
	if calls > 0 {
		size = rchar / calls
	}
	return rate, size, ok
}

// busiestDisk is the disk with the most I/O time over the window.
func busiestDisk(h *derive.Host) *derive.Disk {
	var best *derive.Disk
	for _, d := range h.Disks {
		if math.IsNaN(d.Util) {
			continue
		}
		if best == nil || d.Util > best.Util {
			best = d
		}
	}
	return best
}
