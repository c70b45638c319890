package procfs

import (
	"errors"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	promfs "github.com/prometheus/procfs"
	"github.com/prometheus/procfs/nfs"
)

// Mount is one line of /proc/PID/mountinfo.
type Mount struct {
	MountPoint string `json:"mount_point"`
	FSType     string `json:"fstype"`
	Source     string `json:"source"`
	// Options merges per-mount and superblock options ("size": "65536k").
	Options map[string]string `json:"options,omitempty"`
}

// Mounts reads proc/PID/mountinfo (pid 0: self) through prometheus/procfs:
// the mount table as that process sees it (its mount namespace).
func (f FS) Mounts(pid int) ([]Mount, error) {
	pfs, err := promfs.NewFS(f.Proc)
	if err != nil {
		return nil, err
	}
	var infos []*promfs.MountInfo
	path := filepath.Join(f.Proc, "self", "mountinfo")
	if pid > 0 {
		path = filepath.Join(f.Proc, strconv.Itoa(pid), "mountinfo")
		infos, err = pfs.GetProcMounts(pid)
	} else {
		infos, err = pfs.GetMounts()
	}
	if err != nil {
		return nil, procfsErr(path, err)
	}
	out := make([]Mount, 0, len(infos))
	for _, mi := range infos {
		opts := map[string]string{}
		for k, v := range mi.Options {
			opts[k] = v
		}
		for k, v := range mi.SuperOptions {
			opts[k] = v
		}
		out = append(out, Mount{
			MountPoint: UnescapeMountField(mi.MountPoint),
			FSType:     mi.FSType,
			Source:     UnescapeMountField(mi.Source),
			Options:    opts,
		})
	}
	return out, nil
}

