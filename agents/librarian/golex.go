package librarian

import (
	"strconv"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Go source is read as tokens, not as a syntax tree: what the index records
// of a Go file (declarations, their signatures, calls and imports) is all in
// the token stream, and building a tree costs several times more than the
// rest of indexing a file. The lexer follows the language specification's
// lexical rules (including semicolon insertion) and allocates nothing but
// the token slice, which a worker reuses.

// tokKind is the kind of a Go token.
type tokKind uint8

const (
	tIdent   tokKind = iota + 1 // identifiers and keywords
	tLit                        // numbers
	tString                     // interpreted and raw strings
	tChar                       // rune literals
	tComment                    // line and general comments
	tSemi                       // explicit, or inserted at a line end
	tOp                         // operators and punctuation; op holds the first byte
)

// gtok is one token: its kind, its first byte for an operator, and where it
// is (byte offsets and the line it starts on and the line it ends on).
type gtok struct {
	kind     tokKind
	op       byte
	off, end int32
	line     int32
	endLine  int32
}

// goLexer holds a worker's token slice between files.
type goLexer struct {
	toks  []gtok
	out   goCode
	stack []int32
	// err is the first lexical error ("" when none), at errLine; last is
	// the line the last token (a comment too) ends on.
	err     string
	errLine int32
	last    int32
	x       goExtract // extractGo's
	// Arenas the files' symbols and calls are cut from (see arenaRoom).
	symbols []schemas.Symbol
	calls   []schemas.Call
}

// arenaSize is how many elements an arena is made with.
const arenaSize = 512

// arenaRoom is the room left at the end of arena, an empty slice to
// append to; a new arena is made when little is left.
func arenaRoom[T any](arena *[]T) []T {
	if cap(*arena)-len(*arena) < arenaSize/8 {
		*arena = make([]T, 0, arenaSize)
	}
	a := *arena
	return a[len(a):len(a)]
}

// arenaTake is s, appended to from arenaRoom(arena), cut to its length,
// the arena grown over it when it is still there (an append past the
// arena's room moved it); nil when it is empty.
func arenaTake[T any](arena *[]T, s []T) []T {
	if len(s) == 0 {
		return nil
	}
	if a := *arena; cap(a) > len(a) && &s[0] == &a[len(a) : len(a)+1][0] {
		*arena = a[:len(a)+len(s)]
	}
	return s[:len(s):len(s)]
}

// fail records what as the lexical error at line, unless one is.
func (lx *goLexer) fail(what string, line int32) {
	if lx.err == "" {
		lx.err, lx.errLine = what, line
	}
}

// lex splits src into tokens; a lexical error (an unterminated string or
// comment) is kept in err and the rest of the file is read as far as it
// goes.
func (lx *goLexer) lex(src string) []gtok {
	toks := lx.toks[:0]
	lx.err, lx.errLine = "", 0
	line := int32(1)
	semi := false // a newline here ends a statement
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			if semi {
				toks = append(toks, gtok{kind: tSemi, off: int32(i), end: int32(i), line: line, endLine: line})
				semi = false
			}
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		}
		start, startLine := i, line
		kind, op := tOp, byte(0)
		switch {
		case isLetter(c):
			for i < len(src) && (isLetter(src[i]) || isDigit(src[i])) {
				i++
			}
			kind = tIdent
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			// A sign belongs to an exponent: after e (p in hexadecimal,
			// where e is a digit: 0x7E+1 is a sum).
			hex := c == '0' && i+1 < len(src) && (src[i+1] == 'x' || src[i+1] == 'X')
			for i < len(src) && (isLetter(src[i]) || isDigit(src[i]) || src[i] == '.' ||
				(src[i] == '+' || src[i] == '-') && (!hex && (src[i-1] == 'e' || src[i-1] == 'E') || src[i-1] == 'p' || src[i-1] == 'P')) {
				i++
			}
			kind = tLit
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) {
					i++
				}
				i++
			}
			if i < len(src) && src[i] == c {
				i++
			} else {
				lx.fail("unterminated literal", startLine)
			}
			kind = tString
			if c == '\'' {
				kind = tChar
			}
		case c == '`':
			end := strings.IndexByte(src[i+1:], '`')
			if end < 0 {
				lx.fail("unterminated raw string", startLine)
				end = len(src) - i - 1
			} else {
				end++
			}
			line += int32(strings.Count(src[i:i+end], "\n"))
			i += end + 1
			kind = tString
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			i += end
			kind = tComment
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				lx.fail("unterminated comment", startLine)
				end = len(src) - i - 2
			} else {
				end += 2
			}
			nl := int32(strings.Count(src[i:i+2+end], "\n"))
			line += nl
			i += end + 2
			kind = tComment
			if nl > 0 && semi {
				// A general comment over lines ends the statement, as a
				// newline does.
				toks = append(toks, gtok{kind: tSemi, off: int32(start), end: int32(start), line: startLine, endLine: startLine})
				semi = false
			}
		default:
			n := opLen(src[i:])
			if n == 1 {
				op = c // the one-byte operators are the ones read back
			}
			i += n
		}
		toks = append(toks, gtok{kind: kind, op: op, off: int32(start), end: int32(min(i, len(src))), line: startLine, endLine: line})
		switch kind {
		case tComment:
		case tIdent:
			w := src[start:i]
			semi = !isKeyword(w) || w == "break" || w == "continue" || w == "fallthrough" || w == "return"
		case tLit, tString, tChar:
			semi = true
		case tSemi:
			semi = false
		default:
			semi = op == ')' || op == ']' || op == '}' ||
				(i-start == 2 && (src[start:i] == "++" || src[start:i] == "--"))
			if op == ';' {
				toks[len(toks)-1].kind, semi = tSemi, false
			}
		}
	}
	if semi {
		toks = append(toks, gtok{kind: tSemi, off: int32(len(src)), end: int32(len(src)), line: line, endLine: line})
	}
	lx.toks, lx.last = toks, 1
	if len(toks) > 0 {
		lx.last = toks[len(toks)-1].endLine
	}
	return toks
}

