package frozen

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// maxStackFrames is how many innermost frames a thread's evidence shows.
const maxStackFrames = 4

// pyStackFindings turns the py-spy dumps recorded in the timeline (diagnose
// --py-stacks) into findings: every Python thread's innermost frames and
// the GIL holder; or, when py-spy could not run, why and how to get it.
func pyStackFindings(v *view) []finding.Finding {
	var out []finding.Finding
	for _, ev := range v.tl.Events {
		switch ev.Kind {
		case timeline.EventPyStacksError:
			subject := "python stacks"
			if ev.PID > 0 {
				subject = v.procName(ev.PID)
			}
			out = append(out, finding.Finding{ID: "python-stacks-unavailable", Severity: finding.Info, Subject: subject,
				Claim:    "Python stacks were asked for but could not be taken: " + safe(ev.Text),
				Decision: stacksUnavailableDecision(ev.Text),
				// Sources: 004 (The GIL: py-spy reads the process from outside)
			})
		case timeline.EventPyStacks:
			procs, err := profile.ParsePySpy(strings.NewReader(ev.Text))
			if err != nil {
				out = append(out, finding.Finding{ID: "python-stacks-unavailable", Severity: finding.Info, Subject: v.procName(ev.PID),
					Claim: "The Python stacks of " + v.procName(ev.PID) + " could not be read: " + safe(err.Error())})
				continue
			}
			for _, p := range procs {
				out = append(out, stackFinding(v, p))
			}
		}
	}
	return out
}

func stackFinding(v *view, p profile.Process) finding.Finding {
	name := v.procName(p.PID)
	// Sources: 004 (The GIL)
	f := finding.Finding{ID: "python-stacks", Severity: finding.Info, Subject: name}
	holder, active := "", 0
	for _, th := range p.Threads {
		if th.Active() {
			active++
		}
		var frames []string
		for i, fr := range th.Frames {
			if i == maxStackFrames {
				frames = append(frames, "...")
				break
			}
			frames = append(frames, safe(fr.String()))
		}
		who := "thread " + th.ID
		if th.Name != "" {
			who += " (" + safe(th.Name) + ")"
		}
		if th.GIL() && holder == "" {
			holder = who
			if len(th.Frames) > 0 {
				holder += " in " + safe(th.Frames[0].String())
			}
		}
		text := strings.Join(frames, " <- ")
		if text == "" {
			text = "no Python frame (native code or idle)"
		}
		f.Evidence = append(f.Evidence, finding.Evidence{What: who + ", " + th.Status, Text: text, Source: p.Source()})
	}
	f.Claim = fmt.Sprintf("Python stacks of %s: %s, %d active", name, plural(len(p.Threads), "thread", "threads"), active)
	if holder != "" {
		f.Claim += "; " + holder + " holds the GIL"
	}
	if p.Skipped > 0 {
		f.Claim += fmt.Sprintf("; %s left out (their stacks changed while read)", plural(p.Skipped, "thread", "threads"))
	}
	return f
}
