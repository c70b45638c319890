package sys

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Meminfo holds the /proc/meminfo fields check needs, in bytes; nil where
// the kernel does not write the field.
type Meminfo struct {
	MemTotal     *uint64 `json:"mem_total_bytes,omitempty"`
	MemAvailable *uint64 `json:"mem_available_bytes,omitempty"`
	Dirty        *uint64 `json:"dirty_bytes,omitempty"`
	Writeback    *uint64 `json:"writeback_bytes,omitempty"`
	SwapTotal    *uint64 `json:"swap_total_bytes,omitempty"`
	SwapFree     *uint64 `json:"swap_free_bytes,omitempty"`
}

// Meminfo reads proc/meminfo through prometheus/procfs.
func (f FS) Meminfo() (Meminfo, error) {
	pfs, err := procfs.NewFS(f.Proc)
	if err != nil {
		return Meminfo{}, err
	}
	m, err := pfs.Meminfo()
	if err != nil {
		return Meminfo{}, procfsErr(filepath.Join(f.Proc, "meminfo"), err)
	}
	return Meminfo{
		MemTotal: m.MemTotalBytes, MemAvailable: m.MemAvailableBytes,
		Dirty: m.DirtyBytes, Writeback: m.WritebackBytes,
		SwapTotal: m.SwapTotalBytes, SwapFree: m.SwapFreeBytes,
	}, nil
}

// Pressure is one /proc/pressure file: percentages of wall time over 10,
// 60 and 300 seconds. Full is nil for cpu on kernels before 5.13.
type Pressure struct {
	Some *PressureLine `json:"some,omitempty"`
	Full *PressureLine `json:"full,omitempty"`
}

// PressureLine is one line of a pressure file.
type PressureLine struct {
	Avg10  float64 `json:"avg10"`
	Avg60  float64 `json:"avg60"`
	Avg300 float64 `json:"avg300"`
}

// Pressure reads proc/pressure/<resource> ("cpu", "memory", "io") through
// prometheus/procfs.
func (f FS) Pressure(resource string) (Pressure, error) {
	pfs, err := procfs.NewFS(f.Proc)
	if err != nil {
		return Pressure{}, err
	}
	st, err := pfs.PSIStatsForResource(resource)
	if err != nil {
		return Pressure{}, procfsErr(filepath.Join(f.Proc, "pressure", resource), err)
	}
	conv := func(l *procfs.PSILine) *PressureLine {
		if l == nil {
			return nil
		}
		return &PressureLine{Avg10: l.Avg10, Avg60: l.Avg60, Avg300: l.Avg300}
	}
	return Pressure{Some: conv(st.Some), Full: conv(st.Full)}, nil
}

// DirtySettings are the vm.dirty_* sysctls: a *_bytes value, when non-zero,
// replaces the matching ratio.
type DirtySettings struct {
	Ratio           uint64 `json:"dirty_ratio"`
	BackgroundRatio uint64 `json:"dirty_background_ratio"`
	Bytes           uint64 `json:"dirty_bytes"`
	BackgroundBytes uint64 `json:"dirty_background_bytes"`
}

// Dirty reads proc/sys/vm/dirty_{ratio,background_ratio,bytes,background_bytes}.
func (f FS) Dirty() (DirtySettings, error) {
	var d DirtySettings
	for _, m := range []struct {
		name string
		dst  *uint64
	}{{"dirty_ratio", &d.Ratio}, {"dirty_background_ratio", &d.BackgroundRatio},
		{"dirty_bytes", &d.Bytes}, {"dirty_background_bytes", &d.BackgroundBytes}} {
		p := f.ProcPath("sys/vm", m.name)
		s, err := readString(p)
		if err != nil {
			return d, err
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return d, parseErr(p, 1, "%q: want an unsigned integer", s)
		}
		*m.dst = v
	}
	return d, nil
}

// THP is the transparent huge page setting: the bracketed choice of
// sys/kernel/mm/transparent_hugepage/{enabled,defrag}.
type THP struct {
	Enabled string `json:"enabled"`
	Defrag  string `json:"defrag,omitempty"`
}

// THP reads the transparent huge page mode.
func (f FS) THP() (THP, error) {
	var t THP
	p := f.SysPath("kernel/mm/transparent_hugepage/enabled")
	s, err := readString(p)
	if err != nil {
		return t, err
	}
	if t.Enabled = BracketChoice(s); t.Enabled == "" {
		return t, parseErr(p, 1, "%q: want choices with the active one in brackets", s)
	}
	if s, err := readString(f.SysPath("kernel/mm/transparent_hugepage/defrag")); err == nil {
		t.Defrag = BracketChoice(s)
	}
	return t, nil
}

// BracketChoice returns the bracketed word of "always [madvise] never".
func BracketChoice(s string) string {
	_, rest, ok := strings.Cut(s, "[")
	if !ok {
		return ""
	}
	choice, _, ok := strings.Cut(rest, "]")
	if !ok {
		return ""
	}
	return choice
}
