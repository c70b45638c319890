// Package python embeds the Python client of the simulated device, so that
// the gpufeed binary can hand it to the Python workloads of `gpufeed demo`
// on a machine that has only the binary and python3.
package python

import _ "embed"

// SimdevClient is gpufeed_simdev.py, the standard-library-only client of
// the simulated device (docs/SIMDEV.md, "Python API").
//
//go:embed gpufeed_simdev.py
var SimdevClient []byte

// SimdevClientName is the file name the module must have to be imported as
// gpufeed_simdev.
const SimdevClientName = "gpufeed_simdev.py"
