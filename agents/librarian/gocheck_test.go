package librarian

import (
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sylk/sylk/schemas"
)

// Broken Go files: each is rejected by go/parser, and the token reader
// reports a parse error on the line of go/parser's first error.
func TestGoParseErrorsAgreeWithGoParser(t *testing.T) {
	for name, src := range map[string]string{
		"empty":                      "",
		"no package":                 "func F() {}\n",
		"package without a name":     "package\n\nfunc F() {}\n",
		"two package names":          "package p q\n",
		"statement at top level":     "package p\n\nx := 1\n",
		"call at top level":          "package p\n\nfunc F() {}\n\nF()\n",
		"import after a decl":        "package p\n\nfunc F() {}\n\nimport \"fmt\"\n",
		"import without a path":      "package p\n\nimport fmt\n",
		"import two paths":           "package p\n\nimport (\n\t\"fmt\" \"os\"\n)\n",
		"func without a name":        "package p\n\nfunc () {}\n",
		"func without params":        "package p\n\nfunc F {}\n",
		"two decls on a line":        "package p\n\nfunc F() {} func G() {}\n",
		"var without a name":         "package p\n\nvar\n",
		"dangling assignment":        "package p\n\nfunc F() {\n\tx :=\n}\n",
		"dangling operator":          "package p\n\nfunc F() int {\n\treturn 1 +\n}\n",
		"operator before paren":      "package p\n\nfunc F() {\n\tG(1, 2 *)\n}\n",
		"two operands":               "package p\n\nfunc F() {\n\tx := 1 2\n\t_ = x\n}\n",
		"string after string":        "package p\n\nvar s = \"a\" \"b\"\n",
		"else on its own line":       "package p\n\nfunc F(x bool) {\n\tif x {\n\t}\n\telse {\n\t}\n}\n",
		"if without a condition":     "package p\n\nfunc F() {\n\tif {\n\t}\n}\n",
		"illegal character":          "package p\n\nfunc F() {\n\tx := 1 @ 2\n}\n",
		"illegal character hash":     "package p\n\n# comment\n",
		"bad escape":                 "package p\n\nvar s = \"a\\qb\"\n",
		"bad rune":                   "package p\n\nvar r = 'ab'\n",
		"empty rune":                 "package p\n\nvar r = ''\n",
		"bad octal":                  "package p\n\nvar n = 08\n",
		"bad hex":                    "package p\n\nvar n = 0x\n",
		"bad exponent":               "package p\n\nvar f = 1e+\n",
		"non-letter in a name":       "package p\n\nvar a→b = 1\n",
		"unterminated string":        "package p\n\nfunc F() {\n\tG(\"unterminated)\n}\n",
		"unterminated comment":       "package p\n\n/* never closed\n",
		"unbalanced brace":           "package p\n\nfunc F() {\n\tG()\n",
		"unclosed paren":             "package p\n\nfunc F() {\n\tG(\n",
		"unclosed at a comment":      "package p\n\nfunc F() {\n\tG()\n\n// trailing\n",
		"extra brace":                "package p\n\nfunc F() {\n}\n}\n",
		"mismatched brackets":        "package p\n\nfunc F() {\n\tG(1]\n}\n",
		"unterminated raw string":    "package p\n\nvar s = `never closed\n",
		"two names in a block":       "package p\n\nfunc F() {\n\ta b\n}\n",
		"two names in a call":        "package p\n\nfunc F() {\n\tG(a b)\n}\n",
		"a line starting with .":     "package p\n\nfunc F() {\n\tx := T{}\n\t.M()\n}\n",
		"a line starting with ==":    "package p\n\nfunc F() bool {\n\treturn a\n\t== b\n}\n",
		"operand then return":        "package p\n\nfunc F() int {\n\tx :=\n\treturn 1\n}\n",
		"broken before unbalanced":   "package p\n\nfunc F() {\n\tG(a b)\n\tif x {\n}\n",
		"a call without a comma":     "package p\n\nfunc F() {\n\tG(a,\n\t\tb\n\t)\n}\n",
		"params without a comma":     "package p\n\nfunc F(\n\ta int\n) {\n}\n",
		"two calls on a line":        "package p\n\nfunc F() {\n\tG(a)\n\tG(b)\tG(c)\n}\n",
		"a call and a keyword":       "package p\n\nfunc F() {\n\tG(a)\n\tG(b) return\n}\n",
		"a block and a statement":    "package p\n\nfunc F() {\n\tif x {\n\t\tG()\n\t}\treturn\n}\n",
		"two operands in a stmt":     "package p\n\nfunc F() {\n\tx, y = y x\n}\n",
		"two operands in args":       "package p\n\nfunc F() {\n\tG(a.b c)\n}\n",
		"a call in args, then one":   "package p\n\nfunc F() {\n\tG(H(a) b)\n}\n",
		"a literal and an operand":   "package p\n\nvar x = []int{1}\n\nfunc F() {\n\t_ = T{} y\n}\n",
		"three names in params":      "package p\n\nfunc F(a int b int) {\n}\n",
		"a qualified type and name":  "package p\n\nfunc F() (http.Handler error) {\n}\n",
		"two fields on a line":       "package p\n\ntype T struct {\n\ta int\tb string\n}\n",
		"a const without =":          "package p\n\nconst (\n\tA = 1\n\tB 2\n)\n",
		"a missing argument":         "package p\n\nfunc F() {\n\tG(, a)\n}\n",
		"a missing key":              "package p\n\nvar x = T{a: 1, : 2}\n",
		"a dot after an operator":    "package p\n\nfunc F() {\n\tx = .a\n}\n",
		"a name and a func":          "package p\n\nfunc F() {\n\tdefr func() {}()\n}\n",
		"a literal's line, no comma": "package p\n\nvar x = []int{\n\t1,\n\t2\n}\n",
		"an if without its brace":    "package p\n\nfunc F() {\n\tif x\n\t\tG()\n\t}\n}\n",
		"a header's literal":         "package p\n\nfunc F() {\n\tfor _, x := range []*T{\n\t\ta\n\t} {\n\t}\n}\n",
	} {
		want := goParserLine(t, name, src)
		got := tokenParseError(src)
		m := errorLine.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("%s: go/parser's first error is at line %d; the token reader says %q", name, want, got)
			continue
		}
		if line, _ := strconv.Atoi(m[1]); line != want {
			t.Errorf("%s: the token reader's error %q, go/parser's first is at line %d", name, got, want)
		}
	}
}

