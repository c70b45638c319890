package simcuda_test

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

func serve(t *testing.T, opt sim.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

// TestCProgramLinksAgainstTheLibrary compiles a C program against the
// library's header, links it with -lgpufeed-simcuda as a CUDA program links
// with -lcuda, and runs it against a simulated device: the driver API's
// behaviour checked from C (testdata/driver_test.c).
func TestCProgramLinksAgainstTheLibrary(t *testing.T) {
	lib, err := simcuda.Path()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := simcuda.Compiler()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := simcuda.WriteSources(dir); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "driver_test")
	libDir := filepath.Dir(lib)
	args := append(append([]string{}, cc[1:]...), "-std=gnu11", "-O1", "-Wall", "-Werror", "-I", dir, "-o", prog,
		filepath.Join("testdata", "driver_test.c"), "-L", libDir, "-lgpufeed-simcuda", "-Wl,-rpath,"+libDir)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("compiling the C test program: %v\n%s", err, out)
	}
	path := serve(t, sim.Options{Devices: 2, MaxPending: 16})
	cmd := exec.Command(prog, filepath.Join(dir, "gpufeed_sim_kernel.ptx"))
	cmd.Env = append(os.Environ(), "GPUFEED_SIMDEV="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the C test program: %v\n%s", err, out)
	}
}

// The library exports the driver API's names and nothing of its own but
// the gpufeedSim calls.
func TestLibraryExportsTheDriverAPI(t *testing.T) {
	lib, err := simcuda.Path()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var names []string
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			have[s.Name] = true
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasPrefix(n, "cu") && !strings.HasPrefix(n, "gpufeedSim") {
			t.Errorf("exports %s: not a driver API name", n)
		}
	}
	for _, n := range []string{"cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain", "cuCtxCreate_v2",
		"cuStreamCreate", "cuLaunchKernel", "cuLaunchKernelEx", "cuGraphLaunch", "cuMemAlloc_v2", "cuMemFree_v2",
		"cuMemHostAlloc", "cuMemHostRegister_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2",
		"cuMemcpyDtoHAsync_v2", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventRecord", "cuEventSynchronize",
		"cuStreamQuery", "cuModuleLoadData", "cuModuleGetFunction", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
		"cuGraphInstantiateWithFlags", "cuMemAllocHost_v2", "cuDeviceGetPCIBusId", "cuDeviceGetName", "cuDriverGetVersion"} {
		if !have[n] {
			t.Errorf("%s is not exported", n)
		}
	}
}

func TestBuildIsCachedByKeyAndSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	a, err := simcuda.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := simcuda.Build(dir) // the second time nothing is compiled
	if err != nil || b != a {
		t.Fatalf("second build %s %v, want %s", b, err, a)
	}
	if fi2, _ := os.Stat(b); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Error("the cached library was rebuilt")
	}
	if filepath.Base(a) != simcuda.LibName || !strings.Contains(a, "simcuda-") {
		t.Errorf("library at %s", a)
	}
	t.Setenv("CC", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := simcuda.Build(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no C compiler") || !strings.Contains(err.Error(), simcuda.EnvLib) {
		t.Fatalf("without a compiler: %v", err)
	}
	t.Setenv("CC", "no-such-cc --flag")
	if _, err := simcuda.Build(t.TempDir()); err == nil || !strings.Contains(err.Error(), "CC=no-such-cc") {
		t.Fatalf("with CC naming nothing: %v", err)
	}
}

// The Python client carries the same kernel text as the library's PTX file.
func TestPythonClientCarriesTheKernel(t *testing.T) {
	b, err := os.ReadFile("../../../../python/gpufeed_simdev.py")
	if err != nil {
		t.Fatal(err)
	}
	py := strings.ReplaceAll(string(b), `\t`, "\t")
	if !strings.Contains(py, simcuda.KernelPTX) {
		t.Error("python/gpufeed_simdev.py's KERNEL_PTX differs from csrc/gpufeed_sim_kernel.ptx")
	}
}
