package skills

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// The discovery cache: a new process with the cache file gets the same
// catalogue without parsing; a SKILL.md that changes (content, size or
// time), breaks, is fixed or is deleted is seen as it is now.
func TestCacheParsesOnlyChangedFiles(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(t.TempDir(), "data", CacheFile)
	locs := []Location{DirLocation("project", root)}
	write := func(name, desc string, at time.Time) string {
		t.Helper()
		dir := writeSkill(t, root, name, skillText(name, desc, "  load-trigger: "+name+"\n", "Do it."))
		p := filepath.Join(dir, FileName)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	notes := write("release-notes", "Write release notes.", t0)
	write("go-testing", "Write Go tests.", t0)
	if err := os.MkdirAll(filepath.Join(root, "go-testing", "references"), 0o755); err != nil {
		t.Fatal(err)
	}

	cold := Discover(locs, 0)
	first := OpenCache(file).Discover(locs, 0)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("no cache file: %v", err)
	}
	if !reflect.DeepEqual(first, cold) {
		t.Fatalf("through the cache:\n%+v\nwithout:\n%+v", first, cold)
	}
	warm := OpenCache(file).Discover(locs, 0)
	if !reflect.DeepEqual(warm, cold) {
		t.Fatalf("from the cache file:\n%+v\nparsed:\n%+v", warm, cold)
	}
	// The trigger works on a cached skill (its matcher is not in the file).
	if sel := Select(warm, Request{Agent: "engineer", Task: "update the RELEASE notes"}); len(sel.Skills) != 1 || sel.Skills[0].Name != "release-notes" {
		t.Fatalf("selected from the cache: %+v", sel.Skills)
	}
	// A listing is read every time.
	ref := filepath.Join(root, "go-testing", "references", "table.md")
	if err := os.WriteFile(ref, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := OpenCache(file).Discover(locs, 0).Skills["go-testing"].References; !reflect.DeepEqual(got, []string{"references/table.md"}) {
		t.Fatalf("references %v", got)
	}

	// The entry is used while path, size and time are the same: rewritten
	// to the same size and time, the old parse stands (this is how the
	// test knows the file was not read)...
	same := skillText("release-notes", "Write release NOTES.", "  load-trigger: release-notes\n", "Do it.")
	if err := os.WriteFile(notes, []byte(same), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(notes, t0, t0); err != nil {
		t.Fatal(err)
	}
	if d := OpenCache(file).Discover(locs, 0).Skills["release-notes"].Description; d != "Write release notes." {
		t.Fatalf("cached description %q", d)
	}
	// ...a nanosecond later it is parsed again,
	if err := os.Chtimes(notes, t0, t0.Add(time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	if d := OpenCache(file).Discover(locs, 0).Skills["release-notes"].Description; d != "Write release NOTES." {
		t.Fatalf("changed time: description %q", d)
	}
	// as it is when its size changes at the same time,
	write("release-notes", "Write the release notes.", t0)
	if d := OpenCache(file).Discover(locs, 0).Skills["release-notes"].Description; d != "Write the release notes." {
		t.Fatalf("changed size: description %q", d)
	}
	// when it breaks (and stays broken from the cache),
	write("release-notes", "", t0.Add(time.Hour))
	for range 2 {
		c := OpenCache(file).Discover(locs, 0)
		if _, ok := c.Skills["release-notes"]; ok || len(c.Failed) != 1 || c.Failed[0].Name != "release-notes" {
			t.Fatalf("broken skill: %+v failed %+v", c.Skills["release-notes"], c.Failed)
		}
	}
	// when it is fixed,
	write("release-notes", "Fixed.", t0.Add(2*time.Hour))
	if c := OpenCache(file).Discover(locs, 0); c.Skills["release-notes"] == nil || c.Skills["release-notes"].Description != "Fixed." {
		t.Fatalf("fixed skill: %+v", c.Failed)
	}
	// or when the body cap changes.
	if c := OpenCache(file).Discover(locs, 3); len(c.Warnings) != 2 {
		t.Fatalf("cap of 3: warnings %v", c.Warnings)
	}
	// A deleted skill leaves the file.
	if err := os.RemoveAll(filepath.Join(root, "go-testing")); err != nil {
		t.Fatal(err)
	}
	c := OpenCache(file)
	if got := c.Discover(locs, 0).Names; !reflect.DeepEqual(got, []string{"release-notes"}) {
		t.Fatalf("after delete: %v", got)
	}
	if _, ok := c.entries[filepath.Join(root, "go-testing", FileName)]; ok || len(c.entries) != 1 {
		t.Fatalf("entries after delete: %v", c.entries)
	}
}

// A cache file that is not one (another version, garbage) is ignored and
// replaced; a cache that cannot be written is a warning, the catalogue is
// whole.
func TestCacheBadFile(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "go-testing", skillText("go-testing", "Write Go tests.", "", "Do it."))
	locs := []Location{DirLocation("project", root)}
	file := filepath.Join(t.TempDir(), CacheFile)
	if err := os.WriteFile(file, []byte("not gob"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := OpenCache(file).Discover(locs, 0); len(c.Names) != 1 || len(c.Warnings) != 0 {
		t.Fatalf("over garbage: %v %v", c.Names, c.Warnings)
	}
	if c := OpenCache(file); len(c.Discover(locs, 0).Names) != 1 || len(c.entries) != 1 {
		t.Fatalf("the garbage was not replaced: %v", c.entries)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := OpenCache(filepath.Join(blocked, CacheFile)).Discover(locs, 0)
	if len(c.Names) != 1 || len(c.Warnings) != 1 {
		t.Fatalf("unwritable cache: %v %v", c.Names, c.Warnings)
	}
	t.Log(c.Warnings[0])
}

// A cached skill's pattern trigger is compiled once per cache entry, not
// at every discovery (every agent loop's start): two discoveries from the
// cache file share one compiled pattern, which still matches.
func TestCachedTriggerCompiledOnce(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(t.TempDir(), CacheFile)
	locs := []Location{DirLocation("project", root)}
	writeSkill(t, root, "flaky", skillText("flaky", "Chase flaky tests.", "  load-trigger: \"flak(y|iness) tests?\"\n", "Do it."))
	OpenCache(file).Discover(locs, 0) // parsed, and the cache file written
	c := OpenCache(file)
	var res []*regexp.Regexp
	for range 2 {
		cat := c.Discover(locs, 0)
		p, ok := cat.Skills["flaky"].match.(pattern)
		if !ok {
			t.Fatalf("matcher %T, want a pattern", cat.Skills["flaky"].match)
		}
		res = append(res, p.re)
		if sel := Select(cat, Request{Agent: "engineer", Task: "find the flaky tests in ci"}); len(sel.Skills) != 1 {
			t.Fatalf("selected %+v", sel.Skills)
		}
	}
	if res[0] != res[1] {
		t.Fatal("the trigger was compiled again at the second discovery")
	}
}
