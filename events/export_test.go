package events

import (
	"testing"
	"time"
)

// SetScanHeartbeat sets the idle heartbeat of scans' consumers for one test.
func SetScanHeartbeat(t *testing.T, d time.Duration) {
	old := scanHeartbeat
	scanHeartbeat = d
	t.Cleanup(func() { scanHeartbeat = old })
}
