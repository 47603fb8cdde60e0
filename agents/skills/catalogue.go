package skills

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sylk/sylk/schemas"
)

//go:embed builtin
var builtinFS embed.FS

// Builtin returns the skills shipped in the binary, as a file system whose
// top-level directories are skills (always the same value, which is how a
// discovery knows them).
func Builtin() fs.FS { return builtinSub() }

var builtinSub = sync.OnceValue(func() fs.FS {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
})

// Location is one place skills are read from: each directory directly under
// its root that holds a SKILL.md is a skill.
type Location struct {
	// Name says where it is, for users and events ("project .sylk/skills",
	// "/home/u/.config/sylk/skills", "builtin").
	Name string
	// FS is the root; Dir is its path on disk ("" for the built-in skills).
	FS  fs.FS
	Dir string
}

// DirLocation is the location of a directory on disk.
func DirLocation(name, dir string) Location {
	return Location{Name: name, FS: os.DirFS(dir), Dir: dir}
}

// ProjectDirs are the skill directories of a project, relative to its root,
// in search order.
var ProjectDirs = []string{".sylk/skills", ".agent/skills", ".claude/skills"}

// UserDirs are the user's skill directories, in search order: Sylk's own
// under the configuration directory ($XDG_CONFIG_HOME/sylk/skills, else
// ~/.config/sylk/skills), then ~/.agent/skills and ~/.claude/skills. Missing
// directories are skipped when read.
func UserDirs() []string {
	var out []string
	if cfg, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(cfg, "sylk", "skills"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, ".agent", "skills"), filepath.Join(home, ".claude", "skills"))
	}
	return out
}

// SearchPath is the documented search order: the project's directories
// (when project is not empty), then userDirs, then the built-in skills. The
// first location holding a name wins, so a project overrides a user skill
// and either overrides a built-in one.
func SearchPath(project string, userDirs []string) []Location {
	var out []Location
	if project != "" {
		for _, d := range ProjectDirs {
			out = append(out, DirLocation("project "+d, filepath.Join(project, filepath.FromSlash(d))))
		}
	}
	for _, d := range userDirs {
		out = append(out, DirLocation(d, d))
	}
	return append(out, Location{Name: "builtin", FS: Builtin()})
}

// Catalogue is the skills found in a search path, first name wins.
type Catalogue struct {
	// Skills by name, and Names in order.
	Skills map[string]*Skill
	Names  []string
	// Locations read, in search order (those that exist).
	Locations []string
	// Shadowed are names found again in a later location.
	Shadowed []schemas.ShadowedSkill
	// Failed are the skills that could not be read or broke the format:
	// their names (the directory's) and reasons.
	Failed []schemas.SkillNote
	// Warnings are problems that leave a skill usable (an oversized body).
	Warnings []Problem

	order []*Skill // by priority (highest first), then name
}

// Discover reads every location in order. A location that does not exist is
// skipped; a skill that is broken is recorded in Failed and skipped; a name
// seen before is recorded in Shadowed and skipped. maxBody is the body cap
// warned about (0: DefaultMaxBodyChars). The files are parsed in parallel;
// the result does not depend on it.
func Discover(locs []Location, maxBody int) *Catalogue {
	var none *Cache
	return none.Discover(locs, maxBody)
}

// Discover is Discover parsing only the SKILL.md files the cache does not
// hold as they are; the cache file is written when anything changed (a
// failure to write it is a warning: the next discovery parses again).
func (cache *Cache) Discover(locs []Location, maxBody int) *Catalogue {
	c := &Catalogue{Skills: map[string]*Skill{}}
	type found struct {
		loc   *Location
		name  string
		skill *Skill
		probs []Problem
	}
	var all []found
	var scanned []string // directories listed, or gone
	for i := range locs {
		loc := &locs[i]
		entries, err := fs.ReadDir(loc.FS, ".")
		if loc.Dir != "" && (err == nil || errors.Is(err, fs.ErrNotExist)) {
			scanned = append(scanned, loc.Dir)
		}
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.Failed = append(c.Failed, schemas.SkillNote{Path: loc.Name, Reason: "cannot read the skills directory: " + unwrapPath(err).Error()})
			}
			continue
		}
		c.Locations = append(c.Locations, loc.Name)
		for _, e := range entries {
			if e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
				all = append(all, found{loc: loc, name: e.Name()})
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(all)/16, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(all); i = int(next.Add(1)) - 1 {
				f := &all[i]
				f.skill, f.probs = cache.parse(f.loc, f.name, maxBody)
			}
		}()
	}
	wg.Wait()
	if cache != nil {
		seen := map[string]bool{}
		for _, f := range all {
			seen[filepath.Join(f.loc.Dir, f.name, FileName)] = true
		}
		cache.forget(scanned, seen)
		if err := cache.save(); err != nil {
			c.Warnings = append(c.Warnings, Problem{Path: cache.path, Msg: fmt.Sprintf("cannot write the skills discovery cache: %v", unwrapPath(err))})
		}
	}
	for _, f := range all {
		if len(f.probs) == 1 && f.probs[0].missing {
			continue // a directory without a SKILL.md is not a skill
		}
		where := f.loc.Name + "/" + f.name
		if kept, ok := c.Skills[f.name]; ok {
			c.Shadowed = append(c.Shadowed, schemas.ShadowedSkill{Name: f.name, Kept: kept.Source + "/" + f.name, Dropped: where})
			continue
		}
		if f.skill == nil {
			c.Failed = append(c.Failed, schemas.SkillNote{Name: f.name, Path: where, Reason: fatalText(f.probs)})
			continue
		}
		for _, p := range f.probs {
			p.Path = f.loc.Name + "/" + p.Path
			c.Warnings = append(c.Warnings, p)
		}
		s := f.skill
		s.Source = f.loc.Name
		s.Dir = "builtin:" + f.name
		if f.loc.Dir != "" {
			s.Dir = filepath.Join(f.loc.Dir, f.name)
		}
		c.Skills[f.name] = s
		c.Names = append(c.Names, f.name)
	}
	sort.Strings(c.Names)
	c.order = make([]*Skill, len(c.Names))
	for i, n := range c.Names {
		c.order[i] = c.Skills[n]
	}
	slices.SortStableFunc(c.order, func(a, b *Skill) int { return cmp.Compare(b.Priority, a.Priority) })
	return c
}

// fatalText joins the fatal problems of a skill.
func fatalText(probs []Problem) string {
	var out string
	for _, p := range probs {
		if !p.Fatal {
			continue
		}
		if out != "" {
			out += "; "
		}
		if p.Field != "" {
			out += p.Field + ": "
		}
		out += p.Msg
	}
	return out
}

// For lists the skills for agent ("" for all), by name.
func (c *Catalogue) For(agent string) []*Skill {
	var out []*Skill
	for _, n := range c.Names {
		if s := c.Skills[n]; agent == "" || s.For(agent) {
			out = append(out, s)
		}
	}
	return out
}
