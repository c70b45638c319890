package main

import (
	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return agentcmd.New(version, func(spec, procRoot string) (gpu.Source, string, error) {
			return openGPU(spec, nil, procRoot)
		})
	})
}
