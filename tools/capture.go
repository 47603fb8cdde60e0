package tools

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// capture keeps a bounded, line-structured copy of one output stream and
// renders it smart-truncated: the first lines, the last lines, and the lines
// in between that matter (errors, warnings, file:line:col locations, stack
// frames), with a marker for every gap saying how much was cut.
//
// Memory stays within OutputOptions.MaxBytes whatever is written: at most
// head+tail+important lines are kept, each cut to lineMax bytes, plus one
// pending line of at most lineMax bytes; tail slots reuse their buffers, so a
// flood of short lines does not allocate per line. If the stream has no more
// lines than head+tail, every line is kept.
//
// A capture is written by one goroutine; render it after the last Write.
type capture struct {
	det                     *detector
	headMax, tailMax, impMx int
	lineMax                 int

	total      int64 // bytes written
	lines      int64 // lines completed
	pending    []byte
	pendingCut int64
	lastNL     bool // the last byte written was '\n'

	head      []keptLine
	headShut  bool
	tail      []keptLine // ring once full; tailStart is the oldest
	tailStart int
	imp       []keptLine

	omittedLines, omittedBytes int64
	markBytes                  int64 // omittedBytes when the last important line was kept
	impDropped                 int64
	errLines, warnLines        int64
	cutLines                   int64
}

type keptLine struct {
	n        int64 // 1-based line number
	text     []byte
	cut      int64 // bytes cut from the end of the line
	gapBytes int64 // for important lines: bytes omitted just before it
}

func newCapture(o OutputOptions, det *detector) *capture {
	return &capture{det: det, headMax: o.HeadLines, tailMax: o.TailLines, impMx: o.ImportantLines, lineMax: o.lineBytes()}
}

// Write implements io.Writer; it never fails.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	c.total += int64(n)
	c.lastNL = p[n-1] == '\n'
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.appendPending(p)
			break
		}
		c.appendPending(p[:i])
		c.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (c *capture) appendPending(b []byte) {
	if c.pending == nil {
		c.pending = make([]byte, 0, c.lineMax)
	}
	room := c.lineMax - len(c.pending)
	if len(b) > room {
		c.pendingCut += int64(len(b) - room)
		b = b[:room]
	}
	c.pending = append(c.pending, b...)
}

func (c *capture) endLine() {
	c.lines++
	l := keptLine{n: c.lines, text: c.pending, cut: c.pendingCut}
	if l.cut > 0 {
		// Cut back to a token boundary, so no fragment of a secret (or of
		// anything else) is left dangling where the redactor cannot see
		// its whole shape.
		if k := lastDelim(l.text, 256); k > 0 {
			l.cut += int64(len(l.text) - k)
			l.text = l.text[:k]
		}
		c.cutLines++
	}
	c.keep(l)
	c.pending = c.pending[:0]
	c.pendingCut = 0
}

func lastDelim(b []byte, within int) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-within; i-- {
		switch b[i] {
		case ' ', '\t', ',', ';', '"', '\'', '=', ':', '(', ')', '[', ']', '{', '}', '<', '>', '|', '&', '\r':
			return i + 1
		}
	}
	return 0
}

func (c *capture) keep(l keptLine) {
	if !c.headShut && len(c.head) < c.headMax {
		c.count(c.det.classify(l.text))
		c.head = append(c.head, cloneLine(l))
		return
	}
	c.headShut = true
	if c.tailMax == 0 {
		c.evict(l)
		return
	}
	if len(c.tail) < c.tailMax {
		c.tail = append(c.tail, cloneLine(l))
		return
	}
	slot := &c.tail[c.tailStart]
	c.evict(*slot)
	if cap(slot.text) < len(l.text) {
		slot.text = make([]byte, len(l.text))
	}
	slot.text = append(slot.text[:0], l.text...)
	slot.n, slot.cut = l.n, l.cut
	c.tailStart = (c.tailStart + 1) % c.tailMax
}

