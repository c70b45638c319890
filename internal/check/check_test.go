package check

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

func fixture(name string) (proc, sysRoot string) {
	root := filepath.Join("..", "..", "testdata", "check", name)
	return filepath.Join(root, "proc"), filepath.Join(root, "sys")
}

func find(rs []Outcome, id, subject string) (Outcome, bool) {
	for _, r := range rs {
		if r.ID == id && (subject == "" || r.Subject == subject) {
			return r, true
		}
	}
	return Outcome{}, false
}

func want(t *testing.T, rs []Outcome, id, subject string, st Status) Outcome {
	t.Helper()
	r, ok := find(rs, id, subject)
	if !ok {
		t.Fatalf("no result %s %q", id, subject)
	}
	if r.Status != st {
		t.Errorf("%s %q: status %s, want %s (%s)", id, subject, r.Status, st, r.Claim)
	}
	return r
}

// TestFixtureMachines runs every check over the fixture trees and checks the
// conclusions each fixture machine exists for, and that the rest stay quiet.
func TestFixtureMachines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pid    int
		data   string
		expect map[[2]string]Status // {id, subject} -> status
	}{
		{"server", 0, "", map[[2]string]Status{
			{"gpu-driver", ""}:                Warn, // NVIDIA GPUs on the PCI bus, no driver source
			{"pcie-link", "GPU 0000:92:00.0"}: OK, {"gpu-numa", ""}: OK, {"cpu-governor", ""}: OK,
			{"numa-affinity", ""}: Absent, {"dev-shm", ""}: OK, {"nfs-client", ""}: Absent, {"gpu-throttle", ""}: Absent,
		}},
		{"server-downgraded", 0, "", map[[2]string]Status{
			{"gpu-driver", ""}:                Warn, // NVIDIA GPUs on the PCI bus, no driver source
			{"pcie-link", "GPU 0000:92:00.0"}: Fail, {"pcie-link", "GPU 0000:93:00.0"}: OK, {"pcie-link", "NVMe 0000:85:00.0"}: OK,
		}},
		{"wrong-numa", 4242, "", map[[2]string]Status{
			{"gpu-driver", ""}:            Warn, // NVIDIA GPUs on the PCI bus, no driver source
			{"numa-affinity", "pid 4242"}: Fail, {"numa-memory", "pid 4242"}: Warn, {"cpu-smt", "pid 4242"}: OK,
		}},
		{"powersave", 0, "", map[[2]string]Status{{"cpu-governor", ""}: Warn, {"cpu-frequency", ""}: OK, {"gpu-driver", ""}: Warn}},
		{"container-shm", 4242, "/data/imagenet", map[[2]string]Status{
			{"gpu-driver", ""}:                  Warn, // NVIDIA GPUs on the PCI bus, no driver source
			{"dev-shm", "/dev/shm of pid 4242"}: Fail, {"limit-memlock", "pid 4242"}: Warn, {"numa-affinity", "pid 4242"}: OK,
			{"data-filesystem", "data /data/imagenet"}: OK, {"nfs-mount", "pid 4242"}: Absent,
		}},
		{"nfs-retrans", 4242, "/datasets/imagenet", map[[2]string]Status{
			{"gpu-driver", ""}: Warn, // NVIDIA GPUs on the PCI bus, no driver source
			{"data-filesystem", "data /datasets/imagenet"}: Warn, {"nfs-client", ""}: Warn,
			{"nfs-mount", "NFS /datasets (holds --data)"}: Warn, {"numa-memory", "pid 4242"}: OK,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc, sysRoot := fixture(tc.name)
			rs := Run(context.Background(), Options{ProcRoot: proc, SysRoot: sysRoot, DevRoot: filepath.Join(filepath.Dir(proc), "dev"), PID: tc.pid, DataPath: tc.data})
			expected := 0
			for key, st := range tc.expect {
				want(t, rs, key[0], key[1], st)
				if st == Fail || st == Warn {
					expected++
				}
			}
			got := 0
			for _, r := range rs {
				if r.Status == Error {
					t.Errorf("%s %s: error %s", r.ID, r.Subject, r.Claim)
				}
				if r.Status == Fail || r.Status == Warn {
					got++
				}
				if r.Claim == "" {
					t.Errorf("%s %s: missing claim", r.ID, r.Subject)
				}
				// The agent's metrics name the subject by an identifier:
				// one token, no prose.
				if id := SubjectID(r.Subject); (r.Subject != "") != (id != "") || strings.ContainsAny(id, " ()'") {
					t.Errorf("%s %q: identifier %q, want one token naming it", r.ID, r.Subject, id)
				}
				if (r.Status == Fail || r.Status == Warn) && (r.Decision == "" || len(r.Evidence) == 0) {
					t.Errorf("%s %s: a %s needs evidence and a decision", r.ID, r.Subject, r.Status)
				}
				if (r.Status == Absent || r.Status == NotVisible) && r.Need == "" {
					t.Errorf("%s %s: %s without what would let it see", r.ID, r.Subject, r.Status)
				}
			}
			if got != expected {
				t.Errorf("%d warnings and failures, want exactly the %d expected", got, expected)
			}
			if Failed(rs) != (tc.name == "server-downgraded" || tc.name == "wrong-numa" || tc.name == "container-shm") {
				t.Errorf("Failed() = %v", Failed(rs))
			}
			if len(Findings(rs)) != got {
				t.Errorf("Findings() kept %d of %d warn/fail results", len(Findings(rs)), got)
			}
		})
	}
}

func TestChecksRegistryIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Checks() {
		if c.ID == "" || c.Title == "" || c.run == nil || seen[c.ID] {
			t.Errorf("bad or duplicate check %+v", c.ID)
		}
		seen[c.ID] = true
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "CHECKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for id := range seen {
		if !strings.Contains(string(doc), "`"+id+"`") {
			t.Errorf("docs/CHECKS.md does not document %s", id)
		}
	}
}

func TestReadFailureKinds(t *testing.T) {
	if r := readFailure("s", "x", "/proc/x", &fs.PathError{Op: "open", Path: "/p", Err: fs.ErrPermission}, "a", "root"); r.Status != NotVisible || r.Need != "root" {
		t.Errorf("denied: %+v", r)
	}
	if r := readFailure("s", "x", "/proc/x", &fs.PathError{Op: "open", Path: "/p", Err: fs.ErrNotExist}, "a", "root"); r.Status != Absent || r.Need != "a" {
		t.Errorf("absent: %+v", r)
	}
	if r := readFailure("s", "x", "/proc/x", &procfs.ParseError{File: "/proc/x", Line: 3, Want: "good"}, "a", "root"); r.Status != Error || !strings.Contains(r.Claim, "/proc/x: line 3: expected good") {
		t.Errorf("malformed: %+v", r)
	}
}

