package tools

import (
	"fmt"
	"strings"
	"testing"
)

func testCapture(t *testing.T, o OutputOptions) *capture {
	t.Helper()
	full := Options{WorkDir: ".", Output: o}
	full.EnsureDefaults()
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	det, err := newDetector(full.Output.ImportantPatterns, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newCapture(full.Output, det)
}

func feed(c *capture, s string, chunk int) {
	for len(s) > 0 {
		n := min(chunk, len(s))
		c.Write([]byte(s[:n]))
		s = s[n:]
	}
	c.finish()
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// Output with no more lines than head+tail is kept whole, byte for byte,
// whatever the chunking (the seed's truncator lost lines 51-100 here).
func TestCaptureKeepsShortOutputExactly(t *testing.T) {
	for _, in := range []string{
		"", "x", "x\n", "\n\n\n", "a\r\nb\r\n", "no newline at end",
		numbered(50), numbered(51), numbered(99), numbered(150),
		numbered(149) + "tail without newline",
	} {
		for _, chunk := range []int{1, 3, 4096} {
			c := testCapture(t, OutputOptions{})
			feed(c, in, chunk)
			if got := c.render(); got != in {
				t.Errorf("chunk %d: render of %d bytes differs:\n got %q\nwant %q", chunk, len(in), trunc(got), trunc(in))
			}
			if c.truncated() {
				t.Errorf("chunk %d: %d bytes marked truncated", chunk, len(in))
			}
		}
	}
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:60] + "..." + s[len(s)-60:]
	}
	return s
}

// Long output keeps the head, the tail and the important lines between, and
// every gap says how many lines (and which) were cut.
func TestCaptureSmartTruncation(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		switch i {
		case 300:
			b.WriteString("pkg/store/db.go:41:7: undefined: Open\n")
		case 500:
			b.WriteString("WARNING: deprecated flag\n")
		case 501:
			b.WriteString("    at Object.run (/app/index.js:10:5)\n")
		case 700:
			b.WriteString("--- FAIL: TestThing (0.00s)\n")
		default:
			fmt.Fprintf(&b, "ordinary line %d\n", i)
		}
	}
	c := testCapture(t, OutputOptions{HeadLines: 10, TailLines: 20})
	feed(c, b.String(), 777)
	got := c.render()
	for _, want := range []string{
		"ordinary line 1\n", "ordinary line 10\n",
		"[... 289 lines omitted (lines 11-299,",
		"pkg/store/db.go:41:7: undefined: Open\n",
		"[... 199 lines omitted (lines 301-499,",
		"WARNING: deprecated flag\n    at Object.run (/app/index.js:10:5)\n",
		"--- FAIL: TestThing (0.00s)\n",
		"[... 280 lines omitted (lines 701-980,",
		"ordinary line 981\n", "ordinary line 1000\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("render lacks %q", want)
		}
	}
	for _, gone := range []string{"ordinary line 11\n", "ordinary line 980\n", "ordinary line 600\n"} {
		if strings.Contains(got, gone) {
			t.Errorf("render keeps %q", gone)
		}
	}
	if !c.truncated() || c.lines != 1000 || c.errLines != 1 || c.warnLines != 1 {
		t.Errorf("truncated=%v lines=%d errLines=%d warnLines=%d", c.truncated(), c.lines, c.errLines, c.warnLines)
	}
	if s := c.summary(); !strings.Contains(s, "1000 lines") || !strings.Contains(s, "1 error line,") || !strings.Contains(s, "1 warning line") {
		t.Errorf("summary %q", s)
	}
}

// More important lines than there is room for: the first ones are kept and
// the rest are counted.
func TestCaptureImportantOverflow(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&b, "error %d\n", i)
	}
	c := testCapture(t, OutputOptions{HeadLines: 5, TailLines: 5, ImportantLines: 10})
	feed(c, b.String(), 100)
	got := c.render()
	if !strings.Contains(got, "error 15\n") || strings.Contains(got, "error 16\n") {
		t.Errorf("want errors 6-15 kept from the middle:\n%s", got)
	}
	if !strings.Contains(got, "[... 480 more error/warning/location lines were omitted ...]") {
		t.Errorf("overflow not reported:\n%s", got)
	}
}

