package main

import "github.com/spf13/cobra"

// commands lists the top-level commands.
func commands(f *Factory) []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(f, nil),
		newRunCmd(f),
		newPlanCmd(f),
		newUsageCmd(f),
		newPublishCmd(f, nil),
		newTailCmd(f, nil),
		newConsumerCmd(f),
		newSchemaCmd(f),
		newBenchCmd(f),
		newSignalCmd(f),
		newDLQCmd(f),
		newSessionCmd(f),
		newReplayCmd(f),
		newDAGCmd(f),
		newCheckpointCmd(f),
		newHistoryCmd(f),
		newProjectionsCmd(f),
	}
}
