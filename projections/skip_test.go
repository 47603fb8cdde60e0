package projections_test

import (
	"errors"
	"testing"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// A store that skips a projection leaves it untouched, cursor included; the
// store opened again without skipping it catches it up to a clean rebuild.
func TestSkippedProjectionCatchesUpLater(t *testing.T) {
	w := newWorld(t)
	if err := w.store.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := projections.Open(w.ctx, projections.Options{Dir: "/proj", FS: w.fs, Skip: []string{"nope"}}); !errors.Is(err, projections.ErrInvalidOptions) {
		t.Fatalf("skipping an unknown projection: %v", err)
	}
	s, err := projections.Open(w.ctx, projections.Options{Dir: "/proj", FS: w.fs, Skip: []string{projections.Audit}})
	if err != nil {
		t.Fatal(err)
	}
	w.store = s
	w.appendLines(`S session_create
S prompt_rejected {"reason":"a secret"}`)
	denied := func() int {
		es, err := w.store.Audit(w.ctx, projections.AuditQuery{Outcome: schemas.OutcomeDenied})
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	if n := denied(); n != 0 {
		t.Fatalf("%d audit entries in a store that skips the audit projection", n)
	}
	st, err := w.store.Status(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Projections {
		if want := map[bool]uint64{true: 0, false: 2}[p.Name == projections.Audit]; p.Cursor != want {
			t.Fatalf("cursor of %s: %d, want %d", p.Name, p.Cursor, want)
		}
	}
	w.restart() // without Skip
	if n := denied(); n != 1 {
		t.Fatalf("%d denied entries after catching up, want 1", n)
	}
	rep, err := w.store.Verify(w.ctx, w.log)
	if err != nil || rep.Difference != nil {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
