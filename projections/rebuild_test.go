package projections_test

import (
	"context"
	"errors"
	"flag"
	"testing"

	"pgregory.net/rapid"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
)

// TestInterruptedRebuildIsResumedOrClean: a rebuild stopped at any point
// (before its first commit, between any two commits, or after its last),
// then either closed cleanly or crashed with a random part of its unsynced
// writes lost, leaves a store that is never silently partial: reopened, it
// either says a rebuild is under way (Status, and Verify refuses it) and the
// catch-up every start runs rebuilds it again, or it is the whole rebuild,
// verified clean. Either way it ends in exactly the state of a clean rebuild.
// The rebuild runs with or without a write-ahead log (as `sylk projections
// rebuild` runs it); the store is reopened with one, as a server opens it.
func TestInterruptedRebuildIsResumedOrClean(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		f.Value.Set("20") // each check folds on a real broker; keep the suite quick
		defer f.Value.Set("100")
	}
	b := brokertest.StartMutable(t)
	log := events.New(b.JetStream())
	ctx, cancel := context.WithTimeout(context.Background(), 5*brokertest.Timeout)
	defer cancel()
	rapid.Check(t, func(rt *rapid.T) {
		g := freshEvents(ctx, rt, b, 150)
		seqs, err := log.AppendBatch(ctx, g.envs)
		if err != nil {
			rt.Fatalf("append: %v", err)
		}
		last := seqs[len(seqs)-1]
		cs := openCrashable(ctx, rt, 30)
		defer func() { cs.store.Close() }()
		// A complete store first: the rebuild drops it.
		if _, err := cs.store.Projector(log).CatchUp(ctx); err != nil {
			rt.Fatalf("catch up: %v", err)
		}
		if rapid.Bool().Draw(rt, "rebuild without a log") {
			cs.opts = cs.opts.ForRebuild()
			cs.restart(false)
		}

		// The rebuild stops after its commit number stop (0: right after the
		// drop, before any fold is committed).
		stop := rapid.IntRange(0, int(last)).Draw(rt, "stop after commits")
		rctx, rcancel := context.WithCancel(ctx)
		if stop == 0 {
			rcancel()
		}
		commits := 0
		err = cs.store.Projector(log).Rebuild(rctx, func(projections.Progress) {
			if commits++; commits == stop {
				rcancel()
			}
		})
		rcancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			rt.Fatalf("rebuild: %v", err)
		}
		cs.opts.NoWAL = false
		cs.restart(rapid.Bool().Draw(rt, "crash"))
		st, err := cs.store.Status(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		if st.Rebuild == nil {
			// The rebuild got to its end: the store must be all of it.
			if _, err := cs.store.Verify(ctx, log); err != nil || cs.store.Cursor() != last {
				rt.Fatalf("a rebuild stopped after %d commits, not marked unfinished: cursor %d of %d, verify: %v", stop, cs.store.Cursor(), last, err)
			}
		} else if _, err := cs.store.Verify(ctx, log); !errors.Is(err, projections.ErrVerify) {
			rt.Fatalf("verify of a store whose rebuild was interrupted = %v, want ErrVerify", err)
		}
		if got, err := cs.store.Projector(log).CatchUp(ctx); err != nil || got != last {
			rt.Fatalf("catch up after the interrupted rebuild = %d, %v; want %d", got, err, last)
		}
		if _, err := cs.store.Verify(ctx, log); err != nil {
			rt.Fatalf("the store after the interrupted rebuild differs from a clean rebuild: %v", err)
		}
		if st, err := cs.store.Status(ctx); err != nil || st.Rebuild != nil {
			rt.Fatalf("status after the catch-up: %+v, %v; want no rebuild under way", st, err)
		}
	})
}