// opLen is the length of the operator at the start of s.
func opLen(s string) int {
	var next, third byte
	if len(s) > 1 {
		next = s[1]
	}
	if len(s) > 2 {
		third = s[2]
	}
	switch c := s[0]; {
	case c == '.' && next == '.' && third == '.':
		return 3
	case (c == '<' || c == '>') && next == c:
		if third == '=' {
			return 3
		}
		return 2
	case c == '&' && next == '^':
		if third == '=' {
			return 3
		}
		return 2
	case (c == '&' || c == '|' || c == '+' || c == '-') && next == c, c == '<' && next == '-':
		return 2
	case strings.IndexByte("+-*/%&|^<>=!:", c) >= 0 && next == '=':
		return 2
	}
	return 1
}

// isLetter: what starts an identifier; any non-ASCII byte counts (the
// letters beyond ASCII), so an identifier is never cut in two.
func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isKeyword says whether w is one of Go's keywords (a switch: cheaper than
// a map's hash, for every name of every Go file).
func isKeyword(w string) bool {
	switch w {
	case "break", "case", "chan", "const", "continue", "default",
		"defer", "else", "fallthrough", "for", "func", "go", "goto",
		"if", "import", "interface", "map", "package", "range",
		"return", "select", "struct", "switch", "type", "var":
		return true
	}
	return false
}

// goCode is a Go file's tokens but its comments, each with whether a doc
// comment (a comment group ending on the line before it) precedes it, and
// the matching bracket of each bracket.
type goCode struct {
	src   string
	toks  []gtok
	doc   []bool
	match []int32
}

// code lexes src and keeps what extraction reads.
func (lx *goLexer) code(src string) *goCode {
	all := lx.lex(src)
	c := &lx.out
	c.src, c.toks, c.doc, c.match = src, c.toks[:0], c.doc[:0], c.match[:0]
	// A comment group is a lead (doc) comment of the token after it when it
	// ends on the line before that token; comments on the line of the token
	// before them are that token's line comment (go/parser's rules).
	prevLine := int32(0)
	inLine, lineEnd := false, int32(0) // the comments on the previous token's line
	group, groupEnd := false, int32(0)
	for _, t := range all {
		if t.kind == tComment {
			switch {
			case !group && (t.line == prevLine && !inLine || inLine && t.line <= lineEnd):
				inLine, lineEnd = true, t.endLine
			case group && t.line <= groupEnd+1:
				groupEnd = t.endLine
			default:
				group, groupEnd = true, t.endLine
			}
			continue
		}
		c.toks = append(c.toks, t)
		c.doc = append(c.doc, group && groupEnd+1 == t.line)
		prevLine, inLine, group = t.line, false, false
	}
	// Brackets: an unbalanced one is matched with the end.
	c.match = append(c.match, make([]int32, len(c.toks))...)
	stack := lx.stack[:0]
	for i, t := range c.toks {
		switch t.op {
		case '(', '[', '{':
			stack = append(stack, int32(i))
		case ')', ']', '}':
			if len(stack) == 0 || closer(c.toks[stack[len(stack)-1]].op) != t.op {
				lx.fail("unbalanced "+string(t.op), t.line)
				c.match[i] = int32(i)
				continue
			}
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			c.match[i], c.match[o] = o, int32(i)
		}
	}
	for _, o := range stack {
		// Where go/parser says it: at the end of the file.
		lx.fail("expected '"+string(closer(c.toks[o].op))+"', found EOF", lx.last)
		c.match[o] = int32(len(c.toks) - 1)
	}
	lx.stack = stack
	return c
}

