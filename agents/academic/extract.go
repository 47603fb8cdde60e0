package academic

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
	"golang.org/x/net/html"

	"github.com/sylk/sylk/schemas"
)

// section is a heading's text (or a page) before it is cut into chunks.
type section struct {
	name string
	text string
}

// extracted is what a file's format reader found: a title and sections.
type extracted struct {
	title    string
	sections []section
}

// extract reads content in format; an error says why the file is skipped.
func extract(format string, content []byte) (*extracted, error) {
	if format == schemas.DocPDF {
		return extractPDF(content)
	}
	if bytes.IndexByte(content[:min(len(content), binarySniff)], 0) >= 0 || !utf8.Valid(content) {
		return nil, fmt.Errorf("binary: not UTF-8 text")
	}
	switch format {
	case schemas.DocMarkdown:
		return extractMarkdown(string(content)), nil
	case schemas.DocHTML:
		return extractHTML(content)
	}
	return extractText(string(content)), nil
}

// binarySniff is how much of a text file is looked at for a NUL byte.
const binarySniff = 8000

// extractMarkdown cuts at ATX headings (# to ######) outside fenced code;
// a section is named by its heading path ("Install > Linux").
func extractMarkdown(s string) *extracted {
	out := &extracted{}
	var path []string // the headings above, by level
	var body strings.Builder
	name := ""
	flush := func() {
		if t := strings.TrimSpace(body.String()); t != "" {
			out.sections = append(out.sections, section{name: name, text: t})
		}
		body.Reset()
	}
	fence := ""
	for _, line := range strings.SplitAfter(s, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			body.WriteString(line)
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			body.WriteString(line)
			continue
		}
		level := 0
		for level < len(trimmed) && trimmed[level] == '#' {
			level++
		}
		if level == 0 || level > 6 || (len(trimmed) > level && trimmed[level] != ' ') {
			body.WriteString(line)
			continue
		}
		flush()
		heading := strings.TrimSpace(strings.TrimRight(trimmed[level:], "# "))
		if level == 1 && out.title == "" {
			out.title = heading
		}
		path = append(path[:min(len(path), level-1)], heading)
		for len(path) < level { // a skipped level (# then ###)
			path = append([]string{""}, path...)
		}
		name = joinPath(path)
	}
	flush()
	return out
}

// joinPath names a section by its non-empty headings.
func joinPath(path []string) string {
	var parts []string
	for _, p := range path {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " > ")
}

// extractHTML cuts at h1-h6; the text of scripts and styles is dropped.
func extractHTML(content []byte) (*extracted, error) {
	doc, err := html.Parse(bytes.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("HTML does not parse: %w", err)
	}
	out := &extracted{}
	var path []string
	name := ""
	var body strings.Builder
	flush := func() {
		if t := strings.TrimSpace(body.String()); t != "" {
			out.sections = append(out.sections, section{name: name, text: t})
		}
		body.Reset()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "noscript", "template":
				return
			case "title":
				if out.title == "" {
					out.title = strings.TrimSpace(textOf(n))
				}
				return
			case "h1", "h2", "h3", "h4", "h5", "h6":
				flush()
				level := int(n.Data[1] - '0')
				heading := strings.Join(strings.Fields(textOf(n)), " ")
				path = append(path[:min(len(path), level-1)], heading)
				for len(path) < level {
					path = append([]string{""}, path...)
				}
				name = joinPath(path)
				if out.title == "" && level == 1 {
					out.title = heading
				}
				return
			case "p", "div", "li", "pre", "tr", "br", "blockquote", "section", "article", "table", "ul", "ol", "dd", "dt":
				defer body.WriteString("\n")
			}
		}
		if n.Type == html.TextNode {
			body.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	flush()
	return out, nil
}

// textOf is the text under n.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// extractText is one section; the title is the first non-empty line.
func extractText(s string) *extracted {
	out := &extracted{}
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			out.title = t
			break
		}
	}
	if t := strings.TrimSpace(s); t != "" {
		out.sections = []section{{text: t}}
	}
	return out
}

// extractPDF reads the text of each page: a section a page. The library
// panics on some malformed files; that is a file that does not parse.
func extractPDF(content []byte) (out *extracted, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("PDF does not parse: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		return nil, fmt.Errorf("PDF does not parse: %w", err)
	}
	out = &extracted{}
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		text, err := p.GetPlainText(nil)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("PDF does not parse: page %d: %w", i, err)
		}
		text = strings.TrimSpace(strings.ToValidUTF8(text, ""))
		if text == "" {
			continue
		}
		if out.title == "" {
			out.title, _, _ = strings.Cut(text, "\n")
			out.title = strings.TrimSpace(out.title)
		}
		out.sections = append(out.sections, section{name: fmt.Sprintf("page %d", i), text: text})
	}
	if len(out.sections) == 0 {
		return nil, fmt.Errorf("PDF has no text (%d pages; scanned images are not read)", r.NumPage())
	}
	return out, nil
}

// chunk cuts a section's text into chunks of at most max bytes, at
// paragraph breaks where it can (else at a line, a space, a character
// boundary); the parts after the first are named "name (2)", "name (3)".
func chunk(s section, max int) []section {
	if len(s.text) <= max {
		return []section{s}
	}
	var out []section
	text := s.text
	for text != "" {
		cut := len(text)
		if cut > max {
			cut = lastBreak(text, max)
		}
		part := strings.TrimSpace(text[:cut])
		text = strings.TrimLeft(text[cut:], " \t\r\n")
		if part == "" {
			continue
		}
		name := s.name
		if len(out) > 0 {
			name = fmt.Sprintf("%s (%d)", s.name, len(out)+1)
		}
		out = append(out, section{name: name, text: part})
	}
	return out
}

// lastBreak is where to cut text (longer than max) to keep at most max
// bytes: after the last paragraph break, else the last newline, else the
// last space in its first max bytes, else at a character boundary.
func lastBreak(text string, max int) int {
	s := text[:max]
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(s, sep); i > len(s)/4 {
			return i + len(sep)
		}
	}
	cut := max
	for cut > 1 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return cut
}
