package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// pcieLaneGBps is the usable bandwidth of one lane per direction after line
// coding (8b/10b for Gen1-2, 128b/130b for Gen3-5, FLIT for Gen6), in GB/s.
// Indexed by generation.
var pcieLaneGBps = map[int]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

var pcieLinkCheck = Check{
	ID:    "pcie-link",
	Title: "PCIe link of every NVIDIA GPU, its bridges and the NVMe/NICs beside it: negotiated vs capable speed and width",
	// Sources: 002 Task 3, Task 4
	run: runPCIeLink,
}

const pcieLinkDecision = "Treat it as a platform fault: reseat or move the card, check the riser and the slot's wiring, " +
	"and the BIOS PCIe generation setting; no DataLoader or code change widens a downgraded link."

func runPCIeLink(e *env) []Outcome {
	listing, err := e.pciDevices()
	if err != nil {
		return []Outcome{readFailure("", "PCI devices", sysFile("bus/pci/devices"), err,
			"a sysfs with PCI devices (--root pointing at the host's /sys in a container)", "read access to /sys")}
	}
	byAddr := map[string]procfs.PCIDevice{}
	for _, d := range listing.devs {
		byAddr[d.Address] = d
	}
	var out []Outcome
	for _, s := range listing.skipped {
		out = append(out, Outcome{Status: Error, Claim: "PCI device skipped: " + s.Error(), Need: "readable class, vendor and device files"})
	}
	var gpus []procfs.PCIDevice
	for _, d := range listing.devs {
		if d.IsNVIDIAGPU() {
			gpus = append(gpus, d)
		}
	}
	if len(gpus) == 0 {
		return append(out, Outcome{Status: Absent, Claim: "no NVIDIA GPU (vendor 0x10de, class 0x03xx) under /sys/bus/pci/devices",
			Need: "a host with an NVIDIA GPU, or --root pointing at that host's /proc and /sys"})
	}
	gpuBridges := map[string][]string{} // bridge -> GPUs below it
	for _, g := range gpus {
		out = append(out, judgeDeviceLink("GPU", g, byAddr))
		for _, b := range g.Upstream {
			gpuBridges[b] = append(gpuBridges[b], g.Address)
		}
	}
	for _, d := range listing.devs {
		if !d.IsNVMe() && !d.IsNetwork() {
			continue
		}
		var shared string
		for _, b := range slices.Backward(d.Upstream) {
			if gs, ok := gpuBridges[b]; ok {
				shared = fmt.Sprintf("shares bridge %s with GPU %s", b, strings.Join(gs, ", "))
				break
			}
		}
		if shared == "" {
			continue // not on a GPU's PCIe tree
		}
		kind := "NVMe"
		if d.IsNetwork() {
			kind = "network"
		}
		r := judgeDeviceLink(kind, d, byAddr)
		r.Evidence = append(r.Evidence, text("PCIe tree", shared, sysFile("bus/pci/devices", d.Address)))
		out = append(out, r)
	}
	return out
}

// linkState is one end of a link as sysfs reports it.
type linkState struct {
	curGTs, maxGTs     float64
	curWidth, maxWidth int
}

func (l linkState) String() string {
	return fmt.Sprintf("%s x%d", genName(l.curGTs), l.curWidth)
}

func genName(gts float64) string {
	if g := procfs.PCIeGen(gts); g > 0 {
		return fmt.Sprintf("Gen%d", g)
	}
	return fmt.Sprintf("%.1f GT/s", gts)
}

func linkOf(d procfs.PCIDevice) (linkState, bool) {
	if d.CurrentLinkSpeed == nil || d.MaxLinkSpeed == nil || d.CurrentLinkWidth == nil || d.MaxLinkWidth == nil {
		return linkState{}, false
	}
	return linkState{*d.CurrentLinkSpeed, *d.MaxLinkSpeed, *d.CurrentLinkWidth, *d.MaxLinkWidth}, true
}

// linkBandwidthGBps is the per-direction bandwidth of a link; 0 when the
// generation is not a standard one.
func linkBandwidthGBps(gts float64, width int) float64 {
	return pcieLaneGBps[procfs.PCIeGen(gts)] * float64(width)
}

