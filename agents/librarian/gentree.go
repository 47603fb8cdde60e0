package librarian

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// GeneratedTree describes a tree GenerateTree wrote: what a correct index
// must answer about it.
type GeneratedTree struct {
	Root  string
	Files []string
	// Defines maps each generated function ("Handler17") to its file.
	Defines map[string]string
	// Callers maps each function to the files that call it.
	Callers map[string][]string
	// GoFiles counts the Go files among Files; Bytes is their total size.
	GoFiles int
	Bytes   int64
}

// filesPerPackage is how many files each generated package holds.
const filesPerPackage = 50

// vocabulary gives generated text words to rank on.
var vocabulary = strings.Fields(`account adapter allocate archive audit backoff balance batch buffer cache
channel checkpoint client cluster codec commit compact config consumer context cursor decode deadline
delete deliver digest dispatch document durable encode endpoint envelope event export fetch filter flush
fork gateway graph handler hash header history index ingest inventory journal kernel ledger lease limit
listener loader lock manifest merge message metric migrate monitor mutex notify offset order packet
parser partition payload pipeline policy pool primary probe producer profile projection queue quota
record redact refund region registry replica request resolve retry route router sample schema scope
segment sequence session shard signal snapshot socket source stream subject supervisor table tenant
ticket token topic trace transfer tree upload vector verify version watcher window worker`)

// Word is a word of the generated trees' vocabulary, at random.
func Word(rng *rand.Rand) string { return vocabulary[rng.IntN(len(vocabulary))] }

// GenerateTree writes n files under dir (most of them Go, in packages of
// filesPerPackage files under one module, the others Markdown, Python and
// text), deterministically from seed, and returns what they define and who
// calls what. File i defines Handler<i>, Type<i> and its method Run; each
// handler calls a handler of another file.
func GenerateTree(dir string, n int, seed uint64) (*GeneratedTree, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &GeneratedTree{Root: dir, Defines: map[string]string{}, Callers: map[string][]string{}}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/gen\n\ngo 1.22\n"), 0o644); err != nil {
		return nil, err
	}
	g.Files = append(g.Files, "go.mod")
	words := func(k int) string {
		w := make([]string, k)
		for i := range w {
			w[i] = Word(rng)
		}
		return strings.Join(w, " ")
	}
	for i := range n {
		pkg := fmt.Sprintf("pkg%03d", i/filesPerPackage)
		var rel, body string
		switch i % 10 {
		case 7:
			rel = fmt.Sprintf("docs/%s/note%d.md", pkg, i)
			body = fmt.Sprintf("# Note %d\n\n%s\n\n## Details\n\n%s\n", i, words(40), words(60))
		case 8:
			rel = fmt.Sprintf("scripts/%s/tool%d.py", pkg, i)
			body = fmt.Sprintf("def tool_%d(value):\n    # %s\n    return value + %d\n\n\ndef helper_%d():\n    \"\"\"%s\"\"\"\n    return tool_%d(1)\n", i, words(12), i, i, words(20), i)
		case 9:
			rel = fmt.Sprintf("notes/%s/log%d.txt", pkg, i)
			body = words(120) + "\n"
		default:
			rel, body = goFile(g, i, n, pkg, rng, words)
			g.GoFiles++
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			return nil, err
		}
		g.Files = append(g.Files, rel)
		g.Bytes += int64(len(body))
	}
	return g, nil
}

// goFile is the Go source of generated file i, recording what it defines
// and calls in g.
func goFile(g *GeneratedTree, i, n int, pkg string, rng *rand.Rand, words func(int) string) (string, string) {
	rel := fmt.Sprintf("%s/file%d.go", pkg, i)
	// The callee: a Go file of another package when there is one.
	j := rng.IntN(n)
	for j%10 >= 7 || j == i {
		j = (j + 1) % n
	}
	calleePkg := fmt.Sprintf("pkg%03d", j/filesPerPackage)
	var b strings.Builder
	fmt.Fprintf(&b, "// Package %s is generated.\npackage %s\n\nimport (\n\t\"fmt\"\n", pkg, pkg)
	call := fmt.Sprintf("Handler%d(x)", j)
	if calleePkg != pkg {
		fmt.Fprintf(&b, "\n\t\"example.com/gen/%s\"\n", calleePkg)
		call = calleePkg + "." + call
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(&b, "// Type%d holds %s.\ntype Type%d struct {\n\tName  string\n\tCount int\n}\n\n", i, words(6), i)
	fmt.Fprintf(&b, "// Handler%d handles %s.\nfunc Handler%d(x int) int {\n\tif x > %d {\n\t\treturn x\n\t}\n\treturn %s + %d\n}\n\n", i, words(8), i, 1000+i, call, i)
	if i%5 == 0 {
		b.WriteString("// TODO: " + words(5) + "\n")
	}
	fmt.Fprintf(&b, "// Run reports %s.\nfunc (t *Type%d) Run() string {\n\tt.Count++\n\treturn fmt.Sprintf(\"%%s %%d %s\", t.Name, Handler%d(t.Count))\n}\n\n", words(8), i, words(4), i)
	fmt.Fprintf(&b, "var table%d = []string{\n", i)
	for range 8 {
		fmt.Fprintf(&b, "\t%q,\n", words(5))
	}
	b.WriteString("}\n")
	name := fmt.Sprintf("Handler%d", i)
	g.Defines[name] = rel
	callee := fmt.Sprintf("Handler%d", j)
	g.Callers[callee] = append(g.Callers[callee], rel)
	g.Callers[name] = append(g.Callers[name], rel) // Run calls it
	return rel, b.String()
}
