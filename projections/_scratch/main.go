package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/projbench"
)

func main() {
	ctx := context.Background()
	ds := &projbench.Dataset{Dir: os.Args[1]}
	b, err := ds.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	log := events.New(b.JetStream())
	be, _ := strconv.Atoi(os.Args[2])
	bb, _ := strconv.Atoi(os.Args[3])
	cs, _ := strconv.Atoi(os.Args[4])
	mt, _ := strconv.Atoi(os.Args[5])
	dir := "/tmp/scratchproj"
	os.RemoveAll(dir)
	store, err := projections.Open(ctx, projections.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler), BatchEvents: be, BatchBytes: bb, BlockCacheBytes: int64(cs), MemTableBytes: uint64(mt)})
	if err != nil {
		panic(err)
	}
	runtime.MemProfileRate = 64 << 10
	f, _ := os.Create("/tmp/cpu.prof")
	pprof.StartCPUProfile(f)
	t0 := time.Now()
	if err := store.Projector(log).Rebuild(ctx, nil); err != nil {
		panic(err)
	}
	pprof.StopCPUProfile()
	mf, _ := os.Create("/tmp/mem.prof")
	pprof.Lookup("allocs").WriteTo(mf, 0)
	fmt.Println("rebuild", time.Since(t0))
	store.Close()
}
