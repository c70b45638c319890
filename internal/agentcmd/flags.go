package agentcmd

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Seconds is a duration flag as every gpufeed command takes one (gpufeed
// and gpufeed-agent both use this type): a bare number is seconds ("30",
// "2.5"), as sleep(1) and timeout(1) read it; "500ms", "2m", "1m30s" are Go
// durations. It prints as a user would type it (safetext.Duration).
type Seconds time.Duration

// NewSeconds sets *p to def and returns the flag value that sets it.
func NewSeconds(p *time.Duration, def time.Duration) *Seconds {
	*p = def
	return (*Seconds)(p)
}

// errDuration is what a duration flag says it wants.
var errDuration = errors.New("want a duration: seconds (5, 2.5) or with a unit (500ms, 30s, 2m)")

func (d *Seconds) Set(s string) error {
	v, err := ParseSeconds(s)
	if err != nil {
		return errDuration
	}
	*d = Seconds(v)
	return nil
}

func (d *Seconds) String() string { return safetext.Duration(time.Duration(*d)) }
func (d *Seconds) Type() string   { return "duration" }

// Want says what the flag takes, for a command's flag error message.
func (d *Seconds) Want() string {
	return "a duration: seconds (5, 2.5) or with a unit (500ms, 30s, 2m)"
}

// ParseSeconds reads a bare number as seconds, anything else as a Go
// duration ("500ms", "2m"). A hex number (0x1p4) is refused: Go's float
// parser takes it, nobody means it on a command line.
func ParseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if IsHex(s) {
		return 0, ErrNotDecimal
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(1<<62)/1e9 {
			return 0, errors.New("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// ErrNotDecimal refuses a number written in hex.
var ErrNotDecimal = errors.New("not a decimal number")

// IsHex reports a number written in hex: Go's float parser takes hex
// floats (0x1p-4 for 0.0625) and pflag's integers 0x10, which nobody means
// on a command line and which read as something else at a glance.
func IsHex(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

// AddDuration adds a duration flag that takes bare seconds.
func AddDuration(f *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	f.Var(NewSeconds(p, def), name, usage+" (seconds, or with a unit: 500ms, 2m)")
}

// FlagError turns pflag's message about a value it could not take into
// one that says what the flag wants, as a usage error.
func FlagError(_ *cobra.Command, err error) error {
	var inv *pflag.InvalidValueError
	if errors.As(err, &inv) {
		fl := inv.GetFlag()
		what := "a " + fl.Value.Type()
		if w, ok := fl.Value.(interface{ Want() string }); ok {
			what = w.Want()
		}
		return UsageError{fmt.Errorf("--%s wants %s; got %q", fl.Name, what, inv.GetValue())}
	}
	return UsageError{err}
}
