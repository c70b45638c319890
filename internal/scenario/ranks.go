package scenario

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
}

// StartOOMRanks runs the ranks workload with rank victim in a memory cgroup
// of OOMRanksLimit bytes and waits until the kernel has killed it. The
// other ranks are then blocked in read() for good. Extra environment (NCCL
// settings to check) goes to every rank.
func StartOOMRanks(ctx context.Context, victim int, env ...string) (*OOMRanks, error) {
	o, err := StartRanks(ctx, victim, 20, env...)
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
	cg, err := NewMemoryCgroup("gpufeed-scenario-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36), OOMRanksLimit)
	if err != nil {
		return nil, err
	}
	run, err := Start(ctx, Ranks, env, "--world", "3", "--victim", strconv.Itoa(victim), "--rounds", strconv.Itoa(rounds), "--cgroup-procs", cg.ProcsFile())
	if err != nil {
		cg.Remove()
		return nil, err
	}
	run.OnStop(cg.Remove)
	o := &OOMRanks{Run: run, Victim: victim, Cgroup: cg, Ranks: map[int]int{}}
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

// AwaitKill waits until the launcher reports the victim's end.
func (o *OOMRanks) AwaitKill(ctx context.Context) error {
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
