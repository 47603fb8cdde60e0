package cmdutil

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressBar is a progress bar on a terminal's stderr, or nothing.
func ProgressBar(io *IOStreams, total int64, what string) *progressbar.ProgressBar {
	if !io.Terminal {
		return nil
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(io.ErrOut),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionEnableColorCodes(io.Color),
		progressbar.OptionClearOnFinish(),
	)
}
