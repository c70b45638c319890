package procfs

import (
	"strconv"
	"strings"
)

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
			return d, parseErr(p, 1, strconv.Quote(s), "an unsigned integer")
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
		return t, parseErr(p, 1, strconv.Quote(s), "choices with the active one in brackets")
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
