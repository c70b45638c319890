package kernlog

import "time"

// Kill is one OOM kill with everything the kernel said about it across the
// lines of its report: the kill line itself, the oom-kill summary, the
// memory cgroup's usage and limit, the task that triggered it and whether
// the reaper freed its memory.
type Kill struct {
	PID  int
	Comm string
	// Mono, HasMono and Wall are the kill line's time.
	Mono    time.Duration
	HasMono bool
	Wall    time.Time

	// Resident memory at the kill, in bytes (anon + file + shmem RSS), and
	// the total virtual size; HasMemory is false when the line printed none.
	ResidentBytes uint64
	AnonRSSBytes  uint64
	TotalVMBytes  uint64
	HasMemory     bool

	// Constraint is CONSTRAINT_NONE (the whole machine ran out),
	// CONSTRAINT_MEMCG (a memory cgroup hit its limit), CONSTRAINT_CPUSET or
	// CONSTRAINT_MEMORY_POLICY; empty when the kernel did not say.
	Constraint string
	// MemCG is the cgroup whose limit was hit; TaskMemCG the victim's own.
	MemCG, TaskMemCG string
	// LimitBytes and UsageBytes are the memory cgroup's limit and usage as
	// the report printed them ("memory: usage ..., limit ..."); 0 when absent.
	LimitBytes, UsageBytes uint64
	// Trigger is the task whose allocation invoked the OOM killer.
	Trigger string
	// Score is the badness score of the older "Kill process ... score S"
	// line, when the kernel printed one.
	Score *int
	// Reaped says the oom_reaper reported freeing the victim's memory.
	Reaped bool
	// Lines are the raw messages of the report, in order (attacker-controlled).
	Lines []string
}

// Kills gathers the OOM kills in events (oldest first) with the context of
// their reports. A kill is reported by one "Killed process" line; the lines
// printed before it in the same report (invoked, usage, summary, selected)
// and the reaper line after it are attached to it.
func Kills(events []Event) []Kill {
	var (
		kills    []Kill
		trigger  string
		usage    *Event
		summary  = map[int]Event{}
		taskCG   *Event
		selected = map[int]Event{}
	)
	reset := func() {
		trigger, usage, taskCG = "", nil, nil
		clear(summary)
		clear(selected)
	}
	for i := range events {
		ev := events[i]
		switch ev.Kind {
		case OOMInvoked:
			reset()
			trigger = ev.Comm
		case OOMMemcgUsage:
			usage = &events[i]
		case OOMMemcgTask:
			taskCG = &events[i]
		case OOMSummary:
			summary[ev.PID] = ev
		case OOMSelected:
			selected[ev.PID] = ev
		case OOMKill:
			k := Kill{PID: ev.PID, Comm: ev.Comm, Mono: ev.Mono, HasMono: ev.HasMono, Wall: ev.Wall,
				Constraint: ev.Constraint, Trigger: trigger}
			if r, ok := ev.ResidentBytes(); ok {
				k.ResidentBytes, k.HasMemory = r, true
			}
			k.AnonRSSBytes, _ = ev.MemoryBytes("anon-rss")
			k.TotalVMBytes, _ = ev.MemoryBytes("total-vm")
			if s, ok := summary[ev.PID]; ok {
				k.Constraint, k.MemCG, k.TaskMemCG = s.Constraint, s.MemCG, s.TaskMemCG
				if s.Global && k.Constraint == "" {
					k.Constraint = "CONSTRAINT_NONE"
				}
				k.Lines = append(k.Lines, s.Raw)
			}
			if taskCG != nil {
				k.MemCG, k.TaskMemCG = taskCG.MemCG, taskCG.TaskMemCG
				if k.Constraint == "" {
					k.Constraint = "CONSTRAINT_MEMCG"
				}
			}
			if usage != nil {
				k.UsageBytes, _ = usage.MemoryBytes("usage")
				k.LimitBytes, _ = usage.MemoryBytes("limit")
				k.Lines = append([]string{usage.Raw}, k.Lines...)
			}
			sel, ok := selected[ev.PID]
			if !ok && len(selected) == 1 {
				// "or sacrifice child": the selected process's child was killed.
				for _, s := range selected {
					sel, ok = s, true
				}
			}
			if ok {
				k.Score = sel.Score
				if k.Constraint == "" {
					k.Constraint = sel.Constraint
				}
				k.Lines = append(k.Lines, sel.Raw)
			}
			k.Lines = append(k.Lines, ev.Raw)
			kills = append(kills, k)
			reset()
		case OOMReaped:
			for j := len(kills) - 1; j >= 0; j-- {
				if kills[j].PID == ev.PID {
					kills[j].Reaped = true
					kills[j].Lines = append(kills[j].Lines, ev.Raw)
					break
				}
			}
		}
	}
	return kills
}
