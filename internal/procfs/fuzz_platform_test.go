package procfs

import (
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets cover every parser of input another user can shape:
// interrupt descriptions come from drivers, numa_maps from file names,
// mountstats from mount sources, cmdline from the boot loader. CI runs the
// seeds; `go test -fuzz=FuzzX` explores.

func seedFile(f *testing.F, path string) {
	if data, err := os.ReadFile(path); err == nil {
		f.Add(data)
	}
}

func FuzzParseInterrupts(f *testing.F) {
	seedFile(f, "testdata/interrupts.vm")
	f.Add([]byte("CPU0 CPU1\nERR: 0\nMIS:\n 1: 2\n"))
	f.Add([]byte("   CPU0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		irq, err := ParseInterrupts("fuzz", data)
		if err != nil {
			return
		}
		for _, l := range irq.Lines {
			if len(l.Counts) > len(irq.CPUs) {
				t.Fatalf("row %q has %d counts for %d CPUs", l.Name, len(l.Counts), len(irq.CPUs))
			}
		}
		irq.DevicePerCPU()
	})
}

func FuzzParseNUMAMaps(f *testing.F) {
	seedFile(f, "testdata/numa_maps.vm")
	f.Add([]byte("7f00 bind:1 anon=1 N1=1 kernelpagesize_kB=2048\n"))
	f.Add([]byte("1 x N=1 N0=x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseNUMAMaps("fuzz", data)
		if err == nil && m.Mappings < 0 {
			t.Fatal("negative mappings")
		}
	})
}

func FuzzParseKernelCmdline(f *testing.F) {
	f.Add(`root=/dev/sda isolcpus=managed_irq,domain,2-7 nohz_full=2-7 "quoted=a b" -- init`)
	f.Add(`"unterminated`)
	f.Add("isolcpus=domain,")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range ParseKernelCmdline(s) {
			if p.Name == "--" {
				t.Fatal("-- must end the kernel's parameters")
			}
			if p.Name == "isolcpus" {
				_, _, _ = IsolcpusList(p.Value)
			}
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	seedFile(f, "testdata/status.vm")
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = ParseStatus("fuzz", data) })
}

func FuzzParseStatProcessor(f *testing.F) {
	f.Add([]byte("1 (a) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5 0"))
	f.Add([]byte("1 (a)) x"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = ParseStatProcessor("fuzz", data) })
}

func FuzzParseLimits(f *testing.F) {
	seedFile(f, "testdata/limits.vm")
	f.Add([]byte("Limit  Soft Limit\nx"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = ParseLimits("fuzz", data) })
}

func FuzzParseNFSClient(f *testing.F) {
	f.Add([]byte("net 0 0 0 0\nrpc 248391 1203 0\nproc4 3 0 1 2\nproc3 22 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"))
	f.Add([]byte("proc2 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = ParseNFSClient("fuzz", data) })
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"16.0 GT/s PCIe", "Unknown", "8 GT/s", "NaN GT/s", "1e400 GT/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseLinkSpeed(s)
		if err == nil && v != nil && (*v <= 0 || *v != *v) {
			t.Fatalf("%q gave %v", s, *v)
		}
	})
}

func FuzzUnescapeMountField(f *testing.F) {
	f.Add(`/a\040b\`)
	f.Add(`\777\12`)
	f.Fuzz(func(t *testing.T, s string) {
		if len(UnescapeMountField(s)) > len(s) {
			t.Fatal("unescaping grew the string")
		}
	})
}

// FuzzNFSMounts drives prometheus/procfs's mountstats parser through our
// reader (its parser is not exported, so the input goes through a file).
func FuzzNFSMounts(f *testing.F) {
	seedFile(f, "../../../testdata/check/nfs-retrans/proc/4242/mountstats")
	f.Add([]byte("device srv:/x mounted on /x with fstype nfs4 statvers=1.1\n\tage: 1\n\tper-op statistics\n\t        READ: 1 2 0 0 0 0 0 0 0\n"))
	f.Add([]byte("device a mounted on /b with fstype ext4\n"))
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "7"), 0o755); err != nil {
		f.Fatal(err)
	}
	fs := At(dir, dir)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "7", "mountstats"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		mounts, err := fs.NFSMounts(7)
		if err != nil {
			return
		}
		for _, m := range mounts {
			for _, op := range m.Ops {
				if op.Retransmissions() > op.Transmissions {
					t.Fatal("retransmissions above transmissions")
				}
			}
		}
	})
}