func closer(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

func (c *goCode) text(i int) string { return c.src[c.toks[i].off:c.toks[i].end] }
func (c *goCode) is(i int, op byte) bool {
	return i >= 0 && i < len(c.toks) && c.toks[i].kind == tOp && c.toks[i].op == op
}
func (c *goCode) ident(i int) bool {
	return i >= 0 && i < len(c.toks) && c.toks[i].kind == tIdent && !isKeyword(c.text(i))
}
func (c *goCode) keyword(i int, w string) bool {
	return i >= 0 && i < len(c.toks) && c.toks[i].kind == tIdent && c.text(i) == w
}
func (c *goCode) semi(i int) bool { return i < len(c.toks) && c.toks[i].kind == tSemi }

// primaryEnd: the token can end an operand that a call, an index or a
// selector continues (an identifier, or a closing bracket).
func (c *goCode) primaryEnd(i int) bool {
	return c.ident(i) || c.is(i, ')') || c.is(i, ']') || c.is(i, '}')
}

// span is the source from token a to token b, its blanks collapsed.
func (c *goCode) span(a, b int) string {
	if a > b || b >= len(c.toks) {
		return ""
	}
	return collapseBlanks(c.src[c.toks[a].off:c.toks[b].end])
}

// collapseBlanks is strings.Join(strings.Fields(s), " "): s itself, not a
// copy, when it is ASCII whose blanks are single spaces between words
// already (most signatures, which span makes for every declaration).
func collapseBlanks(s string) string {
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == ' ' && i > 0 && i < len(s)-1 && s[i+1] != ' ':
		case b >= 0x80 || b <= ' ':
			return strings.Join(strings.Fields(s), " ")
		}
	}
	return s
}

// exprStart is the first token of the operand that ends at token e, no
// further back than lo (exclusive): through selectors, calls, indexes,
// type assertions and composite literals.
func (c *goCode) exprStart(e, lo int) int {
	for {
		switch {
		case c.ident(e):
			if e-1 > lo && c.is(e-1, '.') {
				e -= 2
				continue
			}
			return e
		case c.is(e, ')') || c.is(e, ']') || c.is(e, '}'):
			o := int(c.match[e])
			if o-1 > lo && c.is(o-1, '.') {
				e = o - 2
				continue
			}
			if o-1 > lo && c.primaryEnd(o-1) {
				e = o - 1
				continue
			}
			return o
		}
		return e
	}
}

// goExtract extracts one Go file.
type goExtract struct {
	*goCode
	f       *schemas.IndexedFile
	pkg     string
	imports map[string]string // local name -> import path
}

