package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
)

// ErrQuotaFull is wrapped by an append the server refused because the
// stream's disk quota (broker.Options.MaxBytes, stream.max_bytes in the
// configuration) is full.
var ErrQuotaFull = errors.New("the event stream's disk quota is full, so the server refuses new events: " +
	"raise stream.max_bytes in the configuration: a running server takes the edit (sylk config show says where it is set)")

// quotaFull wraps err with ErrQuotaFull when the server refused a message
// because its stream is at its byte limit.
func quotaFull(err error) error {
	if err != nil && strings.Contains(err.Error(), "maximum bytes exceeded") {
		return fmt.Errorf("%w (%w)", ErrQuotaFull, err)
	}
	return err
}

// QuotaLevel is the quota level (schemas.QuotaWarn, QuotaCritical or 0) of
// a stream holding bytes out of maxBytes, and the share it holds.
func QuotaLevel(bytes uint64, maxBytes int64) (level, percent int) {
	if maxBytes <= 0 {
		return 0, 0
	}
	percent = int(bytes * 100 / uint64(maxBytes))
	for _, l := range []int{schemas.QuotaCritical, schemas.QuotaWarn} {
		if percent >= l {
			return l, percent
		}
	}
	return 0, percent
}

// WatchQuota reads the stream's use of its disk quota every interval until
// ctx ends, and appends a stream_quota event to the system session each time
// it crosses a level, up or down (logged too). onLevel, if set, sees every level read, so
// that work can be paused under pressure and resumed after it. A stream
// without a quota is watched all the same: a quota set later is seen.
func (l *Log) WatchQuota(ctx context.Context, interval time.Duration, onLevel func(schemas.StreamQuota)) error {
	last := 0
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s, err := l.js.Stream(ctx, broker.Stream)
		if err == nil {
			info := s.CachedInfo()
			q := schemas.StreamQuota{Bytes: info.State.Bytes, MaxBytes: info.Config.MaxBytes}
			q.Level, q.Percent = QuotaLevel(q.Bytes, q.MaxBytes)
			if onLevel != nil {
				onLevel(q)
			}
			if q.Level != last {
				last = q.Level
				l.recordQuota(ctx, q)
			}
		} else if ctx.Err() == nil {
			slog.Warn("stream quota: reading the stream", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (l *Log) recordQuota(ctx context.Context, q schemas.StreamQuota) {
	attrs := []any{"level", q.Level, "percent", q.Percent, "bytes", q.Bytes, "max_bytes", q.MaxBytes}
	if q.Level > 0 {
		slog.Warn("stream quota filling up: beyond it new events are refused", attrs...)
	} else {
		slog.Info("stream quota back under its warning level", attrs...)
	}
	env, err := schemas.New(schemas.TypeStreamQuota, schemas.SystemSession, "server", "user", time.Now(), q)
	if err == nil {
		_, err = l.Append(ctx, env)
	}
	if err != nil && ctx.Err() == nil {
		slog.Error("stream quota: recording the crossing", "err", err)
	}
}
