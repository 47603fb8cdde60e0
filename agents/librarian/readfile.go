package librarian

import (
	"io/fs"
	"slices"

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
func openRaw(path string) (rawFile, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return rawFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return rawFile{fd: fd, path: path}, nil
	}
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

// readAll appends what the file holds from where it is to buf, which it
// grows to size+1 (what the file's stat said, and one byte to see its end)
// first; it stops after more than limit bytes. A read of a regular file
// returns fewer bytes than asked only at its end, so a file that still has
// the size its stat said is read in one system call.
func (f rawFile) readAll(buf []byte, size, limit int64) ([]byte, error) {
	buf = slices.Grow(buf, int(min(size, limit))+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		want := cap(buf) - len(buf)
		n, err := unix.Read(f.fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, &fs.PathError{Op: "read", Path: f.path, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n < want {
			return buf, nil
		}
	}
	return buf, nil
}
