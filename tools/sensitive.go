package tools

import (
	"fmt"
	"path"
	"strings"
)

// sensitivePatterns are the names of files whose content is a secret as a
// whole (seed L12527-12543): keys, certificates with private parts,
// credential stores and .env files. Each is matched case-insensitively with
// path.Match against the file's base name, or against its last two
// elements when the pattern has a slash.
var sensitivePatterns = []string{
	".env", ".env.*", "*.env",
	"*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
	"*credentials*", "*secrets*", "*secret.*",
	"id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
	".ssh/*", ".aws/*", ".gnupg/*",
	".npmrc", ".pypirc", ".netrc", ".htpasswd", ".pgpass", ".git-credentials",
}

// sensitiveRule is one of sensitivePatterns taken apart once: a pattern is
// the literal parts between its stars (the patterns have no other
// metacharacter), and, for a pattern with a slash, the parent directory's
// name. Matching them with path.Match one by one was a tenth of the code
// index's work per file.
type sensitiveRule struct {
	pat   string
	dir   string   // the parent directory's name, when the pattern has a slash
	parts []string // the base name's pattern split at its stars
}

var sensitiveRules = func() []sensitiveRule {
	rules := make([]sensitiveRule, 0, len(sensitivePatterns))
	for _, pat := range sensitivePatterns {
		if strings.ContainsAny(pat, "?[\\") {
			panic("tools: sensitive pattern " + pat + " uses a metacharacter other than *")
		}
		r := sensitiveRule{pat: pat}
		base := pat
		if d, b, ok := strings.Cut(pat, "/"); ok {
			r.dir, base = d, b
		}
		r.parts = strings.Split(base, "*")
		rules = append(rules, r)
	}
	return rules
}()

// matches reports whether name matches the parts (star-separated literals)
// as path.Match would: a star matches any run of bytes without a slash, and
// name has none.
func matches(parts []string, name string) bool {
	if len(parts) == 1 {
		return name == parts[0]
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, mid)
		if i < 0 {
			return false
		}
		rest = rest[i+len(mid):]
	}
	return true
}

// SensitiveFile reports whether the file at p (slash-separated, relative or
// absolute) is one whose content must never be indexed or shown: only its
// existence may be. The rule that matched is returned for the record.
func SensitiveFile(p string) (rule string, ok bool) {
	p = strings.ToLower(p)
	base := path.Base(p)
	dir := path.Base(path.Dir(p))
	for _, r := range sensitiveRules {
		if r.dir != "" && (r.dir != dir || base == "." || base == "..") {
			continue // (a path ending in . or .. names a directory)
		}
		if matches(r.parts, base) {
			return r.pat, true
		}
	}
	return "", false
}

// SensitiveStub is what the file tools show instead of a sensitive file's
// content (seed L12553-12709): its name, that it is not shown, and its type.
func SensitiveStub(p, rule string) string {
	ext := path.Ext(p)
	if ext == "" {
		ext = "(none)"
	}
	return fmt.Sprintf("# %s\n(contents not shown for security: the file matches %q, a kind that holds secrets)\n\nFile type: %s\n", path.Base(p), rule, ext)
}
