package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The flag types every command shares, so that the same thing has one name
// and one spelling everywhere: a duration takes bare seconds as well as Go's
// units, the output format is case-insensitive, and a bad value says what
// the flag wants instead of a parser's message.

// wanter is a flag value that says, in a user's words, what it accepts
// (agentcmd.Seconds, the duration flag of every command, is one).
type wanter interface{ Want() string }

// The duration flag is agentcmd.Seconds, the agent's too: "5" and "2.5"
// are seconds, as in sleep(1) and timeout(1); "500ms", "2m", "1m30s" are Go
// durations; a hex number is refused (agentcmd.IsHex), as by the number
// flags below. (Integers here are read in base ten: 010 is ten, not
// pflag's eight.)
var (
	newSeconds      = agentcmd.NewSeconds
	addDurationFlag = agentcmd.AddDuration
	humanDuration   = safetext.Duration
)

// decimalFloat is a number flag written in decimal (0.5, 1e-2), not as a
// hex float.
type decimalFloat float64

func newDecimalFloat(p *float64, def float64) *decimalFloat {
	*p = def
	return (*decimalFloat)(p)
}

func (d *decimalFloat) Set(s string) error {
	s = strings.TrimSpace(s)
	if agentcmd.IsHex(s) {
		return agentcmd.ErrNotDecimal
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*d = decimalFloat(v)
	return nil
}

func (d *decimalFloat) String() string { return strconv.FormatFloat(float64(*d), 'g', -1, 64) }
func (d *decimalFloat) Type() string   { return "float" }
func (d *decimalFloat) Want() string {
	return "a decimal number (0.5, 1e-2; not a hex float such as 0x1p-1)"
}

// decimalInt is an integer flag read in base ten: pflag's own takes 0x10,
// 0b101 and reads 010 as eight.
type decimalInt int

func newDecimalInt(p *int, def int) *decimalInt {
	*p = def
	return (*decimalInt)(p)
}

func (d *decimalInt) Set(s string) error {
	s = strings.TrimSpace(s)
	if agentcmd.IsHex(s) {
		return agentcmd.ErrNotDecimal
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*d = decimalInt(v)
	return nil
}

func (d *decimalInt) String() string { return strconv.Itoa(int(*d)) }
func (d *decimalInt) Type() string   { return "int" }
func (d *decimalInt) Want() string   { return "a decimal integer (not hex such as 0x10)" }

// formatValue is -o/--output: one of the formats its command writes
// (render's, in any case). A format the command cannot write is refused
// when the flag is parsed, before any work: a drill or a comparison does
// not run to its end to say it cannot write HTML.
type formatValue struct {
	p        *string
	allowed  []render.Format
	rejected render.Format
}

func newFormat(p *string, allowed []render.Format) *formatValue {
	*p = "text"
	return &formatValue{p: p, allowed: allowed}
}

func (f *formatValue) Set(s string) error {
	v, err := render.ParseFormat(s) // the formats are render's
	if err != nil {
		return errors.New("unknown format")
	}
	if !slices.Contains(f.allowed, v) {
		f.rejected = v
		return errors.New("not a format of this command")
	}
	*f.p = string(v)
	return nil
}

func (f *formatValue) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	return *f.p
}
func (f *formatValue) Type() string { return "format" }
func (f *formatValue) Want() string {
	w := "an output format: " + formatList(f.allowed)
	if f.rejected == render.FormatJSONL {
		w += " (-o jsonl streams a live run's intervals: diagnose, demo)"
	}
	return w
}

// formatList names formats for a message or a flag's help: "text, json or html".
func formatList(fs []render.Format) string {
	var names []string
	for _, f := range fs {
		names = append(names, string(f))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// pidValue is --pid: a positive integer.
type pidValue int

func (p *pidValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return errors.New("not a process id")
	}
	*p = pidValue(n)
	return nil
}

func (p *pidValue) String() string { return strconv.Itoa(int(*p)) }
func (p *pidValue) Type() string   { return "pid" }
func (p *pidValue) Want() string   { return "a process id, a positive integer" }

// choiceValue is a flag taking one of a few words, in any case.
type choiceValue struct {
	p       *string
	choices []string
}

func newChoice(p *string, def string, choices ...string) *choiceValue {
	*p = def
	return &choiceValue{p: p, choices: choices}
}

func (c *choiceValue) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	for _, ch := range c.choices {
		if v == ch {
			*c.p = v
			return nil
		}
	}
	return errors.New("not one of the choices")
}

func (c *choiceValue) String() string { return *c.p }
func (c *choiceValue) Type() string   { return strings.Join(c.choices, "|") }
func (c *choiceValue) Want() string   { return "one of " + strings.Join(c.choices, ", ") }

// addOutputFlag adds -o/--output to a command that writes formats.
func addOutputFlag(f *pflag.FlagSet, p *string, formats []render.Format) {
	f.VarP(newFormat(p, formats), "output", "o", "output format: "+formatList(formats))
}

// aliasValue is a deprecated spelling of a flag: it sets the flag it
// stands for and warns once that the spelling is going.
type aliasValue struct {
	pflag.Value
	old, now string
	once     *sync.Once
}

func (a aliasValue) Set(s string) error {
	a.once.Do(func() {
		fmt.Fprintf(os.Stderr, "gpufeed: warning: --%s is deprecated: %s\n", a.old, a.now)
	})
	return a.Value.Set(s)
}

// deprecatedAlias adds --old as a hidden, deprecated spelling of v (the
// value a current flag also sets, or one of its own), telling the user what
// to type instead.
func deprecatedAlias(f *pflag.FlagSet, v pflag.Value, old, now string) {
	f.Var(aliasValue{Value: v, old: old, now: now, once: new(sync.Once)}, old, now)
	_ = f.MarkHidden(old)
}

// usageError is gpufeed being called in a way it cannot run: a flag, an
// argument or a value that names nothing usable (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// asUsage marks err, when not nil, as a usage error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// flagError rewrites cobra's and pflag's parse errors as one line saying
// what the flag wants and what it got, with no parser's text.
func flagError(_ *cobra.Command, err error) error {
	var inv *pflag.InvalidValueError
	if errors.As(err, &inv) {
		fl := inv.GetFlag()
		what := "a " + fl.Value.Type()
		switch fl.Value.Type() {
		case "int", "int64", "uint", "uint64":
			what = "an integer"
		case "float64":
			what = "a number"
		case "bool":
			what = "true or false"
		}
		if w, ok := fl.Value.(wanter); ok {
			what = w.Want()
		}
		if a, ok := fl.Value.(aliasValue); ok {
			if w, ok := a.Value.(wanter); ok {
				what = w.Want()
			}
		}
		name := "--" + fl.Name
		if fl.Shorthand != "" {
			name = "-" + fl.Shorthand + "/" + name
		}
		return usagef("%s wants %s; got %q", name, what, inv.GetValue())
	}
	return usageError{err}
}

// wrapArgs makes a cobra argument validator's errors usage errors.
func wrapArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return asUsage(v(cmd, args)) }
}
