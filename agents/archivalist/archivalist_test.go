package archivalist

import "testing"

func TestErrorPattern(t *testing.T) {
	same := [][2]string{
		{`exit status 1`, `exit status 2`},
		{`open /tmp/x/y.txt: no such file or directory`, `open /home/u/a.txt: no such file or directory`},
		{`panic: test timed out after 10m0s`, `panic: test timed out after 5m0s`},
		{`key "abc" not found in 0xdeadbeef01`, `key "zz" not found in 0x12345678ab`},
		{"FAIL ./auth TestLogout\nmore", "FAIL ./billing TestLogout\nother"},
	}
	for _, p := range same {
		if a, b := ErrorPattern(p[0]), ErrorPattern(p[1]); a != b {
			t.Errorf("%q -> %q and %q -> %q should be the same pattern", p[0], a, p[1], b)
		}
	}
	if a, b := ErrorPattern("exit status 1"), ErrorPattern("connection refused"); a == b {
		t.Errorf("different errors share the pattern %q", a)
	}
	if got := ErrorPattern("open /tmp/x: permission denied after 3 tries"); got != "open <path>: permission denied after <n> tries" {
		t.Errorf("pattern: %q", got)
	}
}
