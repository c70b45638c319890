// Package render is where every command's output is written: the report
// models and their text and JSON renderers for diagnose and report (Build,
// Text, JSON), for trace (TraceText, TraceJSON) and for check
// (CheckReport). Renderers format; they compute nothing and read no probe:
// what they print comes from the timeline, its derived view, the verdict,
// the findings and the check outcomes. Attacker-controlled text (process
// names, command lines, paths, kernel log lines) goes through
// internal/safetext on its way out.
package render
