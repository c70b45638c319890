package agentcmd

import (
	"fmt"
	"time"

	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// MinInterval is the shortest sampling interval a command takes: CPU
// times advance in 10 ms clock ticks.
const MinInterval = 10 * time.Millisecond

// CheckWindow bounds a window and its sampling interval, for every command
// that judges one: diagnose and demo (--duration: how long they observe,
// the window their one verdict covers), top and the agent (--window: the
// window each verdict covers). flag names the window's flag. The interval
// is at least MinInterval, and the window one a verdict can be given on (at
// least thresholds.MinWindow, holding at least thresholds.MinIntervals
// intervals): a shorter one is always inconclusive, so it is refused before
// it runs.
func CheckWindow(flag string, window, interval time.Duration) error {
	h := safetext.Duration
	switch {
	case window <= 0:
		return fmt.Errorf("--%s %s: want a positive %s (e.g. 10 or 10s)", flag, h(window), flag)
	case interval < MinInterval:
		return fmt.Errorf("--interval %s: want at least %s (CPU times advance in 10 ms clock ticks; shorter intervals cost CPU and show nothing more)", h(interval), h(MinInterval))
	case interval > window:
		return fmt.Errorf("--interval %s is longer than --%s %s: the window must hold at least %d intervals for a verdict",
			h(interval), flag, h(window), thresholds.MinIntervals)
	case window < thresholds.MinWindow:
		return fmt.Errorf("--%s %s: a verdict needs a window of at least %s (a shorter one cannot tell a pattern from noise); give --%s %s or more",
			flag, h(window), h(thresholds.MinWindow), flag, h(thresholds.MinWindow))
	case window/interval < thresholds.MinIntervals:
		return fmt.Errorf("--%s %s holds %d intervals of %s; a verdict needs at least %d: give a shorter --interval (at most %s) or a longer --%s (at least %s)",
			flag, h(window), window/interval, h(interval), thresholds.MinIntervals,
			h(window/thresholds.MinIntervals), flag, h(interval*thresholds.MinIntervals))
	}
	return nil
}
