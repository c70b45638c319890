// Package layers holds no code: its test keeps gpufeed's import graph
// running one way and docs/ARCHITECTURE.md true to it.
//
// Every package of the module belongs to one layer, and a package imports
// only packages of the layers its own may use:
//
//	vocabulary  the shared words: findings, the timeline, CPU sets, the
//	            device interface, the trace model, what Python stacks say,
//	            the kernel log (one package: its bounded reader needs only
//	            the standard library, and every layer reads its lines),
//	            the terminal sanitiser
//	sources     what reads the machine, the GPUs and the profilers (procfs,
//	            py-spy and the Python and CPU samplers, the eBPF probes,
//	            NVML, the simulated device, the sampler, the trace readers,
//	            the platform checks) and what makes situations to read (the
//	            demo, the drills, the trace generator)
//	derive      quantities derived from a timeline or a trace model
//	judge       rules, thresholds, verdicts: what the quantities mean
//	render      the report models and their renderers
//	pipeline    the observation pipeline (diagnose): sources, then derive,
//	            judge and render
//	commands    flags and wiring
//	testing     helpers only tests import
//
// No package imports one of a higher layer, and a directory of internal/ or
// cmd/ holds packages of one layer only (a source never sits under the
// vocabulary it fills), so the imports between directories never run back
// up. Sources import no derive, judge or render package; derive, judge and
// render import no source: a rule never reads a file, a renderer never
// reads a probe, a probe never decides.
package layers