// goParserLine is the line of go/parser's first error in src; it fails t
// when go/parser reads src.
func goParserLine(t *testing.T, name, src string) int {
	t.Helper()
	_, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	list, ok := err.(scanner.ErrorList)
	if !ok || len(list) == 0 {
		t.Fatalf("%s: go/parser reads it (%v): not a broken input", name, err)
	}
	return list[0].Pos.Line
}

// Files go/parser reads get no parse error, however their tokens look.
func TestGoParseErrorsOnlyWhereGoParserHasOne(t *testing.T) {
	for name, src := range map[string]string{
		"fields and methods":     "package p\n\ntype T struct {\n\ta, b int\n\tc string `json:\"c\"`\n}\n\ntype I interface {\n\tM(a int) (n int, err error)\n\tN()\n}\n",
		"groups":                 "package p\n\nimport (\n\t. \"fmt\"\n\tx \"os\"\n)\n\nvar (\n\ta int\n\tb, c = 1, 2\n)\n\nconst (\n\tk int = iota\n\tl\n)\n",
		"numbers":                "package p\n\nvar a, b, c, d, e, f = 0x7E+1, 1e+3, 0x1p-2, 08i, 0o17, 1_000\n",
		"functions":              "package p\n\nfunc (t *T) M(a, b int) (c int) { return a }\n\nfunc G[K comparable, V any](m map[K]V) (out []V) {\n\tf := func(a int) int { return a }\n\t_ = f\n\treturn nil\n}\n\nfunc H() struct{ a int } { return struct{ a int }{1} }\n",
		"statements":             "package p\n\nfunc F(x any) {\nL:\n\tfor i := range 3 {\n\t\tif i > 1 {\n\t\t\tbreak L\n\t\t} else if i == 0 {\n\t\t\tcontinue\n\t\t}\n\t}\n\tswitch v := x.(type) {\n\tcase int, string:\n\t\t_ = v\n\t}\n\tvar a, b int\n\t_, _ = a, b\n\tG(a, -b, !true, <-ch, &T{a: 1}, []int{1, 2,}, 'x', \"\\n\")\n}\n",
		"lists over lines":       "package p\n\nfunc F(\n\ta int,\n) {\n\tG(a,\n\t\tfunc() {\n\t\t\tH()\n\t\t},\n\t)\n\t_ = x[\n\t\t1]\n}\n",
		"a method chain":         "package p\n\nfunc F() {\n\tt := T{}.\n\t\tM().\n\t\tN()\n\t_ = t\n}\n",
		"a non-ASCII name":       "package p\n\nvar café = 1\n",
		"lists":                  "package p\n\nimport (\n\t. \"os\"\n)\n\nvar (\n\ta, b int = 1, 2\n\tc    = x.y.z\n)\n\ntype T struct {\n\ta, b int `json:\"a\"`\n\tio.Reader\n\tf func(a, b int, c ...string) (n int, err error)\n}\n\nfunc F(a pkg.T, b ...int) (c map[string]int) { return T{a: 1, b: x.y}.c }\n",
		"headers":                "package p\n\nfunc F() {\n\tfor _, x := range []int{1, 2} {\n\t\t_ = x\n\t}\n\tfor cur := []*pkg.T{s}; len(cur) > 0; cur = nil {\n\t}\n\tif a*b < c[len(c)-1]*d {\n\t}\n\tfor i, fn := range []func() func(){f, g} {\n\t\t_, _ = i, fn\n\t}\n\tfor k := range map[string]int{\"a\": 1} {\n\t\t_ = k\n\t}\n\tfor _, s := range []struct{ a int }{{1}, {2}} {\n\t\t_ = s\n\t}\n\tf := func() func() int {\n\t\treturn nil\n\t}\n\t_ = f\n\tfor {\n\t\tselect {\n\t\t}\n\t}\n}\n",
		"declarations in blocks": "package p\n\nfunc F(x any) {\n\tswitch x.(type) {\n\tcase int:\n\t\tvar a, b uint32\n\t\t_, _ = a, b\n\t}\n\tconst c int = 1\n\ttype T struct{ a int }\n\tvar f = func() { var g int; _ = g }\n\tif f != nil {\n\t} else {\n\t}\n\t_ = (T{}).a\n}\n",
	} {
		if _, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution); err != nil {
			t.Fatalf("%s: go/parser rejects it: %v", name, err)
		}
		if got := tokenParseError(src); got != "" {
			t.Errorf("%s: a parse error %q in a file go/parser reads", name, got)
		}
	}
}

