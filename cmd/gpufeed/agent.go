package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		cmd := agentcmd.New(version, func(spec, procRoot string) (gpu.Source, string, error) {
			return openGPU(spec, nil, procRoot)
		})
		run := cmd.RunE
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			if u := (agentcmd.UsageError{}); errors.As(err, &u) {
				return usageError{err}
			}
			return err
		}
		// A value a flag cannot take: the agent's message, gpufeed's usage status.
		cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{agentcmd.FlagError(c, err)} })
		return cmd
	})
}
