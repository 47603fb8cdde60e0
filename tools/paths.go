package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// workRoot is the session's work directory, symlinks resolved. Every path
// argument is resolved against it with resolve, and file I/O then goes
// through an os.Root opened on it, which refuses to follow a symbolic link
// out of the directory even if one appears between the check and the use.
type workRoot struct {
	dir string
}

func newWorkRoot(dir string) (workRoot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return workRoot{}, fmt.Errorf("%w: work_dir %q: %w", ErrInvalidOptions, dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workRoot{}, fmt.Errorf("%w: work_dir %q: %w", ErrInvalidOptions, dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return workRoot{}, fmt.Errorf("%w: work_dir %q: %w", ErrInvalidOptions, dir, err)
	}
	if !fi.IsDir() {
		return workRoot{}, fmt.Errorf("%w: work_dir %q is not a directory", ErrInvalidOptions, dir)
	}
	return workRoot{dir: real}, nil
}

// escapeError wraps both ErrPathEscape and ErrInvalidArgs.
type escapeError struct{ msg string }

func (e *escapeError) Error() string   { return e.msg }
func (e *escapeError) Unwrap() []error { return []error{ErrPathEscape, ErrInvalidArgs} }

// resolve maps the path argument p (named field in messages) to its path
// relative to the work directory and its absolute real path. p may be
// relative to the work directory or absolute; after cleaning and resolving
// every symbolic link (a path that does not exist yet is resolved through its
// nearest existing parent, a dangling link through its target) the result
// must lie inside the work directory, checked with filepath.Rel, never with
// a string prefix. Other failures (permission denied, a file used as a
// directory) are returned as they are, for the tool to report.
func (w workRoot) resolve(field, p string) (rel, abs string, err error) {
	if p == "" {
		return "", "", fmt.Errorf("%w: %s: empty path", ErrInvalidArgs, field)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", fmt.Errorf("%w: %s: path contains a NUL byte", ErrInvalidArgs, field)
	}
	cand := p
	if filepath.IsAbs(cand) {
		cand = filepath.Clean(cand)
	} else {
		cand = filepath.Join(w.dir, cand)
	}
	real, err := resolveReal(cand, 0)
	if err != nil {
		return "", "", err
	}
	rel, err = filepath.Rel(w.dir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", &escapeError{msg: fmt.Sprintf("%v: %s %q resolves to %q, outside the work directory %q",
			ErrPathEscape, field, truncForMsg(p), real, w.dir)}
	}
	return rel, real, nil
}

const maxSymlinkDepth = 40

func resolveReal(p string, depth int) (string, error) {
	if depth > maxSymlinkDepth {
		return "", fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		return resolveReal(target, depth+1)
	}
	parent := filepath.Dir(p)
	if parent == p {
		return "", err
	}
	rp, err := resolveReal(parent, depth)
	if err != nil {
		return "", err
	}
	return filepath.Join(rp, filepath.Base(p)), nil
}

// openRoot opens the work directory as an os.Root.
func (w workRoot) open() (*os.Root, error) { return os.OpenRoot(w.dir) }

// writeAtomic replaces rel (relative to root) with data: it writes a
// temporary file in the same directory, syncs it and renames it over the
// target, so readers see the old content or the new, never a mix. An
// existing file keeps its permission bits; a new one gets 0644. It reports
// whether the file was created.
func writeAtomic(root *os.Root, rel string, data []byte, mkdirs bool) (created bool, err error) {
	dir := filepath.Dir(rel)
	if mkdirs && dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return false, err
		}
	}
	mode := fs.FileMode(0o644)
	switch fi, err := root.Stat(rel); {
	case err == nil && fi.IsDir():
		return false, fmt.Errorf("%s is a directory", rel)
	case err == nil:
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
		created = true
	default:
		return false, err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(rel)+".sylk-tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return false, err
	}
	_, werr := f.Write(data)
	if werr == nil && !created {
		werr = f.Chmod(mode) // the umask may have narrowed it
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, rel)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return false, werr
	}
	if d, err := root.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable; best effort
		_ = d.Close()
	}
	return created, nil
}
