// Package render is gpufeed's one output layer. Every command builds its
// report model (Build → *Report for diagnose, demo and report,
// *CheckReport for check, *TraceReport for trace) and writes it with
// Write in a Format; a format is one Renderer with a method per model
// (text: a short report by default, everything with Options.Verbose;
// JSON: the contract of docs/JSON.md and docs/gpufeed.schema.json).
// Renderers format; they compute nothing and read no probe. What they
// share is written once: the header of every JSON document, sanitising of
// text from outside through internal/safetext at the writer, numbers,
// bytes and durations in human units, evidence lines and wrapping to the
// terminal.
package render
