// Package gpu is gpufeed's view of the accelerators: an application-shaped
// interface that both the NVML source (internal/nvml) and the simulated
// device (internal/sim) implement, so diagnose, check and the rules never
// know which one they read.
//
// Every optional reading is a pointer: nil means "not read" (not supported by
// this device or driver, named in Sample.Unsupported), never zero.
package gpu

import "time"

// Source is an opened set of devices.
type Source interface {
	// Name says what this source is, for reports: "NVML 550.54.15", "simulated device at /tmp/x.sock".
	Name() string
	// Devices returns the devices' static facts, read once at open.
	Devices() []DeviceInfo
	// Sample reads every device once. Utilisation covers the window since the
	// previous call (the first call covers the time since open). A device that
	// fell off the bus yields a Sample with Lost set; the error is reserved for
	// the source itself failing.
	Sample() ([]Sample, error)
	// Close releases the source.
	Close() error
}

// DeviceInfo holds a device's static facts.
type DeviceInfo struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name"`
	// BusID is the PCI address in sysfs form (0000:81:00.0), lower case.
	BusID string `json:"bus_id,omitempty"`
	// Simulated is true for the simulated device.
	Simulated bool   `json:"simulated,omitempty"`
	Driver    string `json:"driver,omitempty"`

	MemTotalBytes      *uint64  `json:"mem_total_bytes,omitempty"`
	MaxSMClockMHz      *uint32  `json:"max_sm_clock_mhz,omitempty"`
	MaxMemClockMHz     *uint32  `json:"max_mem_clock_mhz,omitempty"`
	AppSMClockMHz      *uint32  `json:"app_sm_clock_mhz,omitempty"`
	AppMemClockMHz     *uint32  `json:"app_mem_clock_mhz,omitempty"`
	PowerLimitW        *float64 `json:"power_limit_w,omitempty"`
	DefaultPowerLimitW *float64 `json:"default_power_limit_w,omitempty"`
	LinkGenMax         *int     `json:"link_gen_max,omitempty"`
	LinkWidthMax       *int     `json:"link_width_max,omitempty"`
	PersistenceMode    *bool    `json:"persistence_mode,omitempty"`
	NUMANode           *int     `json:"numa_node,omitempty"`
	GPMSupported       bool     `json:"gpm_supported,omitempty"`
	// ECCEnabled is the current ECC mode.
	ECCEnabled *bool `json:"ecc_enabled,omitempty"`
	// RemappedRowsPending / RemappedRowsFailed are NVML's row-remapping state
	// (Ampere and later): a pending remap needs a GPU reset; a failure means the
	// memory is degraded.
	RemappedRowsPending *bool `json:"remapped_rows_pending,omitempty"`
	RemappedRowsFailed  *bool `json:"remapped_rows_failed,omitempty"`
	// RetiredPages counts pages retired for ECC errors (pre-Ampere page retirement).
	RetiredPages *int `json:"retired_pages,omitempty"`
	// Unsupported names the static facts the device would not give.
	Unsupported []string `json:"unsupported,omitempty"`
	// Errors maps a static fact that could not be read for another reason
	// (no permission, unknown error) to the driver's error text.
	Errors map[string]string `json:"errors,omitempty"`
}

// UtilPoint is one utilisation reading at the device's finest resolution
// (NVML's nvmlDeviceGetSamples; the simulated device's own windows).
type UtilPoint struct {
	At      time.Time `json:"at"`
	Percent float64   `json:"percent"`
}

// Process is one compute process on a device, with its host PID.
type Process struct {
	// PID is the process as gpufeed's proc root shows it (the host PID when
	// that is the host's /proc).
	PID int `json:"pid"`
	// NSPID is the PID inside the process's own PID namespace (a container),
	// when it differs from PID (from NSpid in /proc/PID/status).
	NSPID int `json:"ns_pid,omitempty"`
	// NotVisible says why PID could not be found under the proc root (a host
	// PID seen from inside a container's PID namespace).
	NotVisible    string   `json:"not_visible,omitempty"`
	UsedMemBytes  *uint64  `json:"used_mem_bytes,omitempty"`
	SMUtilPercent *float64 `json:"sm_util_percent,omitempty"`
	MemUtilPct    *float64 `json:"mem_util_percent,omitempty"`
	// CompletedOps counts the operations (kernels and copies) the device
	// completed for the process since it first used it: the device's own
	// measure of progress. The simulated device reports it; NVML has no such
	// counter (nil).
	CompletedOps *uint64 `json:"completed_ops,omitempty"`
}

// GPM holds Hopper-class GPU performance monitoring metrics over the window.
type GPM struct {
	SMActivityPct     *float64 `json:"sm_activity_percent,omitempty"`
	SMOccupancyPct    *float64 `json:"sm_occupancy_percent,omitempty"`
	TensorActivityPct *float64 `json:"tensor_activity_percent,omitempty"`
	DRAMActivityPct   *float64 `json:"dram_activity_percent,omitempty"`
	PCIeTxBytesPerSec *float64 `json:"pcie_tx_bytes_per_sec,omitempty"`
	PCIeRxBytesPerSec *float64 `json:"pcie_rx_bytes_per_sec,omitempty"`
}

// Sample is one reading of one device.
type Sample struct {
	Index int       `json:"index"`
	At    time.Time `json:"at"`
	// Lost is non-empty once the device stopped answering (fell off the bus); the run goes on.
	Lost string `json:"lost,omitempty"`

	// Points are the utilisation readings inside the window, oldest first.
	Points []UtilPoint `json:"points,omitempty"`
	// UtilPercent is the percentage of the window during which at least one
	// kernel ran (NVML's definition of GPU utilisation).
	UtilPercent    *float64 `json:"util_percent,omitempty"`
	MemUtilPercent *float64 `json:"mem_util_percent,omitempty"`

	SMClockMHz  *uint32 `json:"sm_clock_mhz,omitempty"`
	MemClockMHz *uint32 `json:"mem_clock_mhz,omitempty"`
	// ClockEventReasons is NVML's clock event (throttle) reason bit mask.
	ClockEventReasons *uint64  `json:"clock_event_reasons,omitempty"`
	PowerW            *float64 `json:"power_w,omitempty"`
	TempC             *float64 `json:"temp_c,omitempty"`
	MemUsedBytes      *uint64  `json:"mem_used_bytes,omitempty"`

	PCIeTxBytesPerSec *float64 `json:"pcie_tx_bytes_per_sec,omitempty"`
	PCIeRxBytesPerSec *float64 `json:"pcie_rx_bytes_per_sec,omitempty"`
	LinkGen           *int     `json:"link_gen,omitempty"`
	LinkWidth         *int     `json:"link_width,omitempty"`
	ReplayCounter     *uint64  `json:"replay_counter,omitempty"`

	Processes []Process `json:"processes,omitempty"`
	GPM       *GPM      `json:"gpm,omitempty"`

	// Unsupported names the readings the device said it does not support.
	Unsupported []string `json:"unsupported,omitempty"`
	// Errors maps a reading that failed for another reason (no permission,
	// unknown error) to the driver's error text: not read, never zero.
	Errors map[string]string `json:"errors,omitempty"`
}
