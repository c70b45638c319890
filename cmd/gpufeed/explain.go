package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

func init() { subcommands = append(subcommands, newExplainCmd) }

// exitUnknownID is explain's exit status for an ID no rule emits: distinct
// from a usage error (2) so that a script can tell a typo from a bad call.
const exitUnknownID = 3

func newExplainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "explain [ID]",
		Short: "Say what a finding means, how it is measured, its thresholds and what to change",
		Long: `explain prints what a finding ID in a report means, how gpufeed measures it,
its thresholds with the public sources they come from (Nsight Systems' expert
rules, Holistic Trace Analysis, SageMaker Debugger, the kernel's and CUDA's
documentation), and what to change. Without ID it lists every finding any
command can report, with a one-line summary.

Exit status: 0, or 3 when no finding has that ID (the error lists the nearest).`,
		Args: wrapArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := findingDocs()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return render.ExplainList(cmd.OutOrStdout(), docs)
			}
			id := strings.ToLower(strings.TrimSpace(args[0]))
			for _, d := range docs {
				if d.ID == id {
					return render.Explain(cmd.OutOrStdout(), d)
				}
			}
			msg := fmt.Sprintf("explain: no finding has the ID %q", args[0])
			if now, ok := renamedIDs[id]; ok {
				msg += "; it is now " + now
			} else if c := finding.Class(id); slices.Contains(finding.Classes, c) {
				msg += "; " + id + " is a verdict class"
				switch causes := classCauses(c); len(causes) {
				case 1:
					msg += ", stated by " + causes[0]
				case 2:
					msg += ", stated by " + causes[0] + " (live) and " + causes[1] + " (trace)"
				}
			} else if near := nearIDs(id, docs); len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, ", ") + "?"
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "gpufeed:", safetext.Clean(msg+" (gpufeed explain lists them all)"))
			return exitCode(exitUnknownID)
		},
	}
}

// renamedIDs are trace finding IDs renamed to the live ID of the same
// cause: a report written before says the old one.
var renamedIDs = map[string]string{
	"gpu-bound":            "gpu-busy",
	"host-wait-sync":       "launch-thread-waits-on-gpu",
	"host-wait-submission": "launch-thread-saturated",
	"small-kernels":        "gpu-underfed",
}

// classCauses returns the finding IDs that state class c: live diagnose's
// and the trace judgement's, when they differ.
func classCauses(c finding.Class) []string {
	var out []string
	for _, id := range []string{judge.CauseID[c], tracejudge.CauseID[c]} {
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// findingDocs gathers the explanation of every finding ID: the live rules'
// and frozen-job triage's, the trace judgement's and the platform checks',
// each with the commands that report it. An ID explained twice, or one
// whose explanation no rule emits, is an error (a test keeps both from
// happening).
func findingDocs() ([]finding.Doc, error) {
	from := map[string][]string{}
	add := func(id, cmd string) {
		for _, c := range from[id] {
			if c == cmd {
				return
			}
		}
		from[id] = append(from[id], cmd)
	}
	for _, r := range judge.Rules() {
		for _, id := range r.IDs() {
			add(id, "diagnose")
		}
	}
	for _, id := range tracejudge.IDs() {
		add(id, "trace")
	}
	for _, c := range check.Checks() {
		add(c.ID, "check")
		if judge.FoldsCheck(c.ID) {
			add(c.ID, "diagnose")
		}
	}
	var docs []finding.Doc
	seen := map[string]bool{}
	for _, set := range [][]finding.Doc{judge.Docs(), tracejudge.Docs(), check.Docs()} {
		for _, d := range set {
			if seen[d.ID] {
				return nil, fmt.Errorf("finding %s is explained twice", d.ID)
			}
			seen[d.ID] = true
			if from[d.ID] == nil {
				return nil, fmt.Errorf("finding %s is explained but no rule emits it", d.ID)
			}
			d.From = from[d.ID]
			docs = append(docs, d)
		}
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
	return docs, nil
}

// nearIDs returns up to five documented IDs close to id, nearest first:
// those it begins or names a word of, those that contain it, then those
// within a few edits of it (a typo).
func nearIDs(id string, docs []finding.Doc) []string {
	type cand struct {
		id   string
		dist int
	}
	var cs []cand
	for _, d := range docs {
		dist := 0
		switch {
		case id == "":
			continue
		case strings.HasPrefix(d.ID, id) || slices.Contains(strings.Split(d.ID, "-"), id):
		case strings.Contains(d.ID, "-"+id):
			dist = 1
		case strings.Contains(d.ID, id) || strings.Contains(id, d.ID):
			dist = 2
		default:
			e := editDistance(id, d.ID)
			if e > max(2, len(id)/4) {
				continue
			}
			dist = 2 + e
		}
		cs = append(cs, cand{d.ID, dist})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].dist < cs[j].dist })
	var out []string
	for _, c := range cs[:min(5, len(cs))] {
		out = append(out, c.id)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
