package drill

import "unsafe"

// unsafePointer is the address of a mapping made outside Go's heap (mmap),
// which the driver may read and write as host memory.
func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
