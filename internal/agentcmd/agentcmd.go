// Package agentcmd is the gpufeed agent command, shared by the gpufeed
// binary (gpufeed agent) and the lean gpufeed-agent binary, which links
// only what the agent runs (no trace readers: a node agent's resident
// memory is part of its cost).
package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v2"

	"github.com/gpufeed/gpufeed/internal/agent"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpusource"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// defaultAgentListen: loopback unless told otherwise; a port no other
// exporter on a GPU node commonly takes.
const defaultAgentListen = "127.0.0.1:9847"

// UsageError is the agent called in a way it cannot run (a flag's value):
// the gpufeed binaries exit with their usage status for it, and with their
// runtime status for any other error (a device that does not answer, an
// address in use).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// OpenGPU resolves --device (auto, none, nvml, sim:PATH) with /proc at
// procRoot: the source, its name or why there is none.
type OpenGPU func(spec, procRoot string) (gpu.Source, string, error)

// New returns the agent command; version names the build in recordings.
// openGPU nil opens the device as gpusource.Open does.
func New(version string, openGPU OpenGPU) *cobra.Command {
	if openGPU == nil {
		openGPU = func(spec, procRoot string) (gpu.Source, string, error) {
			return gpusource.OpenWith(spec, nil, gpusource.Options{ProcRoot: procRoot})
		}
	}
	var (
		listen, webConfig, device, root, procRoot, sysRoot, kmsgPath, hostname string
		cfg                                                                    agent.Config
		verbose                                                                bool
		cpuProfile, detailSocket                                               string
		maxConns                                                               int
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Watch every GPU job on this node and export what starves each as Prometheus metrics",
		Long: `agent runs once per node. It finds the processes using a GPU (the device's
process list, or the processes holding /dev/nvidia* open), watches each one's
process tree continuously as diagnose --pid does, at a low sampling rate,
judges each window with the same rules, and serves:

  /metrics            Prometheus metrics (gpufeed_*), labelled like
                      dcgm-exporter's (Hostname, gpu, UUID, pci_bus_id) and
                      with the job's Slurm job id or Kubernetes pod
  /report?pid=PID     the job's last minutes judged, as gpufeed report prints
  /recording?pid=PID  the same minutes as a recording (gpufeed report FILE)
  /                   the jobs watched and their last verdicts

It listens on loopback unless --listen says otherwise; --web.config.file
enables TLS and basic authentication (the Prometheus exporters' web
configuration file). It only reads: nothing it watches is changed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := gpusource.CheckSpec(device); err != nil {
				return UsageError{err}
			}
			for _, pid := range cfg.PIDs {
				if pid <= 0 {
					return UsageError{fmt.Errorf("--pid %d: want a process id, a positive integer", pid)}
				}
			}
			if cfg.MaxJobs < 1 {
				return UsageError{fmt.Errorf("--max-jobs %d: want at least 1 process tree", cfg.MaxJobs)}
			}
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return UsageError{fmt.Errorf("--listen %s: want host:port (e.g. 127.0.0.1:9847 or :9847)", listen)}
			}
			if err := checkWindow(cfg.Interval, cfg.Window, cfg.Ring); err != nil {
				return UsageError{err}
			}
			procRoot, sysRoot, cfg.HostRoot, kmsgPath = underRoot(cmd.Flags(), root, procRoot, sysRoot, cfg.HostRoot, kmsgPath)
			fs, err := procfs.NewFS(procRoot, sysRoot)
			switch {
			case err != nil && root != "" && !cmd.Flags().Changed("proc-root"):
				return UsageError{fmt.Errorf("--root %s: no proc directory under it (mount the node's /proc at %s): %w", root, procRoot, err)}
			case err != nil:
				return UsageError{fmt.Errorf("--proc-root %s, --sys-root %s: %w", procRoot, sysRoot, err)}
			}
			src, name, err := openGPU(device, fs.Proc)
			if err != nil {
				return err
			}
			if src != nil {
				defer src.Close()
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			cfg.FS, cfg.GPU, cfg.GPUName, cfg.Log = fs, src, name, logger
			cfg.Kmsg = kernlog.Reader{Path: kmsgPath}
			cfg.Hostname = hostname
			cfg.Version = version
			cfg.Tool = "gpufeed " + version
			authed := false
			if webConfig != "" {
				if err := web.Validate(webConfig); err != nil {
					return UsageError{fmt.Errorf("--web.config.file %s: %w", webConfig, err)}
				}
				authed = authenticates(webConfig)
			}
			if maxConns < 1 {
				return UsageError{fmt.Errorf("--max-connections %d: want at least 1", maxConns)}
			}

			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			tuneMemory()
			maxConns = connectionCap(maxConns, logger)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			a := agent.New(cfg)
			reg := a.Registry()
			tcp, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			l := agent.LimitConnections(tcp, maxConns)
			a.CountConnections("tcp", l)
			// The TCP listener serves a job's details only to clients the
			// web configuration authenticates; any other reads the metrics.
			h := a.MetricsHandler(reg)
			if authed {
				h = a.Handler(reg)
			}
			srv := agent.NewServer(h)
			flags := &web.FlagConfig{WebListenAddresses: &[]string{listen}, WebConfigFile: &webConfig}
			served := make(chan error, 2)
			go func() { served <- web.Serve(l, srv, flags, logger) }()
			var detail *http.Server
			if detailSocket != "" {
				ul, err := listenUnix(detailSocket)
				if err != nil {
					_ = srv.Close()
					return fmt.Errorf("--detail-socket %s: %w", detailSocket, err)
				}
				defer os.Remove(detailSocket)
				dl := agent.LimitConnections(ul, maxConns)
				a.CountConnections("unix", dl)
				detail = agent.NewServer(a.Handler(reg))
				go func() { served <- detail.Serve(dl) }()
				logger.Info("gpufeed agent serving job details", "socket", detailSocket)
			}
			logger.Info("gpufeed agent listening", "address", tcp.Addr().String(), "gpu_source", name, "detail_on_listen", authed,
				"max_connections", maxConns)
			ran := make(chan error, 1)
			go func() { ran <- a.Run(ctx) }()
			select {
			case err = <-served:
				stop()
				<-ran
			case err = <-ran:
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			if detail != nil {
				_ = detail.Shutdown(shutdown)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(FlagError)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", defaultAgentListen, "address to serve on (host:port; loopback by default)")
	f.StringVar(&webConfig, "web.config.file", "", "Prometheus exporters' web configuration `FILE` (TLS, basic authentication); when it requires basic authentication or verified client certificates, --listen also serves /report and /recording")
	f.StringVar(&detailSocket, "detail-socket", "", "also serve every endpoint, /report and /recording included, on the Unix socket `PATH`: root reads every job, another user only the jobs it runs, and kernel log lines only where the kernel would show them to it")
	f.IntVar(&maxConns, "max-connections", agent.DefaultMaxConnections, "keep at most this many connections open per listener (more are closed at once)")
	f.StringVar(&device, "device", "auto", "GPU source: auto, none, nvml or sim:PATH")
	AddRootFlag(f, &root) // the flags below name one file system elsewhere
	f.StringVar(&procRoot, "proc-root", procfs.DefaultProc, "where procfs is mounted (a container sharing the node's PID namespace reads its own /proc)")
	f.StringVar(&sysRoot, "sys-root", procfs.DefaultSys, "where sysfs is mounted (e.g. /host/sys)")
	f.StringVar(&cfg.HostRoot, "host-root", "/", "where the node's own files are (the container runtime's records of its containers, for pod and container names; e.g. /host in a container)")
	f.StringVar(&kmsgPath, "kmsg", kernlog.DefaultPath, "the kernel log device (falls back to dmesg, then journalctl -k)")
	f.StringVar(&hostname, "hostname", "", "the node's name in the Hostname label (default: the host name; in Kubernetes the node's name, as dcgm-exporter labels it)")
	AddDuration(f, &cfg.Interval, "interval", agent.DefaultInterval, "per-thread sampling interval")
	AddDuration(f, &cfg.SlowEvery, "slow-every", agent.DefaultSlowEvery, "context switches and blocked-thread details every")
	AddDuration(f, &cfg.Window, "window", agent.DefaultWindow, "each job is judged on windows this long")
	AddDuration(f, &cfg.Ring, "ring", agent.DefaultRing, "how much of each job's past is kept for /report and /recording")
	AddDuration(f, &cfg.DiscoverEvery, "discover-every", agent.DefaultDiscoverEvery, "look for new GPU processes every")
	AddDuration(f, &cfg.ChecksEvery, "checks-every", agent.DefaultChecksEvery, "run the platform checks every")
	f.IntSliceVar(&cfg.PIDs, "pid", nil, "also watch this process tree, whether or not a GPU lists it (repeatable)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log every judged window")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write the agent's own CPU profile to `FILE` (Go pprof format) until it stops")
	_ = f.MarkHidden("cpu-profile")
	f.IntVar(&cfg.MaxJobs, "max-jobs", agent.DefaultMaxJobs, "watch at most this many GPU process trees")
	return cmd
}

// underRoot resolves --root DIR: /proc, /sys, the node's files and the
// kernel log under DIR, as diagnose --root and check --root read them,
// except where --proc-root, --sys-root, --host-root or --kmsg was given (a
// DaemonSet sharing the node's PID namespace reads its own /proc and
// mounts only the node's /sys, as node_exporter's --path.procfs and
// --path.sysfs name each file system).
func underRoot(f *pflag.FlagSet, root, proc, sys, host, kmsgPath string) (string, string, string, string) {
	if root == "" {
		return proc, sys, host, kmsgPath
	}
	under := UnderRoot(root)
	if !f.Changed("proc-root") {
		proc = under.Proc
	}
	if !f.Changed("sys-root") {
		sys = under.Sys
	}
	if !f.Changed("host-root") {
		host = under.Host
	}
	if !f.Changed("kmsg") {
		kmsgPath = under.Kmsg
	}
	return proc, sys, host, kmsgPath
}

// authenticates says whether a (valid) web configuration authenticates
// every client: basic authentication users, or client certificates
// required and verified.
func authenticates(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var c web.Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return false
	}
	return len(c.Users) > 0 || c.TLSConfig.ClientAuth == "RequireAndVerifyClientCert"
}

// connectionCap raises the soft limit on open files to the hard one and
// keeps the listeners' connections to a quarter of it, whatever
// --max-connections says: the rest is for watching the jobs (each
// sampler keeps files open, discovery scans /proc).
func connectionCap(want int, log *slog.Logger) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return want
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			rl = raised
		}
	}
	// Two listeners (TCP and the detail socket) share the quarter.
	if limit := int(min(rl.Cur/8, 1<<20)); want > limit {
		log.Warn("connections capped below --max-connections by the open-file limit", "max_connections", max(limit, 1),
			"nofile", rl.Cur)
		return max(limit, 1)
	}
	return want
}

// listenUnix listens on a Unix socket at path that any local user may
// connect to (each request is then judged by its client's credentials),
// replacing a socket left by an agent that did not stop cleanly; any other
// file there is an error.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("%s: another agent serves it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o666); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// tuneMemory keeps the Go heap near what the agent holds: a node agent
// runs for months beside the jobs it watches, so its garbage is collected
// at half the live heap's growth (GOGC=50) and a soft limit of 20 MiB
// makes the collector work harder before the heap passes it. GOGC and
// GOMEMLIMIT in the environment win.
func tuneMemory() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(20 << 20)
	}
}

// checkWindow refuses, as diagnose refuses its --duration (CheckWindow),
// a window no verdict can ever be given on (every window would be exported
// as inconclusive, for good), and a ring that cannot keep one window.
func checkWindow(interval, window, ring time.Duration) error {
	if err := CheckWindow("window", window, interval); err != nil {
		return err
	}
	if ring < window {
		return fmt.Errorf("--ring %s is shorter than --window %s: want a ring of at least one window", safetext.Duration(ring), safetext.Duration(window))
	}
	return nil
}
