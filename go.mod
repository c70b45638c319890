module github.com/gpufeed/gpufeed

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/prometheus/procfs v0.23.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.49.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
