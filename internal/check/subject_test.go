package check

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// TestSubjectID: every form of subject the checks write has an identifier
// (a path, a PCI address, a GPU): the agent's metric labels carry it, the
// report keeps the sentence.
func TestSubjectID(t *testing.T) {
	for subject, want := range map[string]string{
		"":                             "",
		"pid 4242":                     "/proc/4242",
		ownProcess:                     "/proc/self",
		"/dev/shm of pid 4242":         "/proc/4242/root/dev/shm",
		"/dev/shm of " + ownProcess:    "/proc/self/root/dev/shm",
		"data /datasets/image net":     "/datasets/image net",
		"NFS /datasets":                "/datasets",
		"NFS /datasets" + nfsHoldsData: "/datasets",
		gpuSubject(gpu.DeviceInfo{Index: 1, BusID: "00000000:81:00.0"}): "00000000:81:00.0",
		gpuSubject(gpu.DeviceInfo{Index: 1}):                            "GPU1",
		"GPU 0000:92:00.0":                                              "0000:92:00.0",
		"NVMe 0000:85:00.0":                                             "0000:85:00.0",
		"network 0000:86:00.0":                                          "0000:86:00.0",
		"memory pressure":                                               "/proc/pressure/memory",
		"something else":                                                "something_else",
	} {
		if got := SubjectID(subject); got != want {
			t.Errorf("SubjectID(%q) = %q, want %q", subject, got, want)
		}
	}
}
