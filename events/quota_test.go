package events_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// A stream with a quota warns at 80% and 90% with stream_quota events, and
// beyond its quota refuses appends, single and batched, with ErrQuotaFull;
// the events already stored stay.
func TestStreamQuotaWarnsThenRefuses(t *testing.T) {
	o := brokertest.Options(t)
	o.MaxBytes = 64 << 10
	b := brokertest.Start(t, o)
	log := events.New(b.JetStream())
	ctx := brokertest.Context(t)
	wctx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var levels []int
	done := make(chan error, 1)
	go func() {
		done <- log.WatchQuota(wctx, 10*time.Millisecond, func(q schemas.StreamQuota) {
			mu.Lock()
			defer mu.Unlock()
			if n := len(levels); n == 0 || levels[n-1] != q.Level {
				levels = append(levels, q.Level)
			}
		})
	}()
	level := func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(levels) == 0 {
			return -1
		}
		return levels[len(levels)-1]
	}
	text := strings.Repeat("x", 900)
	var stored int
	var err error
	for stored = 0; stored < 200; stored++ {
		if _, err = log.Append(ctx, userInput(t, "S1", text)); err != nil {
			break
		}
		// Step by step, so that the watcher sees each level on the way.
		s, err := b.JetStream().Stream(ctx, broker.Stream)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := events.QuotaLevel(s.CachedInfo().State.Bytes, o.MaxBytes)
		brokertest.Eventually(t, 10*time.Second, "the watcher at the stream's level", func() bool { return level() == want })
	}
	if !errors.Is(err, events.ErrQuotaFull) || !strings.Contains(err.Error(), "raise stream.max_bytes") {
		t.Fatalf("append %d past the quota: %v, want ErrQuotaFull saying what to do", stored+1, err)
	}
	if _, err := log.AppendBatch(ctx, []*schemas.Envelope{userInput(t, "S1", text), userInput(t, "S1", text)}); !errors.Is(err, events.ErrQuotaFull) {
		t.Fatalf("a batch past the quota: %v, want ErrQuotaFull", err)
	}
	brokertest.Eventually(t, 10*time.Second, "the watcher at the critical level", func() bool { return level() == schemas.QuotaCritical })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs, err := log.Read(ctx, events.Filter{Type: schemas.TypeStreamQuota}.Subject(), events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []int
	for _, ev := range evs {
		q, err := schemas.PayloadAs[schemas.StreamQuota](ev.Env)
		if err != nil {
			t.Fatal(err)
		}
		if q.MaxBytes != o.MaxBytes || q.Percent < q.Level {
			t.Errorf("stream_quota %+v", q)
		}
		recorded = append(recorded, q.Level)
	}
	if len(recorded) != 2 || recorded[0] != schemas.QuotaWarn || recorded[1] != schemas.QuotaCritical {
		t.Fatalf("stream_quota levels recorded %v, want [80 90]", recorded)
	}
	all, err := log.Read(ctx, events.Filter{Type: schemas.TypeUserInput}.Subject(), events.Cursor{}, 0)
	if err != nil || len(all) != stored {
		t.Fatalf("%d events stored before the quota, %d read back (%v)", stored, len(all), err)
	}
}
