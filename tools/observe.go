package tools

import (
	"bytes"
	"context"
	"sync"
)

// Streams an observer is told about.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxObservedLine bounds one line handed to an observer, in bytes: a longer
// line is cut at a token boundary within its first MaxObservedLine bytes and
// the rest of it is not shown.
const MaxObservedLine = 64 << 10

// RunObserved is Run that also hands every line the call's processes write to
// onLine, as it is written and before any truncation: the caller counts what
// it needs (test results, warnings) over the whole output while the Result
// keeps only the bounded, truncated copy.
//
// Each line is redacted on its own before onLine sees it, without its line
// ending; a final line with no newline is handed over when the process ends.
// A secret spread over several lines (a PEM block) may only be partly
// recognised line by line, so onLine should derive counts or names from the
// lines rather than store or send them. Calls are serialised (stdout and
// stderr never call onLine at the same time) and made from the goroutines
// reading the process's pipes: a slow onLine slows the process's output, and
// onLine must not call back into the Executor. Tools that run no process
// (the file tools) never call onLine.
func (e *Executor) RunObserved(ctx context.Context, agent string, call Call, onLine func(stream, line string)) (Result, error) {
	if onLine == nil {
		return e.Run(ctx, agent, call)
	}
	return e.Run(context.WithValue(ctx, observerKey{}, &lineObserver{fn: onLine, red: e.red}), agent, call)
}

// observerKey carries a call's observer from RunObserved down to the process
// runner, through tools whose signatures know nothing of it.
type observerKey struct{}

func observerFrom(ctx context.Context) *lineObserver {
	o, _ := ctx.Value(observerKey{}).(*lineObserver)
	return o
}

// lineObserver serialises one call's lines to the caller's function.
type lineObserver struct {
	mu  sync.Mutex
	fn  func(stream, line string)
	red *Redactor
}

func (o *lineObserver) emit(stream string, line []byte) {
	text := o.red.Redact(string(line))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fn(stream, text)
}

// splitter assembles one stream's lines for an observer, holding at most
// MaxObservedLine bytes of the line being written.
type splitter struct {
	o      *lineObserver
	stream string
	buf    []byte
	over   bool // the current line passed MaxObservedLine; the rest is dropped
}

func (o *lineObserver) splitter(stream string) *splitter {
	if o == nil {
		return nil
	}
	return &splitter{o: o, stream: stream}
}

func (s *splitter) write(p []byte) {
	if s == nil {
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			return
		}
		s.add(p[:i])
		s.end()
		p = p[i+1:]
	}
}

func (s *splitter) add(p []byte) {
	if s.over {
		return
	}
	if room := MaxObservedLine - len(s.buf); len(p) > room {
		s.buf = append(s.buf, p[:room]...)
		// Cut back to a token boundary so no fragment of a secret is left
		// where the redactor cannot see its whole shape.
		if k := lastDelim(s.buf, 256); k > 0 {
			s.buf = s.buf[:k]
		}
		s.over = true
		return
	}
	s.buf = append(s.buf, p...)
}

func (s *splitter) end() {
	s.o.emit(s.stream, s.buf)
	s.buf = s.buf[:0]
	s.over = false
}

// finish hands over a last line that had no newline.
func (s *splitter) finish() {
	if s != nil && (len(s.buf) > 0 || s.over) {
		s.end()
	}
}
