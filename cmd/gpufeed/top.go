package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpusource"
	"github.com/gpufeed/gpufeed/internal/live"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/sample"
)

func init() { subcommands = append(subcommands, newTopCmd) }

type topOpts struct {
	pid                     pidValue
	interval, refresh, span time.Duration
	root, device, cmdOutput string
	plain                   bool
}

func newTopCmd() *cobra.Command {
	var o topOpts
	cmd := &cobra.Command{
		Use:   "top (--pid PID | [flags] -- COMMAND [ARGS...])",
		Short: "Watch a job live: GPU busy, the launch thread, the workers, and the verdict over the last window",
		Long: `top watches a job as diagnose does and shows, refreshed every --refresh: the
GPU's busy share (a sparkline of the recent intervals), the launch thread's
shares of the time running, waiting for a CPU and sleeping, the CPU of the
job's other threads (DataLoader workers, readers, pools), the host's iowait,
and the verdict over the last --window with its first finding: the verdict
diagnose would give for that window (the same rules), without what diagnose
reads once at the end of its own (the platform checks, the kernel log,
Python stacks).

Keys: p or space pauses the view (sampling goes on), q quits. NO_COLOR turns
colours off. When standard output is not a terminal (or with --plain), top
writes one line per refresh instead.

With a command, top runs it (its output goes to --cmd-output, else nowhere in
the full-screen view and to standard error with --plain) and exits with its
exit status when it ends; quitting top ends the command it started.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.pid == 0) == (len(args) == 0) {
				return usagef("give either --pid PID or -- COMMAND [ARGS...]")
			}
			if err := gpusource.CheckSpec(o.device); err != nil {
				return asUsage(err)
			}
			if err := checkWindow(o.span, o.interval); err != nil {
				return asUsage(errors.New(strings.ReplaceAll(err.Error(), "--duration", "--window")))
			}
			if o.refresh < o.interval {
				return usagef("--refresh %s is shorter than --interval %s", humanDuration(o.refresh), humanDuration(o.interval))
			}
			return runTop(cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.Var(&o.pid, "pid", "attach to the running process `PID` (and its descendants)")
	addDurationFlag(f, &o.interval, "interval", sample.DefaultInterval, "per-thread sampling interval")
	addDurationFlag(f, &o.refresh, "refresh", time.Second, "how often the view is refreshed and the window judged")
	addDurationFlag(f, &o.span, "window", sample.DefaultDuration, "the window the verdict is judged over (the last one)")
	addRootFlag(f, &o.root)
	f.StringVar(&o.device, "device", "auto", "GPU source: auto, none, nvml or sim:PATH")
	f.StringVar(&o.cmdOutput, "cmd-output", "", "write the launched command's stdout and stderr to `FILE`")
	f.BoolVar(&o.plain, "plain", false, "one line per refresh, even on a terminal")
	return cmd
}

func runTop(cmd *cobra.Command, o topOpts, args []string) error {
	fs, err := openRoot(o.root, "", "")
	if err != nil {
		return err
	}
	targetName := ""
	if o.pid > 0 {
		if err := checkTarget(fs, int(o.pid)); err != nil {
			return err
		}
		// diagnose reads what is left of a zombie (how it ended, the
		// kernel log); top has nothing of it to watch.
		if task, err := fs.Describe(int(o.pid)); err == nil && task.Zombie {
			return usagef("%s. top has nothing of it to watch: gpufeed diagnose --pid %d reads how it ended", task.ZombieNote(fs.Name(task.PPID)), o.pid)
		}
		targetName = fs.Name(int(o.pid))
	}
	out := cmd.OutOrStdout()
	outFile, _ := out.(*os.File)
	plain := o.plain || outFile == nil || !isTerminal(outFile)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lo := live.Options{FS: fs, PID: int(o.pid), Command: args, Interval: o.interval, Refresh: o.refresh, Span: o.span,
		OpenGPU: func(env map[string]string) (gpu.Source, string, error) {
			src, name, err := openGPU(o.device, env, fs.Proc)
			if err != nil {
				return nil, "", fmt.Errorf("--device %s: %w", o.device, err)
			}
			return src, name, nil
		},
		Tool: "gpufeed " + version}
	if len(args) > 0 {
		lo.CommandStdin = os.Stdin
		if plain {
			lo.CommandOutput = os.Stderr
		}
		if o.cmdOutput != "" {
			f, err := os.Create(o.cmdOutput)
			if err != nil {
				return usagef("--cmd-output: %w", err)
			}
			defer f.Close()
			lo.CommandOutput = f
		}
		if !plain {
			lo.CommandStdin = nil // the keys are top's
		}
	}
	var tracker live.Tracker
	var ended live.Ended
	var runErr error
	if plain {
		ended, runErr = live.Run(ctx, lo, func(u live.Update) {
			fmt.Fprintln(out, safetext.CleanLine(plainLine(tracker.Frame(u))))
		})
	} else {
		popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(out)}
		if os.Getenv("NO_COLOR") != "" {
			popts = append(popts, tea.WithColorProfile(colorprofile.Ascii)) // no-color.org: no colour, other styles kept
		}
		m := &topModel{frame: live.Frame{Target: "starting", NowGPU: math.NaN()}}
		p := tea.NewProgram(m, popts...)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ended, runErr = live.Run(ctx, lo, func(u live.Update) { p.Send(frameMsg(tracker.Frame(u))) })
			p.Send(endedMsg{})
		}()
		if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
			cancel()
			<-done
			return err
		}
		cancel()
		<-done
		// The full-screen view is gone: what it last showed stays in the
		// terminal's scrollback, on one line.
		if m.frame.Verdict != nil {
			fmt.Fprintln(os.Stderr, "gpufeed top: last: "+safetext.CleanLine(plainLine(m.frame)))
		}
	}
	var start *diagnose.StartError
	switch {
	case errors.As(runErr, &start):
		warn("%v", start)
		return exitCode(start.ExitCode)
	case runErr != nil:
		return runErr
	}
	if ended.Why != "target exited" {
		return nil
	}
	if ended.ExitCode != nil {
		warn("top: the command exited (exit status %d)", *ended.ExitCode)
		return exitCode(*ended.ExitCode)
	}
	if targetName != "" {
		warn("top: %s exited", targetName)
	}
	return nil
}

type frameMsg live.Frame
type endedMsg struct{}

// topModel is the full-screen view.
type topModel struct {
	frame  live.Frame
	shown  live.Frame
	paused bool
	width  int
}

func (m *topModel) Init() tea.Cmd { return nil }

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "p", "space", " ":
			m.paused = !m.paused
			if !m.paused {
				m.shown = m.frame
			}
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case frameMsg:
		m.frame = live.Frame(msg)
		if !m.paused {
			m.shown = m.frame
		}
	case endedMsg:
		return m, tea.Quit
	}
	return m, nil
}

var (
	styleBold  = lipgloss.NewStyle().Bold(true)
	styleDim   = lipgloss.NewStyle().Faint(true)
	styleGPU   = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleWarn  = lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true)
	styleBad   = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	styleOK    = lipgloss.NewStyle().Foreground(lipgloss.Color("2")).Bold(true)
	stylePause = lipgloss.NewStyle().Reverse(true).Bold(true)
)

func classStyle(c finding.Class) lipgloss.Style {
	switch c {
	case finding.GPUBound, finding.Idle:
		return styleOK
	case finding.Stalled:
		return styleBad
	case finding.Inconclusive:
		return styleDim
	}
	return styleWarn
}

func (m *topModel) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	return v
}

func (m *topModel) render() string {
	f := m.shown
	width := m.width
	if width <= 0 {
		width = render.DefaultWidth
	}
	clean := func(s string) string { return clip(safetext.Clean(s), width) }
	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	keys := "p pause · q quit"
	if m.paused {
		keys = stylePause.Render(" PAUSED ") + " p resume · q quit"
	}
	line(clip(styleBold.Render("gpufeed top")+"  "+humanElapsed(f.Elapsed)+"  "+safetext.Clean(f.Target), width+len(styleBold.Render(""))))
	line(styleDim.Render(clip(safetext.Clean(f.GPUSource), max(10, width-26))) + "   " + keys)
	line("")
	spark := width - 20
	line(fmt.Sprintf("GPU busy      %5s  %s", pctText(f.NowGPU), styleGPU.Render(live.Sparkline(f.GPUBusy, max(10, spark)))))
	if f.Launch != "" {
		line("launch thread " + clean(f.Launch))
		line(fmt.Sprintf("  running %5s   waiting for a CPU %5s   sleeping %5s   %s", pctText(f.LaunchRun), pctText(f.LaunchWait),
			pctText(f.Sleep), shareBar(f.LaunchRun, f.LaunchWait, 30)))
	} else {
		line("launch thread not found yet")
	}
	workers := "-"
	if !math.IsNaN(f.WorkersCores) {
		workers = fmt.Sprintf("%.2f cores", f.WorkersCores)
	}
	line(fmt.Sprintf("other threads (%d) %s   host iowait %s", f.Workers, workers, pctText(f.IOWait)))
	line("")
	if v := f.Verdict; v != nil {
		over := fmt.Sprintf("over the last %s", humanElapsed(f.Window))
		if f.Stale {
			over += ", before sampling restarted: the new window is filling"
		}
		line(styleBold.Render("VERDICT") + " " + classStyle(v.Class).Render(string(v.Class)) + fmt.Sprintf(" (confidence %.0f%%, %s)", v.Confidence*100, over))
		for _, l := range wrapText(safetext.Clean(v.Summary), width-2, 3) {
			line("  " + l)
		}
		if v.Missing != "" {
			for _, l := range wrapText(safetext.Clean("to conclude: "+v.Missing), width-2, 2) {
				line("  " + l)
			}
		}
		if t := f.Top; t != nil {
			line(clean(fmt.Sprintf("TOP FINDING %s %s: %s", strings.ToUpper(t.Severity.String()), t.ID, t.Claim)))
		}
	} else {
		line(styleDim.Render("VERDICT: judging the first window..."))
	}
	return b.String()
}

// plainLine is one refresh on one line, for a pipe or a log.
func plainLine(f live.Frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s gpu %s [%s]", humanElapsed(f.Elapsed), pctText(f.NowGPU), live.Sparkline(f.GPUBusy, 20))
	if f.Launch != "" {
		fmt.Fprintf(&b, " launch run %s wait %s sleep %s", pctText(f.LaunchRun), pctText(f.LaunchWait), pctText(f.Sleep))
	}
	if !math.IsNaN(f.WorkersCores) {
		fmt.Fprintf(&b, " others %.2f cores", f.WorkersCores)
	}
	fmt.Fprintf(&b, " iowait %s", pctText(f.IOWait))
	if v := f.Verdict; v != nil {
		fmt.Fprintf(&b, " | %s %.0f%% over %s", v.Class, v.Confidence*100, humanElapsed(f.Window))
		if f.Stale {
			b.WriteString(" (previous window)")
		}
		if f.Top != nil {
			fmt.Fprintf(&b, ": %s", f.Top.ID)
		}
	} else {
		b.WriteString(" | judging the first window")
	}
	return b.String()
}

func pctText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v)
}

func humanElapsed(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// shareBar draws running (█), waiting for a CPU (▒) and sleeping (░) in
// width characters.
func shareBar(run, wait float64, width int) string {
	if math.IsNaN(run) {
		return ""
	}
	r := int(math.Round(run / 100 * float64(width)))
	w := int(math.Round(zeroNaN(wait) / 100 * float64(width)))
	r, w = min(r, width), min(w, width-min(r, width))
	return strings.Repeat("█", r) + strings.Repeat("▒", w) + strings.Repeat("░", width-r-w)
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func clip(s string, n int) string {
	r := []rune(s)
	if n > 1 && len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// wrapText wraps s at word boundaries to width, at most lines lines.
func wrapText(s string, width, lines int) []string {
	if width < 20 {
		width = 20
	}
	var out []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && len([]rune(cur))+1+len([]rune(w)) > width {
			out = append(out, cur)
			cur = w
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		out = append(out, cur)
	}
	if len(out) > lines {
		out = out[:lines]
		out[lines-1] = clip(out[lines-1]+" …", width)
	}
	return out
}