// tree writes a small fixture: files maps paths to contents, links maps
// symlink paths to targets.
func tree(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func runOne(t *testing.T, c Check, root string, opts Options) []Outcome {
	t.Helper()
	opts.ProcRoot, opts.SysRoot = filepath.Join(root, "proc"), filepath.Join(root, "sys")
	e := newEnv(context.Background(), opts)
	e.firstReadings()
	e.secondReadings()
	return c.outcomes(e)
}

func pciFiles(files map[string]string, links map[string]string, path, class, vendor, cur string, curW int, max string, maxW int, node string) {
	addr := filepath.Base(path)
	d := "sys/devices/" + path + "/"
	files[d+"class"], files[d+"vendor"], files[d+"device"] = class, vendor, "0x1"
	if cur != "" {
		files[d+"current_link_speed"] = cur
		files[d+"max_link_speed"] = max
		files[d+"current_link_width"] = itoa(curW)
		files[d+"max_link_width"] = itoa(maxW)
	}
	files[d+"numa_node"] = node
	links["sys/bus/pci/devices/"+addr] = "../../../devices/" + path
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestPCIeLinkJudgements(t *testing.T) {
	files, links := map[string]string{}, map[string]string{}
	rp := "pci0000:00/0000:00:01.0"
	up := rp + "/0000:01:00.0"
	down := up + "/0000:02:00.0"
	pciFiles(files, links, rp, "0x060400", "0x8086", "16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 16, "0")   // root port
	pciFiles(files, links, up, "0x060400", "0x1000", "16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 16, "0")   // switch uplink at x8
	pciFiles(files, links, down, "0x060400", "0x1000", "2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, "0") // port to the GPU
	pciFiles(files, links, down+"/0000:03:00.0", "0x030200", "0x10de", "2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, "0")
	pciFiles(files, links, "pci0000:00/0000:00:02.0/0000:04:00.0", "0x030000", "0x10de", "", 0, "", 0, "-1") // no link files
	pciFiles(files, links, "pci0000:00/0000:00:03.0/0000:05:00.0", "0x030200", "0x10de", "Unknown", 0, "16.0 GT/s PCIe", 16, "0")
	pciFiles(files, links, "pci0000:00/0000:00:04.0/0000:06:00.0", "0x030200", "0x10de", "16.0 GT/s PCIe", 0, "16.0 GT/s PCIe", 16, "0")
	root := tree(t, files, links)
	rs := runOne(t, pcieLinkCheck, root, Options{})
	// The GPU idles at Gen1 (a warning alone), but the switch uplink runs x8 of x16: fail.
	r := want(t, rs, "pcie-link", "GPU 0000:03:00.0", Fail)
	if !strings.Contains(r.Claim, "0000:00:01.0 > 0000:01:00.0") || !strings.Contains(r.Claim, "x8") {
		t.Errorf("claim should name the downgraded uplink: %s", r.Claim)
	}
	want(t, rs, "pcie-link", "GPU 0000:04:00.0", Absent)
	want(t, rs, "pcie-link", "GPU 0000:05:00.0", Absent) // "Unknown" speed is absent, not zero
	want(t, rs, "pcie-link", "GPU 0000:06:00.0", Fail)   // width 0: link down

	// Speed alone below max: a warning (idle GPUs lower link speed).
	files2, links2 := map[string]string{}, map[string]string{}
	pciFiles(files2, links2, "pci0000:00/0000:00:01.0", "0x060400", "0x8086", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, "0")
	pciFiles(files2, links2, "pci0000:00/0000:00:01.0/0000:03:00.0", "0x030200", "0x10de", "2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, "0")
	rs = runOne(t, pcieLinkCheck, tree(t, files2, links2), Options{})
	want(t, rs, "pcie-link", "GPU 0000:03:00.0", Warn)

	// gpu-numa on a two-node machine with a GPU whose node is unknown.
	files["sys/devices/system/node/node0/cpulist"] = "0-3"
	files["sys/devices/system/node/node1/cpulist"] = "4-7"
	rs = runOne(t, gpuNUMACheck, tree(t, files, links), Options{})
	want(t, rs, "gpu-numa", "", Warn)
}

func TestReplayAllowance(t *testing.T) {
	for _, tc := range []struct{ gen, lanes, want int }{{4, 16, 16}, {3, 8, 4}, {5, 16, 31}, {1, 1, 1}, {9, 16, 62}} {
		if got := replayAllowancePerMinute(tc.gen, tc.lanes); got != float64(tc.want) {
			t.Errorf("Gen%d x%d: %v, want %d", tc.gen, tc.lanes, got, tc.want)
		}
	}
}

// fakeSource is a gpu.Source with fixed answers.
type fakeSource struct {
	devs    []gpu.DeviceInfo
	samples [][]gpu.Sample
	calls   int
	err     error
}

func (f *fakeSource) Name() string              { return "fake" }
func (f *fakeSource) Devices() []gpu.DeviceInfo { return f.devs }
func (f *fakeSource) Close() error              { return nil }
func (f *fakeSource) Sample() ([]gpu.Sample, error) {
	if f.err != nil {
		return nil, f.err
	}
	s := f.samples[min(f.calls, len(f.samples)-1)]
	f.calls++
	return s, nil
}

func ptr[T any](v T) *T { return &v }

func TestGPUChecksWithFakeSource(t *testing.T) {
	healthy := gpu.DeviceInfo{Index: 0, BusID: "0000:03:00.0", PersistenceMode: ptr(true), ECCEnabled: ptr(true),
		RemappedRowsPending: ptr(false), RemappedRowsFailed: ptr(false), PowerLimitW: ptr(400.0), DefaultPowerLimitW: ptr(400.0),
		AppSMClockMHz: ptr(uint32(1410)), MaxSMClockMHz: ptr(uint32(1410)), LinkGenMax: ptr(4), LinkWidthMax: ptr(16)}
	sick := gpu.DeviceInfo{Index: 1, BusID: "0000:92:00.0", PersistenceMode: ptr(false), ECCEnabled: ptr(false),
		RemappedRowsPending: ptr(false), RemappedRowsFailed: ptr(true), RetiredPages: ptr(3), PowerLimitW: ptr(250.0), DefaultPowerLimitW: ptr(400.0),
		AppSMClockMHz: ptr(uint32(1410)), MaxSMClockMHz: ptr(uint32(1410)), LinkGenMax: ptr(4), LinkWidthMax: ptr(16)}
	pending := gpu.DeviceInfo{Index: 2, RemappedRowsPending: ptr(true), RemappedRowsFailed: ptr(false)}
	s0 := []gpu.Sample{
		{Index: 0, UtilPercent: ptr(95.0), SMClockMHz: ptr(uint32(1410)), ClockEventReasons: ptr(gpu.ClockEventSWPowerCap), LinkGen: ptr(4), LinkWidth: ptr(16), ReplayCounter: ptr(uint64(10))},
		{Index: 1, UtilPercent: ptr(95.0), SMClockMHz: ptr(uint32(705)), ClockEventReasons: ptr(gpu.ClockEventHWThermal | gpu.ClockEventSWPowerCap), LinkGen: ptr(3), LinkWidth: ptr(8), ReplayCounter: ptr(uint64(0))},
		{Index: 2},
	}
	s1 := []gpu.Sample{s0[0], s0[1], s0[2]}
	s1[1].ReplayCounter = ptr(uint64(50)) // 50 replays in the window: far above Gen3 x8's 4/min
	src := &fakeSource{devs: []gpu.DeviceInfo{healthy, sick, pending}, samples: [][]gpu.Sample{s0, s1}}
	proc := tree(t, map[string]string{"proc/uptime": "100000.0 1.0", "proc/interrupts": "CPU0\n"}, nil)
	rs := Run(context.Background(), Options{ProcRoot: filepath.Join(proc, "proc"), SysRoot: filepath.Join(proc, "sys"), GPU: src, Window: 50 * time.Millisecond})
	for id, st := range map[string][2]Status{
		"gpu-persistence":   {OK, Warn},
		"gpu-ecc":           {OK, Warn},
		"gpu-memory-health": {OK, Fail},
		"gpu-power-limit":   {OK, Warn},
		"gpu-clocks":        {OK, Warn},
		"gpu-throttle":      {OK, Fail},
		"gpu-pcie-link":     {OK, Fail},
		"gpu-pcie-replay":   {OK, Warn},
	} {
		want(t, rs, id, "GPU0 0000:03:00.0", st[0])
		want(t, rs, id, "GPU1 0000:92:00.0", st[1])
	}
	want(t, rs, "gpu-memory-health", "GPU2", Warn)
	want(t, rs, "gpu-persistence", "GPU2", Absent)
	r, _ := find(rs, "gpu-throttle", "GPU1 0000:92:00.0")
	if !strings.Contains(r.Claim, "HW thermal slowdown") {
		t.Errorf("throttle claim: %s", r.Claim)
	}

	// An idle GPU at low clocks and a slower link is normal.
	idle := []gpu.Sample{{Index: 0, UtilPercent: ptr(2.0), SMClockMHz: ptr(uint32(210)), LinkGen: ptr(1), LinkWidth: ptr(16), ClockEventReasons: ptr(gpu.ClockEventGPUIdle)}}
	rs = Run(context.Background(), Options{ProcRoot: filepath.Join(proc, "proc"), SysRoot: filepath.Join(proc, "sys"),
		GPU: &fakeSource{devs: []gpu.DeviceInfo{healthy}, samples: [][]gpu.Sample{idle}}})
	want(t, rs, "gpu-clocks", "GPU0 0000:03:00.0", OK)
	want(t, rs, "gpu-pcie-link", "GPU0 0000:03:00.0", OK)
	want(t, rs, "gpu-throttle", "GPU0 0000:03:00.0", OK)

	// A source that fails to sample: one error per GPU check, never a panic.
	rs = Run(context.Background(), Options{ProcRoot: filepath.Join(proc, "proc"), SysRoot: filepath.Join(proc, "sys"),
		GPU: &fakeSource{devs: []gpu.DeviceInfo{healthy}, err: errors.New("driver gone")}})
	want(t, rs, "gpu-clocks", "", Error)
}

// A process whose GPU is known only from the driver's process list.
func TestNUMAAffinityFromDriverProcessList(t *testing.T) {
	proc, sysRoot := fixture("wrong-numa")
	src := &fakeSource{devs: []gpu.DeviceInfo{{Index: 0, BusID: "0000:83:00.0"}},
		samples: [][]gpu.Sample{{{Index: 0, Processes: []gpu.Process{{PID: 4242}}}}}}
	rs := Run(context.Background(), Options{ProcRoot: proc, SysRoot: sysRoot, PID: 4242, GPU: src})
	r := want(t, rs, "numa-affinity", "pid 4242", OK) // GPU 83:00.0 is on node 1, where the process is bound
	if !strings.Contains(r.Claim, "pinned to node 1") {
		t.Errorf("claim: %s", r.Claim)
	}
}

func procTree(status, extra map[string]string) map[string]string {
	f := map[string]string{
		"proc/4242/status":           status["status"],
		"proc/4242/task/4242/status": status["status"],
		"proc/interrupts":            "CPU0 CPU1 CPU2 CPU3\n 10: 9000 10 10 10 nvidia\n 11: 9000 10 10 10 mlx5\nLOC: 1 1 1 1 Local timer\n",
		"proc/cmdline":               "root=/dev/sda isolcpus=managed_irq,domain,2-3 nohz_full=2-3",
	}
	for i, sib := range []string{"0,2", "1,3", "0,2", "1,3"} {
		d := "sys/devices/system/cpu/cpu" + itoa(i) + "/"
		f[d+"topology/thread_siblings_list"] = sib
		f[d+"cpu_capacity"] = map[bool]string{true: "1024", false: "512"}[i < 2]
	}
	f["sys/devices/system/cpu/smt/control"] = "on"
	f["sys/devices/system/cpu/isolated"] = "2-3"
	for k, v := range extra {
		f[k] = v
	}
	return f
}

func TestCPUChecksWithTarget(t *testing.T) {
	status := map[string]string{"status": "Name:\tpython3\nThreads:\t9\nCpus_allowed_list:\t0,2\nMems_allowed_list:\t0\n"}
	root := tree(t, procTree(status, nil), nil)
	opts := Options{PID: 4242}
	want(t, runOne(t, cpuSMTCheck, root, opts), "cpu-smt", "pid 4242", Warn)           // 0 and 2 are siblings
	want(t, runOne(t, cpuCapacityCheck, root, opts), "cpu-capacity", "pid 4242", Warn) // CPU 2 is a small core
	want(t, runOne(t, cpuIRQCheck, root, opts), "cpu-irq", "pid 4242", Warn)           // CPU 0 takes most IRQs
	want(t, runOne(t, cpuIsolationCheck, root, opts), "cpu-isolation", "pid 4242", OK) // only CPU 2 of it is isolated

	status["status"] = "Name:\tpython3\nCpus_allowed_list:\t2-3\nMems_allowed_list:\t0\n"
	root = tree(t, procTree(status, nil), nil)
	want(t, runOne(t, cpuIsolationCheck, root, opts), "cpu-isolation", "pid 4242", Warn) // two isolated CPUs: no balancing
	want(t, runOne(t, cpuIRQCheck, root, opts), "cpu-irq", "pid 4242", OK)
	want(t, runOne(t, cpuCapacityCheck, root, Options{}), "cpu-capacity", "", OK)
	r := want(t, runOne(t, cpuIRQCheck, root, Options{}), "cpu-irq", "", Warn) // CPU 0 takes 99% of 4 CPUs' IRQs
	if !strings.Contains(r.Evidence[1].Source, "mlx5, nvidia") {
		t.Errorf("top devices: %s", r.Evidence[1].Source)
	}
}

func TestDevShmWithStatfs(t *testing.T) {
	files := map[string]string{
		"proc/self/mountinfo": "25 22 0:21 / /dev/shm rw - tmpfs tmpfs rw,size=8388608k\n",
		"proc/meminfo":        "MemTotal: 1000000 kB\n",
	}
	root := tree(t, files, nil)
	full := func(string) (procfs.FSStat, error) {
		return procfs.FSStat{Type: procfs.TmpfsMagic, TotalBytes: 8 << 30, FreeBytes: 200 << 20}, nil
	}
	r := want(t, runOne(t, devShmCheck, root, Options{Statfs: full}), "dev-shm", "", Warn)
	if !strings.Contains(r.Claim, "98% full") {
		t.Errorf("claim: %s", r.Claim)
	}
	denied := func(p string) (procfs.FSStat, error) {
		return procfs.FSStat{}, &fs.PathError{Op: "statfs", Path: p, Err: fs.ErrPermission}
	}
	r = want(t, runOne(t, devShmCheck, root, Options{Statfs: denied}), "dev-shm", "", OK) // 8 GiB from size=, use not visible
	if !strings.Contains(evidenceText(r.Evidence[len(r.Evidence)-1:]), "not visible") {
		t.Errorf("use should be reported not visible: %+v", r.Evidence)
	}
	files["proc/self/mountinfo"] = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
	want(t, runOne(t, devShmCheck, tree(t, files, nil), Options{Statfs: denied}), "dev-shm", "", Warn) // no /dev/shm mount
}

func TestMemoryAndPressureThresholds(t *testing.T) {
	files := map[string]string{
		"proc/meminfo":            "MemTotal: 100000000 kB\nMemAvailable: 5000000 kB\nDirty: 2000000 kB\nWriteback: 100000 kB\nSwapTotal: 20000000 kB\nSwapFree: 5000000 kB\n",
		"proc/sys/vm/dirty_ratio": "20", "proc/sys/vm/dirty_background_ratio": "10", "proc/sys/vm/dirty_bytes": "0", "proc/sys/vm/dirty_background_bytes": "0",
		"proc/pressure/memory":                       "some avg10=30.00 avg60=25.00 avg300=5.00 total=1\nfull avg10=1.00 avg60=1.00 avg300=1.00 total=1\n",
		"proc/pressure/io":                           "some avg10=1.00 avg60=1.00 avg300=1.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
		"sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never",
		"sys/kernel/mm/transparent_hugepage/defrag":  "[always] defer defer+madvise madvise never",
	}
	root := tree(t, files, nil)
	want(t, runOne(t, memoryAvailableCheck, root, Options{}), "memory-available", "", Warn) // 5%
	want(t, runOne(t, memoryDirtyCheck, root, Options{}), "memory-dirty", "", Warn)         // 2.1 GB past 15% of 5 GB
	want(t, runOne(t, memorySwapCheck, root, Options{}), "memory-swap", "", Warn)           // 15 GB of 100 GB RAM
	want(t, runOne(t, memoryTHPCheck, root, Options{}), "memory-thp", "", Warn)
	rs := runOne(t, pressureCheck, root, Options{})
	want(t, rs, "pressure", "memory pressure", Warn)
	want(t, rs, "pressure", "io pressure", OK)
	want(t, rs, "pressure", "cpu pressure", Absent)
}

func TestLimitJudgements(t *testing.T) {
	files := map[string]string{
		"proc/4242/limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max open files            1024                 4096                 files     \n" +
			"Max locked memory         unlimited            unlimited            bytes     \n" +
			"Max processes             1024                 1024                 processes \n",
		"proc/4242/status": "Name:\tpython3\nThreads:\t40\n",
	}
	links := map[string]string{}
	for i := 0; i < 950; i++ {
		links["proc/4242/fd/"+itoa(i)] = "/dev/null"
	}
	root := tree(t, files, links)
	opts := Options{PID: 4242}
	want(t, runOne(t, limitNofileCheck, root, opts), "limit-nofile", "pid 4242", Fail) // 950 of 1024 open
	want(t, runOne(t, limitMemlockCheck, root, opts), "limit-memlock", "pid 4242", OK)
	want(t, runOne(t, limitNprocCheck, root, opts), "limit-nproc", "pid 4242", Warn)
}

// A low memlock limit matters only where RDMA registers memory against it.
func TestLimitMemlockNeedsRDMA(t *testing.T) {
	files := map[string]string{
		"proc/4242/limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max locked memory         8388608              8388608              bytes     \n",
		"proc/4242/status": "Name:\tpython3\nVmLck:\t       0 kB\nVmPin:\t       0 kB\n",
	}
	opts := Options{PID: 4242}
	want(t, runOne(t, limitMemlockCheck, tree(t, files, nil), opts), "limit-memlock", "pid 4242", OK)

	files["sys/devices/pci0000:00/0000:06:00.0/infiniband/mlx5_0/node_type"] = "1: CA"
	links := map[string]string{"sys/class/infiniband/mlx5_0": "../../devices/pci0000:00/0000:06:00.0/infiniband/mlx5_0"}
	rs := runOne(t, limitMemlockCheck, tree(t, files, links), opts)
	want(t, rs, "limit-memlock", "pid 4242", Warn)
	if !strings.Contains(evidenceText(rs[0].Evidence), "mlx5_0") {
		t.Errorf("the warning must name the RDMA device: %+v", rs[0].Evidence)
	}
}

func evidenceText(ev []finding.Evidence) string {
	var b strings.Builder
	for _, e := range ev {
		b.WriteString(e.What + "=" + e.Text + ";")
	}
	return b.String()
}

func TestCPUFrequencyCapAndScheduler(t *testing.T) {
	files := map[string]string{
		"proc/sys/kernel/osrelease":  "5.15.0-105-generic",
		"sys/kernel/sched_ext/state": "enabled", "sys/kernel/sched_ext/root/ops": "scx_lavd",
	}
	for i := 0; i < 4; i++ {
		d := "sys/devices/system/cpu/cpu" + itoa(i) + "/cpufreq/"
		files[d+"scaling_governor"] = "performance"
		files[d+"scaling_cur_freq"] = "<unknown>" // cpufreq's own word for "could not sample": absent, not an error
		files[d+"cpuinfo_max_freq"] = "3800000"
		files[d+"scaling_max_freq"] = map[bool]string{true: "2000000", false: "3800000"}[i >= 2]
	}
	root := tree(t, files, nil)
	r := want(t, runOne(t, cpuFrequencyCheck, root, Options{}), "cpu-frequency", "", Warn)
	if !strings.Contains(r.Claim, "CPUs 2-3") || !strings.Contains(r.Claim, "2000 of 3800 MHz") {
		t.Errorf("claim: %s", r.Claim)
	}
	want(t, runOne(t, cpuGovernorCheck, root, Options{}), "cpu-governor", "", OK)
	r = want(t, runOne(t, kernelSchedulerCheck, root, Options{}), "kernel-scheduler", "", OK)
	if !strings.Contains(r.Claim, "scx_lavd") || !strings.Contains(r.Claim, "CFS") {
		t.Errorf("claim: %s", r.Claim)
	}
	want(t, runOne(t, kernelSchedulerCheck, tree(t, map[string]string{"proc/sys/kernel/osrelease": "linux"}, nil), Options{}), "kernel-scheduler", "", Error)
}

// The checks left absent for a zombie target are registered checks.
func TestProcessChecksAreRegistered(t *testing.T) {
	ids := map[string]bool{}
	for _, c := range Checks() {
		ids[c.ID] = true
	}
	for id := range processChecks {
		if !ids[id] {
			t.Errorf("processChecks names %q, which is not a check", id)
		}
	}
}

// Of a zombie target only the platform is left to check: the per-process
// checks say why they are absent, the others run as without --pid.
func TestExitedTargetLeavesThePlatform(t *testing.T) {
	p, s := fixture("wrong-numa")
	rs := Run(context.Background(), Options{ProcRoot: p, SysRoot: s, PID: 4242, DataPath: "/data",
		TargetExited: "python3 has exited (exit status 1) and is a zombie"})
	for id := range processChecks {
		r := want(t, rs, id, "pid 4242", Absent)
		if !strings.Contains(r.Claim, "zombie") {
			t.Errorf("%s: %q", id, r.Claim)
		}
	}
	if r, ok := find(rs, "numa-affinity", ""); !ok || r.Status == Fail {
		t.Errorf("the zombie's placement was judged: %+v", r)
	}
	want(t, rs, "pcie-link", "", OK)
}