// judgeDeviceLink compares a device's negotiated link with what it can do,
// and looks at every bridge above it. A narrower link fails: width does not
// drop to save power. A slower link with full width warns: GPUs drop link
// speed when idle, so it needs a second look under load.
func judgeDeviceLink(kind string, d procfs.PCIDevice, byAddr map[string]procfs.PCIDevice) Outcome {
	subject := kind + " " + d.Address
	src := func(f string) string { return sysFile("bus/pci/devices", d.Address, f) }
	l, ok := linkOf(d)
	if !ok {
		return Outcome{Status: Absent, Subject: subject,
			Claim: "link speed and width files absent (a virtual machine's passthrough device often has none)",
			Need:  "the host's /sys (run on the host, or --root pointing at it); nvidia-smi -q shows the link too"}
	}
	ev := []finding.Evidence{
		num("current link speed", l.curGTs, "GT/s", src("current_link_speed")),
		num("max link speed", l.maxGTs, "GT/s", src("max_link_speed")),
		num("current link width", float64(l.curWidth), "lanes", src("current_link_width")),
		num("max link width", float64(l.maxWidth), "lanes", src("max_link_width")),
	}
	status := OK
	narrow := l.curWidth < l.maxWidth
	slow := l.curGTs < l.maxGTs*0.99
	claim := fmt.Sprintf("PCIe link %s, as capable", l)
	decision := ""
	switch {
	case l.curWidth == 0:
		status = Fail
		claim = "PCIe link is down (width 0)"
		decision = "The device is not on the bus: check dmesg for AER errors or Xid 79 (fell off the bus), reseat, and drain the node."
	case narrow:
		status = Fail
		claim = fmt.Sprintf("PCIe link downgraded: runs %s, capable of %s x%d", l, genName(l.maxGTs), l.maxWidth)
		decision = pcieLinkDecision
	case slow:
		status = Warn
		claim = fmt.Sprintf("PCIe link slower than capable: runs %s, capable of %s x%d", l, genName(l.maxGTs), l.maxWidth)
		decision = "A GPU lowers its link speed when idle; check again while the job runs. If it stays below " +
			genName(l.maxGTs) + " under load, " + pcieLinkDecision
	}
	if status != OK {
		cur, full := linkBandwidthGBps(l.curGTs, l.curWidth), linkBandwidthGBps(l.maxGTs, l.maxWidth)
		if cur > 0 && full > 0 {
			claim += fmt.Sprintf(" (about %.0f of %.0f GB/s per direction)", cur, full)
			ev = append(ev, num("link bandwidth now", cur, "GB/s", "derived: lanes x per-lane rate after encoding"),
				num("link bandwidth capable", full, "GB/s", "derived: lanes x per-lane rate after encoding"))
		}
	}
	// The links above. A device path runs root port > (switch upstream port
	// > switch downstream port)* > device, so the physical links are the
	// pairs at even positions: a downstream-facing port and the port or
	// device below it. The child's link registers describe that link; it is
	// downgraded when it runs below what both ends can do. (Inside a switch
	// the upstream-to-downstream hop is not a physical link.)
	chain := append(append([]string(nil), d.Upstream...), d.Address)
	for k := 0; k+2 < len(chain); k += 2 {
		b, okB := byAddr[chain[k]]
		c, okC := byAddr[chain[k+1]]
		if !okB || !okC {
			continue
		}
		bl, ok1 := linkOf(b)
		cl, ok2 := linkOf(c)
		if !ok1 || !ok2 {
			continue
		}
		capGTs, capWidth := min(bl.maxGTs, cl.maxGTs), min(bl.maxWidth, cl.maxWidth)
		if cl.curWidth >= capWidth && cl.curGTs >= capGTs*0.99 {
			continue
		}
		name := fmt.Sprintf("link %s > %s", b.Address, c.Address)
		csrc := func(f string) string { return sysFile("bus/pci/devices", c.Address, f) }
		ev = append(ev,
			num(name+" current speed", cl.curGTs, "GT/s", csrc("current_link_speed")),
			num(name+" current width", float64(cl.curWidth), "lanes", csrc("current_link_width")),
			text(name+" capable (both ends)", fmt.Sprintf("%s x%d", genName(capGTs), capWidth), csrc("max_link_*")+" and "+b.Address+"/max_link_*"))
		if cl.curWidth < capWidth {
			if status != Fail {
				claim = fmt.Sprintf("PCIe %s upstream is downgraded: runs %s, both ends can do %s x%d", name, cl, genName(capGTs), capWidth)
				decision = pcieLinkDecision
			}
			status = Fail
		} else if status == OK {
			status = Warn
			claim = fmt.Sprintf("PCIe %s upstream is slower than both ends can do: runs %s, capable of %s x%d", name, cl, genName(capGTs), capWidth)
			decision = "Check again under load; if it stays slow, " + pcieLinkDecision
		}
	}
	path := d.Upstream
	if len(path) > 0 {
		ev = append(ev, text("upstream bridges", strings.Join(path, " > "), sysFile("bus/pci/devices", d.Address)+" (link target)"))
	}
	sev := defaultSeverity(status)
	return Outcome{Status: status, Severity: sev, Subject: subject, Claim: claim, Evidence: ev, Decision: decision,
		Supports: supportsIf(status, finding.TransferBound)}
}

func supportsIf(s Status, c finding.Class) finding.Class {
	if s == Warn || s == Fail {
		return c
	}
	return ""
}
