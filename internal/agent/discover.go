package agent

import (
	"os"
	"sort"
	"strconv"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// gpuProc is a process found using a GPU.
type gpuProc struct {
	key  timeline.ProcKey
	ppid int
	comm string
	// devices are the indexes of the devices it uses (from the device's
	// process list), or the /dev/nvidiaN minor numbers it holds open when
	// only its descriptors tell (byNode).
	devices []int
	byNode  bool
}

// found is one discovery's result: the roots of the GPU process trees to
// watch, by identity, with the devices each tree uses.
type found struct {
	roots map[timeline.ProcKey]*gpuProc
	// how says where the processes were found ("listed by the device",
	// "holding /dev/nvidia* open").
	how string
}

// discover finds the processes using a GPU: the device's own process list
// (NVML's running compute processes, the simulated device's clients) when
// the source gives one, else the processes holding /dev/nvidia* device
// nodes open (a scan of every process's descriptors, so done only when
// there is no list). Each GPU process whose parent chain holds no other
// GPU process is a root: its tree (DataLoader workers, helper processes)
// is watched as one job, as diagnose --pid ROOT watches it.
func discover(fs procfs.FS, samples []gpu.Sample, scanNodes bool, self int) (found, error) {
	procs := map[int]*gpuProc{}
	add := func(pid, dev int, byNode bool) {
		if pid <= 0 || pid == self {
			return
		}
		p := procs[pid]
		if p == nil {
			st, err := procfs.ReadStatOnce(fs.PidPath(pid, "stat"))
			if err != nil {
				return // gone since the device listed it
			}
			p = &gpuProc{key: timeline.ProcKey{PID: pid, StartTime: st.StartTime}, ppid: st.PPID, comm: string(st.Comm), byNode: byNode}
			procs[pid] = p
		}
		for _, d := range p.devices {
			if d == dev {
				return
			}
		}
		p.devices = append(p.devices, dev)
	}
	how := "listed by the device as compute processes"
	for _, s := range samples {
		for _, p := range s.Processes {
			if p.NotVisible == "" {
				add(p.PID, s.Index, false)
			}
		}
	}
	if len(procs) == 0 && scanNodes {
		how = "holding /dev/nvidia* device nodes open"
		d, err := procfs.OpenDir(fs.Proc)
		if err != nil {
			return found{}, err
		}
		defer d.Close()
		var pids []int
		if err := d.EachNumeric(func(pid int) { pids = append(pids, pid) }); err != nil {
			return found{}, err
		}
		for _, pid := range pids {
			for _, minor := range nvidiaMinors(fs, pid) {
				add(pid, minor, true)
			}
		}
	}
	// Roots: walk each process's parents; a GPU process below another one
	// belongs to that one's tree.
	parentOf := func(pid int) int {
		if p := procs[pid]; p != nil {
			return p.ppid
		}
		st, err := procfs.ReadStatOnce(fs.PidPath(pid, "stat"))
		if err != nil {
			return 0
		}
		return st.PPID
	}
	out := found{roots: map[timeline.ProcKey]*gpuProc{}, how: how}
	for pid, p := range procs {
		root := p
		for a, hops := parentOf(pid), 0; a > 1 && hops < 64; a, hops = parentOf(a), hops+1 {
			if q := procs[a]; q != nil {
				root = q
			}
		}
		r := out.roots[root.key]
		if r == nil {
			r = &gpuProc{key: root.key, ppid: root.ppid, comm: root.comm, byNode: root.byNode}
			out.roots[root.key] = r
		}
		for _, d := range p.devices {
			if !containsInt(r.devices, d) {
				r.devices = append(r.devices, d)
			}
		}
		sort.Ints(r.devices)
	}
	return out, nil
}

// nvidiaMinors lists the /dev/nvidiaN nodes pid holds open (N >= 0; the
// control and UVM nodes, which every CUDA process and the driver's own
// daemons hold, do not name a device). A process whose descriptors are not
// visible holds none as far as the agent can tell.
func nvidiaMinors(fs procfs.FS, pid int) []int {
	f, err := os.Open(fs.PidPath(pid, "fd"))
	if err != nil {
		return nil
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil
	}
	var out []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		target, err := fs.FDTarget(pid, fd)
		if err != nil {
			continue
		}
		if m, ok := gpu.NVIDIAMinor(target); ok && !containsInt(out, m) {
			out = append(out, m)
		}
	}
	sort.Ints(out)
	return out
}

func containsInt(v []int, x int) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}
