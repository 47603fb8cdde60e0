package schemas

// Resource limits and pressure (seed L6602-7473).
const (
	TypeStreamQuota Type = "stream_quota"
)

// resourceTypes are the resource limits' types.
var resourceTypes = map[Type]typeInfo{
	TypeStreamQuota: entry[StreamQuota]("The event stream's use of its disk quota crossed a warning level (80%, 90%) or fell back below one (level 0: under 80%). Beyond the quota the server refuses new events."),
}

// Quota levels: the share of the stream's quota (stream.max_bytes) in use
// at which a stream_quota event is appended. Beyond the quota the server
// refuses new events, this one too: the refusal is the append's error.
const (
	QuotaWarn     = 80
	QuotaCritical = 90
)

// StreamQuota is the stream's use of its quota when it crossed Level
// (QuotaWarn, QuotaCritical, or 0 when back under QuotaWarn).
type StreamQuota struct {
	Level    int    `json:"level"`
	Bytes    uint64 `json:"bytes"`
	MaxBytes int64  `json:"max_bytes"`
	// Percent is Bytes as a share of MaxBytes, rounded down.
	Percent int `json:"percent"`
}
