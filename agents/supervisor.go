package agents

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// RestartLimits is a supervisor's restart intensity: more than Max restarts
// within Period and it gives up (seed 001: 3 in 5 s for the application).
type RestartLimits struct {
	Max    int
	Period time.Duration
}

// DefaultRestartLimits allow 3 restarts in 5 seconds.
var DefaultRestartLimits = RestartLimits{Max: 3, Period: 5 * time.Second}

// ErrRestartLimit is returned when a supervised loop fails too often.
var ErrRestartLimit = errors.New("restart intensity exceeded")

// Supervise runs fn until ctx ends, restarting it after it returns an error or
// panics. onRestart is told each restart with the reason. Past the limits it
// returns an error wrapping ErrRestartLimit and the last failure.
func Supervise(ctx context.Context, name string, limits RestartLimits, fn func(context.Context) error, onRestart func(restarts int, reason string)) error {
	var recent []time.Time
	restarts := 0
	for {
		err := runGuarded(ctx, fn)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("returned before its context ended")
		}
		now := time.Now()
		recent = append(recent, now)
		for len(recent) > 0 && now.Sub(recent[0]) > limits.Period {
			recent = recent[1:]
		}
		if len(recent) > limits.Max {
			return fmt.Errorf("%s: %w (%d in %s): %w", name, ErrRestartLimit, len(recent), limits.Period, err)
		}
		restarts++
		if onRestart != nil {
			onRestart(restarts, err.Error())
		}
	}
}

func runGuarded(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx)
}
