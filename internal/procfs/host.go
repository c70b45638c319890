package procfs

import (
	"os"
	"strings"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Host samples the host-wide files, each kept open and re-read with pread.
// /proc/stat is read on every tick; pressure, meminfo and diskstats on the
// slow tier. Files that do not exist are named in NotVisible once.
type Host struct {
	fs        FS
	stat      *Kept
	psi       [3]*Kept // cpu, memory, io
	meminfo   *Kept
	diskstats *Kept
	keepDisk  map[string]bool // whole disks from SYS/block; nil keeps all but loop/ram
	buf       []byte
	st        HostStat
	disks     []timeline.DiskStat
	// NotVisible maps a host fact ("psi", "meminfo", "diskstats") to why it is missing.
	NotVisible map[string]string
}

// OpenHost opens the host files under fs and lists whole disks under SYS/block.
func OpenHost(fs FS) (*Host, error) {
	h := &Host{fs: fs, buf: make([]byte, 64<<10), NotVisible: map[string]string{}}
	var err error
	if h.stat, err = OpenKept(fs.ProcPath("stat"), PrivProcMount); err != nil {
		return nil, err
	}
	for i, name := range []string{"cpu", "memory", "io"} {
		k, err := OpenKept(fs.ProcPath("pressure", name), PrivProcMount)
		if err != nil {
			h.NotVisible["psi"] = "absent: " + fs.ProcPath("pressure") + " not readable (kernel without CONFIG_PSI, or booted with psi=0)"
			h.closePSI()
			break
		}
		h.psi[i] = k
	}
	if h.meminfo, err = OpenKept(fs.ProcPath("meminfo"), PrivProcMount); err != nil {
		h.NotVisible["meminfo"] = "absent: " + err.Error()
	}
	if h.diskstats, err = OpenKept(fs.ProcPath("diskstats"), PrivProcMount); err != nil {
		h.NotVisible["diskstats"] = "absent: " + err.Error()
	}
	if ents, err := os.ReadDir(fs.SysPath("block")); err == nil {
		h.keepDisk = map[string]bool{}
		for _, e := range ents {
			if !isVirtualDisk(e.Name()) {
				h.keepDisk[e.Name()] = true
			}
		}
	}
	return h, nil
}

// isVirtualDisk names block devices that never back a dataset: loop and RAM disks.
func isVirtualDisk(name string) bool {
	return strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram")
}

func (h *Host) closePSI() {
	for i, k := range h.psi {
		k.Close()
		h.psi[i] = nil
	}
}

// Sample reads the host. full adds the slow-tier files (PSI, meminfo, diskstats).
func (h *Host) Sample(full bool) (*timeline.HostSample, error) {
	b, err := h.stat.ReadGrow(&h.buf, 16<<20)
	if err != nil {
		return nil, err
	}
	if err := ParseProcStat(h.stat.Path(), b, &h.st); err != nil {
		return nil, err
	}
	hs := &timeline.HostSample{
		CPUs:         append([]timeline.CPUTimes(nil), h.st.CPUs...),
		ProcsRunning: h.st.ProcsRunning,
		ProcsBlocked: h.st.ProcsBlocked,
		Ctxt:         h.st.Ctxt,
		Forks:        h.st.Processes,
	}
	if !full {
		return hs, nil
	}
	if h.psi[0] != nil {
		var p [3]Pressure
		ok := true
		for i, k := range h.psi {
			b, err := k.ReadInto(h.buf[:4096])
			if err == nil {
				p[i], err = ParsePressure(k.Path(), b)
			}
			if err != nil {
				h.NotVisible["psi"] = "unreadable: " + err.Error()
				ok = false
				break
			}
		}
		if ok {
			hs.PSI = &timeline.PSI{CPUSomeUS: p[0].Some.TotalUS, MemSomeUS: p[1].Some.TotalUS, MemFullUS: p[1].FullUS(),
				IOSomeUS: p[2].Some.TotalUS, IOFullUS: p[2].FullUS()}
		}
	}
	if h.meminfo != nil {
		b, err := h.meminfo.ReadGrow(&h.buf, 1<<20)
		var m timeline.MemInfo
		if err == nil {
			err = hostMeminfo(h.meminfo.Path(), b, &m)
		}
		if err != nil {
			h.NotVisible["meminfo"] = "unreadable: " + err.Error()
		} else {
			hs.Mem = &m
		}
	}
	if h.diskstats != nil {
		b, err := h.diskstats.ReadGrow(&h.buf, 16<<20)
		if err == nil {
			h.disks, err = ParseDiskstats(h.diskstats.Path(), b, h.disks, h.keep)
		}
		if err != nil {
			h.NotVisible["diskstats"] = "unreadable: " + err.Error()
		} else {
			hs.Disks = append([]timeline.DiskStat(nil), h.disks...)
		}
	}
	return hs, nil
}

func (h *Host) keep(name []byte) bool {
	if h.keepDisk != nil {
		return h.keepDisk[string(name)]
	}
	return !isVirtualDisk(string(name))
}

// Close releases the host files.
func (h *Host) Close() {
	h.stat.Close()
	h.closePSI()
	h.meminfo.Close()
	h.diskstats.Close()
}

// hostMeminfo is what the sampler keeps of meminfo: MemTotal and
// MemAvailable must be there (MemAvailable exists since 3.14); the other
// fields are zero when absent.
func hostMeminfo(file string, b []byte, m *timeline.MemInfo) error {
	mi, err := ParseMeminfo(file, b)
	if err != nil {
		return err
	}
	if mi.MemTotal == nil || mi.MemAvailable == nil {
		return &ParseError{File: file, Offset: -1, Want: "MemTotal and MemAvailable lines"}
	}
	v := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	*m = timeline.MemInfo{Total: *mi.MemTotal, Available: *mi.MemAvailable, Dirty: v(mi.Dirty),
		Writeback: v(mi.Writeback), SwapTotal: v(mi.SwapTotal), SwapFree: v(mi.SwapFree)}
	return nil
}
