package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockFile is held, with an exclusive flock, by the one server that owns a data
// directory. The kernel drops the lock when the process dies, so a crash never
// leaves the directory locked.
const LockFile = "sylk.lock"

// ErrLocked means another server owns the data directory.
var ErrLocked = errors.New("data directory is in use by another sylk server")

type dirLock struct{ f *os.File }

func lockDataDir(dataDir string) (*dirLock, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dataDir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if info, ierr := ReadInfo(dataDir); ierr == nil {
				return nil, fmt.Errorf("%w: %s is served by pid %d at %s (stop it, or use another --data)", ErrLocked, dataDir, info.PID, info.URL)
			}
			return nil, fmt.Errorf("%w: %s (stop it, or use another --data)", ErrLocked, dataDir)
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return errors.Join(err, l.f.Close())
}

// lockHeld reports whether some process holds dataDir's lock.
func lockHeld(dataDir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, LockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
