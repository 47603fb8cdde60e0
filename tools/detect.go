package tools

import (
	"bytes"
	"regexp"
	"unicode/utf8"
)

// Line classes found by the importance detector.
const (
	impError    = 1 << iota // error, fail, panic, fatal, exception, traceback
	impWarning              // warn
	impLocation             // file.ext:line[:col]
	impFrame                // a stack frame ("  at f (x.js:1)", `File "x.py"`, "goroutine 1 [")
	impPattern              // a configured pattern
)

// detector finds important lines and noise lines. The built-in rules are
// hand-written scans, because every line of an output flood goes through
// them; configured patterns add to them.
type detector struct {
	important []*regexp.Regexp
	noise     []*regexp.Regexp
}

func newDetector(important, noise []string) (*detector, error) {
	d := &detector{}
	for _, p := range important {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, err
		}
		d.important = append(d.important, re)
	}
	for _, p := range noise {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, err
		}
		d.noise = append(d.noise, re)
	}
	return d, nil
}

// classify returns the importance classes of line (0: unimportant).
func (d *detector) classify(line []byte) int {
	c := classifyLine(line)
	if c == 0 {
		for _, re := range d.important {
			if re.Match(line) {
				return impPattern
			}
		}
	}
	return c
}

var (
	kwError     = [][]byte{[]byte("error"), []byte("exception")}
	kwFail      = [][]byte{[]byte("fail"), []byte("fatal")}
	kwPanic     = []byte("panic")
	kwTraceback = []byte("traceback")
	kwWarn      = []byte("warn")
)

func classifyLine(line []byte) int {
	c := 0
	for i := 0; i < len(line); i++ {
		switch line[i] | 0x20 {
		case 'e':
			for _, kw := range kwError {
				if hasPrefixFold(line[i:], kw) {
					c |= impError
				}
			}
		case 'f':
			for _, kw := range kwFail {
				if hasPrefixFold(line[i:], kw) {
					c |= impError
				}
			}
		case 'p':
			if hasPrefixFold(line[i:], kwPanic) {
				c |= impError
			}
		case 't':
			if hasPrefixFold(line[i:], kwTraceback) {
				c |= impError
			}
		case 'w':
			if hasPrefixFold(line[i:], kwWarn) {
				c |= impWarning
			}
		}
	}
	if hasLocation(line) {
		c |= impLocation
	}
	if isFrame(line) {
		c |= impFrame
	}
	return c
}

// hasPrefixFold reports whether s starts with the lower-case ASCII word kw,
// ignoring case.
func hasPrefixFold(s, kw []byte) bool {
	if len(s) < len(kw) {
		return false
	}
	for i := range kw {
		if s[i]|0x20 != kw[i] {
			return false
		}
	}
	return true
}

// hasLocation reports a "name.ext:123" location (file:line or file:line:col).
func hasLocation(line []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], ':')
		if j < 0 {
			return false
		}
		at := i + j
		i = at + 1
		if at+1 >= len(line) || line[at+1] < '0' || line[at+1] > '9' {
			continue
		}
		// Extension: letters and digits, then a dot, then a name character.
		k := at
		for k > 0 && (isAlpha(line[k-1]) || line[k-1] >= '0' && line[k-1] <= '9') {
			k--
		}
		if k == at || k < 2 || line[k-1] != '.' {
			continue
		}
		if p := line[k-2]; !(isAlpha(p) || p >= '0' && p <= '9' || p == '_' || p == '-') {
			continue
		}
		// Not a host:port in a URL.
		tokStart := bytes.LastIndexAny(line[:k], " \t\"'(") + 1
		if bytes.Contains(line[tokStart:k], []byte("://")) {
			continue
		}
		return true
	}
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isFrame reports stack frame lines of common runtimes.
func isFrame(line []byte) bool {
	t := bytes.TrimLeft(line, " \t")
	switch {
	case len(t) < len(line) && bytes.HasPrefix(t, []byte("at ")): // JavaScript, Java
		return true
	case bytes.HasPrefix(t, []byte(`File "`)): // Python
		return true
	case bytes.HasPrefix(line, []byte("goroutine ")): // Go
		return true
	}
	return false
}

// isNoise reports whether an output line carries no information: blank,
// dots, spinner characters, progress bars, a bare percentage. Noise does not
// extend the adaptive timeout.
func (d *detector) isNoise(line []byte) bool {
	t := bytes.TrimSpace(line)
	if builtinNoise(t) {
		return true
	}
	for _, re := range d.noise {
		if re.Match(t) {
			return true
		}
	}
	return false
}

func builtinNoise(t []byte) bool {
	// Drop progress characters; what remains must be empty or a percentage.
	var rest [16]byte
	n := 0
	for i := 0; i < len(t); {
		r, size := utf8.DecodeRune(t[i:])
		i += size
		switch {
		case r < utf8.RuneSelf && isProgressByte(byte(r)):
			continue
		case r >= 0x2500 && r <= 0x259F, // box drawing, block elements: bars
			r >= 0x2800 && r <= 0x28FF, // braille: spinners
			r == '…' || r == '·':
			continue
		}
		if r >= utf8.RuneSelf || n == len(rest) {
			return false
		}
		rest[n] = byte(r)
		n++
	}
	if n == 0 {
		return true
	}
	// A percentage: digits then '%'.
	if rest[n-1] != '%' || n == 1 {
		return false
	}
	for _, c := range rest[:n-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isProgressByte(c byte) bool {
	switch c {
	case '.', '|', '/', '-', '\\', '=', '#', '>', '<', '[', ']', '*', '_', ' ', '\t', '(', ')', '~', '+':
		return true
	}
	return false
}
