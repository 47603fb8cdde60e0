package librarian

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
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

var debtMarkers = []string{"TODO", "FIXME", "HACK", "XXX"}

func countDebt(b string) int {
	n := 0
	for _, m := range debtMarkers {
		n += strings.Count(b, m)
	}
	return n
}

func countLines(b string) int {
	n := strings.Count(b, "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
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
