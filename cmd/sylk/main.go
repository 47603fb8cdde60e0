// Command sylk drives the Sylk runtime: serve the event log and agents, publish
// and tail events, run workflows, inspect sessions and replay them.
package main

import (
	"os"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func main() {
	os.Exit(run(os.Args[1:], cmdutil.DefaultIO()))
}
