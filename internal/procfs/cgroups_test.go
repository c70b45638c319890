package procfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fixture trees written from the kernel documentation's formats
// (Documentation/admin-guide/cgroup-v2.rst "Interface Files";
// cgroup-v1/memory.rst; scheduler/sched-bwc.rst) and from this machine's
// files (a hybrid host: v1 controllers beside an empty v2 tree).

const mountinfoHybrid = `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 22 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const mountinfoV2 = `24 1 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

func TestCgroupsHybridV1Quota(t *testing.T) {
	root := cgroupTree(t, map[string]string{
		"proc/self/mountinfo":                            mountinfoHybrid,
		"proc/7/cgroup":                                  "9:name=systemd:/\n8:pids:/job\n4:memory:/job\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/job/step\n0::/\n",
		"sys/fs/cgroup/unified/cgroup.controllers":       "",
		"sys/fs/cgroup/cpu/cpu.cfs_quota_us":             "-1\n",
		"sys/fs/cgroup/cpu/cpu.cfs_period_us":            "100000\n",
		"sys/fs/cgroup/cpu/job/cpu.cfs_quota_us":         "60000\n",
		"sys/fs/cgroup/cpu/job/cpu.cfs_period_us":        "100000\n",
		"sys/fs/cgroup/cpu/job/cpu.stat":                 "nr_periods 120\nnr_throttled 45\nthrottled_time 2345678901\nnr_bursts 0\nburst_time 0\n",
		"sys/fs/cgroup/cpu/job/step/cpu.cfs_quota_us":    "-1\n",
		"sys/fs/cgroup/cpu/job/step/cpu.cfs_period_us":   "100000\n",
		"sys/fs/cgroup/cpu/job/step/cpu.shares":          "1024\n",
		"sys/fs/cgroup/cpu/job/step/cpu.stat":            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
		"sys/fs/cgroup/cpuset/cpuset.effective_cpus":     "0-1\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":     "9223372036854771712\n",
		"sys/fs/cgroup/memory/job/memory.limit_in_bytes": "314572800\n",
		"sys/fs/cgroup/memory/job/memory.usage_in_bytes": "209715200\n",
		"sys/fs/cgroup/memory/job/memory.failcnt":        "3\n",
		"sys/fs/cgroup/memory/job/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		"sys/fs/cgroup/memory/job/memory.stat":           "cache 1000\nrss 2000\nrss_huge 0\ntotal_cache 4096\ntotal_rss 200000000\n",
		"sys/fs/cgroup/pids/job/pids.max":                "max\n",
		"sys/fs/cgroup/pids/job/pids.current":            "12\n",
	})
	fs := At(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	cg, err := fs.Cgroups(7)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Mode != "hybrid" || cg.CPU == nil || cg.CPU.Version != 1 || cg.CPU.Path != "/job/step" ||
		cg.CPU.Dir != filepath.Join(root, "sys/fs/cgroup/cpu/job/step") || cg.Memory == nil || cg.Memory.Version != 1 {
		t.Fatalf("%+v cpu %+v", cg, cg.CPU)
	}
	l := cg.Limits()
	if l.CPUQuotaUs != 60000 || l.CPUPeriodUs != 100000 || l.CPULimit() != 0.6 || l.CPULimitAt != filepath.Join(root, "sys/fs/cgroup/cpu/job") {
		t.Errorf("cpu limit %+v", l)
	}
	if l.CPUShares == nil || *l.CPUShares != 1024 || l.CPUSet != "0-1" || l.MemMax == nil || *l.MemMax != 300<<20 || l.PidsMax != nil {
		t.Errorf("limits %+v", l)
	}
	k := cg.Counters(l)
	if !k.HaveCPU || k.NrPeriods != 120 || k.NrThrottled != 45 || k.ThrottledNs != 2345678901 {
		t.Errorf("cpu counters %+v", k)
	}
	if !k.HaveMem || k.MemUsage != 200<<20 || !k.HaveStat || k.Anon != 200000000 || k.File != 4096 ||
		!k.HaveEvent || k.OOMKill != 1 || k.Max != 3 || !k.HavePids || k.PidsCurrent != 12 {
		t.Errorf("counters %+v", k)
	}
}

func TestCgroupsV2Kubernetes(t *testing.T) {
	pod := "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/"
	c := pod + "cri-containerd-abc.scope/"
	root := cgroupTree(t, map[string]string{
		"proc/self/mountinfo":                             mountinfoV2,
		"proc/8/cgroup":                                   "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope\n",
		"sys/fs/cgroup/cgroup.controllers":                "cpuset cpu io memory hugetlb pids rdma misc\n",
		"sys/fs/cgroup/kubepods.slice/cgroup.controllers": "cpuset cpu io memory hugetlb pids\n",
		"sys/fs/cgroup/kubepods.slice/cpu.max":            "max 100000\n",
		"sys/fs/cgroup/kubepods.slice/memory.max":         "max\n",
		pod + "cgroup.controllers":                        "cpuset cpu io memory hugetlb pids\n",
		pod + "cpu.max":                                   "200000 100000\n",
		pod + "memory.max":                                "1610612736\n",
		pod + "memory.high":                               "max\n",
		c + "cgroup.controllers":                          "cpuset cpu io memory hugetlb pids\n",
		c + "cpu.max":                                     "150000 100000\n",
		c + "cpu.weight":                                  "79\n",
		c + "cpu.stat":                                    "usage_usec 8123456\nuser_usec 7000000\nsystem_usec 1123456\nnr_periods 500\nnr_throttled 190\nthrottled_usec 40000000\nnr_bursts 0\nburst_usec 0\n",
		c + "cpuset.cpus.effective":                       "0-63\n",
		c + "memory.max":                                  "max\n",
		c + "memory.high":                                 "1288490188\n",
		c + "memory.current":                              "1073741824\n",
		c + "memory.stat":                                 "anon 900000000\nfile 150000000\nkernel 8000000\nkernel_stack 100000\nshmem 0\n",
		c + "memory.events":                               "low 0\nhigh 17\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n",
		c + "pids.max":                                    "4096\n",
		c + "pids.current":                                "73\n",
	})
	fs := At(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	cg, err := fs.Cgroups(8)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Mode != "v2" || cg.CPU == nil || cg.CPU.Version != 2 || cg.Memory == nil || cg.Pids == nil || cg.CPUSet == nil {
		t.Fatalf("%+v", cg)
	}
	l := cg.Limits()
	if l.CPUQuotaUs != 150000 || l.CPULimit() != 1.5 || l.CPUWeight == nil || *l.CPUWeight != 79 || l.CPUSet != "0-63" {
		t.Errorf("cpu %+v", l)
	}
	// The pod's 1.5 GiB limit is the tightest; the container's memory.high
	// throttles before it.
	if l.MemMax == nil || *l.MemMax != 1536<<20 || !strings.HasSuffix(l.MemLimitAt, "kubepods-pod1.slice") ||
		l.MemHigh == nil || *l.MemHigh != 1288490188 || l.PidsMax == nil || *l.PidsMax != 4096 {
		t.Errorf("mem %+v", l)
	}
	// Usage is read where the limit is set: the pod (no memory.current
	// there in this fixture: not visible, never zero).
	k := cg.Counters(l)
	if !k.HaveCPU || k.NrPeriods != 500 || k.NrThrottled != 190 || k.ThrottledNs != 40e9 {
		t.Errorf("cpu counters %+v", k)
	}
	if k.HaveMem || k.NotVisible["memory.current"] == "" {
		t.Errorf("absent usage read as a value: %+v", k)
	}
	l.MemoryDir = cg.Memory.Dir
	k = cg.Counters(l)
	if !k.HaveMem || k.MemUsage != 1<<30 || k.Anon != 900000000 || k.File != 150000000 || k.High != 17 || k.Max != 2 || k.OOM != 1 || k.OOMKill != 1 || k.PidsCurrent != 73 {
		t.Errorf("counters %+v", k)
	}
}

// A container without a cgroup namespace: its cgroup is the mount's root.
func TestCgroupsContainerMountRoot(t *testing.T) {
	root := cgroupTree(t, map[string]string{
		"proc/self/mountinfo": "30 24 0:26 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n" +
			"31 24 0:27 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n",
		"proc/9/cgroup":                              "5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
		"sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "50000\n",
		"sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000\n",
		"sys/fs/cgroup/cpu/cpu.stat":                 "nr_periods 10\nnr_throttled 9\nthrottled_time 900000000\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes": "4096\n",
	})
	cg, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).Cgroups(9)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Mode != "v1" || cg.CPU == nil || cg.CPU.Dir != filepath.Join(root, "sys/fs/cgroup/cpu") || cg.Pids != nil || cg.NotVisible["pids"] == "" {
		t.Fatalf("%+v %+v", cg, cg.CPU)
	}
	l := cg.Limits()
	if l.CPULimit() != 0.5 || l.MemMax != nil {
		t.Errorf("%+v", l)
	}
	k := cg.Counters(l)
	if k.NrThrottled != 9 || !k.HaveMem || k.MemUsage != 4096 || k.HaveStat || k.NotVisible["memory.stat"] == "" {
		t.Errorf("%+v", k)
	}
}

func TestCgroupsBadInput(t *testing.T) {
	for _, tc := range []struct{ name, file, content, want string }{
		{"mountinfo", "proc/self/mountinfo", "1 2 3\n", "mountinfo: line 1"},
		{"cgroup", "proc/1/cgroup", "nonsense\n", "cgroup: line 1"},
	} {
		files := map[string]string{"proc/self/mountinfo": mountinfoV2, "proc/1/cgroup": "0::/\n"}
		files[tc.file] = tc.content
		root := cgroupTree(t, files)
		_, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).Cgroups(1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := ParseCPUMax("cpu.max", []byte("lots 100000\n")); err == nil || !strings.Contains(err.Error(), "cpu.max: line 1") {
		t.Errorf("cpu.max: %v", err)
	}
	if _, err := ParseFlatKeyed("memory.events", []byte("high 1\nmax x\n")); err == nil || !strings.Contains(err.Error(), "memory.events: line 2") {
		t.Errorf("memory.events: %v", err)
	}
}

// The live hierarchy of this machine: this process's cgroups are found
// and read without error where a cgroup file system is mounted.
func TestCgroupsLive(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("no /sys/fs/cgroup")
	}
	cg, err := At("", "").Cgroups(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cg.CPU == nil && cg.Memory == nil {
		t.Fatalf("no cpu or memory controller found: %+v", cg)
	}
	k := cg.Counters(cg.Limits())
	if cg.Memory != nil && !k.HaveMem {
		t.Errorf("memory usage not read: %+v", k)
	}
}

func FuzzParseCgroupFiles(f *testing.F) {
	f.Add([]byte(mountinfoHybrid))
	f.Add([]byte(mountinfoV2))
	f.Add([]byte("max 100000\n"))
	f.Add([]byte("nr_periods 1\nnr_throttled 1\nthrottled_usec 5\n"))
	f.Add([]byte("0::/a\n1:cpu,cpuacct:/b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		_, _ = ParseCgroupMounts("mountinfo", b)
		_, _ = parseCgroupLines("cgroup", b)
		if q, p, err := ParseCPUMax("cpu.max", b); err == nil && (p <= 0 || q < 0) {
			t.Fatalf("cpu.max %q: quota %d period %d", b, q, p)
		}
		_, _ = ParseFlatKeyed("cpu.stat", b)
		_, _, _ = ParseCgroupNumber("memory.max", b)
	})
}
