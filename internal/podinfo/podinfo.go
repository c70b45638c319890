// Package podinfo names a Kubernetes container's pod, namespace and
// container from what a node holds, without the API server: the container
// runtime's own record of the container (the annotations the kubelet gave
// it through the CRI), the files the kubelet puts in every container (its
// hostname, its service account's namespace), and the downward API's
// conventional environment variables. What none of them says stays
// unnamed: the pod is then known by its UID only.
//
// Everything is read, nothing is asked: no API server, no CRI socket (its
// socket would let the agent start containers). A container's runtime
// record also holds its environment; only the annotations are decoded, the
// rest is skipped unread into any value.
package podinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Where each name was read.
const (
	// FromCRI: the container runtime's record of the container, written
	// from what the kubelet asked for (containerd's, CRI-O's or Docker's).
	FromCRI = "the container runtime's record"
	// FromServiceAccount: the namespace file the kubelet projects into
	// every pod with a service account token.
	FromServiceAccount = "the pod's service account namespace file"
	// FromEnv: POD_NAME and POD_NAMESPACE in the container's environment,
	// the downward API's convention (the pod's author sets them).
	FromEnv = "the downward API environment (POD_NAME, POD_NAMESPACE)"
	// FromHostname: the container's /etc/hostname, the pod's name unless
	// the pod sets spec.hostname.
	FromHostname = "the container's hostname"
)

// Names are what could be read; an empty name is not known.
type Names struct {
	Pod, Namespace, Container             string
	PodFrom, NamespaceFrom, ContainerFrom string
}

// Reader reads a node's records.
type Reader struct {
	// Proc is the node's procfs (the agent runs with the host's process
	// namespace): a container's own files are read through PROC/PID/root.
	Proc string
	// HostRoot is where the node's own files are (the runtime's state
	// directories): "/" on the node, the mount point in a container.
	HostRoot string
}

// maxRecordBytes bounds a runtime record (an OCI config holds the whole
// container spec: tens of KiB).
const maxRecordBytes = 4 << 20

// containerIDRe: the runtime's container ID as the cgroup path gives it.
var containerIDRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// The names Kubernetes accepts: a pod's is a DNS subdomain (RFC 1123), a
// namespace's and a container's a DNS label. Anything else read from a
// file is not a name and is not used.
var (
	subdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	labelRe     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func validPod(s string) bool   { return len(s) <= 253 && subdomainRe.MatchString(s) }
func validLabel(s string) bool { return len(s) <= 63 && labelRe.MatchString(s) }

// Resolve names the container of process pid, whose runtime ID is
// containerID (from its cgroup path; "" when not known), with env its
// allowlisted environment (nil when not visible). Each name is taken from
// the most authoritative source that has it: the runtime's record (the
// kubelet's annotations), then for the namespace the service account file
// the kubelet writes, then the downward API environment, then for the pod
// its hostname.
func (r Reader) Resolve(pid int, containerID string, env map[string]string) Names {
	var n Names
	set := func(dst, from *string, v, src string, ok func(string) bool) {
		if *dst == "" && v != "" && ok(v) {
			*dst, *from = v, src
		}
	}
	if containerIDRe.MatchString(containerID) {
		if a, err := r.runtimeRecord(containerID); err == nil {
			set(&n.Pod, &n.PodFrom, a.pod, FromCRI, validPod)
			set(&n.Namespace, &n.NamespaceFrom, a.namespace, FromCRI, validLabel)
			set(&n.Container, &n.ContainerFrom, a.container, FromCRI, validLabel)
		}
	}
	if n.Namespace == "" {
		if b, err := r.containerFile(pid, "var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			set(&n.Namespace, &n.NamespaceFrom, strings.TrimSpace(string(b)), FromServiceAccount, validLabel)
		}
	}
	set(&n.Pod, &n.PodFrom, env["POD_NAME"], FromEnv, validPod)
	set(&n.Namespace, &n.NamespaceFrom, env["POD_NAMESPACE"], FromEnv, validLabel)
	if n.Pod == "" {
		if b, err := r.containerFile(pid, "etc/hostname"); err == nil {
			set(&n.Pod, &n.PodFrom, strings.TrimSpace(string(b)), FromHostname, validPod)
		}
	}
	return n
}

type annotations struct{ pod, namespace, container string }

// The runtimes' records of a Kubernetes container, under the node's root:
// containerd's OCI bundle (the CRI plugin's annotations), CRI-O's (its
// own), and Docker's container config for cri-dockerd (labels).
var records = []struct {
	path func(id string) string
	read func(b []byte) (annotations, error)
}{
	{func(id string) string {
		return filepath.Join("run/containerd/io.containerd.runtime.v2.task/k8s.io", id, "config.json")
	}, func(b []byte) (annotations, error) {
		var c struct {
			Annotations map[string]string `json:"annotations"`
		}
		err := json.Unmarshal(b, &c)
		a := c.Annotations
		return annotations{a["io.kubernetes.cri.sandbox-name"], a["io.kubernetes.cri.sandbox-namespace"], a["io.kubernetes.cri.container-name"]}, err
	}},
	{func(id string) string {
		return filepath.Join("run/containers/storage/overlay-containers", id, "userdata/config.json")
	}, func(b []byte) (annotations, error) {
		var c struct {
			Annotations map[string]string `json:"annotations"`
		}
		err := json.Unmarshal(b, &c)
		a := c.Annotations
		return annotations{a["io.kubernetes.pod.name"], a["io.kubernetes.pod.namespace"], a["io.kubernetes.container.name"]}, err
	}},
	{func(id string) string {
		return filepath.Join("var/lib/docker/containers", id, "config.v2.json")
	}, func(b []byte) (annotations, error) {
		var c struct {
			Config struct {
				Labels map[string]string `json:"Labels"`
			} `json:"Config"`
		}
		err := json.Unmarshal(b, &c)
		l := c.Config.Labels
		return annotations{l["io.kubernetes.pod.name"], l["io.kubernetes.pod.namespace"], l["io.kubernetes.container.name"]}, err
	}},
}

// errNoRecord: no runtime holds a record of the container here.
var errNoRecord = errors.New("no container runtime record")

func (r Reader) runtimeRecord(id string) (annotations, error) {
	root := r.HostRoot
	if root == "" {
		root = "/"
	}
	for _, rec := range records {
		p := filepath.Join(root, rec.path(id))
		b, err := readCapped(p)
		if err != nil {
			continue
		}
		a, err := rec.read(b)
		if err != nil {
			return annotations{}, fmt.Errorf("%s: %w", p, err)
		}
		return a, nil
	}
	return annotations{}, errNoRecord
}

func readCapped(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB", p, maxRecordBytes>>20)
	}
	return b, nil
}

// containerFile reads a small file of the container's own filesystem
// through PROC/PID/root, resolving every path component inside the
// container's root (openat2 RESOLVE_IN_ROOT): a symbolic link the
// container made cannot point the agent at a file of the node.
func (r Reader) containerFile(pid int, rel string) ([]byte, error) {
	proc := r.Proc
	if proc == "" {
		proc = "/proc"
	}
	root, err := unix.Open(filepath.Join(proc, strconv.Itoa(pid), "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", rel)
	}
	return io.ReadAll(io.LimitReader(f, 512))
}
