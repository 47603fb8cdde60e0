package agents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sylk/sylk/schemas"
)

// Class is how the runner treats a handler's error (seed L5828-6000, with the
// seed's own rule that an unknown error is permanent).
type Class int

// Error classes.
const (
	// ClassNone: no error.
	ClassNone Class = iota
	// ClassTransient: retry after a backoff (NakWithDelay).
	ClassTransient
	// ClassPermanent: do not retry; terminate and dead-letter with the reason.
	ClassPermanent
	// ClassStopping: the runner is shutting down; leave the message for another
	// delivery without counting it as a failure.
	ClassStopping
)

// classified carries a class and, for retries, an explicit delay.
type classified struct {
	err   error
	class Class
	delay time.Duration
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// Transient marks err as worth retrying; delay, when positive, overrides the
// backoff (a Retry-After, a circuit breaker's cooldown).
func Transient(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: ClassTransient, delay: delay}
}

// Permanent marks err as final: the message is dead-lettered.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: ClassPermanent}
}

// Classify returns err's class and explicit retry delay. Unmarked errors are
// permanent; a cancelled context while the runner stops is ClassStopping.
func Classify(ctx context.Context, err error) (Class, time.Duration) {
	if err == nil {
		return ClassNone, 0
	}
	var c *classified
	if errors.As(err, &c) {
		return c.class, c.delay
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ClassStopping, 0
	}
	return ClassPermanent, 0
}

// Backoff returns the delay before delivery attempt+1: base doubled per attempt,
// capped at max (the seed's transient policy: 100 ms to 5 s).
func Backoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}

// ErrUnhandledType is returned by handlers for a message type they do not take.
var ErrUnhandledType = errors.New("message type not handled by this agent")

// Unhandled is the permanent error for a message type an agent does not take.
func Unhandled(agent string, t schemas.Type) error {
	return Permanent(fmt.Errorf("%w: %s does not handle %s", ErrUnhandledType, agent, t))
}