// evict handles a line leaving the tail for the middle: kept if important
// and there is room, else omitted.
func (c *capture) evict(l keptLine) {
	cls := c.det.classify(l.text)
	c.count(cls)
	if cls != 0 {
		if len(c.imp) < c.impMx {
			k := cloneLine(l)
			k.gapBytes = c.omittedBytes - c.markBytes
			c.markBytes = c.omittedBytes
			c.imp = append(c.imp, k)
			return
		}
		c.impDropped++
	}
	c.omittedLines++
	c.omittedBytes += int64(len(l.text)) + l.cut + 1
}

func (c *capture) count(cls int) {
	if cls&impError != 0 {
		c.errLines++
	}
	if cls&impWarning != 0 {
		c.warnLines++
	}
}

// cloneLine copies l's text into a buffer of exactly its length, so kept
// memory is what the bound accounts for.
func cloneLine(l keptLine) keptLine {
	t := make([]byte, len(l.text))
	copy(t, l.text)
	l.text = t
	return l
}

// finish completes a final line without a newline and counts the tail.
// Call it once, after the last Write.
func (c *capture) finish() {
	if len(c.pending) > 0 || c.pendingCut > 0 {
		c.endLine()
	}
	for _, l := range c.tail {
		c.count(c.det.classify(l.text))
	}
}

// retained returns the bytes of buffer memory the capture holds.
func (c *capture) retained() int {
	n := cap(c.pending)
	for _, set := range [][]keptLine{c.head, c.tail, c.imp} {
		for _, l := range set {
			n += cap(l.text)
		}
	}
	return n
}

// truncated reports whether render leaves anything out.
func (c *capture) truncated() bool { return c.omittedLines > 0 || c.cutLines > 0 }

// render returns the kept lines in order with a marker at every gap. When
// nothing was cut it returns exactly what was written.
func (c *capture) render() string {
	if c.total == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(int(min(c.total, int64(c.retained())+1024)))
	prev := int64(0)
	gap := func(upTo int64, bytes int64) {
		if upTo > prev+1 {
			fmt.Fprintf(&b, "[... %d lines omitted (lines %d-%d, %s) ...]\n", upTo-prev-1, prev+1, upTo-1, sizeString(bytes))
		}
	}
	write := func(l keptLine, last bool) {
		if bytes.IndexByte(l.text, 0) >= 0 {
			fmt.Fprintf(&b, "[binary data: %s]", sizeString(int64(len(l.text))+l.cut))
		} else {
			b.Write(l.text)
			if l.cut > 0 {
				fmt.Fprintf(&b, " [... %s cut from this line]", sizeString(l.cut))
			}
		}
		if !last || c.lastNL {
			b.WriteByte('\n')
		}
		prev = l.n
	}
	for _, l := range c.head {
		write(l, l.n == c.lines)
	}
	for _, l := range c.imp {
		gap(l.n, l.gapBytes)
		write(l, false)
	}
	tailGap := c.omittedBytes - c.markBytes
	for i := range c.tail {
		l := c.tail[(c.tailStart+i)%len(c.tail)]
		gap(l.n, tailGap)
		write(l, l.n == c.lines)
	}
	if c.impDropped > 0 {
		fmt.Fprintf(&b, "[... %d more error/warning/location lines were omitted ...]\n", c.impDropped)
	}
	return strings.ToValidUTF8(b.String(), string(utf8.RuneError))
}

// summary describes the stream in one phrase ("1200 lines, 48.2 KiB,
// truncated, 3 error lines").
func (c *capture) summary() string {
	if c.total == 0 {
		return "no output"
	}
	s := fmt.Sprintf("%s, %s", plural(c.lines, "line"), sizeString(c.total))
	if c.truncated() {
		s += ", truncated"
	}
	if c.errLines > 0 {
		s += ", " + plural(c.errLines, "error line")
	}
	if c.warnLines > 0 {
		s += ", " + plural(c.warnLines, "warning line")
	}
	return s
}

func sizeString(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// rawBuf keeps the first limit bytes of a stream verbatim.
type rawBuf struct {
	b     []byte
	limit int
	over  bool
}

func (r *rawBuf) write(p []byte) {
	if room := r.limit - len(r.b); len(p) > room {
		r.over = true
		p = p[:max(room, 0)]
	}
	r.b = append(r.b, p...)
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
