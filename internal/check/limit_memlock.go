package check

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// memlockWarnBelow: RDMA memory registration (ibv_reg_mr: NCCL over
// InfiniBand/RoCE, GPUDirect RDMA) is charged to RLIMIT_MEMLOCK, and NVIDIA's
// container and NCCL guides ask for an unlimited limit (--ulimit
// memlock=-1). 64 GiB stands for "effectively unlimited" on a limit someone
// set large on purpose. Without an RDMA device nothing registers memory
// against the limit, so a low one is then a fact, not a warning.
const memlockWarnBelow = 64 << 30

var limitMemlockCheck = Check{
	ID:    "limit-memlock",
	Title: "Locked memory limit: pinned and RDMA-registered memory needs it",
	// Sources: 004 Pinned memory and mmap
	run: runLimitMemlock,
}

func runLimitMemlock(e *env) []Outcome {
	return limitResult(e, procfs.LimitLockedMemory, func(l procfs.Limit, ev []finding.Evidence) Outcome {
		if e.opts.PID > 0 {
			if st, err := e.targetStatus(); err == nil {
				src := procFile(pidDir(e.opts.PID), "status")
				if st.HaveVmLck {
					ev = append(ev, num("locked memory now (VmLck)", float64(st.VmLckKB)/1024, "MiB", src))
				}
				if st.HaveVmPin {
					ev = append(ev, num("pinned memory now (VmPin)", float64(st.VmPinKB)/1024, "MiB", src))
				}
			}
		}
		if l.Soft == procfs.Unlimited || l.Soft >= memlockWarnBelow {
			return Outcome{Status: OK, Evidence: ev, Claim: "locked memory limit " + memlockString(l.Soft)}
		}
		rdma, err := e.fs.RDMADevices()
		rdmaSrc := "/sys/class/infiniband"
		switch {
		case err != nil:
			ev = append(ev, text("RDMA devices", "not visible: "+err.Error(), rdmaSrc))
		case len(rdma) == 0:
			ev = append(ev, text("RDMA devices", "none", rdmaSrc))
			return Outcome{Status: OK, Evidence: ev,
				Claim: fmt.Sprintf("locked memory limit %s; no RDMA device, so no memory registration is charged to it", memlockString(l.Soft))}
		default:
			ev = append(ev, text("RDMA devices", strings.Join(rdma, ", "), rdmaSrc))
		}
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.TransferBound,
			Claim: fmt.Sprintf("locked memory limit %s: RDMA registration (NCCL over InfiniBand/RoCE, GPUDirect RDMA) fails or falls back beyond it", memlockString(l.Soft)),
			Decision: "Run the job with an unlimited memlock limit (docker --ulimit memlock=-1, LimitMEMLOCK=infinity, " +
				"limits.conf memlock unlimited), and pin only what transfers need."}
	})
}

func memlockString(v uint64) string {
	if v == procfs.Unlimited {
		return "unlimited"
	}
	return human(v)
}
