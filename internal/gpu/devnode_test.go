package gpu

import "testing"

func TestNVIDIANodes(t *testing.T) {
	for target, want := range map[string]int{"/dev/nvidia7": 7, "/dev/nvidiactl": -1, "/dev/nvidia-uvm": -1, "/dev/null": -1} {
		n, ok := NVIDIAMinor(target)
		if (want >= 0) != ok || ok && n != want {
			t.Errorf("NVIDIAMinor(%q) = %d %v", target, n, ok)
		}
		if IsNVIDIANode(target) != (target != "/dev/null") {
			t.Errorf("IsNVIDIANode(%q) = %v", target, !IsNVIDIANode(target))
		}
	}
}
