package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// allowUnlimitedMemlock raises this process's locked-memory limit, which
// the workloads inherit, to unlimited where it may (root), else the soft
// limit to the hard one: the demo models a correctly set-up training host
// (docker --ulimit memlock=-1), so that a small default such as 8 MiB does
// not add the same platform warning to every scenario.
func allowUnlimitedMemlock() {
	const rlimitMemlock = 8 // RLIMIT_MEMLOCK
	unlimited := syscall.Rlimit{Cur: ^uint64(0), Max: ^uint64(0)}
	if syscall.Setrlimit(rlimitMemlock, &unlimited) == nil {
		return
	}
	var l syscall.Rlimit
	if syscall.Getrlimit(rlimitMemlock, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(rlimitMemlock, &l)
	}
}

// cpuMask is a sched_setaffinity mask for up to 1024 CPUs.
type cpuMask [16]uint64

func getAffinity() (cpuMask, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return m, e
	}
	return m, nil
}

// pinThread pins the calling thread to one CPU.
func pinThread(cpu int) error {
	if cpu < 0 || cpu >= 64*len(cpuMask{}) {
		return fmt.Errorf("cpu %d out of range", cpu)
	}
	var m cpuMask
	m[cpu/64] = 1 << (cpu % 64)
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return e
	}
	return nil
}

// lastAllowedCPU is the highest CPU this process may run on (0 when unknown).
func lastAllowedCPU() int {
	m, err := getAffinity()
	if err != nil {
		return 0
	}
	for i := len(m)*64 - 1; i >= 0; i-- {
		if m[i/64]&(1<<(i%64)) != 0 {
			return i
		}
	}
	return 0
}

// Storage scenario: where the data lives and how its reads are throttled.
const (
	// throttleReadIOPS is the read budget of the readers' cgroup on the
	// disk holding the data: a few hundred reads per second, a cloud
	// volume's baseline or a busy shared disk. On this project's VMs the
	// virtio disk answers a 4 KiB O_DIRECT read in about 50 us (the host
	// caches it), so unthrottled small reads barely wait (docs/RULES.md).
	throttleReadIOPS = 300
	// fallbackBlock is the read size without a throttle: 1 MiB O_DIRECT
	// reads keep a reader in D about half the time on such a disk.
	fallbackBlock = 1 << 20
	tmpfsMagic    = 0x01021994
)

// prepareStorage places the data file beside the run's directory (the
// temp directory's filesystem) and, where it can (root and a block-I/O
// cgroup controller), a cgroup that throttles reads from that disk, which
// the readers join. It returns the environment for the workload, a note on
// what was set up, and the cleanup.
func prepareStorage(dir string) (env []string, note string, cleanup func(), err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Type == tmpfsMagic {
		return nil, "", nil, fmt.Errorf("the temp directory %s is on tmpfs: reads from it never wait on a disk; set TMPDIR to a directory on a disk", dir)
	}
	data := filepath.Join(dir, "data.bin")
	env = []string{"GPUFEED_DEMO_DATA=" + data}
	var fst syscall.Stat_t
	if err := syscall.Stat(dir, &fst); err != nil {
		return nil, "", nil, err
	}
	disk, derr := wholeDisk(fst.Dev)
	procs, cleanup, cerr := throttleCgroup(disk, filepath.Base(dir))
	if derr != nil || cerr != nil {
		why := cerr
		if derr != nil {
			why = derr
		}
		env = append(env, "GPUFEED_DEMO_BLOCK="+strconv.Itoa(fallbackBlock), "GPUFEED_DEMO_READS=2")
		return env, fmt.Sprintf("no read throttle (%v): the readers make 1 MiB O_DIRECT reads instead of 4 KiB ones", why), nil, nil
	}
	env = append(env, "GPUFEED_DEMO_CGROUP_PROCS="+procs)
	return env, fmt.Sprintf("the readers run in a cgroup limited to %d reads/s on disk %s (a throttled or shared volume)", throttleReadIOPS, disk), cleanup, nil
}

// wholeDisk returns "MAJ:MIN" of the disk holding device dev (the parent
// of a partition): block-I/O throttles apply to whole disks.
func wholeDisk(dev uint64) (string, error) {
	maj, min := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	id := fmt.Sprintf("%d:%d", maj, min)
	sysdir := filepath.Join("/sys/dev/block", id)
	if _, err := os.Stat(sysdir); err != nil {
		return "", fmt.Errorf("%s: not a block device (%v)", id, err)
	}
	if _, err := os.Stat(filepath.Join(sysdir, "partition")); err == nil {
		real, err := filepath.EvalSymlinks(sysdir)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "dev"))
		if err != nil {
			return "", err
		}
		id = strings.TrimSpace(string(b))
	}
	return id, nil
}

// throttleCgroup creates a cgroup whose reads from disk are limited to
// throttleReadIOPS, under cgroup v1's blkio controller or v2's io
// controller, and returns its cgroup.procs file.
func throttleCgroup(disk, name string) (procs string, cleanup func(), err error) {
	type layout struct{ dir, file, rule string }
	var tries []layout
	if _, err := os.Stat("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device"); err == nil {
		tries = append(tries, layout{"/sys/fs/cgroup/blkio", "blkio.throttle.read_iops_device", fmt.Sprintf("%s %d", disk, throttleReadIOPS)})
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(" "+string(b)+" ", " io ") {
		tries = append(tries, layout{"/sys/fs/cgroup", "io.max", fmt.Sprintf("%s riops=%d", disk, throttleReadIOPS)})
	}
	if len(tries) == 0 {
		return "", nil, fmt.Errorf("no blkio (cgroup v1) or io (cgroup v2) controller available")
	}
	var last error
	for _, l := range tries {
		dir := filepath.Join(l.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			last = err
			continue
		}
		rm := func() { removeCgroup(dir, l.dir) }
		if err := os.WriteFile(filepath.Join(dir, l.file), []byte(l.rule), 0o644); err != nil {
			rm()
			last = fmt.Errorf("%s: %w", filepath.Join(dir, l.file), err)
			continue
		}
		return filepath.Join(dir, "cgroup.procs"), rm, nil
	}
	return "", nil, last
}

// removeCgroup moves any process left in dir back to parent and removes it.
func removeCgroup(dir, parent string) {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, pid := range strings.Fields(string(b)) {
			_ = os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(pid), 0o644)
		}
	}
	_ = os.Remove(dir)
}
