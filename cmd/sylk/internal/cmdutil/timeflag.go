package cmdutil

import "time"

// ParseTime reads the value of a time flag (--since, --until): an RFC 3339
// time, a local date, or a duration ago. Empty is the zero time.
func ParseTime(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, Usagef("%s %q: want an RFC 3339 time (2026-11-21T09:00:00Z), a date (2026-11-21) or a duration ago (2h)", flag, s)
}
