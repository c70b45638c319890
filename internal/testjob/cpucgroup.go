package testjob

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUV1Root is where the cgroup v1 cpu controller is mounted.
const CPUV1Root = "/sys/fs/cgroup/cpu"

// CPUCgroup is a cgroup v1 cpu cgroup with a CFS bandwidth limit, made for
// one workload.
type CPUCgroup struct {
	// Dir is its directory under CPUV1Root; Path its name as
	// /proc/PID/cgroup gives it.
	Dir, Path string
}

// NewCPUCgroup makes a cpu cgroup limited to quotaUs of CPU time in every
// periodUs (0.6 CPU: 60000 of 100000), as a child of the calling process's
// own cpu cgroup, named name plus this process's pid (tests run in
// parallel packages).
func NewCPUCgroup(name string, quotaUs, periodUs int) (*CPUCgroup, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: making a cpu cgroup needs root", ErrUnavailable)
	}
	if _, err := os.Stat(filepath.Join(CPUV1Root, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("%w: no cgroup v1 cpu controller with CFS bandwidth at %s", ErrUnavailable, CPUV1Root)
	}
	own, err := ownV1Cgroup("cpu")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	path := strings.TrimRight(own, "/") + "/" + name + "-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(CPUV1Root, path)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c := &CPUCgroup{Dir: dir, Path: path}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(periodUs)), 0o644); err != nil {
		c.Remove()
		return nil, fmt.Errorf("setting the period: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.Itoa(quotaUs)), 0o644); err != nil {
		c.Remove()
		return nil, fmt.Errorf("setting the quota: %w", err)
	}
	return c, nil
}

// Add moves pid (all its threads) into the cgroup.
func (c *CPUCgroup) Add(pid int) error {
	return os.WriteFile(filepath.Join(c.Dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// Stat reads the cgroup's cpu.stat: the enforcement periods elapsed with
// it runnable and those in which its quota throttled it.
func (c *CPUCgroup) Stat() (periods, throttled uint64, err error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, perr := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch {
		case k != "nr_periods" && k != "nr_throttled":
			continue
		case perr != nil:
			return 0, 0, fmt.Errorf("%s: %s: %w", filepath.Join(c.Dir, "cpu.stat"), k, perr)
		case k == "nr_periods":
			periods = n
		default:
			throttled = n
		}
		seen++
	}
	if seen != 2 {
		return 0, 0, fmt.Errorf("%s: no nr_periods and nr_throttled lines", filepath.Join(c.Dir, "cpu.stat"))
	}
	return periods, throttled, nil
}

// Remove moves any task left back to the parent and removes the cgroup.
func (c *CPUCgroup) Remove() error {
	var err error
	for range 100 {
		if b, rerr := os.ReadFile(filepath.Join(c.Dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(filepath.Dir(c.Dir), "cgroup.procs"), []byte(f), 0o644)
			}
		}
		if err = syscall.Rmdir(c.Dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", c.Dir, err)
}

// ownV1Cgroup reads this process's cgroup path in the v1 hierarchy holding
// controller.
func ownV1Cgroup(controller string) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 {
			for _, ctrl := range strings.Split(parts[1], ",") {
				if ctrl == controller {
					return parts[2], nil
				}
			}
		}
	}
	return "", errors.New("/proc/self/cgroup names no v1 " + controller + " cgroup")
}
