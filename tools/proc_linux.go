package tools

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// groupHasLive reports whether a process of group pgid is alive, reading
// /proc: kill(-pgid, 0) also succeeds while the group holds only zombies,
// which an init that does not reap (some container runtimes) keeps forever.
// When /proc cannot be read it answers true, trusting kill.
func groupHasLive(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := bytes.Fields(b[i+2:])
		if len(f) < 3 || !bytes.Equal(f[2], want) {
			continue
		}
		if st := f[0][0]; st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}

// totalMemory is the machine's physical memory in bytes, 0 when unknown.
func totalMemory() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
