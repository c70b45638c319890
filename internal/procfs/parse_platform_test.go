package procfs

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseLinkSpeed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // 0: nil
		err  bool
	}{
		{"16.0 GT/s PCIe", 16, false},
		{"8 GT/s", 8, false},
		{"2.5 GT/s PCIe\n", 2.5, false},
		{"Unknown", 0, false},
		{"Unknown speed", 0, false},
		{"fast", 0, true},
		{"-8 GT/s", 0, true},
	} {
		got, err := ParseLinkSpeed(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseLinkSpeed(%q) error %v", tc.in, err)
			continue
		}
		if tc.want == 0 && got != nil || tc.want != 0 && (got == nil || *got != tc.want) {
			t.Errorf("ParseLinkSpeed(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if PCIeGen(8) != 3 || PCIeGen(16) != 4 || PCIeGen(2.5) != 1 || PCIeGen(7) != 0 || PCIeRate(5) != 32 || PCIeRate(9) != 0 {
		t.Error("PCIeGen/PCIeRate wrong")
	}
}

func TestUpstreamFromSysfsPath(t *testing.T) {
	got := UpstreamFromSysfsPath("../../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:85:00.0", "0000:85:00.0")
	want := []string{"0000:80:01.0", "0000:81:00.0", "0000:82:08.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseInterruptsRealVM(t *testing.T) {
	data, err := os.ReadFile("testdata/interrupts.vm")
	if err != nil {
		t.Fatal(err)
	}
	irq, err := ParseInterrupts("interrupts.vm", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(irq.CPUs, []int{0, 1}) {
		t.Fatalf("CPUs = %v", irq.CPUs)
	}
	var sawLOC, sawERR bool
	for _, l := range irq.Lines {
		switch l.Name {
		case "LOC":
			sawLOC = true
			if l.Device || len(l.Counts) != 2 || !strings.Contains(l.Desc, "Local timer") {
				t.Errorf("LOC row = %+v", l)
			}
		case "ERR":
			sawERR = true
			if len(l.Counts) != 1 {
				t.Errorf("ERR row = %+v", l)
			}
		case "36":
			if !l.Device || l.Counts[1] == 0 || !strings.Contains(l.Desc, "virtio1-req.0") {
				t.Errorf("IRQ 36 row = %+v", l)
			}
		}
	}
	if !sawLOC || !sawERR {
		t.Error("missing LOC or ERR rows")
	}
}

func TestParseInterruptsOfflineCPUsAndErrors(t *testing.T) {
	in := "           CPU0       CPU2\n  0:   10   20   IO-APIC 2-edge timer\n 16:   5  7  PCI-MSI nvidia\nLOC: 100 200 Local timer interrupts\nERR: 3\n"
	irq, err := ParseInterrupts("x", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	per := irq.DevicePerCPU()
	if per[0] != 15 || per[2] != 27 {
		t.Errorf("DevicePerCPU = %v, want 0:15 2:27 (LOC excluded)", per)
	}
	_, err = ParseInterrupts("x", []byte("CPU0\nbogus 1 2\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 {
		t.Errorf("want a ParseError on line 2, got %v", err)
	}
	if _, err := ParseInterrupts("x", nil); err == nil {
		t.Error("empty input: want error")
	}
}

func TestParseNUMAMaps(t *testing.T) {
	in := `7f0000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
7f1000000000 default file=/usr/lib/libcuda.so mapped=100 N0=60 N1=40 kernelpagesize_kB=4
7f2000000000 interleave:0-1 anon=4 N0=2 N1=2 kernelpagesize_kB=2048
`
	m, err := ParseNUMAMaps("numa_maps", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.Mappings != 3 || m.Policies["bind:1"] != 1 || m.Policies["interleave:0-1"] != 1 {
		t.Errorf("mappings/policies = %d %v", m.Mappings, m.Policies)
	}
	if got, want := m.BytesByNode[1], uint64(552*4096+2*2048*1024); got != want {
		t.Errorf("node 1 bytes = %d, want %d", got, want)
	}
	if got, want := m.BytesByNode[0], uint64(60*4096+2*2048*1024); got != want {
		t.Errorf("node 0 bytes = %d, want %d", got, want)
	}
	if _, err := ParseNUMAMaps("numa_maps", []byte("zzz default\n")); err == nil {
		t.Error("bad address: want error")
	}
	data, err := os.ReadFile("testdata/numa_maps.vm")
	if err != nil {
		t.Fatal(err)
	}
	real, err := ParseNUMAMaps("numa_maps.vm", data)
	if err != nil || real.Mappings == 0 || real.BytesByNode[0] == 0 {
		t.Errorf("real numa_maps: %+v, %v", real, err)
	}
}

func TestParseLimits(t *testing.T) {
	data, err := os.ReadFile("testdata/limits.vm")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLimits("limits.vm", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := l[LimitOpenFiles]; got.Soft != 20000 || got.Hard != 20000 || got.Unit != "files" {
		t.Errorf("open files = %+v", got)
	}
	if got := l["Max cpu time"]; got.Soft != Unlimited {
		t.Errorf("cpu time = %+v", got)
	}
	if got := l["Max nice priority"]; got.Unit != "" || got.Soft != 0 {
		t.Errorf("nice = %+v", got)
	}
	if _, err := ParseLimits("x", []byte("nope\n")); err == nil {
		t.Error("no header: want error")
	}
}

func TestParseStatusOfAVM(t *testing.T) {
	data, err := os.ReadFile("testdata/status.vm")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseStatus("status.vm", data)
	if err != nil {
		t.Fatal(err)
	}
	cpus, okC := s.CPUsAllowed()
	mems, okM := s.MemsAllowed()
	if s.Name != "cp" || !okC || cpus.String() != "0-1" || !okM || mems.String() != "0" || !s.HaveVmLck {
		t.Errorf("status = %+v", s)
	}
	if _, err := ParseStatus("x", []byte("Cpus_allowed_list:\tzz\n")); err == nil {
		t.Error("bad list: want error")
	}
}

func TestParseStatProcessor(t *testing.T) {
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[36] = "13"
	line := "4242 (py (worker) 1) " + strings.Join(fields, " ")
	n, err := ParseStatProcessor("stat", []byte(line))
	if err != nil || n != 13 {
		t.Errorf("got %d, %v; want 13", n, err)
	}
	if _, err := ParseStatProcessor("stat", []byte("4242 (x) R 1")); err == nil {
		t.Error("short stat: want error")
	}
}

func TestParseKernelCmdline(t *testing.T) {
	got := ParseKernelCmdline(`BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,domain,2-7 quiet dyndbg="file x.c +p" nohz_full=2-7 -- --init-arg=1` + "\n")
	names := []string{}
	for _, p := range got {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"BOOT_IMAGE", "isolcpus", "quiet", "dyndbg", "nohz_full"}) {
		t.Fatalf("names = %v", names)
	}
	if p, _ := Param(got, "dyndbg"); p.Value != "file x.c +p" {
		t.Errorf("quoted value = %q", p.Value)
	}
	p, ok := Param(got, "isolcpus")
	if !ok {
		t.Fatal("no isolcpus")
	}
	set, flags, err := IsolcpusList(p.Value)
	if err != nil || set.String() != "2-7" || !reflect.DeepEqual(flags, []string{"managed_irq", "domain"}) {
		t.Errorf("isolcpus = %s %v %v", set, flags, err)
	}
}

func TestParseKernelRelease(t *testing.T) {
	k, err := ParseKernelRelease("6.8.0-45-generic")
	if err != nil || k.Major != 6 || k.Minor != 8 || !k.AtLeast(6, 6) || k.AtLeast(6, 9) {
		t.Errorf("got %+v %v", k, err)
	}
	k, err = ParseKernelRelease("5.15rc1")
	if err != nil || k.Minor != 15 {
		t.Errorf("got %+v %v", k, err)
	}
	if _, err := ParseKernelRelease("linux"); err == nil {
		t.Error("want error")
	}
}

func TestParseNFSClient(t *testing.T) {
	in := "net 0 0 0 0\nrpc 248391 1203 0\nproc4 4 0 182744 100 3\n"
	c, err := ParseNFSClient("nfs", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls != 248391 || c.Retransmissions != 1203 || c.Version != "4" || c.Ops["read"] != 182744 {
		t.Errorf("got %+v", c)
	}
	if _, err := ParseNFSClient("nfs", []byte("bogus 1 2\n")); err == nil {
		t.Error("want error")
	}
}

func TestUnescapeMountField(t *testing.T) {
	if got := UnescapeMountField(`/mnt/my\040data\134x`); got != `/mnt/my data\x` {
		t.Errorf("got %q", got)
	}
	if got := UnescapeMountField(`/trailing\04`); got != `/trailing\04` {
		t.Errorf("got %q", got)
	}
}

func TestMountFor(t *testing.T) {
	mounts := []Mount{{MountPoint: "/", FSType: "ext4"}, {MountPoint: "/data", FSType: "xfs"}, {MountPoint: "/data/nfs", FSType: "nfs4"}, {MountPoint: "/data", FSType: "overlay"}}
	for p, want := range map[string]string{"/data/nfs/x": "nfs4", "/data/nfsx": "overlay", "/": "ext4", "/data": "overlay", "rel/path": "ext4"} {
		m, ok := MountFor(mounts, p)
		if !ok || m.FSType != want {
			t.Errorf("MountFor(%q) = %v, want %s", p, m.FSType, want)
		}
	}
}

func TestNVIDIAHelpers(t *testing.T) {
	if n, ok := ParseNVIDIAInformationMinor("Model: \t NVIDIA A100\nIRQ: 10\nDevice Minor: \t 3\n"); !ok || n != 3 {
		t.Errorf("minor = %d %v", n, ok)
	}
	if BracketChoice("always [madvise] never") != "madvise" || BracketChoice("always") != "" {
		t.Error("BracketChoice")
	}
}
