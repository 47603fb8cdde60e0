package llmtest

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Timing is an http.RoundTripper that measures the HTTP calls it carries:
// from sending the request until the body is closed, the model's latency and
// the transfer included. Benchmarks subtract it from what they time to get
// the runtime's own overhead.
type Timing struct {
	base  http.RoundTripper
	mu    sync.Mutex
	total time.Duration
	calls int
}

// NewTiming measures the calls of a fresh default transport.
func NewTiming() *Timing { return &Timing{base: http.DefaultTransport.(*http.Transport).Clone()} }

// RoundTrip implements http.RoundTripper.
func (t *Timing) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.add(time.Since(start))
		return nil, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() { t.add(time.Since(start)) }}
	return resp, nil
}

func (t *Timing) add(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += d
	t.calls++
}

// Total is the time spent in the calls so far and their number.
func (t *Timing) Total() (time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total, t.calls
}

// Reset forgets the calls so far.
func (t *Timing) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total, t.calls = 0, 0
}

type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
