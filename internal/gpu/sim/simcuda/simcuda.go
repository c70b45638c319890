// Package simcuda holds the simulated CUDA driver, libgpufeed-simcuda.so: a
// C shared object exporting the CUDA driver API's names and signatures for
// what gpufeed's scenarios and drills call, over the simulated device
// (internal/sim). Its source is embedded in every gpufeed binary and
// test, and compiled with the system C compiler on first use into a cache
// directory keyed by the hash of the source and the build command, so that
// `go run ./cmd/gpufeed demo`, `make test` on a fresh clone and a `go
// install`ed binary all have it with no manual step. docs/SIMDEV.md has the
// model and the API.
package simcuda

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

//go:embed csrc/gpufeed_simcuda.c csrc/gpufeed_simcuda.h csrc/gpufeed_sim_kernel.ptx
var src embed.FS

// LibName is the shared object's file name: it says it is the simulator.
const LibName = "libgpufeed-simcuda.so"

// EnvLib names an environment variable that points at an already built
// library, used instead of building one.
const EnvLib = "GPUFEED_SIMDEV_LIB"

// HeaderName is the C header declaring the library's API.
const HeaderName = "gpufeed_simcuda.h"

// KernelName is the simulator's kernel in KernelPTX: its first parameter is
// its duration in nanoseconds.
const KernelName = "gpufeed_sim_kernel"

// KernelPTX is the PTX module of the simulator's kernel (a real GPU runs it
// as a spin on %globaltimer for the same duration).
var KernelPTX = mustRead("csrc/gpufeed_sim_kernel.ptx")

// Header is the library's C header, for programs that link against it.
var Header = mustRead("csrc/" + HeaderName)

func mustRead(name string) string {
	b, err := src.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// cflags is how the library is compiled. -fvisibility=hidden keeps every
// symbol but the API's private.
var cflags = []string{"-std=gnu11", "-O2", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden", "-Wall"}

var (
	once    sync.Once
	libPath string
	libErr  error
)

// Path returns the library's path: GPUFEED_SIMDEV_LIB when set, else the
// library built (once per cache key) in the user's cache directory.
func Path() (string, error) {
	once.Do(func() {
		if p := os.Getenv(EnvLib); p != "" {
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				libErr = fmt.Errorf("%s=%s: not a built library (%v)", EnvLib, p, err)
				return
			}
			libPath = p
			return
		}
		dir, err := cacheDir()
		if err != nil {
			libErr = err
			return
		}
		libPath, libErr = Build(dir)
	})
	return libPath, libErr
}

// cacheDir is gpufeed's directory in the user's cache (XDG_CACHE_HOME or
// ~/.cache), or a private one under the temporary directory when there is
// no home.
func cacheDir() (string, error) {
	if d, err := os.UserCacheDir(); err == nil {
		d = filepath.Join(d, "gpufeed")
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d, nil
		}
	}
	d := filepath.Join(os.TempDir(), fmt.Sprintf("gpufeed-cache-%d", os.Getuid()))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("no cache directory for the simulated driver library: %w", err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("cache directory %s is not this user's own private directory: refusing to load a library from it", d)
	}
	return d, nil
}

// Compiler returns the C compiler command: $CC when set (it may carry
// arguments), else the first of cc, gcc and clang on PATH.
func Compiler() ([]string, error) {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		p, err := exec.LookPath(cc[0])
		if err != nil {
			return nil, fmt.Errorf("the simulated driver library is compiled with CC=%s: %w", os.Getenv("CC"), err)
		}
		return append([]string{p}, cc[1:]...), nil
	}
	for _, name := range []string{"cc", "gcc", "clang"} {
		if p, err := exec.LookPath(name); err == nil {
			return []string{p}, nil
		}
	}
	return nil, errors.New("the simulated device's driver library (" + LibName + ") is compiled from its embedded C source on first use, " +
		"and no C compiler was found (CC unset; no cc, gcc or clang on PATH): install one (apt-get install gcc) or set " +
		EnvLib + " to a built library")
}

// Key is the cache key of the library a compiler command builds: the hash
// of the sources, the flags and the command.
func Key(cc []string) string {
	h := sha256.New()
	for _, name := range []string{"csrc/gpufeed_simcuda.c", "csrc/" + HeaderName} {
		b, _ := src.ReadFile(name)
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "flags %q\ncc %q\n", cflags, cc)
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// Build compiles the library into dir/simcuda-KEY/ unless it is already
// there, and returns its path. Concurrent builders (two test binaries)
// each compile into a file of their own and rename it into place.
func Build(dir string) (string, error) {
	cc, err := Compiler()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "simcuda-"+Key(cc))
	lib := filepath.Join(out, LibName)
	if fi, err := os.Stat(lib); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		return lib, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("building the simulated driver library: %w", err)
	}
	work, err := os.MkdirTemp(out, "build-")
	if err != nil {
		return "", fmt.Errorf("building the simulated driver library: %w", err)
	}
	defer os.RemoveAll(work)
	if err := WriteSources(work); err != nil {
		return "", err
	}
	tmp := filepath.Join(work, LibName)
	args := append(append(append([]string{}, cc[1:]...), cflags...), "-o", tmp, filepath.Join(work, "gpufeed_simcuda.c"))
	cmd := exec.Command(cc[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("compiling the simulated driver library with %s: %v\n%s", strings.Join(cc, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Rename(tmp, lib); err != nil {
		return "", fmt.Errorf("building the simulated driver library: %w", err)
	}
	return lib, nil
}

// WriteSources writes the library's C source, header and PTX kernel into dir.
func WriteSources(dir string) error {
	for _, name := range []string{"gpufeed_simcuda.c", HeaderName, "gpufeed_sim_kernel.ptx"} {
		b, _ := src.ReadFile("csrc/" + name)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing the simulated driver's %s: %w", name, err)
		}
	}
	return nil
}