// extractGo adds the declarations, calls and imports of the Go source src
// to f. A file whose tokens cannot all be read (an unterminated string or
// comment, unbalanced brackets), or that holds a syntax error the tokens
// show (see syntaxError), keeps what was read and says why.
func extractGo(f *schemas.IndexedFile, src, pkgPath string, lx *goLexer) {
	// The extraction's state and its map of imports are the lexer's,
	// reused from one file to the next.
	if lx.x.imports == nil {
		lx.x.imports = map[string]string{}
	}
	clear(lx.x.imports)
	x := &lx.x
	x.goCode, x.f, x.pkg = lx.code(src), f, pkgPath
	// The symbols and calls are appended in the room left in the
	// lexer's arenas: a few allocations a chunk of files rather than a
	// slice grown a few times a file.
	f.Symbols, f.Calls = arenaRoom(&lx.symbols), arenaRoom(&lx.calls)
	defer func() {
		f.Symbols, f.Calls = arenaTake(&lx.symbols, f.Symbols), arenaTake(&lx.calls, f.Calls)
	}()
	// go/parser reports its first error: the earlier of the lexer's and
	// the syntax's.
	what, line := lx.err, lx.errLine
	if w, l := x.syntaxError(lx.last); w != "" && (what == "" || l < line) {
		what, line = w, l
	}
	if what != "" {
		f.ParseError = what + " at line " + strconv.Itoa(int(line))
	}
	f.Package = pkgPath
	for i := 0; i < len(x.toks); i++ {
		switch {
		case x.keyword(i, "import"):
			i = x.group(i, x.importSpec)
		case x.keyword(i, "func"):
			i = x.funcDecl(i)
		case x.keyword(i, "type"):
			i = x.group(i, x.typeSpec)
		case x.keyword(i, "var"), x.keyword(i, "const"):
			i = x.group(i, x.valueSpec)
		case x.is(i, '('), x.is(i, '['), x.is(i, '{'):
			i = int(x.match[i])
		}
	}
}

// group reads the specs of the declaration whose keyword is at i, one or a
// parenthesised list, and returns the index of its last token.
func (x *goExtract) group(i int, spec func(a, b int, doc bool, kw string)) int {
	kw, doc := x.text(i), x.doc[i]
	j := i + 1
	if !x.is(j, '(') {
		end := x.specEnd(j, len(x.toks))
		spec(j, end, doc || x.doc[min(j, len(x.doc)-1)], kw)
		return end
	}
	close := int(x.match[j])
	for k := j + 1; k < close; {
		if x.semi(k) {
			k++
			continue
		}
		end := x.specEnd(k, close)
		spec(k, end, doc || x.doc[k], kw)
		k = end + 1
	}
	return close
}

func (x *goExtract) importSpec(a, b int, _ bool, _ string) {
	if a > b {
		return
	}
	pth := strings.Trim(x.text(b), "\"`")
	name := importName(pth)
	if a < b {
		name = x.text(a) // an explicit name, "." or "_"
	}
	x.f.Imports = append(x.f.Imports, pth)
	x.imports[name] = pth
}

func (x *goExtract) valueSpec(a, b int, doc bool, kw string) {
	for k := a; k <= b && x.ident(k); k += 2 {
		if name := x.text(k); name != "_" {
			x.f.Symbols = append(x.f.Symbols, schemas.Symbol{Name: name, Kind: kw, Line: int(x.toks[k].line), Doc: doc})
		}
		if !x.is(k+1, ',') {
			break
		}
	}
}

func (x *goExtract) typeSpec(a, b int, doc bool, _ string) {
	if a > b || !x.ident(a) {
		return
	}
	t := a + 1
	if x.is(t, '[') && x.typeParams(t) {
		t = int(x.match[t]) + 1
	}
	if x.is(t, '=') {
		t++ // an alias
	}
	kind := "type"
	switch {
	case x.keyword(t, "struct"):
		kind = "struct"
	case x.keyword(t, "interface"):
		kind = "interface"
	}
	x.f.Symbols = append(x.f.Symbols, schemas.Symbol{Name: x.text(a), Kind: kind, Line: int(x.toks[a].line),
		EndLine: int(x.toks[b].endLine), Doc: doc, Signature: "type " + firstLine(x.span(a, b))})
}

// typeParams reports whether the brackets at i after a type's name hold
// type parameters ("[K comparable, V any]"), not an array length ("[4]").
func (x *goExtract) typeParams(i int) bool {
	if !x.ident(i + 1) {
		return false
	}
	n := i + 2
	return x.ident(n) || x.is(n, ',') || x.is(n, '*') || x.is(n, '[') || x.is(n, '(') ||
		x.keyword(n, "interface") || x.keyword(n, "func") || x.keyword(n, "map") || x.keyword(n, "chan") ||
		x.toks[n].kind == tOp && x.toks[n].op == 0 && x.text(n) == "~"
}

