package librarian

import (
	"encoding/binary"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The token reader reads no syntax tree, so the syntax errors a tree would
// meet are looked for in the tokens: the file's outline (the package
// clause, imports before the other declarations, nothing but declarations
// at the top level, a function's name and parameters, a semicolon after
// each declaration), characters no token may hold, literals that are not
// well formed, an operator with no operand after it, two operands with
// nothing between them (but in a declaration), a call, an expression in
// parentheses or a block followed on its line by an operand or a
// statement, a parameter, field or declared name with more than one type
// or a literal for one, an element missing from a list, a selector with no
// operand, a line that ends a list of parameters, arguments or a composite
// literal's elements without a comma, an if or switch header that runs
// past its line, and an else that follows no block. What is
// reported is go/parser's first error: the earliest, by line. A mistake
// inside a statement that none of these catch (a misplaced keyword, a
// malformed type) goes unreported: checking every production of the
// grammar is what building the tree cost.

// syntaxError is the earliest syntax error found in c and its line ("" for
// none); last is the line the file's last token ends on (where EOF is).
func (c *goCode) syntaxError(last int32) (string, int32) {
	at, what := c.outlineError()
	if a, w := c.tokenError(); w != "" && (what == "" || a < at) {
		at, what = a, w
	}
	switch {
	case len(c.toks) == 0:
		return "expected 'package', found EOF", last
	case what == "":
		return "", 0
	case at >= len(c.toks):
		return what, last
	}
	return what, c.toks[at].line
}

// found describes token i as go/parser does in "expected X, found Y".
func (c *goCode) found(i int) string {
	switch {
	case i >= len(c.toks):
		return "EOF"
	case c.toks[i].kind == tSemi:
		if c.toks[i].off == c.toks[i].end {
			return "newline"
		}
		return "';'"
	case c.toks[i].kind == tIdent && !isKeyword(c.text(i)):
		return c.text(i)
	}
	return "'" + c.text(i) + "'"
}

// outlineError is the first error in the file's outline: the token it is at
// and what is wrong ("" for none).
func (c *goCode) outlineError() (int, string) {
	n := len(c.toks)
	switch {
	case n == 0:
		return 0, ""
	case !c.keyword(0, "package"):
		return 0, "expected 'package', found " + c.found(0)
	case !c.ident(1):
		return 1, "expected package name, found " + c.found(1)
	case !c.semi(2) && n > 2:
		return 2, "expected ';', found " + c.found(2)
	}
	imports := true
	for i := 3; i < n; i++ {
		var end int
		var what string
		switch {
		case c.keyword(i, "import"):
			if !imports {
				return i, "imports must appear before other declarations"
			}
			end, what = c.declEnd(i, c.importSpecError)
		case c.keyword(i, "func"):
			imports = false
			end, what = c.funcEnd(i)
		case c.keyword(i, "type"), c.keyword(i, "var"), c.keyword(i, "const"):
			imports = false
			end, what = c.declEnd(i, nil)
		default:
			return i, "expected declaration, found " + c.found(i)
		}
		if what != "" {
			return end, what
		}
		if end+1 < n && !c.semi(end+1) {
			return end + 1, "expected ';', found " + c.found(end+1)
		}
		i = end + 1
	}
	return 0, ""
}

// declEnd is the last token of the import, type, var or const declaration
// at i, and what is wrong with it (checked by spec, when set, on each spec
// from a to b).
func (c *goCode) declEnd(i int, spec func(a, b int) (int, string)) (int, string) {
	if !c.is(i+1, '(') {
		b := c.specEnd(i+1, len(c.toks))
		if b < i+1 {
			return i + 1, "expected declaration, found " + c.found(i+1)
		}
		if spec != nil {
			if at, what := spec(i+1, b); what != "" {
				return at, what
			}
		}
		return b, ""
	}
	close := int(c.match[i+1])
	for k := i + 2; k < close; {
		if c.semi(k) {
			k++
			continue
		}
		b := c.specEnd(k, close)
		if spec != nil {
			if at, what := spec(k, b); what != "" {
				return at, what
			}
		}
		if b+1 < close && !c.semi(b+1) {
			return b + 1, "expected ';', found " + c.found(b+1)
		}
		k = b + 1
	}
	return close, ""
}

// importSpecError checks the import spec from a to b: a path, after a
// name, a "." or a "_".
func (c *goCode) importSpecError(a, b int) (int, string) {
	p := a
	if c.ident(a) || c.is(a, '.') {
		p++
	}
	switch {
	case p > b || c.toks[p].kind != tString:
		return p, "expected 'STRING', found " + c.found(p)
	case p < b:
		return p + 1, "expected ';', found " + c.found(p+1)
	}
	return 0, ""
}

// specEnd is the index of the last token of the spec starting at a (before
// a semicolon or limit), across brackets.
func (c *goCode) specEnd(a, limit int) int {
	k := a
	for k < limit && !c.semi(k) {
		if c.is(k, '(') || c.is(k, '[') || c.is(k, '{') {
			k = int(c.match[k])
		}
		k++
	}
	return min(k, limit) - 1
}

// funcEnd is the last token of the function declaration at i, and what is
// wrong with its outline: func, a receiver, a name, type parameters,
// parameters, a result, a body.
func (c *goCode) funcEnd(i int) (int, string) {
	k := i + 1
	if c.is(k, '(') {
		k = int(c.match[k]) + 1
	}
	if !c.ident(k) {
		return k, "expected 'IDENT', found " + c.found(k)
	}
	k++
	if c.is(k, '[') {
		k = int(c.match[k]) + 1
	}
	if !c.is(k, '(') {
		return k, "expected '(', found " + c.found(k)
	}
	k = int(c.match[k]) + 1
	for k < len(c.toks) && !c.semi(k) && !c.is(k, '{') {
		switch {
		case c.is(k, '(') || c.is(k, '['):
			k = int(c.match[k])
		case (c.keyword(k, "struct") || c.keyword(k, "interface")) && c.is(k+1, '{'):
			k = int(c.match[k+1]) // a result of a struct or interface type
		}
		k++
	}
	if c.is(k, '{') {
		return int(c.match[k]), ""
	}
	return k - 1, ""
}

// Classes of operators (opClass).
const (
	// needsOperand: an operand must follow it.
	needsOperand = 1 << iota
	// notFirst: neither a statement nor an element of a composite literal
	// starts with it.
	notFirst
)

// opClass is the class of the operator s (a switch: a map lookup for every
// operator of every file cost as much as the rest of the check).
func opClass(s string) uint8 {
	switch s {
	case "+", "-", "*", "&", "^", "!", "<-":
		return needsOperand
	case "/", "%", "|", "<<", ">>", "&^", "&&", "||", "==", "!=", "<", "<=", ">", ">=",
		"=", ":=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "&^=":
		return needsOperand | notFirst
	case ".", ",", ":", "...":
		return notFirst
	}
	return 0
}

// statementKeyword says whether w is a keyword no operand starts with (a
// switch, as isKeyword).
func statementKeyword(w string) bool {
	switch w {
	case "break", "case", "const", "continue", "default", "defer",
		"else", "fallthrough", "for", "go", "goto", "if", "import",
		"package", "return", "select", "switch", "type", "var":
		return true
	}
	return false
}

// tokenError is the first error a token or a pair of tokens shows: the
// token it is at and what is wrong ("" for none).
func (c *goCode) tokenError() (int, string) {
	// The brackets open around each token: 'b' a block, 'l' a composite
	// literal, 't' the body of a struct or interface type, 'g' a group of
	// var, const or type declarations, 'i' a group of imports, 'p'
	// parameters or results, 'c' the arguments of a call (or a
	// parenthesised expression), '['. closed is the kind of the bracket
	// closed last.
	var open []byte
	var closed byte
	// decls are the depths of open (len(open)) at which a declaration
	// statement (var, const, type) is being read: a name and a type follow
	// each other there.
	var decls []int
	// heads are the headers (of if, for, switch, select, and of a func)
	// waiting for their block, at the depth of open they will open it.
	var heads []head
	ascii := isASCII(c.src)
	for i := range c.toks {
		t := &c.toks[i]
		switch t.kind {
		case tSemi:
			// A line ends inside parameters, arguments or brackets: an
			// element without the comma that would continue the list.
			if len(open) > 0 && t.off == t.end {
				switch open[len(open)-1] {
				case 'p', 'c', '[':
					return i, "missing ',' before newline"
				case 'l':
					return i, "missing ',' before newline in composite literal"
				}
			}
			if n := len(decls); n > 0 && decls[n-1] == len(open) {
				decls = decls[:n-1]
			}
			// A func's type ends with its statement; the header of an
			// if or a switch holds one semicolon at most (after its
			// statement), a for's up to two, whose line may end there.
			for len(heads) > 0 && heads[len(heads)-1].depth == len(open) {
				h := &heads[len(heads)-1]
				if !h.fn {
					if h.semis++; h.semis > 1 && !h.loop {
						return i, "expected '{', found " + c.found(i)
					}
					break
				}
				heads = heads[:len(heads)-1]
			}
		case tOp:
			s := c.text(i)
			switch t.op {
			case '{':
				kind := byte('b')
				n := len(heads) - 1
				switch {
				case c.keyword(i-1, "struct") || c.keyword(i-1, "interface"):
					kind = 't'
				case n >= 0 && heads[n].depth == len(open) && (heads[n].fn || !c.literalType(i, closed)):
					// The header's block; a func's ends the func types of
					// its signature too (func() func() {).
					fn := heads[n].fn
					heads = heads[:n]
					for fn && n > 0 && heads[n-1].fn && heads[n-1].depth == len(open) {
						n--
						heads = heads[:n]
					}
				case c.ident(i-1) || c.is(i-1, ']') || c.is(i-1, '}') && closed == 't',
					len(open) > 0 && open[len(open)-1] == 'l' && (c.is(i-1, '{') || c.is(i-1, ',') || c.is(i-1, ':')):
					kind = 'l'
				}
				open = append(open, kind)
			case '(':
				kind := byte('c') // a call's arguments, or an expression
				switch {
				case c.keyword(i-1, "import"):
					kind = 'i'
				case c.keyword(i-1, "var"), c.keyword(i-1, "const"), c.keyword(i-1, "type"):
					kind = 'g'
				case c.params(i, open):
					kind = 'p'
				}
				open = append(open, kind)
			case '[':
				open = append(open, t.op)
			case ')', ']', '}':
				closed = 0
				if len(open) > 0 {
					closed, open = open[len(open)-1], open[:len(open)-1]
				}
				for len(decls) > 0 && decls[len(decls)-1] > len(open) {
					decls = decls[:len(decls)-1]
				}
				for len(heads) > 0 && heads[len(heads)-1].depth > len(open) {
					heads = heads[:len(heads)-1]
				}
				if at, what := c.afterClose(i, closed, open); what != "" {
					return at, what
				}
			}
			switch t.op {
			case '@', '#', '$', '?', '\\':
				return i, "illegal character " + strconv.QuoteRune(rune(t.op))
			}
			cls := opClass(s)
			if cls&needsOperand != 0 && i+1 < len(c.toks) {
				if n := &c.toks[i+1]; n.kind == tSemi || n.kind == tOp && strings.IndexByte(")]},", n.op) >= 0 && n.op != 0 ||
					n.kind == tIdent && statementKeyword(c.text(i+1)) {
					return i + 1, "expected operand, found " + c.found(i+1)
				}
			}
			// After a statement's end, or a block's or a literal's start,
			// an operator that only joins operands cannot come (but the
			// dot of a dot import).
			if cls&notFirst != 0 && i > 2 && (c.semi(i-1) || c.is(i-1, '{')) && !(s == "." && i+1 < len(c.toks) && c.toks[i+1].kind == tString) {
				return i, "expected statement, found " + c.found(i)
			}
			// An element of a list is not missing, and a selector follows
			// an operand (a dot after an operator, a keyword or a list's
			// start starts none).
			switch {
			case (s == "," || s == ":") && c.is(i-1, ','), s == "," && (c.is(i-1, '(') || c.is(i-1, '[')):
				return i, "expected operand, found " + c.found(i)
			case s == "." && i > 2 && (c.toks[i-1].kind == tOp && strings.IndexByte(")]}", c.toks[i-1].op) < 0 || c.toks[i-1].kind == tIdent && isKeyword(c.text(i-1))) && !(i+1 < len(c.toks) && c.toks[i+1].kind == tString):
				return i, "expected operand, found '.'"
			}
		case tIdent:
			if !ascii {
				if what := identError(c.text(i)); what != "" {
					return i, what
				}
			}
			switch w := c.text(i); w {
			case "if", "for", "switch", "select", "func":
				heads = append(heads, head{depth: len(open), fn: w == "func", loop: w == "for"})
			}
			switch {
			case c.keyword(i, "else") && !c.is(i-1, '}'):
				return i, "expected statement, found 'else'"
			case c.keyword(i, "if") && c.is(i+1, '{'):
				return i + 1, "missing condition in if statement"
			case len(open) == 0:
			case open[len(open)-1] == 'b' && (c.semi(i-1) || c.is(i-1, '{') || c.is(i-1, ':')) && (c.keyword(i, "var") || c.keyword(i, "const") || c.keyword(i, "type")):
				decls = append(decls, len(open))
			// Two operands do not follow each other in a statement or an
			// element (only a field of a struct or a method of an
			// interface has a name and a type, and a declaration), nor
			// in the arguments of a call (only parameters do).
			case open[len(open)-1] == 'l' && c.ident(i) && (c.operand(i+1) || c.typeKeyword(i+1)):
				return i + 1, "missing ',' in composite literal"
			case open[len(open)-1] == 'b' && c.ident(i) && c.operand(i+1) && (len(decls) == 0 || decls[len(decls)-1] != len(open)):
				return i + 1, "expected ';', found " + c.found(i+1)
			case open[len(open)-1] == 'c' && c.ident(i) && c.operand(i+1):
				return i + 1, "missing ',' in argument list"
			case open[len(open)-1] == 'b' && c.ident(i) && c.typeKeyword(i+1) && (len(decls) == 0 || decls[len(decls)-1] != len(open)):
				return i + 1, "expected ';', found " + c.found(i+1)
			// A parameter, a field or a declared name has one type: a
			// name (or a qualified one) is not followed by two more.
			case strings.IndexByte("ptg", open[len(open)-1]) >= 0 && (c.ident(i-1) || c.is(i-1, '.')) && c.ident(i) && c.ident(i+1):
				if open[len(open)-1] == 'p' {
					return i + 1, "missing ',' in parameter list"
				}
				return i + 1, "expected ';', found " + c.found(i+1)
			// Nor is a name of a var or const group followed by a literal
			// (an import's name is, by its path).
			case open[len(open)-1] == 'g' && c.ident(i) && c.operand(i+1) && !c.ident(i+1):
				return i + 1, "expected ';', found " + c.found(i+1)
			}
		case tLit, tString, tChar:
			if what := c.literalError(i); what != "" {
				return i, what
			}
			if c.operand(i + 1) {
				return i + 1, "expected ';', found " + c.found(i+1)
			}
		}
	}
	return 0, ""
}

// afterClose is what is wrong after the bracket at i that closed a bracket
// of kind closed, open being those still open ("" for nothing): on the
// same line, a call's arguments or an expression in parentheses are not
// followed by an operand or a statement's keyword, nor is a block or a
// composite literal (but by else).
func (c *goCode) afterClose(i int, closed byte, open []byte) (int, string) {
	n := i + 1
	if n >= len(c.toks) || c.toks[n].kind == tSemi || c.toks[n].kind == tOp {
		return 0, ""
	}
	stmt := c.toks[n].kind == tIdent && statementKeyword(c.text(n))
	switch {
	case closed == 'c' && (c.operand(n) || stmt), (closed == 'b' || closed == 'l') && (c.operand(n) || stmt && !c.keyword(n, "else")):
	default:
		return 0, ""
	}
	switch {
	case len(open) == 0 || open[len(open)-1] == 'b':
		return n, "expected ';', found " + c.found(n)
	case open[len(open)-1] == 'c':
		return n, "missing ',' in argument list"
	case open[len(open)-1] == 'l':
		return n, "missing ',' in composite literal"
	}
	return 0, ""
}

// head is a header waiting for its block: at which depth of the open
// brackets, whether it is a func's or a for's, and the semicolons met in
// it.
type head struct {
	depth    int
	fn, loop bool
	semis    int
}

// literalType says whether the brace at i, in a control statement's
// header, opens a composite literal rather than the statement's block: it
// follows a slice, array or map type (a name after a ']', qualified or
// not, pointed to or not) or a struct's (closed, the kind of the bracket
// closed last).
func (c *goCode) literalType(i int, closed byte) bool {
	j := i - 1
	if c.is(j, '}') {
		return closed == 't'
	}
	if !c.ident(j) {
		return false
	}
	if c.is(j-1, '.') && c.ident(j-2) {
		j -= 2
	}
	for c.is(j-1, '*') {
		j--
	}
	if !c.is(j-1, ']') {
		return false
	}
	// A type's brackets, not an index's: empty, a map's, or an array's
	// length where no operand ends before it.
	o := int(c.match[j-1])
	return o == j-2 || c.keyword(o-1, "map") || !(c.primaryEnd(o-1) || c.operand(o-1))
}

// typeKeyword: token i is a keyword that starts a type.
func (c *goCode) typeKeyword(i int) bool {
	return c.keyword(i, "func") || c.keyword(i, "map") || c.keyword(i, "chan") || c.keyword(i, "struct") || c.keyword(i, "interface")
}

// operand: token i is a name or a literal.
func (c *goCode) operand(i int) bool {
	if i >= len(c.toks) {
		return false
	}
	k := c.toks[i].kind
	return k == tLit || k == tString || k == tChar || c.ident(i)
}

// params says whether the parenthesis at i (inside the brackets open)
// opens parameters or results rather than a call's arguments: after func
// (a literal, a type, a receiver), after a function's name (and its type
// parameters), after parameters, or a method's in an interface.
func (c *goCode) params(i int, open []byte) bool {
	p := i - 1
	if c.is(p, ')') || c.is(p, ']') {
		o := int(c.match[p])
		if c.is(p, ')') {
			return c.params(o, open) // results after parameters
		}
		p = o - 1 // type parameters: what is before them
	}
	if p < 0 || c.toks[p].kind != tIdent {
		return false
	}
	if c.text(p) == "func" {
		return true
	}
	// Another keyword (if, return, ...) is followed by an expression: it
	// follows neither func nor a receiver, nor is it a method's name.
	if c.keyword(p-1, "func") || len(open) > 0 && open[len(open)-1] == 't' {
		return true
	}
	// A method's name after its receiver.
	return c.is(p-1, ')') && c.keyword(int(c.match[p-1])-1, "func")
}

// isASCII says whether s holds no byte beyond ASCII, eight bytes at a time
// (most files are ASCII, and their names need no look at each character).
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64([]byte(s[i:i+8]))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// identError is what is wrong with an identifier: a character that is no
// letter or digit, or bytes that are not UTF-8.
func identError(w string) string {
	for j, r := range w {
		switch {
		case r < utf8.RuneSelf:
		case r == utf8.RuneError:
			return "illegal UTF-8 encoding"
		case !unicode.IsLetter(r) && (j == 0 || !unicode.IsDigit(r)):
			return "invalid character " + strconv.QuoteRune(r) + " in identifier"
		}
	}
	return ""
}

// literalError is what is wrong with the literal at i: a number that is
// none, an unknown escape, a rune literal of no character or several.
func (c *goCode) literalError(i int) string {
	s := c.text(i)
	switch c.toks[i].kind {
	case tLit:
		num, imaginary := strings.CutSuffix(s, "i")
		if !imaginary && len(num) > 1 && num[0] == '0' && strings.Trim(num, "0123456789_") == "" && strings.ContainsAny(num, "89") {
			return "invalid digit in octal literal"
		}
		if _, err := strconv.ParseInt(num, 0, 64); err == nil || err.(*strconv.NumError).Err == strconv.ErrRange {
			return ""
		}
		if _, err := strconv.ParseFloat(num, 64); err == nil || err.(*strconv.NumError).Err == strconv.ErrRange {
			return ""
		}
		return "invalid number literal " + s
	case tString:
		if s[0] == '`' || len(s) < 2 || s[len(s)-1] != '"' || strings.IndexByte(s, '\\') < 0 {
			return "" // raw, unterminated (the lexer says so) or without escapes
		}
		if _, err := strconv.Unquote(s); err != nil {
			return "unknown escape sequence"
		}
	case tChar:
		if len(s) < 2 || s[len(s)-1] != '\'' {
			return ""
		}
		if s == "''" {
			return "empty rune literal or unescaped ' in rune literal"
		}
		if _, _, tail, err := strconv.UnquoteChar(s[1:len(s)-1], '\''); err != nil {
			return "unknown escape sequence"
		} else if tail != "" {
			return "more than one character in rune literal"
		}
	}
	return ""
}
