package librarian

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sylk/sylk/schemas"
)

// The token reader extracts from every Go file of this repository exactly
// what go/parser's syntax tree gives: symbols (names, kinds, receivers,
// lines, signatures, doc comments), imports and calls (the same callees
// from the same callers on the same lines; their order may differ, as the
// tree lists an outer call before the calls in its operand).
func TestGoTokensAgreeWithTheSyntaxTree(t *testing.T) {
	var lx goLexer
	files := 0
	repoGoFiles(t, func(p, src string) {
		files++
		compareExtractions(t, p, src, &lx)
	})
	if files < 100 {
		t.Fatalf("only %d Go files compared", files)
	}
}

// Constructs the repository may not hold.
func TestGoTokensAgreeOnEdgeCases(t *testing.T) {
	var lx goLexer
	for name, src := range map[string]string{
		"generics":    "package p\n\ntype List[T any] struct{ items []T }\n\ntype Arr [4]struct{}\n\n// Map maps.\nfunc Map[K comparable, V any](m map[K]V, f func(V) V) (out map[K]V) {\n\tout = make(map[K]V)\n\tfor k, v := range m {\n\t\tout[k] = f(v)\n\t}\n\treturn Identity[map[K]V](out)\n}\n\nfunc (l *List[T]) Push(v T) { l.items = append(l.items, v); l.Len() }\n",
		"conversions": "package p\n\nimport (\n\tstr \"strings\"\n\t. \"fmt\"\n\t_ \"embed\"\n)\n\nfunc F(x any) {\n\t_ = []byte(\"a\")\n\t_ = (*T)(nil)\n\t_ = (G)(x)\n\t_ = map[string]T(nil)\n\t_ = x.(interface{ Close() error })\n\tswitch x.(type) {\n\t}\n\tfunc() { Println(str.ToUpper(\"a\")) }()\n\tH(1)(2)\n\tt := T{}.\n\t\tM().\n\t\tN()\n\t_ = t\n\tvar f func(int) (int, error)\n\t_ = f\n}\n",
		"comments":    "package p\n\nvar a = 1 // about a\nfunc A() {}\n\n// B does.\n/* more */\nfunc B() {}\n\n// far\n\nfunc C() {}\n\nconst (\n\t// X is.\n\tX, Y = 1, 2\n\t_ = 3\n\tZ\n)\n\n/* doc\n */ func D() {}\n",
		"broken":      "package p\n\nfunc F() {\n\tG(\"unterminated)\n}\n",
		"raw":         "package p\n\nvar s = `a\nb`\n\n// T is.\ntype T = struct {\n\tA int `json:\"a\"`\n}\n",
	} {
		compareExtractions(t, name, src, &lx)
	}
}

// compareExtractions fails t where the token reader's extraction of src
// differs from the syntax tree's.
func compareExtractions(t *testing.T, name, src string, lx *goLexer) {
	t.Helper()
	want := &schemas.IndexedFile{Path: name}
	astExtract(want, []byte(src), "example.com/p")
	got := &schemas.IndexedFile{Path: name}
	extractGo(got, src, "example.com/p", lx)
	if want.ParseError != "" {
		if got.ParseError == "" {
			t.Logf("%s: go/parser says %q; the tokens read in full", name, want.ParseError)
		}
		return // a broken file: what each recovers differs
	}
	if got.ParseError != "" {
		t.Errorf("%s: a parse error %q in a file go/parser reads", name, got.ParseError)
	}
	if !slices.Equal(got.Imports, want.Imports) {
		t.Errorf("%s: imports %q, want %q", name, got.Imports, want.Imports)
	}
	if !slices.Equal(got.Symbols, want.Symbols) {
		for i := range max(len(got.Symbols), len(want.Symbols)) {
			var g, w schemas.Symbol
			if i < len(got.Symbols) {
				g = got.Symbols[i]
			}
			if i < len(want.Symbols) {
				w = want.Symbols[i]
			}
			if g != w {
				t.Errorf("%s: symbol %d\n got %+v\nwant %+v", name, i, g, w)
				break
			}
		}
	}
	order := func(a, b schemas.Call) int {
		return strings.Compare(a.From+"\x00"+a.To+"\x00"+string(rune(a.Line)), b.From+"\x00"+b.To+"\x00"+string(rune(b.Line)))
	}
	slices.SortFunc(got.Calls, order)
	slices.SortFunc(want.Calls, order)
	if !slices.Equal(got.Calls, want.Calls) {
		for _, c := range want.Calls {
			if !slices.Contains(got.Calls, c) {
				t.Errorf("%s: call %+v missing", name, c)
			}
		}
		for _, c := range got.Calls {
			if !slices.Contains(want.Calls, c) {
				t.Errorf("%s: call %+v is not one", name, c)
			}
		}
	}
}

