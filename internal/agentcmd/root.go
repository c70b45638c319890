package agentcmd

import (
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// RootUsage is --root's help, the same for every command that takes it
// (diagnose, top, check, agent): one meaning, the host's / as gpufeed in a
// container sees it. Each command reads there what it reads of the host.
const RootUsage = "read the host's files under `DIR` instead of /: DIR/proc, DIR/sys, DIR/dev (the kernel log at DIR/dev/kmsg) " +
	"and the container runtime's records under DIR, as far as the command reads them (gpufeed in a container with the host's / mounted at DIR, e.g. /host)"

// AddRootFlag adds --root, the one flag every command gives the directory
// the host's / is mounted at.
func AddRootFlag(f *pflag.FlagSet, p *string) { f.StringVar(p, "root", "", RootUsage) }

// RootPaths are where the host's files are read.
type RootPaths struct {
	Proc, Sys, Dev string
	// Kmsg is the kernel log device; Host the host's own files (the
	// container runtime's records of its containers).
	Kmsg, Host string
}

// UnderRoot resolves --root DIR for every command: the host's /proc, /sys,
// /dev, kernel log and files under DIR, or where they are without it.
func UnderRoot(dir string) RootPaths {
	if dir == "" {
		return RootPaths{Proc: procfs.DefaultProc, Sys: procfs.DefaultSys, Dev: "/dev", Kmsg: kernlog.DefaultPath, Host: "/"}
	}
	return RootPaths{Proc: filepath.Join(dir, "proc"), Sys: filepath.Join(dir, "sys"), Dev: filepath.Join(dir, "dev"),
		Kmsg: filepath.Join(dir, kernlog.DefaultPath), Host: dir}
}
