package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/nvml"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// answerNotSupported fills every call a go-nvml mock (a server or a device)
// leaves unset with one that answers ERROR_NOT_SUPPORTED, as a GPU without
// that reading does.
func answerNotSupported(mock any) {
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch {
			case f.Kind() == reflect.Struct && v.Type().Field(i).Anonymous:
				fill(f)
			case f.Kind() == reflect.Func && f.IsNil() && f.CanSet():
				ft := f.Type()
				f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
					out := make([]reflect.Value, ft.NumOut())
					for j := range out {
						out[j] = reflect.Zero(ft.Out(j))
					}
					if n := ft.NumOut(); n > 0 && ft.Out(n-1) == reflect.TypeOf(nv.SUCCESS) {
						out[n-1] = reflect.ValueOf(nv.ERROR_NOT_SUPPORTED)
					}
					return out
				}))
			}
		}
	}
	fill(reflect.ValueOf(mock).Elem())
}

// TestDiagnoseProcRootReachesNVML: NVML reports PIDs of the host's PID
// namespace and the NVML source maps them through /proc; under --root (a
// container reading the host's /proc at /host/proc) it must map them
// through that root. The fixture root holds the trainer with NSpid
// "26627 4011": the GPU lists PID 4011, which only that root's index turns
// into 26627.
func TestDiagnoseProcRootReachesNVML(t *testing.T) {
	host := t.TempDir()
	root := filepath.Join(host, "proc")
	if err := os.CopyFS(root, os.DirFS("../../testdata/proc/trainer")); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(root, "26627", "status")
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("NSpid:\t26627\n"), []byte("NSpid:\t26627\t4011\n"), 1)
	if err := os.WriteFile(status, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var gotRoot string
	old := openNVML
	t.Cleanup(func() { openNVML = old })
	openNVML = func(o nvml.Options) (gpu.Source, error) {
		gotRoot = o.ProcRoot
		srv := dgxh100.New()
		srv.Devices = srv.Devices[:1]
		d := srv.Devices[0].(*server.Device)
		d.GetComputeRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) {
			return []nv.ProcessInfo{{Pid: 4011, UsedGpuMemory: 1 << 30}}, nv.SUCCESS
		}
		answerNotSupported(d)
		answerNotSupported(srv)
		o.Lib = srv
		s, err := nvml.Open(o)
		if err != nil {
			return nil, err
		}
		return s, nil
	}

	rec := filepath.Join(t.TempDir(), "run.gpufeed")
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"diagnose", "--root", host, "--pid", "26627",
		"--duration", "2s", "--device", "nvml", "--kmsg", filepath.Join(t.TempDir(), "no-kmsg"), "--record", rec})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if gotRoot != root {
		t.Errorf("the NVML source maps PIDs through %q, want --root's %q", gotRoot, root)
	}
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl, _, err := timeline.Decode(f, rec)
	if err != nil {
		t.Fatal(err)
	}
	var seen []gpu.Process
	for _, tk := range tl.Ticks {
		for _, g := range tk.GPUs {
			seen = append(seen, g.Processes...)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no GPU process sampled")
	}
	for _, p := range seen {
		if p.PID != 26627 || p.NSPID != 4011 || p.NotVisible != "" {
			t.Fatalf("GPU process %+v: NVML's PID 4011 should map to the trainer 26627 through the fixture root", p)
		}
	}
}
