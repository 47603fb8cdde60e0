package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
)

// TestProjectionsRebuildWithoutALog runs `sylk projections rebuild`, which
// keeps no write-ahead log, as a real process: run to its end, the store it
// leaves holds the whole rebuild (closing wrote it); SIGKILLed at points of
// its run, it leaves either the store it started from or one marked
// unfinished, which the next start rebuilds; never a part of a rebuild
// that passes for a whole one. Stopped by SIGTERM once it has opened the
// store, it leaves the same (or, if it was done by then, the whole rebuild).
func TestProjectionsRebuildWithoutALog(t *testing.T) {
	t.Parallel()          // a long end-to-end run of its own processes, ports and directories
	const sessions = 3000 // 30k events
	bin := sylkBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	// Five rebuild processes, each verified after: on a loaded 2-core
	// machine three minutes were not always enough.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	writeKillStream(ctx, t, data, "r", sessions)
	const last = sessions * 10

	out, err := exec.CommandContext(ctx, bin, "--data", data, "projections", "rebuild", "--json").Output()
	if err != nil {
		t.Fatalf("projections rebuild: %v", err)
	}
	var res struct{ Events, Applied uint64 }
	if err := json.Unmarshal(out, &res); err != nil || res.Events != last || res.Applied != last {
		t.Fatalf("projections rebuild printed %s (%v); want %d events applied", out, err, last)
	}
	checkRebuilt(ctx, t, data, last, false)

	// Killed at its start, once it has opened the store (Pebble writes new
	// files when it opens), and once it has written a table (or at its end,
	// if it writes none before).
	dir := filepath.Join(data, "projections")
	for _, at := range []string{"start", "open", "table", "sigterm"} {
		before := files(t, dir, "")
		tablesBefore := files(t, dir, ".sst")
		cmd := exec.CommandContext(ctx, bin, "--data", data, "projections", "rebuild", "--json")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		ended := false
		switch at {
		case "open", "sigterm":
			ended = waitOrEnd(t, done, "the store opened", func() bool { return files(t, dir, "") != before })
		case "table":
			ended = waitOrEnd(t, done, "a new table", func() bool { return files(t, dir, ".sst") != tablesBefore })
		}
		if !ended && at == "sigterm" {
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
		} else if !ended {
			cmd.Process.Kill()
			<-done
			os.Remove(filepath.Join(data, broker.InfoFile)) // in case it wrote one
		}
		t.Logf("stopped at %s (ended by itself: %v); checking the store", at, ended)
		checkRebuilt(ctx, t, data, last, true)
	}
}

// waitOrEnd polls cond until it holds (false) or the process ends first
// (true).
func waitOrEnd(t *testing.T, done chan error, what string, cond func() bool) bool {
	t.Helper()
	ended := false
	brokertest.Eventually(t, time.Minute, what, func() bool {
		select {
		case <-done:
			ended = true
			return true
		default:
			return cond()
		}
	})
	return ended
}

// files lists the names in dir ending in suffix, as one string.
func files(t *testing.T, dir, suffix string) string {
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(m)
}

// checkRebuilt opens the store as a server would after the rebuild process
// ended. Unless interrupted is allowed, it must hold the whole rebuild; if
// so, it must be either that or marked unfinished (Status, Verify refusing
// it) and rebuilt by the catch-up. Either way it ends verified clean.
func checkRebuilt(ctx context.Context, t *testing.T, data string, last uint64, interrupted bool) {
	t.Helper()
	b, err := broker.Start(ctx, broker.Options{DataDir: data, Listen: broker.ListenNone, Sync: broker.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	log := events.New(b.JetStream())
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(data, "projections")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, err := store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case st.Rebuild != nil && !interrupted:
		t.Fatalf("a finished rebuild left a store marked unfinished: %+v", st.Rebuild)
	case st.Rebuild != nil:
		if _, err := store.Verify(ctx, log); !errors.Is(err, projections.ErrVerify) {
			t.Fatalf("verify of a store marked unfinished = %v, want ErrVerify", err)
		}
		if got, err := store.Projector(log).CatchUp(ctx); err != nil || got != last {
			t.Fatalf("catch up of a store marked unfinished = %d, %v; want %d", got, err, last)
		}
	case store.Cursor() != last:
		t.Fatalf("store not marked unfinished with cursor %d of %d", store.Cursor(), last)
	}
	if _, err := store.Verify(ctx, log); err != nil {
		t.Fatalf("the store after the rebuild process: %v", err)
	}
}
