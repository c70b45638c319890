package frozen

import (
	"strings"

	"github.com/gpufeed/gpufeed/internal/profile"
)

// stacksUnavailableDecision says what would show the stacks, from why they
// could not be read: the privilege to read another process's memory, a
// reader for an interpreter gpufeed has no layout for, or py-spy.
func stacksUnavailableDecision(why string) string {
	switch {
	case strings.Contains(why, "CAP_SYS_PTRACE"):
		return "Reading another process's memory needs CAP_SYS_PTRACE (or the same user with kernel.yama.ptrace_scope 0): run gpufeed as root, or in a container started with --cap-add SYS_PTRACE, then run `gpufeed diagnose --py-stacks` again."
	case strings.Contains(why, "layout unknown"):
		return "gpufeed reads CPython 3.8 to 3.13; for this interpreter, " + profile.PySpyInstallHint + ", and `gpufeed diagnose --py-stacks` uses it."
	case strings.Contains(why, "not a CPython process"):
		return "This process holds no CPython interpreter gpufeed recognises (another Python implementation, or a Python embedded without its symbols); " + profile.PySpyInstallHint + "."
	}
	return "To see each Python thread's stack and the GIL holder, run `gpufeed diagnose --py-stacks` again; where gpufeed cannot read the interpreter, " + profile.PySpyInstallHint + "."
}