// UnescapeMountField undoes the kernel's octal escapes in mount tables
// ("\040" for a space, "\011" tab, "\012" newline, "\134" backslash).
func UnescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountFor returns the mount holding p (the longest mount point that is p
// or a parent of it; the last such line wins, as later mounts shadow
// earlier ones). p is cleaned but symlinks are not resolved: the path is
// taken as the target process names it.
func MountFor(mounts []Mount, p string) (Mount, bool) {
	p = path.Clean("/" + p)
	best, bestLen, found := Mount{}, -1, false
	for _, m := range mounts {
		mp := path.Clean(m.MountPoint)
		if mp == p || mp == "/" || strings.HasPrefix(p, mp+"/") {
			if len(mp) >= bestLen {
				best, bestLen, found = m, len(mp), true
			}
		}
	}
	return best, found
}

// NetworkFilesystems are filesystem types whose reads cross a network.
var NetworkFilesystems = map[string]bool{
	"nfs": true, "nfs4": true, "cifs": true, "smb3": true, "smbfs": true,
	"9p": true, "ceph": true, "glusterfs": true, "fuse.glusterfs": true,
	"lustre": true, "gpfs": true, "beegfs": true, "fuse.sshfs": true,
	"fuse.s3fs": true, "fuse.gcsfuse": true, "fuse.goofys": true, "fuse.rclone": true,
	"fuse.mountpoint-s3": true, "fuse.juicefs": true, "fuse.blobfuse2": true,
	"afs": true, "wekafs": true, "fuse.weka": true,
}

// NFSOp is one per-operation line of an NFS mount's statistics.
type NFSOp struct {
	Name          string `json:"name"`
	Requests      uint64 `json:"requests"`
	Transmissions uint64 `json:"transmissions"`
	MajorTimeouts uint64 `json:"major_timeouts"`
	// RTTMillis is the cumulative round trip of the replies.
	RTTMillis uint64 `json:"rtt_ms_total"`
}

// Retransmissions is transmissions beyond the first for each request.
func (o NFSOp) Retransmissions() uint64 {
	if o.Transmissions > o.Requests {
		return o.Transmissions - o.Requests
	}
	return 0
}

// NFSMount is one NFS mount of /proc/PID/mountstats.
type NFSMount struct {
	Device     string        `json:"device"`
	MountPoint string        `json:"mount_point"`
	FSType     string        `json:"fstype"`
	Age        time.Duration `json:"age_ns"`
	Ops        []NFSOp       `json:"ops"`
}

// NFSMounts reads proc/PID/mountstats (pid 0: self) through
// prometheus/procfs and keeps the NFS mounts that carry statistics.
func (f FS) NFSMounts(pid int) ([]NFSMount, error) {
	pfs, err := promfs.NewFS(f.Proc)
	if err != nil {
		return nil, err
	}
	var proc promfs.Proc
	if pid > 0 {
		proc, err = pfs.Proc(pid)
	} else {
		proc, err = pfs.Self()
	}
	if err != nil {
		return nil, err
	}
	mounts, err := proc.MountStats()
	if err != nil {
		return nil, err
	}
	var out []NFSMount
	for _, m := range mounts {
		st, ok := m.Stats.(*promfs.MountStatsNFS)
		if !ok {
			continue
		}
		nm := NFSMount{Device: m.Device, MountPoint: UnescapeMountField(m.Mount), FSType: m.Type, Age: st.Age}
		for _, op := range st.Operations {
			nm.Ops = append(nm.Ops, NFSOp{
				Name: op.Operation, Requests: op.Requests, Transmissions: op.Transmissions,
				MajorTimeouts: op.MajorTimeouts, RTTMillis: op.CumulativeTotalResponseMilliseconds,
			})
		}
		out = append(out, nm)
	}
	return out, nil
}

// NFSClient is the client-wide RPC summary of /proc/net/rpc/nfs.
type NFSClient struct {
	Calls           uint64 `json:"calls"`
	Retransmissions uint64 `json:"retransmissions"`
	// Ops counts calls by operation for the NFS version with the most calls
	// ("read", "getattr", "open", "lookup", "access").
	Version string            `json:"version"`
	Ops     map[string]uint64 `json:"ops"`
}

// NFSClient reads proc/net/rpc/nfs through prometheus/procfs.
func (f FS) NFSClient() (NFSClient, error) {
	p := f.ProcPath("net/rpc/nfs")
	data, _, err := readPrefix(p, PrivProcMount, ErrAbsent, capText)
	if err != nil {
		return NFSClient{}, err
	}
	return ParseNFSClient(p, data)
}

// ParseNFSClient parses /proc/net/rpc/nfs with procfs's parser.
func ParseNFSClient(p string, data []byte) (NFSClient, error) {
	st, err := nfs.ParseClientRPCStats(strings.NewReader(string(data)))
	if err != nil {
		return NFSClient{}, parseErr(p, 0, err.Error(), "")
	}
	c := NFSClient{Calls: st.ClientRPC.RPCCount, Retransmissions: st.ClientRPC.Retransmissions}
	v3 := map[string]uint64{"read": st.V3Stats.Read, "getattr": st.V3Stats.GetAttr, "lookup": st.V3Stats.Lookup,
		"access": st.V3Stats.Access, "readdirplus": st.V3Stats.ReadDirPlus}
	v4 := map[string]uint64{"read": st.ClientV4Stats.Read, "getattr": st.ClientV4Stats.Getattr, "lookup": st.ClientV4Stats.Lookup,
		"access": st.ClientV4Stats.Access, "open": st.ClientV4Stats.Open, "close": st.ClientV4Stats.Close}
	if sum(v4) >= sum(v3) {
		c.Version, c.Ops = "4", v4
	} else {
		c.Version, c.Ops = "3", v3
	}
	return c, nil
}

func sum(m map[string]uint64) uint64 {
	var t uint64
	for _, v := range m {
		t += v
	}
	return t
}

// procfsErr names the file in an error from prometheus/procfs: its parse
// errors name neither the file nor, sometimes, anything but themselves
// ("error parsing file: error parsing file: Malformed line ..."), and quote
// whole lines. Errors that are not about parsing (absent, denied) are kept
// as they are, so callers still tell them apart.
func procfsErr(path string, err error) error {
	if !errors.Is(err, promfs.ErrFileParse) {
		return err
	}
	msg := err.Error()
	for prefix := promfs.ErrFileParse.Error() + ": "; strings.HasPrefix(msg, prefix); {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return parseErr(path, 0, msg, "")
}
