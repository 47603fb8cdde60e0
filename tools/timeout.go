package tools

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// activity implements the adaptive timeout of one process. The process may
// run until
//
//	deadline = min(max, max(base, lastMeaningful+extend))
//
// measured from its start: meaningful output extends the base timeout by
// extend, noise does not, and nothing extends past max.
type activity struct {
	start              time.Time
	base, extend, hard time.Duration
	last               atomic.Int64 // since start, of the last meaningful output; -1: none yet
	throttle           time.Duration
	det                *detector
}

func newActivity(start time.Time, base, extend, hard time.Duration, det *detector) *activity {
	a := &activity{start: start, base: min(base, hard), extend: extend, hard: hard, det: det}
	a.last.Store(-1)
	// Once output was meaningful, lines are not examined again for a short
	// while: the deadline moves by at most this much less than it could,
	// and a flood costs no per-line work.
	a.throttle = min(max(extend/8, 10*time.Millisecond), time.Second)
	return a
}

// deadline returns the current deadline, as a duration since start.
func (a *activity) deadline() time.Duration {
	d := a.base
	if l := a.last.Load(); l >= 0 {
		d = max(d, time.Duration(l)+a.extend)
	}
	return min(d, a.hard)
}

// lineWatch examines one output stream line by line for meaningful output.
// Lines end at '\n' or '\r' (progress bars redraw with '\r'); a line longer
// than the pending buffer is judged by its first part.
type lineWatch struct {
	a       *activity
	pending []byte
}

const watchLineMax = 256

func (w *lineWatch) observe(p []byte) {
	now := time.Since(w.a.start)
	if l := w.a.last.Load(); l >= 0 && now-time.Duration(l) < w.a.throttle {
		// Recently meaningful: only keep track of where the current line starts.
		if i := bytes.LastIndexAny(p, "\r\n"); i >= 0 {
			p = p[i+1:]
			w.pending = w.pending[:0]
		}
		w.add(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			w.add(p)
			if len(w.pending) == watchLineMax {
				w.judge(w.pending, now)
				w.pending = w.pending[:0]
			}
			return
		}
		line := p[:i]
		if len(w.pending) > 0 {
			w.add(line)
			line = w.pending
		}
		if w.judge(line, now) {
			// Meaningful: the rest of the chunk cannot move the deadline
			// further; remember only the start of its last line.
			if j := bytes.LastIndexAny(p, "\r\n"); j >= 0 {
				w.pending = append(w.pending[:0], p[j+1:min(len(p), j+1+watchLineMax)]...)
			}
			return
		}
		w.pending = w.pending[:0]
		p = p[i+1:]
	}
}

func (w *lineWatch) add(p []byte) {
	if w.pending == nil {
		w.pending = make([]byte, 0, watchLineMax)
	}
	room := watchLineMax - len(w.pending)
	w.pending = append(w.pending, p[:min(len(p), room)]...)
}

// judge marks meaningful output and reports whether line was meaningful.
func (w *lineWatch) judge(line []byte, now time.Duration) bool {
	if w.a.det.isNoise(line) {
		return false
	}
	w.a.last.Store(int64(now))
	return true
}

// baseTimeout picks the base timeout of a command: the explicit one if
// given, else the longest PerCommand key matching the command's leading
// words, else the default.
func baseTimeout(t TimeoutOptions, words []string, explicit time.Duration) time.Duration {
	if explicit > 0 {
		return explicit
	}
	if len(words) > 0 {
		words = append([]string{filepath.Base(words[0])}, words[1:]...)
	}
	best, bestLen := t.Default, 0
	for key, d := range t.PerCommand {
		kw := strings.Fields(key)
		if len(kw) == 0 || len(kw) > len(words) || len(kw) <= bestLen {
			continue
		}
		match := true
		for i := range kw {
			if kw[i] != words[i] {
				match = false
				break
			}
		}
		if match {
			best, bestLen = d, len(kw)
		}
	}
	return best
}
