package librarian

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// langs maps file extensions to the language names the index records.
var langs = map[string]string{
	".go": "go", ".py": "python", ".js": "javascript", ".mjs": "javascript", ".jsx": "javascript",
	".ts": "typescript", ".tsx": "typescript", ".rs": "rust", ".java": "java", ".kt": "kotlin",
	".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
	".rb": "ruby", ".php": "php", ".swift": "swift", ".scala": "scala", ".sh": "shell", ".bash": "shell",
	".sql": "sql", ".proto": "proto", ".lua": "lua", ".zig": "zig",
	".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "text",
	".yaml": "data", ".yml": "data", ".json": "data", ".toml": "data", ".xml": "data", ".html": "data", ".css": "data",
}

// langOf names the language of the file at p.
func langOf(p string) string {
	if l, ok := langs[strings.ToLower(path.Ext(p))]; ok {
		return l
	}
	switch path.Base(p) {
	case "Makefile", "Dockerfile", "go.mod", "go.sum":
		return "build"
	}
	return "text"
}

// isTest reports whether the file at p holds tests, by the naming
// conventions of the common languages.
func isTest(p string) bool {
	base := path.Base(p)
	stem := strings.TrimSuffix(base, path.Ext(base))
	switch {
	case strings.HasSuffix(stem, "_test"), strings.HasPrefix(stem, "test_"),
		strings.HasSuffix(stem, ".test"), strings.HasSuffix(stem, ".spec"), strings.HasSuffix(stem, "_spec"),
		strings.HasSuffix(stem, "Test") && langOf(p) == "java":
		return true
	}
	return strings.HasPrefix(p, "test/") || strings.HasPrefix(p, "tests/") ||
		strings.Contains(p, "/test/") || strings.Contains(p, "/tests/") || strings.Contains(p, "/__tests__/")
}

// contentHash is the hash the index keys a file's content by.
func contentHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

var debtMarkers = [][]byte{[]byte("TODO"), []byte("FIXME"), []byte("HACK"), []byte("XXX")}

func countDebt(b []byte) int {
	n := 0
	for _, m := range debtMarkers {
		n += bytes.Count(b, m)
	}
	return n
}

func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// extractGo adds the declarations, calls and imports of a Go file to f. A
// file that does not parse keeps what the parser recovered and says why.
func extractGo(f *schemas.IndexedFile, src []byte, pkgPath string) {
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
				f.Calls = append(f.Calls, callsIn(d.Body, from, pkgPath, sym.Recv, recvVar, imports, line)...)
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

// callsIn lists the calls in body: to a local function (qualified by the
// package), to a function of an imported package (by its import path), to a
// method of the receiver (package.Recv.Method), or to a method of a value
// whose type is not resolved ("?.Method").
func callsIn(body *ast.BlockStmt, from, pkg, recv, recvVar string, imports map[string]string, line func(token.Pos) int) []schemas.Call {
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

func qualify(pkg, name string) string {
	if pkg == "" {
		return name
	}
	return pkg + "." + name
}

var builtins = map[string]bool{
	"append": true, "cap": true, "clear": true, "close": true, "complex": true, "copy": true, "delete": true,
	"imag": true, "len": true, "make": true, "max": true, "min": true, "new": true, "panic": true,
	"print": true, "println": true, "real": true, "recover": true,
	"string": true, "int": true, "int64": true, "int32": true, "uint64": true, "uint32": true, "byte": true,
	"float64": true, "rune": true, "uint": true, "uint8": true, "error": true, "any": true, "bool": true,
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

// importName guesses the package name of an import path with no explicit
// name: its last element without a major version suffix (/v2), a gopkg.in
// version (.v3) or a go- prefix.
func importName(p string) string {
	parts := strings.Split(p, "/")
	name := parts[len(parts)-1]
	if len(parts) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = parts[len(parts)-2]
	}
	name, _, _ = strings.Cut(name, ".")
	name = strings.TrimPrefix(name, "go-")
	return strings.ReplaceAll(name, "-", "_")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:199] + "…"
	}
	return s
}
