package librarian

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// rawFile is a file open for reading by its descriptor alone. The indexer
// opens every file of the tree, and an *os.File costs, beyond the open and
// close, a registration with the poller that a regular file refuses (one
// more system call), an allocation and a finalizer.
type rawFile struct {
	fd   int
	path string
}

// fileStat is what a read is checked against: a file whose size or
// modification time changed while it was read is read again.
type fileStat struct {
	size    int64
	mtime   unix.Timespec
	regular bool
}

// openRaw opens path without blocking: a FIFO put where the walk saw a
// file opens at once (and its stat says what it is) instead of waiting for
// a writer.
func openRaw(path string) (rawFile, error) { return openRawAt(unix.AT_FDCWD, path, path) }

// openRawAt opens name relative to the directory dirfd (as openRaw does);
// path names the file in errors.
func openRawAt(dirfd int, name, path string) (rawFile, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return rawFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return rawFile{fd: fd, path: path}, nil
	}
}

// dirHandle is the directory a worker last opened a file in. The files a
// worker reads come in the walk's order, so most share the directory of the
// one before: opened relative to it, a file's open spares the kernel a
// lookup of every element of its path (a tenth of the reading's CPU).
type dirHandle struct {
	rel  string // relative to the root
	fd   int
	open bool
}

// openFile opens the file at rel, relative to the root, through its directory,
// which it opens first when it is not the one open.
func (d *dirHandle) openFile(root, rel string) (rawFile, error) {
	dir, name := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	if !d.open || d.rel != dir {
		d.close()
		full := filepath.Join(filepath.FromSlash(root), filepath.FromSlash(dir))
		for {
			// O_PATH: searching a directory needs no permission to list it.
			fd, err := unix.Open(full, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				// As the file's own open would have failed: gone, or
				// unreadable.
				return rawFile{}, &fs.PathError{Op: "open", Path: rel, Err: err}
			}
			d.rel, d.fd, d.open = dir, fd, true
			break
		}
	}
	return openRawAt(d.fd, name, rel)
}

// close closes the directory open, if any.
func (d *dirHandle) close() {
	if d.open {
		unix.Close(d.fd)
	}
	*d = dirHandle{}
}

func (f rawFile) close() { unix.Close(f.fd) }

func (f rawFile) stat() (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return fileStat{}, &fs.PathError{Op: "stat", Path: f.path, Err: err}
	}
	return fileStat{size: st.Size, mtime: st.Mtim, regular: st.Mode&unix.S_IFMT == unix.S_IFREG}, nil
}

func (f rawFile) rewind() error {
	if _, err := unix.Seek(f.fd, 0, 0); err != nil {
		return &fs.PathError{Op: "seek", Path: f.path, Err: err}
	}
	return nil
}

// readAll reads what the file holds from where it is into buf (emptied),
// and its stat once the read is done, which the read is checked against
// (a file written while it is read is read again). A read of a regular
// file returns fewer bytes than asked only at its end, so a file that fits
// in buf's room (a worker's buffer keeps the room of the largest file it
// read) costs one read and one stat. When buf is full before the end, the
// stat says how much more to make room for, or that the file is too large
// (more than limit bytes) or not a regular file, which are not read
// further: the stat is then the one returned.
func (f rawFile) readAll(buf []byte, limit int64) ([]byte, fileStat, error) {
	buf = buf[:0]
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			st, err := f.stat()
			if err != nil || !st.regular || st.size > limit {
				return buf, st, err
			}
			// One byte more than the file holds, to see its end.
			buf = slices.Grow(buf, int(max(st.size-int64(len(buf)), 0))+1)
		}
		want := cap(buf) - len(buf)
		n, err := unix.Read(f.fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, fileStat{}, &fs.PathError{Op: "read", Path: f.path, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n < want {
			break
		}
	}
	st, err := f.stat()
	return buf, st, err
}
