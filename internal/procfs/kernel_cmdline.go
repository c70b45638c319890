package procfs

import (
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// KernelParam is one kernel boot parameter: "isolcpus=2-7" is
// {Name: "isolcpus", Value: "2-7", HasValue: true}.
type KernelParam struct {
	Name     string `json:"name"`
	Value    string `json:"value,omitempty"`
	HasValue bool   `json:"-"`
}

// KernelCmdline reads proc/cmdline.
func (f FS) KernelCmdline() ([]KernelParam, error) {
	data, _, err := readPrefix(f.ProcPath("cmdline"), PrivProcMount, ErrAbsent, capText)
	if err != nil {
		return nil, err
	}
	return ParseKernelCmdline(string(data)), nil
}

// ParseKernelCmdline splits a kernel command line the way the kernel does:
// on spaces, except inside double quotes; a bare "--" ends the kernel's
// parameters (what follows belongs to init). It never fails: a stray quote
// runs to the end of the line, as in the kernel.
func ParseKernelCmdline(s string) []KernelParam {
	var params []KernelParam
	var cur strings.Builder
	inQuote, any := false, false
	flush := func() bool {
		if !any {
			return true
		}
		word := cur.String()
		cur.Reset()
		any = false
		if word == "--" {
			return false
		}
		name, value, has := strings.Cut(word, "=")
		params = append(params, KernelParam{Name: name, Value: value, HasValue: has})
		return true
	}
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			any = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == 0):
			if !flush() {
				return params
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	flush()
	return params
}

// Param returns the last value given for name (the kernel's own rule: later
// wins) and whether it appeared.
func Param(params []KernelParam, name string) (KernelParam, bool) {
	var found KernelParam
	ok := false
	for _, p := range params {
		if p.Name == name {
			found, ok = p, true
		}
	}
	return found, ok
}

// IsolcpusList extracts the CPU list from an isolcpus= value, which may lead
// with flags ("managed_irq,domain,2-7" or "nohz,domain,2-7"), and returns the
// flags it saw.
func IsolcpusList(value string) (cpuset.Set, []string, error) {
	var flags []string
	rest := value
	for {
		head, tail, more := strings.Cut(rest, ",")
		if head == "" || (head[0] >= '0' && head[0] <= '9') {
			break
		}
		flags = append(flags, head)
		if !more {
			rest = ""
			break
		}
		rest = tail
	}
	set, err := cpuset.Parse(rest)
	return set, flags, err
}
