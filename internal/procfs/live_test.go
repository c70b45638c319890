package procfs

import (
	"os"
	"testing"
)

// TestLiveMachine runs every reader over this machine's real /proc and /sys:
// real samples, not fixtures. What a machine lacks (cpufreq in a VM, NFS)
// must come back as absent, never as a parse error.
func TestLiveMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	f := At("", "")
	ok := func(what string, err error) {
		t.Helper()
		if err != nil && !IsAbsent(err) && !IsDenied(err) {
			t.Errorf("%s: %v", what, err)
		}
	}
	cpus, err := f.CPUs()
	ok("CPUs", err)
	if err == nil && len(cpus) == 0 {
		t.Error("no CPUs listed")
	}
	for _, c := range cpus {
		for _, p := range c.Problems {
			t.Errorf("cpu%d: %v", c.ID, p)
		}
	}
	devs, skipped, err := f.PCIDevices()
	ok("PCIDevices", err)
	for _, s := range skipped {
		t.Errorf("PCI device skipped: %v", s)
	}
	for _, d := range devs {
		for _, p := range d.Problems {
			t.Errorf("%s: %v", d.Address, p)
		}
	}
	_, err = f.Interrupts()
	ok("Interrupts", err)
	st, err := f.ProcStatus(os.Getpid())
	ok("ProcStatus", err)
	if cpus, have := st.CPUsAllowed(); err == nil && (!have || len(cpus) == 0) {
		t.Error("no Cpus_allowed_list for this process")
	}
	_, err = f.LastCPU(os.Getpid(), os.Getpid())
	ok("LastCPU", err)
	_, err = f.Limits(0)
	ok("Limits", err)
	_, err = f.NUMAMaps(0)
	ok("NUMAMaps", err)
	_, err = f.Mounts(0)
	ok("Mounts", err)
	_, err = f.NFSMounts(0)
	ok("NFSMounts", err)
	_, err = f.NFSClient()
	ok("NFSClient", err)
	_, err = f.Meminfo()
	ok("Meminfo", err)
	_, err = f.Pressure("memory")
	ok("Pressure", err)
	_, err = f.Dirty()
	ok("Dirty", err)
	_, err = f.THP()
	ok("THP", err)
	_, err = f.KernelRelease()
	ok("KernelRelease", err)
	_, err = f.KernelCmdline()
	ok("KernelCmdline", err)
	_, err = f.Nodes()
	ok("Nodes", err)
	_, err = f.SMT()
	ok("SMT", err)
	_, err = f.Uptime()
	ok("Uptime", err)
	fds, err := f.FDKinds(0, -1)
	ok("FDKinds", err)
	if err == nil && fds.Total == 0 {
		t.Error("this process has no open files?")
	}
	_, err = Statfs("/")
	ok("Statfs", err)
}