// A line longer than the per-line budget is cut at a token boundary and the
// cut is reported.
func TestCaptureLongLine(t *testing.T) {
	o := OutputOptions{MaxBytes: 256 * 4, HeadLines: 1, TailLines: 1, ImportantLines: 1}
	c := testCapture(t, o)
	long := strings.Repeat("word ", 1000) + "sk-secretsecretsecretsecret1234"
	feed(c, long+"\nnext\n", 64)
	got := c.render()
	first, _, _ := strings.Cut(got, "\n")
	if !strings.HasSuffix(first, "cut from this line]") {
		t.Fatalf("cut not reported: %q", first)
	}
	kept := strings.TrimSuffix(first[:strings.Index(first, " [...")], " ")
	if !strings.HasPrefix(long, kept) || len(kept) > 256 || !strings.HasSuffix(kept, "word") {
		t.Fatalf("kept %q: want a prefix of the line ending at a word boundary, at most 256 bytes", kept)
	}
	if !strings.HasSuffix(got, "next\n") {
		t.Fatalf("line after the long one lost: %q", got)
	}
}

// Binary data is described, not dumped.
func TestCaptureBinary(t *testing.T) {
	c := testCapture(t, OutputOptions{})
	feed(c, "text\n\x00\x01\x02binary\n", 7)
	if got := c.render(); got != "text\n[binary data: 9 B]\n" {
		t.Fatalf("render %q", got)
	}
}

// However much is written, the capture holds at most MaxBytes.
func TestCaptureMemoryBound(t *testing.T) {
	const maxBytes = 64 << 10
	for name, unit := range map[string]string{
		"short lines":   "y\n",
		"mixed":         "ok 1\nmain.go:1:1: error: bad\n" + strings.Repeat("z", 3000) + "\n",
		"no newlines":   strings.Repeat("q", 4096),
		"all important": "panic: boom at x.go:1:1\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := testCapture(t, OutputOptions{MaxBytes: maxBytes})
			chunk := []byte(strings.Repeat(unit, 32<<10/len(unit)+1))
			var total int64
			for total < 4<<20 {
				c.Write(chunk)
				total += int64(len(chunk))
				if r := c.retained(); r > maxBytes {
					t.Fatalf("after %d bytes the capture holds %d > %d", total, r, maxBytes)
				}
			}
			c.finish()
			if c.total != total {
				t.Fatalf("counted %d bytes, wrote %d", c.total, total)
			}
			if got := c.render(); len(got) > maxBytes+8<<10 {
				t.Fatalf("rendered %d bytes", len(got))
			}
		})
	}
}

func TestNoiseAndImportance(t *testing.T) {
	det, err := newDetector(nil, []string{`^spinning$`})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"", "   ", ".", "......", "|", "/", "-", `\`, "42%", "100%", "[=====>    ] 55%", "⠋", "█████▌", "···", "spinning"} {
		if !det.isNoise([]byte(line)) {
			t.Errorf("%q is not noise", line)
		}
	}
	for _, line := range []string{"ok", "Compiling foo", "42", "12/100", "ok  \tgithub.com/x\t0.1s", "%", "100% done"} {
		if det.isNoise([]byte(line)) {
			t.Errorf("%q is noise", line)
		}
	}
	for line, want := range map[string]int{
		"main.go:12:3: undefined: x":             impLocation,
		"foo_test.go:40: got 1, want 2":          impLocation,
		"ERROR something":                        impError,
		"build FAILED":                           impError,
		"Warning: x":                             impWarning,
		"panic: runtime error":                   impError,
		"    at f (x.js:1:2)":                    impFrame | impLocation,
		`  File "x.py", line 3, in <module>`:     impFrame,
		"goroutine 1 [running]:":                 impFrame,
		"Traceback (most recent call last):":     impError,
		"ordinary text":                          0,
		"version 1.2: released":                  0,
		"at the end":                             0,
		"see http://example.com:8080/x for more": 0,
	} {
		if got := det.classify([]byte(line)); got&want != want || (want == 0 && got != 0) {
			t.Errorf("classify(%q) = %b, want %b", line, got, want)
		}
	}
}
