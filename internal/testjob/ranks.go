package testjob

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// OOMRanksLimit is the victim's memory cgroup limit: small, so the kill
// comes within a second or two of allocating (4 MiB at a time).
const OOMRanksLimit = 64 << 20

// OOMRanks is a started three-rank job whose victim rank was OOM-killed.
type OOMRanks struct {
	*Run
	// Ranks maps each rank to its pid.
	Ranks map[int]int
	// Victim is the killed rank; Cgroup the memory cgroup it was killed in.
	Victim int
	Cgroup *MemoryCgroup
	// KilledBy is the signal the launcher saw end the victim (9 for SIGKILL).
	KilledBy int

	inOrder bool
}

// RanksOptions shape the ranks workload.
type RanksOptions struct {
	// Victim is the rank put in a memory cgroup of OOMRanksLimit bytes; it
	// allocates after Rounds rounds (about 10 ms each).
	Victim, Rounds int
	// WaitInOrder makes the launcher wait for rank 0, then 1, ... (a dead
	// rank 2 stays a zombie while rank 0 lives) instead of reaping each
	// rank as it ends.
	WaitInOrder bool
	// NoLocalWorldSize leaves LOCAL_WORLD_SIZE out of the ranks'
	// environment (RANK, LOCAL_RANK and WORLD_SIZE only, as a plain
	// launcher sets them).
	NoLocalWorldSize bool
	// Env is added to every rank's environment ("KEY=VALUE").
	Env []string
}

// StartOOMRanks runs the ranks workload with rank victim in a memory cgroup
// of OOMRanksLimit bytes and waits until the kernel has killed it. The
// other ranks are then blocked in read() for good. Extra environment (NCCL
// settings to check) goes to every rank.
func StartOOMRanks(ctx context.Context, victim int, env ...string) (*OOMRanks, error) {
	return StartOOMRanksWith(ctx, RanksOptions{Victim: victim, Rounds: 20, Env: env})
}

// StartOOMRanksWith is StartOOMRanks with options.
func StartOOMRanksWith(ctx context.Context, opt RanksOptions) (*OOMRanks, error) {
	o, err := StartRanksWith(ctx, opt)
	if err != nil {
		return nil, err
	}
	if err := o.AwaitKill(ctx); err != nil {
		o.Stop()
		return nil, err
	}
	return o, nil
}

// StartRanks runs the ranks workload and returns once the ranks run: the
// victim passes values for rounds rounds (about 10 ms each) before it
// starts allocating, so an observer started now sees it alive, then killed.
func StartRanks(ctx context.Context, victim, rounds int, env ...string) (*OOMRanks, error) {
	return StartRanksWith(ctx, RanksOptions{Victim: victim, Rounds: rounds, Env: env})
}

// StartRanksWith is StartRanks with options.
func StartRanksWith(ctx context.Context, opt RanksOptions) (*OOMRanks, error) {
	cg, err := NewMemoryCgroup("gpufeed-testjob-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36), OOMRanksLimit)
	if err != nil {
		return nil, err
	}
	args := []string{"--world", "3", "--victim", strconv.Itoa(opt.Victim), "--rounds", strconv.Itoa(opt.Rounds), "--cgroup-procs", cg.ProcsFile()}
	if opt.WaitInOrder {
		args = append(args, "--wait", "order")
	}
	if opt.NoLocalWorldSize {
		args = append(args, "--no-local-world-size")
	}
	run, err := Start(ctx, Ranks, opt.Env, args...)
	if err != nil {
		cg.Remove()
		return nil, err
	}
	run.OnStop(cg.Remove)
	o := &OOMRanks{Run: run, Victim: opt.Victim, Cgroup: cg, Ranks: map[int]int{}, inOrder: opt.WaitInOrder}
	m, err := run.Await(ctx, "ranks", 20*time.Second)
	if err != nil {
		run.Stop()
		return nil, err
	}
	for k, v := range m.IntMap("ranks") {
		r, _ := strconv.Atoi(k)
		o.Ranks[r] = v
	}
	return o, nil
}

// AwaitKill waits until the victim has ended: the launcher reports it, or,
// when the launcher waits for the ranks in order (and so does not reap the
// victim), the victim is a zombie.
func (o *OOMRanks) AwaitKill(ctx context.Context) error {
	if o.inOrder {
		pid := o.Ranks[o.Victim]
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				return fmt.Errorf("victim rank %d (pid %d) vanished instead of staying a zombie: %v", o.Victim, pid, err)
			}
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
				o.KilledBy = 9
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return fmt.Errorf("victim rank %d (pid %d) not killed within 60 s", o.Victim, pid)
	}
	exit, err := o.Await(ctx, "exit", 60*time.Second)
	if err != nil {
		return err
	}
	if rank, _ := exit.Int("rank"); rank != o.Victim {
		return fmt.Errorf("rank %d exited, not the victim rank %d", rank, o.Victim)
	}
	o.KilledBy, _ = exit.Int("signal")
	return nil
}