// funcDecl reads the function or method whose func keyword is at i and
// returns the index of its last token.
func (x *goExtract) funcDecl(i int) int {
	sym := schemas.Symbol{Kind: "func", Line: int(x.toks[i].line), Doc: x.doc[i]}
	j, recvVar := i+1, ""
	if x.is(j, '(') {
		close := int(x.match[j])
		k := j + 1
		if x.ident(k) && k+1 < close && !x.is(k+1, '[') && !x.is(k+1, '.') {
			recvVar, k = x.text(k), k+1
		}
		for k < close && (x.is(k, '*') || x.is(k, '(')) {
			k++
		}
		if k < close && x.ident(k) {
			sym.Kind, sym.Recv = "method", x.text(k)
		}
		j = close + 1
	}
	if !x.ident(j) {
		return j - 1
	}
	sym.Name = x.text(j)
	j++
	if x.is(j, '[') {
		j = int(x.match[j]) + 1
	}
	if !x.is(j, '(') {
		return j - 1
	}
	sigEnd := int(x.match[j])
	j = sigEnd + 1
	switch {
	case x.is(j, '('):
		sigEnd = int(x.match[j])
		j = sigEnd + 1
	case !x.is(j, '{') && !x.semi(j) && j < len(x.toks):
		// A result type: up to the body's brace (a struct's or an
		// interface's braces are the type's).
		for j < len(x.toks) && !x.semi(j) && !x.is(j, ')') && !x.is(j, ']') && !x.is(j, '}') {
			if x.is(j, '{') && !x.keyword(j-1, "struct") && !x.keyword(j-1, "interface") {
				break
			}
			if x.is(j, '(') || x.is(j, '[') || x.is(j, '{') {
				j = int(x.match[j])
			}
			sigEnd = j
			j++
		}
	}
	sym.Signature = x.span(i, sigEnd)
	sym.EndLine = int(x.toks[sigEnd].endLine)
	end := sigEnd
	if x.is(j, '{') {
		end = int(x.match[j])
		sym.EndLine = int(x.toks[end].line)
	}
	x.f.Symbols = append(x.f.Symbols, sym)
	if end > sigEnd {
		from := sym.Name
		if sym.Recv != "" {
			from = sym.Recv + "." + sym.Name
		}
		x.calls(j, end, from, sym.Recv, recvVar)
	}
	return end
}

// calls lists the calls between the braces at a and b: to a local function
// (qualified by the package), to a function of an imported package (by its
// import path), to a method of the receiver (package.Recv.Method), or to a
// method of a value whose type is not resolved ("?.Method").
func (x *goExtract) calls(a, b int, from, recv, recvVar string) {
	for k := a + 1; k < b; k++ {
		if x.keyword(k, "interface") && x.is(k+1, '{') {
			k = int(x.match[k+1]) // method specs, not calls
			continue
		}
		if !x.is(k, '(') || k-1 <= a {
			continue
		}
		if to := x.callee(k-1, a, recv, recvVar); to != "" {
			x.f.Calls = append(x.f.Calls, schemas.Call{From: from, To: to, Line: int(x.toks[x.exprStart(k-1, a)].line)})
		}
	}
}

// callee names the function a call calls whose operand ends at token e
// (after lo), or "" when it is not a named function (a conversion to a
// composite type, a function literal, a call's result).
func (x *goExtract) callee(e, lo int, recv, recvVar string) string {
	for {
		switch {
		case x.is(e, ']'): // an index or an instantiation: its operand
			o := int(x.match[e])
			if o-1 <= lo || !x.primaryEnd(o-1) {
				return "" // a slice, array or map type
			}
			e = o - 1
			continue
		case x.is(e, ')'):
			o := int(x.match[e])
			if o-1 > lo && (x.primaryEnd(o-1) || x.is(o-1, '.')) {
				return "" // a call's or a type assertion's result
			}
			if e-1 <= o || x.exprStart(e-1, o) != o+1 {
				return "" // not one operand: (*T)
			}
			e, lo = e-1, o // a parenthesised operand
			continue
		}
		break
	}
	if !x.ident(e) {
		return ""
	}
	name := x.text(e)
	if e-1 > lo && x.is(e-1, '.') {
		xe := e - 2
		if !x.ident(xe) || xe-1 > lo && x.is(xe-1, '.') {
			return "?." + name
		}
		if xe-1 > lo && x.is(xe-1, ']') {
			return "" // []pkg.T(v): a conversion to a slice type
		}
		id := x.text(xe)
		switch {
		case x.imports[id] != "":
			return x.imports[id] + "." + name
		case recvVar != "" && id == recvVar:
			return qualify(x.pkg, recv) + "." + name
		}
		return "?." + name
	}
	if builtins[name] || e-1 > lo && x.is(e-1, ']') {
		return ""
	}
	return qualify(x.pkg, name)
}