// tokenParseError is the parse error the token reader gives src.
func tokenParseError(src string) string {
	f := &schemas.IndexedFile{}
	var lx goLexer
	extractGo(f, src, "example.com/p", &lx)
	return f.ParseError
}

// errorLine finds the line a parse error names.
var errorLine = regexp.MustCompile(` at line (\d+)$`)

// BenchmarkGoParseErrorParity measures how close the token reader's
// syntax check comes to go/parser on Go's own sources: no parse error on a
// file go/parser reads (an error of the benchmark), and, of 1,999 copies
// broken by deleting 1 to 8 random bytes that go/parser rejects, the share
// it reports (reported-%) and reports on go/parser's first error's line
// (at-line-%). Run it with -benchtime=1x.
func BenchmarkGoParseErrorParity(b *testing.B) {
	var files []string
	err := filepath.WalkDir(filepath.Join(runtime.GOROOT(), "src"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.Contains(p, "testdata") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		b.Fatalf("Go's sources: %d files, %v", len(files), err)
	}
	for b.Loop() {
		for _, p := range files {
			src, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), p, src, parser.SkipObjectResolution); err != nil {
				continue
			}
			if got := tokenParseError(string(src)); got != "" {
				b.Errorf("%s: go/parser reads it, the token reader says %q", p, got)
			}
		}
		rng := rand.New(rand.NewPCG(7, 11))
		broken, reported, atLine := 0, 0, 0
		for broken < 1999 {
			src, err := os.ReadFile(files[rng.IntN(len(files))])
			if err != nil {
				b.Fatal(err)
			}
			for range 1 + rng.IntN(8) {
				i := rng.IntN(len(src))
				src = append(src[:i], src[i+1:]...)
			}
			_, err = parser.ParseFile(token.NewFileSet(), "broken.go", src, parser.SkipObjectResolution)
			list, ok := err.(scanner.ErrorList)
			if !ok || len(list) == 0 {
				continue
			}
			broken++
			got := tokenParseError(string(src))
			if got != "" {
				reported++
			}
			if m := errorLine.FindStringSubmatch(got); m != nil && m[1] == strconv.Itoa(list[0].Pos.Line) {
				atLine++
			}
		}
		b.ReportMetric(100*float64(reported)/float64(broken), "reported-%")
		b.ReportMetric(100*float64(atLine)/float64(broken), "at-line-%")
	}
}