// astExtract is the extraction the token reader replaced, from go/parser's
// syntax tree: the reference it must agree with.
func astExtract(f *schemas.IndexedFile, src []byte, pkgPath string) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f.Path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		f.ParseError = firstLine(err.Error())
	}
	if file == nil {
		return
	}
	f.Package = pkgPath
	imports := map[string]string{} // local name -> import path
	for _, im := range file.Imports {
		p := strings.Trim(im.Path.Value, "\"`")
		f.Imports = append(f.Imports, p)
		name := importName(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	text := func(a, b token.Pos) string {
		s, e := fset.Position(a).Offset, fset.Position(b).Offset
		if s < 0 || e > len(src) || s > e {
			return ""
		}
		return strings.Join(strings.Fields(string(src[s:e])), " ")
	}
	for _, d := range file.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			sym := schemas.Symbol{Name: d.Name.Name, Kind: "func", Line: line(d.Pos()), EndLine: line(d.End()), Doc: d.Doc != nil}
			// The type's position is the func keyword: the text runs over
			// the receiver and the name to the results.
			sym.Signature = text(d.Type.Pos(), d.Type.End())
			recvVar := ""
			if d.Recv != nil && len(d.Recv.List) > 0 {
				sym.Kind, sym.Recv = "method", recvType(d.Recv.List[0].Type)
				if len(d.Recv.List[0].Names) > 0 {
					recvVar = d.Recv.List[0].Names[0].Name
				}
			}
			f.Symbols = append(f.Symbols, sym)
			if d.Body != nil {
				from := sym.Name
				if sym.Recv != "" {
					from = sym.Recv + "." + sym.Name
				}
				f.Calls = append(f.Calls, astCalls(d.Body, from, pkgPath, sym.Recv, recvVar, imports, line)...)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					kind := "type"
					switch s.Type.(type) {
					case *ast.StructType:
						kind = "struct"
					case *ast.InterfaceType:
						kind = "interface"
					}
					f.Symbols = append(f.Symbols, schemas.Symbol{Name: s.Name.Name, Kind: kind, Line: line(s.Pos()), EndLine: line(s.End()),
						Doc: d.Doc != nil || s.Doc != nil, Signature: "type " + firstLine(text(s.Pos(), s.End()))})
				case *ast.ValueSpec:
					kind := "var"
					if d.Tok == token.CONST {
						kind = "const"
					}
					for _, n := range s.Names {
						if n.Name == "_" {
							continue
						}
						f.Symbols = append(f.Symbols, schemas.Symbol{Name: n.Name, Kind: kind, Line: line(n.Pos()), Doc: d.Doc != nil || s.Doc != nil})
					}
				}
			}
		}
	}
}

// astCalls lists the calls in body: to a local function (qualified by the
// package), to a function of an imported package (by its import path), to a
// method of the receiver (package.Recv.Method), or to a method of a value
// whose type is not resolved ("?.Method").
func astCalls(body *ast.BlockStmt, from, pkg, recv, recvVar string, imports map[string]string, line func(token.Pos) int) []schemas.Call {
	var out []schemas.Call
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fun := call.Fun
		for {
			switch x := fun.(type) {
			case *ast.IndexExpr:
				fun = x.X
				continue
			case *ast.IndexListExpr:
				fun = x.X
				continue
			case *ast.ParenExpr:
				fun = x.X
				continue
			}
			break
		}
		to := ""
		switch x := fun.(type) {
		case *ast.Ident:
			if !builtins[x.Name] {
				to = qualify(pkg, x.Name)
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				switch {
				case imports[id.Name] != "":
					to = imports[id.Name] + "." + x.Sel.Name
				case recvVar != "" && id.Name == recvVar:
					to = qualify(pkg, recv) + "." + x.Sel.Name
				default:
					to = "?." + x.Sel.Name
				}
			} else {
				to = "?." + x.Sel.Name
			}
		}
		if to != "" {
			out = append(out, schemas.Call{From: from, To: to, Line: line(call.Pos())})
		}
		return true
	})
	return out
}

// recvType is the name of a receiver's type: T of T, *T, T[K] or *T[K].
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// collapseBlanks is strings.Join(strings.Fields(s), " "), whatever the
// blanks.
func TestCollapseBlanks(t *testing.T) {
	for _, s := range []string{
		"", " ", "func F()", "func F(a int) (b, c string)", " func F()", "func F() ", "func  F()",
		"func F(\n\ta int,\n)", "x\ty", "x\u00a0y", "x\u0085y", "über cool", "a\x01b", "a  ", "  a", "a b c d",
	} {
		if got, want := collapseBlanks(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Errorf("collapseBlanks(%q) = %q, want %q", s, got, want)
		}
	}
}

// The files one lexer extracted keep their symbols and calls, which are
// cut from the lexer's arenas, whatever it extracts next.
func TestExtractionsKeepTheirSymbols(t *testing.T) {
	var lx goLexer
	var paths, srcs []string
	var got []*schemas.IndexedFile
	repoGoFiles(t, func(p, src string) {
		f := &schemas.IndexedFile{Path: p}
		extractGo(f, src, "example.com/p", &lx)
		paths, srcs, got = append(paths, p), append(srcs, src), append(got, f)
	})
	for i, p := range paths {
		want := &schemas.IndexedFile{Path: p}
		extractGo(want, srcs[i], "example.com/p", new(goLexer))
		if !reflect.DeepEqual(got[i].Symbols, want.Symbols) || !reflect.DeepEqual(got[i].Calls, want.Calls) {
			t.Fatalf("%s: extracted before %d more files, its symbols and calls changed:\n%+v\n%+v\nwant\n%+v\n%+v",
				p, len(paths)-i-1, got[i].Symbols, got[i].Calls, want.Symbols, want.Calls)
		}
	}
}

// repoGoFiles calls fn with the path and source of every Go file of the
// repository.
func repoGoFiles(t *testing.T, fn func(path, src string)) {
	t.Helper()
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err == nil {
			fn(p, string(src))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
