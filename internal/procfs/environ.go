package procfs

import (
	"bytes"
	"time"
)

// EnvAllowlist is the only environment variables gpufeed reads from another
// process's /proc/PID/environ. Environments hold secrets (tokens, passwords);
// every other variable is skipped while parsing and never stored or printed.
// Each entry is here because a judgement uses it:
//   - rank identity: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
//     GROUP_RANK, SLURM_PROCID, SLURM_LOCALID, SLURM_JOB_ID, and Open MPI's
//     and PMI's OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, PMI_RANK
//     (name a dead rank);
//   - thread pools: OMP_NUM_THREADS, MKL_NUM_THREADS (oversubscription);
//   - CUDA: CUDA_VISIBLE_DEVICES, CUDA_LAUNCH_BLOCKING, PYTORCH_CUDA_ALLOC_CONF;
//   - NCCL / torch.distributed error handling, watchdog monitoring and
//     timeouts (silent hangs, including the pre-2.2 name
//     NCCL_ASYNC_ERROR_HANDLING);
//   - GPUFEED_SIMDEV: the simulated device's socket;
//   - POD_NAME, POD_NAMESPACE: a Kubernetes pod's name and namespace, as
//     the downward API conventionally sets them (the agent's labels).
var EnvAllowlist = []string{
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
	"OMP_NUM_THREADS", "MKL_NUM_THREADS",
	"CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF",
	"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
	"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT",
	"TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_TRACE_BUFFER_SIZE",
	"NCCL_TIMEOUT", "NCCL_DEBUG", "TORCH_DISTRIBUTED_DEBUG",
	"TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
	"GPUFEED_SIMDEV",
	"POD_NAME", "POD_NAMESPACE",
}

var envAllowed = func() map[string]bool {
	m := make(map[string]bool, len(EnvAllowlist))
	for _, k := range EnvAllowlist {
		m[k] = true
	}
	return m
}()

// ReadEnv reads /proc/PID/environ and returns only the allowlisted
// variables. Reading another user's environ needs PTRACE_MODE_READ.
func (fs FS) ReadEnv(pid int) (map[string]string, error) {
	b, err := fs.readEnviron(pid)
	if err != nil {
		return nil, err
	}
	return FilterEnv(b), nil
}

// readEnviron reads /proc/PID/environ's bytes. A truncated environ (over
// the cap) is no error: it still yields the variables it held.
func (fs FS) readEnviron(pid int) ([]byte, error) {
	b, err := readCapped(fs.PidPath(pid, "environ"), PrivPtraceRead, capEnviron)
	if err != nil && !isTooLarge(err) {
		return nil, err
	}
	return b, nil
}

// EnvSettleTries and EnvSettleGap bound ReadEnvSettled's waiting: 5 reads
// 20 ms apart, 80 ms at most, for a process whose environment stays empty.
const (
	EnvSettleTries = 5
	EnvSettleGap   = 20 * time.Millisecond
)

// ReadEnvSettled is ReadEnv for the process a run attaches to, which may be
// in the middle of an exec (a launcher such as pyenv's shim or torchrun's
// wrapper becoming the interpreter): between the new program's memory
// replacing the old and its arguments and environment being laid out, the
// kernel shows an empty environ. An empty read is tried again, up to
// EnvSettleTries reads EnvSettleGap apart; a process whose environment is
// really empty costs that wait once. Read once at attach, where the choice
// of GPU source rests on it (GPUFEED_SIMDEV), and by the agent when it
// starts watching a job (its Slurm and pod labels, read once for the job's
// life); the sampler's slow tier reads every process's with ReadEnv and
// reads again after an exec.
func (fs FS) ReadEnvSettled(pid int) (map[string]string, error) {
	for try := 1; ; try++ {
		b, err := fs.readEnviron(pid)
		if err != nil {
			return nil, err
		}
		if len(b) > 0 || try >= EnvSettleTries {
			return FilterEnv(b), nil
		}
		time.Sleep(EnvSettleGap)
	}
}

// FilterEnv parses NUL-separated NAME=value entries and keeps only
// allowlisted names. Nothing else is converted to a string.
func FilterEnv(b []byte) map[string]string {
	var env map[string]string
	for len(b) > 0 {
		entry := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		eq := bytes.IndexByte(entry, '=')
		if eq <= 0 || !envAllowed[string(entry[:eq])] {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[string(entry[:eq])] = string(entry[eq+1:])
	}
	return env
}
