package procfs

import (
	"bufio"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// What a process maps (PROC/PID/maps): the CUDA driver objects: the driver
// library (libcuda.so) and the NVIDIA device nodes (/dev/nvidiactl,
// /dev/nvidia0, /dev/nvidia-uvm) that a CUDA context maps into its address
// space. A process forked from a parent that had initialised CUDA inherits
// these mappings (seed 000 §5: fork after CUDA init).
//
// The same pass lists the collective-communication libraries mapped
// (NCCL, RCCL, MPI, UCC, gloo): which of torch.distributed's backends a rank
// can be using.

// MaxMapsBytes bounds what is read of /proc/PID/maps: a PyTorch process
// maps a few thousand regions (well under 1 MiB of text); 16 MiB is far
// beyond any real one.
const MaxMapsBytes = 16 << 20

// Mappings is what a process maps of CUDA.
type Mappings struct {
	// Objects are the distinct CUDA-related paths mapped, sorted.
	Objects []string
	// Driver says libcuda.so is mapped (the driver was loaded);
	// DeviceNodes says /dev/nvidia* nodes are mapped (a context exists).
	Driver      bool
	DeviceNodes bool
	// Collectives are the collective-communication objects mapped, sorted:
	// libnccl, librccl, libmpi, libucc and libgloo shared objects by path,
	// and "/dev/shm/nccl-*" for NCCL's shared-memory transport segments.
	Collectives []string
	// Executables are the distinct file-backed executable mappings (one per
	// device and inode, the first range seen), at most MaxDriverCandidates:
	// the objects whose exports DriverAPILibraries reads.
	Executables []MappedObject
	// Truncated says the maps file was larger than the cap.
	Truncated bool
}

// collective names a mapped path as a collective library, "" otherwise.
func collective(p string) string {
	if strings.HasPrefix(p, "/dev/shm/nccl-") {
		return timeline.NCCLShm
	}
	base := path.Base(p)
	if !strings.Contains(base, ".so") {
		return ""
	}
	for _, prefix := range []string{"libnccl", "librccl", "libmpi", "libucc", "libgloo"} {
		if strings.HasPrefix(base, prefix) {
			return p
		}
	}
	return ""
}

// Mappings reads PROC/PID/maps, at most maxBytes of it (0: MaxMapsBytes).
func (fs FS) Mappings(pid int, maxBytes int64) (Mappings, error) {
	if maxBytes <= 0 {
		maxBytes = MaxMapsBytes
	}
	p := fs.PidPath(pid, "maps")
	f, err := os.Open(p)
	if err != nil {
		return Mappings{}, classify(p, PrivPtraceRead, ErrVanished, err)
	}
	defer f.Close()
	u, err := ParseMaps(io.LimitReader(f, maxBytes+1), maxBytes)
	if err != nil {
		return Mappings{}, classify(p, PrivPtraceRead, ErrVanished, err)
	}
	return u, nil
}

// ParseMaps reads maps text: "start-end perms offset dev inode   path".
func ParseMaps(r io.Reader, maxBytes int64) (Mappings, error) {
	var u Mappings
	seen := map[string]bool{}
	seenColl := map[string]bool{}
	seenExe := map[string]bool{}
	br := bufio.NewReaderSize(r, 64<<10)
	var read int64
	for {
		line, err := br.ReadString('\n')
		read += int64(len(line))
		if read > maxBytes {
			u.Truncated = true
			break
		}
		p := mappedPath(line)
		if o, ok := executable(line, p); ok && !seenExe[o.Dev+" "+strconv.FormatUint(o.Inode, 10)] && len(u.Executables) < MaxDriverCandidates {
			seenExe[o.Dev+" "+strconv.FormatUint(o.Inode, 10)] = true
			u.Executables = append(u.Executables, o)
		}
		if c := collective(p); c != "" && !seenColl[c] {
			seenColl[c] = true
			u.Collectives = append(u.Collectives, c)
		}
		if p != "" && isCUDA(p) && !seen[p] {
			seen[p] = true
			u.Objects = append(u.Objects, p)
			if gpu.IsNVIDIANode(p) {
				u.DeviceNodes = true
			} else {
				u.Driver = true
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return u, err
		}
	}
	sort.Strings(u.Objects)
	sort.Strings(u.Collectives)
	return u, nil
}

// executable returns a maps line's mapping when it maps a file (a path, a
// non-zero inode) executable.
func executable(line, p string) (MappedObject, bool) {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/dev/") {
		return MappedObject{}, false
	}
	f := strings.Fields(line)
	if len(f) < 6 || len(f[1]) < 3 || f[1][2] != 'x' {
		return MappedObject{}, false
	}
	ino, err := strconv.ParseUint(f[4], 10, 64)
	if err != nil || ino == 0 {
		return MappedObject{}, false
	}
	return MappedObject{Range: f[0], Dev: f[3], Inode: ino, Path: p}, true
}

// mappedPath returns the path column of a maps line ("" for anonymous).
func mappedPath(line string) string {
	line = strings.TrimRight(line, "\n")
	// five fields before the path; the path may hold spaces
	rest := line
	for range 5 {
		sp := strings.IndexByte(rest, ' ')
		if sp < 0 {
			return ""
		}
		rest = rest[sp+1:]
	}
	return strings.TrimSuffix(strings.TrimLeft(rest, " "), " (deleted)")
}

// isCUDA says whether a mapped path is the CUDA driver or an NVIDIA node.
func isCUDA(p string) bool {
	if gpu.IsNVIDIANode(p) {
		return true
	}
	base := path.Base(p)
	return strings.HasPrefix(base, "libcuda.so") || strings.HasPrefix(base, "libcuda-")
}
