package cpusample

import (
	"regexp"
	"strings"

	"github.com/gpufeed/gpufeed/internal/profile"
)

// The libraries each category names, by file name. The CUDA driver is
// libcuda.so.1; gpufeed's simulated driver exports the same entry points
// under its own name.
var (
	driverFile      = regexp.MustCompile(`^(libcuda\.so|libgpufeed-simcuda\.so)`)
	interpreterFile = regexp.MustCompile(`^(python\d(\.\d+)?[dmu]?|libpython\d\.\d+[dmu]?\.so)`)
	frameworkFile   = regexp.MustCompile(`^(libtorch_cpu\.so|libtorch\.so|libtorch_python\.so|libc10\.so|libshm\.so|libdnnl|libmkl_|libopenblas|libblas\.so|liblapack\.so|libgomp\.so|libiomp5\.so)`)
	decodeFile      = regexp.MustCompile(`^(libz\.so|libzstd\.so|liblzma\.so|libbz2\.so|liblz4\.so|libsnappy\.so|libjpeg|libturbojpeg|libpng|libwebp|libtiff|libopenjp2|libavcodec|libavformat|libavutil|libswscale|libswresample|libopencv_imgcodecs|libopencv_imgproc|_imaging\.|_imagingft\.|_webp\.|cv2\.)`)
	// The C library and the foreign-function glue (libffi, Python's
	// _ctypes) settle nothing: the code they run for or call is what the
	// time was for.
	libcFile = regexp.MustCompile(`^(libc\.so|libc-2\.\d+\.so|libpthread\.so|libpthread-2\.\d+\.so|ld-linux|libffi\.so|_ctypes\.)`)
)

// classify says what a user frame is, and whether that settles the sample.
// A frame in the C library that is neither a copy nor a lock (a clock read,
// malloc), in the vDSO, or with no file does not: the caller above it says
// what the time was for.
func classify(file, sym string) (profile.Category, bool) {
	if isMemcpy(sym) {
		return profile.Memcpy, true
	}
	if isLock(sym) {
		return profile.Locks, true
	}
	switch {
	case file == "" || strings.HasPrefix(file, "["):
		return profile.Other, false
	case driverFile.MatchString(file):
		return driverCategory(sym), true
	case interpreterFile.MatchString(file):
		return profile.Interpreter, true
	case frameworkFile.MatchString(file):
		return profile.Framework, true
	case decodeFile.MatchString(file):
		return profile.Decode, true
	case libcFile.MatchString(file):
		return profile.Other, false
	}
	return profile.Other, true
}

// driverCategory tells the driver's launch entry points and its syncs from
// the rest. The released driver exports only its entry points; where a
// driver names its internal waits (the simulated one does: wait_until), a
// name that says it waits is a sync.
func driverCategory(sym string) profile.Category {
	switch {
	case strings.HasPrefix(sym, "cuLaunch"), strings.HasPrefix(sym, "cuGraphLaunch"):
		return profile.DriverLaunch
	case strings.HasPrefix(sym, "cuStreamSynchronize"), strings.HasPrefix(sym, "cuCtxSynchronize"),
		strings.HasPrefix(sym, "cuEventSynchronize"), strings.HasPrefix(sym, "cuStreamWaitEvent"):
		return profile.DriverSync
	}
	if l := strings.ToLower(sym); !strings.HasPrefix(l, "cu") && (strings.Contains(l, "wait") || strings.Contains(l, "sync") || strings.Contains(l, "spin")) {
		return profile.DriverSync
	}
	return profile.DriverOther
}

func isMemcpy(sym string) bool {
	s := strings.TrimLeft(sym, "_")
	return strings.HasPrefix(s, "memcpy") || strings.HasPrefix(s, "memmove") || strings.HasPrefix(s, "mempcpy")
}

func isLock(sym string) bool {
	s := strings.TrimLeft(sym, "_")
	for _, p := range []string{"pthread_mutex_", "pthread_spin_", "pthread_rwlock_", "pthread_cond_", "lll_lock", "lll_unlock", "futex", "sem_wait", "sem_timedwait"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// frame is one resolved user frame.
type frame struct {
	file, sym string
}

// categorize decides a sample's category from its frames, leaf first: the
// first frame that settles it, the kernel when the sample was taken in
// kernel mode (unless the code that entered it was a driver sync or a lock:
// a yielding or futex wait's time is the wait's), and otherwise the leaf's
// own category. It returns the frame the time is charged to, and whether
// a frame settled it.
func categorize(kernel bool, frames []frame) (profile.Category, frame, bool) {
	for _, f := range frames {
		c, settled := classify(f.file, f.sym)
		if !settled {
			continue
		}
		// In the kernel on behalf of a driver sync, a lock or a launch (the
		// driver's ioctls, a uprobe's trap on its entry): that call's time.
		if kernel && c != profile.DriverSync && c != profile.Locks && c != profile.DriverLaunch {
			return profile.Kernel, frame{file: "[kernel]"}, true
		}
		return c, f, true
	}
	if kernel {
		return profile.Kernel, frame{file: "[kernel]"}, false
	}
	if len(frames) == 0 {
		return profile.Other, frame{}, false
	}
	return profile.Other, frames[0], false
}
