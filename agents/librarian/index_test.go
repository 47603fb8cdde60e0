package librarian

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// scanHelperEnv makes the test binary a helper that scans the directory it
// names and prints the updates as JSON (a scan run with fewer privileges).
const scanHelperEnv = "LIBRARIAN_TEST_SCAN"

func TestMain(m *testing.M) {
	if dir := os.Getenv(scanHelperEnv); dir != "" {
		ix, err := NewIndexer(dir)
		if err == nil {
			var ups []schemas.IndexUpdate
			if ups, err = ix.Scan(context.Background(), Known{}); err == nil {
				err = json.NewEncoder(os.Stdout).Encode(ups)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// rig is a real broker, a projections store with its projector running, and
// helpers to index a directory through events.
type rig struct {
	t     *testing.T
	ctx   context.Context
	log   *events.Log
	store *projections.Store
}

func newRig(t *testing.T) *rig { return newRigWith(t, projections.Options{}) }

// newRigWith is newRig with a store opened with opts (its directory set).
func newRigWith(t *testing.T, opts projections.Options) *rig {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	opts.Dir = filepath.Join(t.TempDir(), "projections")
	store, err := projections.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, log: events.New(b.JetStream()), store: store}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { store.Projector(r.log).Run(pctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		store.Close()
	})
	return r
}

// scan indexes the whole of ix's root and waits until the index has it; it
// returns the updates recorded.
func (r *rig) scan(ix *Indexer) []schemas.IndexUpdate {
	r.t.Helper()
	known, err := KnownFrom(r.ctx, r.store, ix.Root)
	if err != nil {
		r.t.Fatal(err)
	}
	ups, err := ix.Scan(r.ctx, known)
	if err != nil {
		r.t.Fatal(err)
	}
	r.record(ups)
	return ups
}

func (r *rig) record(ups []schemas.IndexUpdate) {
	r.t.Helper()
	seq, err := Record(r.ctx, r.log, "_", Name, time.Now(), ups)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.WaitFor(r.ctx, seq); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) code(root, kind, text string) *projections.CodeResult {
	r.t.Helper()
	res, err := r.store.Code(r.ctx, projections.CodeQuery{Root: root, Kind: kind, Text: text, Limit: 1000})
	if err != nil {
		r.t.Fatalf("%s %q: %v", kind, text, err)
	}
	return res
}

func indexer(t *testing.T, dir string) *Indexer {
	t.Helper()
	ix, err := NewIndexer(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// generatedTree generates a tree of 300 files from seed and returns it
// with an indexer of it that records several events.
func generatedTree(t *testing.T, seed uint64) (*GeneratedTree, *Indexer) {
	t.Helper()
	dir := t.TempDir()
	g, err := GenerateTree(dir, 300, seed)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	ix.BatchBytes = 16 << 10 // several events
	return g, ix
}

func callerFiles(res *projections.CodeResult) []string {
	var out []string
	for _, c := range res.Calls {
		out = append(out, c.Path)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// This repository, indexed: answers a reader of the code knows.
func TestIndexThisRepository(t *testing.T) {
	r := newRig(t)
	ix := indexer(t, "../..")
	r.scan(ix)
	root := ix.Root

	defs := r.code(root, projections.CodeSymbol, "RootID").Symbols
	if len(defs) != 1 || defs[0].Path != "projections/apply_code.go" || defs[0].Kind != "func" || defs[0].Package != "github.com/sylk/sylk/projections" {
		t.Fatalf("RootID is defined in projections/apply_code.go; the index says %+v", defs)
	}
	if m := r.code(root, projections.CodeSymbol, "Indexer.Scan").Symbols; len(m) != 1 || m[0].Kind != "method" || m[0].Path != "agents/librarian/index.go" {
		t.Fatalf("Indexer.Scan: %+v", m)
	}
	callers := callerFiles(r.code(root, projections.CodeCallers, "projections.RootID"))
	for _, want := range []string{"projections/apply_code.go", "projections/read_code.go"} {
		if !slices.Contains(callers, want) {
			t.Errorf("callers of RootID %v lack %s", callers, want)
		}
	}
	for caller, want := range map[string]string{
		"Indexer.walk":     "path/filepath.WalkDir",
		"Indexer.ScanEach": "github.com/sylk/sylk/agents/librarian.Indexer.one",
	} {
		var callees []string
		for _, c := range r.code(root, projections.CodeCallees, caller).Calls {
			callees = append(callees, c.To)
		}
		if !slices.Contains(callees, want) {
			t.Errorf("callees of %s %v lack %s", caller, callees, want)
		}
	}
	if deps := r.code(root, projections.CodeDeps, "github.com/sylk/sylk/projections").Packages; !slices.Contains(deps, "github.com/cockroachdb/pebble/v2") || slices.Contains(deps, "github.com/sylk/sylk/agents") {
		t.Errorf("projections' dependencies: %v", deps)
	}
	if dependents := r.code(root, projections.CodeDependents, "github.com/sylk/sylk/tools").Packages; !slices.Contains(dependents, "github.com/sylk/sylk/agents/librarian") {
		t.Errorf("the packages importing tools %v lack the Librarian", dependents)
	}
	hits := r.code(root, projections.CodeSearch, "bm25 ranking terms").Hits
	if len(hits) == 0 || hits[0].Path != "projections/terms.go" {
		t.Fatalf("a search for bm25 ranking should rank projections/terms.go first: %+v", hits)
	}
	h := r.code(root, projections.CodeHealth, "projections").Health
	if h.Files == 0 || h.TestFiles == 0 || h.SourceFiles == 0 || h.Maturity == "" {
		t.Fatalf("health of projections: %+v", h)
	}
	// A second scan of an unchanged tree records nothing.
	if ups := r.scan(ix); len(ups) != 0 {
		t.Fatalf("an unchanged tree gave %d updates", len(ups))
	}
}

// A generated tree: every definition and every caller is known, one edit
// re-indexes one file, and a removal removes.
func TestIndexGeneratedTree(t *testing.T) {
	r := newRig(t)
	g, ix := generatedTree(t, 7)
	dir := ix.Root
	ups := r.scan(ix)
	if len(ups) < 2 {
		t.Fatalf("%d events for 300 files with 16 KiB batches", len(ups))
	}
	root := ix.Root
	if st := r.code(root, projections.CodeStatus, "").Status; st.Files != len(g.Files) {
		t.Fatalf("%d files indexed, %d written", st.Files, len(g.Files))
	}
	for fn, file := range g.Defines {
		defs := r.code(root, projections.CodeSymbol, fn).Symbols
		if len(defs) != 1 || defs[0].Path != file {
			t.Fatalf("%s is defined in %s; the index says %+v", fn, file, defs)
		}
	}
	for fn, files := range g.Callers {
		want := slices.Clone(files)
		sort.Strings(want)
		want = slices.Compact(want)
		if got := callerFiles(r.code(root, projections.CodeCallers, fn)); !slices.Equal(got, want) {
			t.Fatalf("callers of %s: %v, want %v", fn, got, want)
		}
	}

	// Edit one file: a scan of the whole tree records exactly it.
	edited := g.Defines["Handler42"]
	full := filepath.Join(dir, edited)
	src, _ := os.ReadFile(full)
	if err := os.WriteFile(full, append(src, []byte("\n// zanzibar quokka\nfunc Extra42() { Handler42(1) }\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	ups = r.scan(ix)
	if len(ups) != 1 || len(ups[0].Files) != 1 || ups[0].Files[0].Path != edited || len(ups[0].Removed)+len(ups[0].Skipped) != 0 {
		t.Fatalf("one edited file should give one indexed file, got %+v", ups)
	}
	if hits := r.code(root, projections.CodeSearch, "quokka").Hits; len(hits) != 1 || hits[0].Path != edited {
		t.Fatalf("the edit's new word: %+v", hits)
	}
	if got := callerFiles(r.code(root, projections.CodeCallers, "Handler42")); !slices.Contains(got, edited) {
		t.Fatalf("callers after the edit: %v", got)
	}
	if defs := r.code(root, projections.CodeSymbol, "Extra42").Symbols; len(defs) != 1 {
		t.Fatalf("Extra42: %+v", defs)
	}
	// Only the named file, as a watcher would report it: what the index
	// knows of that file alone is read.
	if err := os.WriteFile(full, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if known, err := KnownFrom(r.ctx, r.store, root, edited, "no/such.go"); err != nil || len(known.Hashes) != 1 || known.Hashes[edited] == "" || len(known.Skipped) != 0 {
		t.Fatalf("what the index knows of %s: %+v, %v", edited, known, err)
	}
	var recorded []schemas.IndexUpdate
	n, _, err := Update(r.ctx, r.store, ix, []string{filepath.Join(dir, edited)}, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
		recorded = append(recorded, ups...)
		r.record(ups)
		return 0, nil
	})
	if err != nil || len(recorded) != 1 || len(recorded[0].Files) != 1 || recorded[0].Files[0].Path != edited {
		t.Fatalf("Update of %s: %+v, %v", edited, recorded, err)
	}
	if n != (Counts{Events: 1, Indexed: 1}) {
		t.Fatalf("Update of %s counted %+v", edited, n)
	}
	if hits := r.code(root, projections.CodeSearch, "quokka"); len(hits.Hits) != 0 || !slices.Contains(hits.Unknown, "quokka") {
		t.Fatalf("the reverted word is still found: %+v", hits)
	}

	// Remove a file: its definitions go.
	gone := g.Defines["Handler11"]
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	ups = r.scan(ix)
	if len(ups) != 1 || !slices.Equal(ups[0].Removed, []string{gone}) {
		t.Fatalf("a removal: %+v", ups)
	}
	if defs := r.code(root, projections.CodeSymbol, "Handler11").Symbols; len(defs) != 0 {
		t.Fatalf("Handler11 outlived its file: %+v", defs)
	}
	if st := r.code(root, projections.CodeStatus, "").Status; st.Files != len(g.Files)-1 {
		t.Fatalf("files after a removal: %d", st.Files)
	}

	// The index is a projection: a rebuild from the stream gives it back.
	if err := r.store.Projector(r.log).Rebuild(r.ctx, nil); err != nil {
		t.Fatal(err)
	}
	last, err := r.log.LastSeq(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.store.WaitFor(r.ctx, last); err != nil {
		t.Fatal(err)
	}
	if defs := r.code(root, projections.CodeSymbol, "Handler42").Symbols; len(defs) != 1 || defs[0].Path != edited {
		t.Fatalf("after a rebuild: %+v", defs)
	}
}

// A tree indexed again whole, with a fold cache too small to hold the
// files' records: each event's files are looked up in Pebble together, in
// key order (not the walk's), and every one is found, so each is replaced,
// not counted twice, and its old segment entries die.
func TestReindexFindsEveryEarlierRecord(t *testing.T) {
	r := newRigWith(t, projections.Options{CacheBytes: 8 << 10})
	g, ix := generatedTree(t, 3)
	r.scan(ix)
	root := ix.Root
	before := r.code(root, projections.CodeStatus, "").Status
	word := "handler"
	hits := len(r.code(root, projections.CodeSearch, word).Hits)
	if before.Files != len(g.Files) || hits == 0 {
		t.Fatalf("first index: %d files of %d, %d hits for %q", before.Files, len(g.Files), hits, word)
	}
	ix.Reindex = true
	if ups := r.scan(ix); len(ups) < 2 {
		t.Fatalf("%d events for the second index", len(ups))
	}
	after := r.code(root, projections.CodeStatus, "").Status
	if after.Files != before.Files || after.Length != before.Length {
		t.Fatalf("indexed again: %+v, before %+v", after, before)
	}
	if got := len(r.code(root, projections.CodeSearch, word).Hits); got != hits {
		t.Fatalf("%d hits for %q after indexing again, %d before", got, word, hits)
	}
	for fn, file := range g.Defines {
		if defs := r.code(root, projections.CodeSymbol, fn).Symbols; len(defs) != 1 || defs[0].Path != file {
			t.Fatalf("%s after indexing again: %+v", fn, defs)
		}
	}
}

// Searches keep the languages and declaration types asked for, and say
// which values they know when asked for another.
func TestSearchFilters(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	g, err := GenerateTree(dir, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	r.scan(ix)
	query := func(q projections.CodeQuery) *projections.CodeResult {
		t.Helper()
		q.Root, q.Limit = ix.Root, 1000
		res, err := r.store.Code(r.ctx, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		return res
	}
	// "value" is in every Python file and in no other.
	all := query(projections.CodeQuery{Kind: projections.CodeSearch, Text: "value"}).Hits
	py := query(projections.CodeQuery{Kind: projections.CodeSearch, Text: "value", Langs: []string{"python"}}).Hits
	if len(py) != 10 || len(all) != len(py) {
		t.Fatalf("%d Python hits of %d for \"value\", want the 10 Python files", len(py), len(all))
	}
	for _, h := range py {
		if h.Lang != "python" {
			t.Fatalf("a python search found %s (%s)", h.Path, h.Lang)
		}
	}
	if hits := query(projections.CodeQuery{Kind: projections.CodeSearch, Text: "value", Langs: []string{"go", "markdown"}}).Hits; len(hits) != 0 {
		t.Fatalf("no Go or Markdown file holds \"value\": %+v", hits)
	}
	// "handler": every Go file declares a Handler function; no struct's
	// name holds the word, so a struct search finds nothing.
	funcs := query(projections.CodeQuery{Kind: projections.CodeSearch, Text: "handler", Types: []string{"func"}}).Hits
	if len(funcs) != g.GoFiles {
		t.Fatalf("%d files declare a handler function, want %d", len(funcs), g.GoFiles)
	}
	for _, h := range funcs {
		if len(h.Symbols) != 1 || h.Symbols[0].Kind != "func" || h.Symbols[0].Path != g.Defines[h.Symbols[0].Name] {
			t.Fatalf("a func search's hit: %+v", h)
		}
	}
	if hits := query(projections.CodeQuery{Kind: projections.CodeSearch, Text: "handler", Types: []string{"struct", "interface"}}).Hits; len(hits) != 0 {
		t.Fatalf("no struct is named handler: %+v", hits)
	}
	// Symbols: every Run is a method.
	if runs := query(projections.CodeQuery{Kind: projections.CodeSymbol, Text: "Run", Types: []string{"method"}}).Symbols; len(runs) != g.GoFiles {
		t.Fatalf("%d Run methods, want %d", len(runs), g.GoFiles)
	}
	if runs := query(projections.CodeQuery{Kind: projections.CodeSymbol, Text: "Run", Types: []string{"func"}}).Symbols; len(runs) != 0 {
		t.Fatalf("Run is no function: %+v", runs)
	}
	if calls := query(projections.CodeQuery{Kind: projections.CodeCallers, Text: "Handler7", Langs: []string{"python"}}).Calls; len(calls) != 0 {
		t.Fatalf("no Python file calls Handler7: %+v", calls)
	}
	// The Librarian answers a context request with the same filters.
	ans, err := Answer(r.ctx, r.store, ix.Root, schemas.ContextRequest{Query: "value", Langs: []string{"python"}}, nil)
	if err != nil || !strings.Contains(ans.Answer, "Files that match:") || len(ans.References) != 5 {
		t.Fatalf("a Python-only answer: %+v, %v", ans, err)
	}
	for _, ref := range ans.References {
		if !strings.HasSuffix(ref, ".py") {
			t.Fatalf("a Python-only answer cites %s", ref)
		}
	}
	ans, err = Answer(r.ctx, r.store, ix.Root, schemas.ContextRequest{Query: "where is Run?", Types: []string{"func"}}, nil)
	if err != nil || strings.Contains(ans.Answer, "method") || strings.Contains(ans.Answer, "Files that match") {
		t.Fatalf("Run is no function, and no file declares a function named run: %+v, %v", ans, err)
	}
	if _, err := Answer(r.ctx, r.store, ix.Root, schemas.ContextRequest{Query: "x", Types: []string{"class"}}, nil); !errors.Is(err, projections.ErrInvalidQuery) {
		t.Fatalf("an unknown type: %v", err)
	}
	for q, want := range map[*projections.CodeQuery]string{
		{Kind: projections.CodeSearch, Text: "x", Types: []string{"function"}}: `type "function" is not one of func, method, struct`,
		{Kind: projections.CodeSearch, Text: "x", Langs: []string{"golang"}}:   `language "golang" is not one of build, c, cpp`,
		{Kind: projections.CodeCallers, Text: "x", Types: []string{"func"}}:    "types filter a search or a symbol query, not a callers query",
		{Kind: projections.CodeHealth, Langs: []string{"go"}}:                  "languages filter a search, a symbol, callers or callees query, not a health query",
	} {
		q.Root = ix.Root
		if _, err := r.store.Code(r.ctx, *q); !errors.Is(err, projections.ErrInvalidQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *q, err, want)
		}
	}
}

// Every language the indexer files a file under is one a query may name.
func TestLanguagesAreKnown(t *testing.T) {
	for ext, l := range langs {
		if !slices.Contains(schemas.CodeLanguages, l) {
			t.Errorf("%s files are %q, which schemas.CodeLanguages lacks", ext, l)
		}
	}
	for _, p := range []string{"x/Makefile", "notes.unknown"} {
		if l := langOf(p); !slices.Contains(schemas.CodeLanguages, l) {
			t.Errorf("%s is %q, which schemas.CodeLanguages lacks", p, l)
		}
	}
}

// A directory the indexer may not read is skipped with the reason, and the
// rest of the tree is indexed. Root reads any directory, so as root the scan
// runs in a copy of this binary without the capabilities that let it.
func TestIndexSkipsAnUnreadableDirectory(t *testing.T) {
	dir := t.TempDir()
	for p, body := range map[string]string{"ok.go": "package ok\n\nfunc Fine() {}\n", "locked/inside.go": "package locked\n\nfunc Hidden() {}\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	var ups []schemas.IndexUpdate
	if os.Geteuid() != 0 {
		var err error
		if ups, err = indexer(t, dir).Scan(brokertest.Context(t), Known{}); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd := exec.CommandContext(brokertest.Context(t), "setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), scanHelperEnv+"="+dir)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("the scan without root's capabilities: %v: %s", err, ee.Stderr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &ups); err != nil {
			t.Fatalf("the scan's updates: %v in %s", err, out)
		}
	}
	var files []string
	skips := map[string]string{}
	for _, u := range ups {
		for _, f := range u.Files {
			files = append(files, f.Path)
		}
		for _, sk := range u.Skipped {
			skips[sk.Path] = sk.Reason
		}
	}
	if !slices.Equal(files, []string{"ok.go"}) || skips["locked"] != "unreadable: open: permission denied" || len(skips) != 1 {
		t.Fatalf("indexed %v, skipped %v; want ok.go indexed and locked skipped as unreadable", files, skips)
	}
}

// Secrets planted in the tree reach neither the events nor the index.
func TestIndexNeverHoldsSecrets(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	const apiKey = "sk-proj-4fG7hJ2kL9mN3pQ8rS5tV1wX6yZ0aB3c"
	const envValue = "hunter2hunter2-zyxwvu"
	files := map[string]string{
		"config.go":         "package config\n\n// Key for the upstream.\nconst Key = \"" + apiKey + "\"\n",
		".env":              "DB_PASSWORD=" + envValue + "\n",
		"deploy/server.pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n",
		"notes.md":          "Use password=" + envValue + " to log in.\n",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ix := indexer(t, dir)
	r.scan(ix)
	secrets := []string{apiKey, envValue, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", strings.ToLower(apiKey), strings.ToLower(envValue), "4fg7hj2kl9mn3pq8rs5tv1wx6yz0ab3c", "hunter2hunter2"}
	// Every byte of the stream...
	evs, err := r.log.Read(r.ctx, events.Filter{}.Subject(), events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Env != nil && ev.Env.Type == schemas.TypeIndexUpdate {
			n++
		}
		for _, s := range secrets {
			if bytes.Contains(ev.Data, []byte(s)) {
				t.Errorf("the stream holds the secret %q", s)
			}
		}
	}
	if n == 0 {
		t.Fatal("no index_update event was recorded")
	}
	// ... and every key and value of the store.
	err = r.store.Dump(func(kvs [][2][]byte) error {
		for _, kv := range kvs {
			for _, s := range secrets {
				if bytes.Contains(kv[0], []byte(s)) || bytes.Contains(kv[1], []byte(s)) {
					t.Errorf("the store holds the secret %q at %q", s, kv[0])
				}
			}
		}
		return nil
	}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The files are there, the sensitive ones by name only.
	if hits := r.code(ix.Root, projections.CodeSearch, "pem").Hits; len(hits) != 1 || hits[0].Path != "deploy/server.pem" {
		t.Fatalf("the stubbed key file is findable by name: %+v", hits)
	}
	if hits := r.code(ix.Root, projections.CodeSearch, "upstream").Hits; len(hits) != 1 || hits[0].Path != "config.go" {
		t.Fatalf("config.go's words are indexed: %+v", hits)
	}
}

// Files the index cannot or must not read are skipped with a reason, and
// never stop the rest.
func TestIndexSkipsWhatItCannotRead(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	write := func(p string, b []byte) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.go", []byte("package ok\n\nfunc Fine() {}\n"))
	write("broken.go", []byte("package broken\n\nfunc Half( {\n"))
	write("image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	write("huge.txt", bytes.Repeat([]byte("x"), 4096))
	if err := os.Symlink("loop/b", filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "loop", "b")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	ix.MaxFileSize = 1024
	r.scan(ix)
	st := r.code(ix.Root, projections.CodeStatus, "").Status
	reasons := map[string]string{}
	for _, s := range st.Skipped {
		reasons[s.Path] = s.Reason
	}
	for p, want := range map[string]string{"image.png": "binary", "huge.txt": "too large", "a": "symlink", "loop/b": "symlink", "pipe": "not a regular file"} {
		if !strings.HasPrefix(reasons[p], want) {
			t.Errorf("%s: skipped for %q, want %q", p, reasons[p], want)
		}
	}
	if st.Files != 2 {
		t.Errorf("%d files indexed, want ok.go and broken.go", st.Files)
	}
	if defs := r.code(ix.Root, projections.CodeSymbol, "Fine").Symbols; len(defs) != 1 {
		t.Errorf("ok.go indexed: %+v", defs)
	}
	// The skips are recorded once: a second scan has nothing to say.
	if ups := r.scan(ix); len(ups) != 0 {
		t.Fatalf("a rescan recorded %+v", ups)
	}
	// Named alone (sylk index update pipe, a watcher's news), the FIFO is
	// skipped too: opening it would wait for a writer for ever.
	named := make(chan []schemas.IndexUpdate, 1)
	go func() {
		ups, err := ix.Paths(r.ctx, Known{}, []string{"pipe"})
		if err != nil {
			t.Error(err)
		}
		named <- ups
	}()
	select {
	case ups := <-named:
		if len(ups) != 1 || len(ups[0].Skipped) != 1 || !strings.HasPrefix(ups[0].Skipped[0].Reason, "not a regular file") {
			t.Fatalf("the FIFO named alone: %+v", ups)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("indexing a FIFO named alone did not return: it waits on the open")
	}
	// Put where the walk saw a file, the FIFO is skipped by the read: its
	// open does not wait for a writer either.
	read := make(chan change, 1)
	go func() { read <- ix.one("pipe", Known{}, new(extractState)) }()
	select {
	case c := <-read:
		if c.skip != "not a regular file" {
			t.Fatalf("the FIFO read as a file: %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO the walk took for a file did not return: it waits on the open")
	}
	// A file that vanishes between the walk and the read is removed.
	known, _ := KnownFrom(r.ctx, r.store, ix.Root)
	if err := os.Remove(filepath.Join(dir, "ok.go")); err != nil {
		t.Fatal(err)
	}
	if c := ix.one("ok.go", known, new(extractState)); !c.removed {
		t.Fatalf("a vanished file: %+v", c)
	}
}

// A scan cancelled while its walk waits for a busy worker stops with the
// cancellation: the chunk the walk had queued for the batcher but no
// worker took is left unread, and the batcher, which meets it in order,
// passes over it rather than read results it does not have.
func TestScanCancelledWithItsQueueFull(t *testing.T) {
	dir := t.TempDir()
	// The files take a while to extract: the walk, far ahead of the one
	// worker reading them, fills the job queue and waits on it.
	text := []byte(strings.Repeat("alpha beta gamma delta epsilon zeta eta theta\n", 900))
	for i := range 8 * scanChunkSize {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix := indexer(t, dir)
	ix.Workers, ix.BatchBytes = 1, 1
	// The worker may take a chunk between the walk found waiting and the
	// cancellation, or read every chunk while a loaded machine keeps the
	// test from looking (the walk then ends before it is seen waiting):
	// the scan is cancelled five times, and at least one of them must catch
	// the walk waiting.
	caught := 0
	for round := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		emitted := 0
		err := ix.ScanEach(ctx, Known{}, func(schemas.IndexUpdate) error {
			if emitted++; emitted == 1 {
				// The first update (the first chunk is read): the scan
				// is cancelled once the walk waits on the full queue.
				if waitForWalkBlocked(t) {
					caught++
				}
				cancel()
			}
			return nil
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: a cancelled scan returned %v after %d updates, want context.Canceled", round, err, emitted)
		}
	}
	if caught == 0 {
		t.Fatal("the walk never waited on the job queue in five scans")
	}
}

// waitForWalkBlocked polls the goroutines' stacks until a scan's walk waits
// in a select (for room in the job queue, or for the cancellation), and says
// whether it did: false if the walk ended first.
func waitForWalkBlocked(t *testing.T) bool {
	buf := make([]byte, 1<<20)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		walking := false
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "librarian.(*Indexer).walk(") {
				walking = true
				if strings.Contains(g, " [select") {
					return true
				}
			}
		}
		if !walking {
			return false
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the walk neither waited on the job queue nor ended in 10 s")
		}
	}
}

// A worker reads every file into one buffer, stat-ing a file after its
// read unless the buffer fills first: a file larger than the room left by
// the ones before is read whole, and a too-large one is skipped with its
// size, whatever the buffer holds.
func TestReadsOneBufferFromFileToFile(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{100, 5000, 5001, 0, 20000, 10000, 10}
	ix := indexer(t, dir)
	ix.MaxFileSize = 10000
	w := &extractState{counted: new(projections.CountedBuffer)}
	for i, n := range sizes {
		name := fmt.Sprintf("f%d.txt", i)
		content := bytes.Repeat([]byte{'a' + byte(i)}, n)
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
		// Written long enough ago that one read is taken.
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
		c := ix.one(name, Known{}, w)
		if n > 10000 {
			if want := "too large: 20000 bytes (the limit is 10000)"; c.skip != want {
				t.Fatalf("%s: %+v, want skipped as %q", name, c, want)
			}
			continue
		}
		if c.file == nil || c.file.Size != int64(n) || c.file.Hash != contentHash(content) {
			t.Fatalf("%s (%d bytes): %+v", name, n, c)
		}
	}
}

// A scan of the whole tree runs with the indexer's GOGC and puts the one
// before back; named files and an indexer without one leave it alone.
func TestUpdateTunesTheCollectorForAScanOfTheTree(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	if _, err := GenerateTree(dir, 20, 1); err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndexer(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := gogc()
	update := func(files []string) (during []uint64) {
		t.Helper()
		if _, _, err := Update(r.ctx, r.store, ix, files, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
			during = append(during, gogc())
			r.record(ups)
			return 0, nil
		}); err != nil {
			t.Fatal(err)
		}
		if after := gogc(); after != before {
			t.Fatalf("GOGC %d after an update, %d before", after, before)
		}
		return during
	}
	if during := update(nil); len(during) == 0 || slices.ContainsFunc(during, func(g uint64) bool { return g != before }) {
		t.Fatalf("GOGC while a scan without GCPercent recorded: %v; want %d", during, before)
	}
	ix.GCPercent, ix.Reindex = int(before)+123, true
	if during := update(nil); len(during) == 0 || slices.ContainsFunc(during, func(g uint64) bool { return g != before+123 }) {
		t.Fatalf("GOGC while the scan recorded: %v; want %d", during, before+123)
	}
	name := filepath.Join(dir, "go.mod")
	if during := update([]string{name}); len(during) != 1 || during[0] != before {
		t.Fatalf("GOGC while a named file was recorded: %v; want %d", during, before)
	}
}

// gogc reads the collector's GOGC without changing it.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
