package procfs

import (
	"io/fs"
	"syscall"
)

// TmpfsMagic is statfs's f_type for tmpfs (linux/magic.h TMPFS_MAGIC).
const TmpfsMagic = 0x01021994

// FSStat is what statfs(2) says of a filesystem.
type FSStat struct {
	Type       int64  `json:"type"`
	TotalBytes uint64 `json:"total_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`
}

// UsedBytes is total minus free.
func (s FSStat) UsedBytes() uint64 {
	if s.FreeBytes > s.TotalBytes {
		return 0
	}
	return s.TotalBytes - s.FreeBytes
}

// StatfsFunc reads filesystem statistics for a path. Tests inject one:
// statfs cannot be faked with files.
type StatfsFunc func(path string) (FSStat, error)

// Statfs is the real statfs(2).
func Statfs(path string) (FSStat, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return FSStat{}, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := uint64(st.Bsize)
	return FSStat{Type: int64(st.Type), TotalBytes: st.Blocks * bs, FreeBytes: st.Bfree * bs}, nil
}
