package tools

import (
	"testing"
	"time"
)

func TestActivityDeadline(t *testing.T) {
	det, _ := newDetector(nil, nil)
	a := newActivity(time.Now(), 10*time.Second, 30*time.Second, time.Minute, det)
	if d := a.deadline(); d != 10*time.Second {
		t.Fatalf("no output: deadline %v, want the base", d)
	}
	a.last.Store(int64(5 * time.Second))
	if d := a.deadline(); d != 35*time.Second {
		t.Fatalf("output at 5s: deadline %v, want 35s", d)
	}
	a.last.Store(int64(50 * time.Second))
	if d := a.deadline(); d != time.Minute {
		t.Fatalf("output at 50s: deadline %v, want the 1m cap", d)
	}
	if a := newActivity(time.Now(), time.Hour, time.Second, time.Minute, det); a.deadline() != time.Minute {
		t.Fatalf("a base over the cap is capped: %v", a.deadline())
	}
}

func TestLineWatch(t *testing.T) {
	det, _ := newDetector(nil, nil)
	for _, tc := range []struct {
		chunks     []string
		meaningful bool
	}{
		{[]string{"....", "...\n", "\r45%", "\r46%\n", "|\r/\r-\r\\\r"}, false},
		{[]string{"\n\n   \n"}, false},
		{[]string{"Comp", "iling\n"}, true},
		{[]string{"50%\rdone\r"}, true},
		{[]string{"no newline yet"}, false},         // judged when the line ends
		{[]string{string(make([]byte, 300))}, true}, // a long line is judged by its start
	} {
		a := newActivity(time.Now(), time.Second, time.Second, time.Minute, det)
		w := lineWatch{a: a}
		for _, c := range tc.chunks {
			w.observe([]byte(c))
		}
		if got := a.last.Load() >= 0; got != tc.meaningful {
			t.Errorf("%q: meaningful = %v, want %v", tc.chunks, got, tc.meaningful)
		}
	}
}
