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
)

// secondsValue is a duration flag as every gpufeed command takes one: a
// bare number is seconds ("30", "2.5"), as sleep(1) and timeout(1) read it;
// "500ms", "2m", "1m30s" are Go durations.
type secondsValue time.Duration

func newSeconds(p *time.Duration, def time.Duration) *secondsValue {
	*p = def
	return (*secondsValue)(p)
}

// errDuration is what a duration flag says it wants.
var errDuration = errors.New("want a duration: seconds (30, 2.5) or with a unit (500ms, 30s, 2m)")

func (d *secondsValue) Set(s string) error {
	v, err := ParseSeconds(s)
	if err != nil {
		return errDuration
	}
	*d = secondsValue(v)
	return nil
}

func (d *secondsValue) String() string { return time.Duration(*d).String() }
func (d *secondsValue) Type() string   { return "duration" }

// Want says what the flag takes, for a command's flag error message.
func (d *secondsValue) Want() string {
	return "a duration: seconds (30, 2.5) or with a unit (500ms, 30s, 2m)"
}

// ParseSeconds reads a bare number as seconds, anything else as a Go
// duration ("500ms", "2m").
func ParseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(1<<62)/1e9 {
			return 0, errors.New("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// addDuration adds a duration flag that takes bare seconds.
func addDuration(f *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	f.Var(newSeconds(p, def), name, usage+" (seconds, or with a unit: 500ms, 2m)")
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
