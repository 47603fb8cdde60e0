package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
)

// Executors sharing a pool share its bound; other work leaves the user's
// reserve free, so a user's command runs at once while other work waits;
// a change of the limits takes effect on the waiting work.
func TestPoolReservesSlotsForTheUser(t *testing.T) {
	pool, err := NewPool(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := newTestExecutor(t, func(o *Options) { o.Pool = pool })
	b := newTestExecutor(t, func(o *Options) { o.Pool = pool })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(ctx context.Context, e *Executor, id string, argv string) chan error {
		done := make(chan error, 1)
		go func() {
			r, err := e.Run(ctx, "engineer", Call{ID: id, Tool: ToolExec, Args: json.RawMessage(`{"argv":` + argv + `}`)})
			if err == nil && !r.OK {
				err = errors.New(id + ": " + r.Error)
			}
			done <- err
		}()
		return done
	}
	sleep := `["sleep","30"]`
	bg1, bg2 := run(ctx, a, "bg1", sleep), run(ctx, b, "bg2", sleep)
	brokertest.Eventually(t, 10*time.Second, "two background processes", func() bool { return pool.Usage().Other == 2 })
	// The third slot is the user's: other work waits for it.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	bg3 := run(waitCtx, a, "bg3", `["true"]`)
	brokertest.Eventually(t, 10*time.Second, "a third background call to wait", func() bool { return pool.Usage().WaitingOther == 1 })
	// The user's command is not held behind it.
	if err := <-run(ForUser(ctx), b, "user", `["true"]`); err != nil {
		t.Fatalf("the user's command: %v", err)
	}
	if u := pool.Usage(); u.Other != 2 || u.WaitingOther != 1 || u.User != 0 {
		t.Fatalf("after the user's command: %+v, want 2 running and 1 waiting", u)
	}
	// Growing the pool live lets the waiting work run.
	if err := pool.SetLimits(4, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-bg3; err != nil {
		t.Fatalf("the waiting call, after the pool grew: %v", err)
	}
	stopWaiting()
	// A waiting call gives up with its context and leaves the count.
	if err := pool.SetLimits(2, 1); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if err := <-run(short, a, "bg4", `["true"]`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call waiting past its deadline: %v", err)
	}
	if u := pool.Usage(); u.WaitingOther != 0 {
		t.Fatalf("a call that gave up still counts as waiting: %+v", u)
	}
	cancel()
	for _, c := range []chan error{bg1, bg2} {
		if err := <-c; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled sleep: %v", err)
		}
	}
	if u := pool.Usage(); u.User+u.Other != 0 {
		t.Fatalf("slots still held after every call ended: %+v", u)
	}
}

func TestPoolLimits(t *testing.T) {
	for _, c := range []struct{ size, reserved int }{{0, 0}, {2, 2}, {4, -1}} {
		if _, err := NewPool(c.size, c.reserved); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewPool(%d, %d): %v, want ErrInvalidOptions", c.size, c.reserved, err)
		}
	}
	for size, want := range map[int]int{1: 0, 2: 1, 4: 1, 10: 2, 16: 3} {
		if got := ReservedFor(size); got != want {
			t.Errorf("ReservedFor(%d) = %d, want %d", size, got, want)
		}
	}
}
