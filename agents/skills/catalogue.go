package skills

import (
	"embed"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/sylk/sylk/schemas"
)

//go:embed builtin
var builtinFS embed.FS

// Builtin returns the skills shipped in the binary, as a file system whose
// top-level directories are skills.
func Builtin() fs.FS {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
}

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
}

// Discover reads every location in order. A location that does not exist is
// skipped; a skill that is broken is recorded in Failed and skipped; a name
// seen before is recorded in Shadowed and skipped. maxBody is the body cap
// warned about (0: DefaultMaxBodyChars).
func Discover(locs []Location, maxBody int) *Catalogue {
	c := &Catalogue{Skills: map[string]*Skill{}}
	for _, loc := range locs {
		entries, err := fs.ReadDir(loc.FS, ".")
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.Failed = append(c.Failed, schemas.SkillNote{Name: "", Path: loc.Name, Reason: "cannot read the skills directory: " + unwrapPath(err).Error()})
			}
			continue
		}
		c.Locations = append(c.Locations, loc.Name)
		for _, e := range entries {
			if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				continue
			}
			name := e.Name()
			if _, err := fs.Stat(loc.FS, name+"/"+FileName); err != nil {
				continue // not a skill directory
			}
			where := loc.Name + "/" + name
			if kept, ok := c.Skills[name]; ok {
				c.Shadowed = append(c.Shadowed, schemas.ShadowedSkill{Name: name, Kept: kept.Source + "/" + name, Dropped: where})
				continue
			}
			s, probs := Parse(loc.FS, name, maxBody)
			if s == nil {
				c.Failed = append(c.Failed, schemas.SkillNote{Name: name, Path: where, Reason: fatalText(probs)})
				continue
			}
			c.Warnings = append(c.Warnings, probs...)
			s.Source = loc.Name
			s.Dir = "builtin:" + name
			if loc.Dir != "" {
				s.Dir = filepath.Join(loc.Dir, name)
			}
			c.Skills[name] = s
			c.Names = append(c.Names, name)
		}
	}
	sort.Strings(c.Names)
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
