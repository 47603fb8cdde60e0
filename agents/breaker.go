package agents

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Circuit breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// ErrBreakerOpen is returned while a breaker refuses calls.
var ErrBreakerOpen = errors.New("circuit breaker open")

// BreakerConfig is when a breaker trips and how it recovers (seed L6247-6283).
type BreakerConfig struct {
	// ConsecutiveFailures trips it.
	ConsecutiveFailures int
	// FailureRate at or above which a full window trips it.
	FailureRate float64
	// Window is how many recent calls the rate is taken over.
	Window int
	// Cooldown is how long it stays open before letting one probe through.
	Cooldown time.Duration
	// SuccessesToClose is how many probes must succeed to close it again.
	SuccessesToClose int
}

// DefaultBreakers are the seed's thresholds per resource.
func DefaultBreakers() map[string]BreakerConfig {
	return map[string]BreakerConfig{
		"llm":        {ConsecutiveFailures: 5, FailureRate: 0.5, Window: 20, Cooldown: 30 * time.Second, SuccessesToClose: 3},
		"file":       {ConsecutiveFailures: 2, FailureRate: 0.3, Window: 10, Cooldown: 10 * time.Second, SuccessesToClose: 2},
		"network":    {ConsecutiveFailures: 3, FailureRate: 0.5, Window: 20, Cooldown: 30 * time.Second, SuccessesToClose: 3},
		"subprocess": {ConsecutiveFailures: 3, FailureRate: 0.4, Window: 15, Cooldown: 20 * time.Second, SuccessesToClose: 2},
	}
}

// BreakerChange is one transition, reported to the breaker's observer.
type BreakerChange struct {
	Resource string
	From, To string
	Reason   string
	Failures int
}

// Breaker guards one resource: closed it lets calls through; after too many
// failures it opens and fails calls fast; after the cooldown it half-opens and
// lets one probe through at a time; enough successful probes close it.
type Breaker struct {
	resource string
	cfg      BreakerConfig
	now      func() time.Time
	onChange func(BreakerChange)

	mu          sync.Mutex
	state       string
	consecutive int
	window      []bool // true = failure
	next        int
	filled      bool
	openedAt    time.Time
	probing     bool
	successes   int
}

// NewBreaker returns a closed breaker. onChange, if set, is called (without the
// breaker's lock) on every transition.
func NewBreaker(resource string, cfg BreakerConfig, now func() time.Time, onChange func(BreakerChange)) *Breaker {
	if now == nil {
		now = time.Now
	}
	return &Breaker{resource: resource, cfg: cfg, now: now, onChange: onChange, state: BreakerClosed, window: make([]bool, max(1, cfg.Window))}
}

// State is the current state.
func (b *Breaker) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Allow asks to make a call. It returns nil, or an error wrapping ErrBreakerOpen
// with how long until a probe may go through.
func (b *Breaker) Allow() (retryIn time.Duration, err error) {
	b.mu.Lock()
	var change *BreakerChange
	defer func() {
		b.mu.Unlock()
		b.report(change)
	}()
	switch b.state {
	case BreakerOpen:
		wait := b.openedAt.Add(b.cfg.Cooldown).Sub(b.now())
		if wait > 0 {
			return wait, fmt.Errorf("%w: %s, retry in %s", ErrBreakerOpen, b.resource, wait.Round(time.Millisecond))
		}
		change = b.moveLocked(BreakerHalfOpen, "cooldown over")
		b.probing = true
		return 0, nil
	case BreakerHalfOpen:
		if b.probing {
			return b.cfg.Cooldown / 10, fmt.Errorf("%w: %s, a probe is in flight", ErrBreakerOpen, b.resource)
		}
		b.probing = true
	}
	return 0, nil
}

// Record reports the outcome of an allowed call.
func (b *Breaker) Record(failed bool) {
	b.mu.Lock()
	var change *BreakerChange
	defer func() {
		b.mu.Unlock()
		b.report(change)
	}()
	b.window[b.next] = failed
	b.next = (b.next + 1) % len(b.window)
	if b.next == 0 {
		b.filled = true
	}
	if failed {
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	switch b.state {
	case BreakerHalfOpen:
		b.probing = false
		if failed {
			change = b.moveLocked(BreakerOpen, "probe failed")
			return
		}
		b.successes++
		if b.successes >= b.cfg.SuccessesToClose {
			change = b.moveLocked(BreakerClosed, fmt.Sprintf("%d probes succeeded", b.successes))
		}
	case BreakerClosed:
		if !failed {
			return
		}
		if b.consecutive >= b.cfg.ConsecutiveFailures {
			change = b.moveLocked(BreakerOpen, fmt.Sprintf("%d consecutive failures", b.consecutive))
		} else if rate := b.failureRateLocked(); b.filled && rate >= b.cfg.FailureRate {
			change = b.moveLocked(BreakerOpen, fmt.Sprintf("failure rate %.0f%% over the last %d calls", rate*100, len(b.window)))
		}
	}
}

// Reset closes the breaker and forgets its history (the user's force reset).
func (b *Breaker) Reset() {
	b.mu.Lock()
	change := b.moveLocked(BreakerClosed, "reset")
	b.mu.Unlock()
	b.report(change)
}

func (b *Breaker) failureRateLocked() float64 {
	n := len(b.window)
	if !b.filled {
		n = b.next
	}
	if n == 0 {
		return 0
	}
	f := 0
	for _, failed := range b.window[:n] {
		if failed {
			f++
		}
	}
	return float64(f) / float64(n)
}

func (b *Breaker) moveLocked(to, reason string) *BreakerChange {
	if b.state == to {
		return nil
	}
	c := &BreakerChange{Resource: b.resource, From: b.state, To: to, Reason: reason, Failures: b.consecutive}
	b.state = to
	b.successes = 0
	b.probing = false
	switch to {
	case BreakerOpen:
		b.openedAt = b.now()
	case BreakerClosed:
		b.consecutive = 0
		clear(b.window)
		b.next, b.filled = 0, false
	}
	return c
}

func (b *Breaker) report(c *BreakerChange) {
	if c != nil && b.onChange != nil {
		b.onChange(*c)
	}
}
