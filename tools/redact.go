package tools

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// A Redactor removes secrets from text. It knows three kinds:
//
//   - literal values: configured secrets and the values of the environment
//     variables scrubbed from children (see EnvOptions);
//   - shapes of well-known credentials: provider API keys (sk-..., ghp_...,
//     github_pat_..., glpat-..., xox?-..., AKIA..., AIza..., npm_..., hf_...,
//     Stripe keys), JSON web tokens, bearer tokens, PEM private key blocks,
//     passwords in URLs (scheme://user:password@host), and values assigned to
//     secret-looking keys (password=..., "api_key": "...", Authorization:
//     ..., AWS_SECRET_ACCESS_KEY=...);
//   - extra regular expressions from SecretOptions.Patterns.
//
// Every match is replaced by the replacement text ("[REDACTED]"). The search
// is anchored on literals found with the standard library's vectorised
// substring search, so redaction runs at hundreds of MB/s. A Redactor is
// immutable and safe for concurrent use.
type Redactor struct {
	values      []string
	extra       []*regexp.Regexp
	replacement string
}

// NewRedactor builds a Redactor from opts (zero fields take their defaults).
func NewRedactor(opts SecretOptions) (*Redactor, error) {
	opts.ensureDefaults()
	for _, v := range opts.Values {
		if len(v) < minConfiguredSecretLen {
			return nil, fmt.Errorf("%w: secrets.values: a value of %d bytes is shorter than %d", ErrInvalidOptions, len(v), minConfiguredSecretLen)
		}
	}
	r := &Redactor{replacement: opts.Replacement}
	for _, p := range opts.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: secrets.patterns %q: %w", ErrInvalidOptions, p, err)
		}
		r.extra = append(r.extra, re)
	}
	return r.withValues(opts.Values...), nil
}

// withValues returns a copy of r that also redacts vals. Values shorter than
// minConfiguredSecretLen are ignored.
func (r *Redactor) withValues(vals ...string) *Redactor {
	c := *r
	c.values = slices.Clone(r.values)
	for _, v := range vals {
		if len(v) >= minConfiguredSecretLen && !slices.Contains(c.values, v) {
			c.values = append(c.values, v)
		}
	}
	// Longest first, so a secret that contains another is cut whole.
	sort.Slice(c.values, func(i, j int) bool { return len(c.values[i]) > len(c.values[j]) })
	return &c
}

// Replacement returns the text secrets are replaced with.
func (r *Redactor) Replacement() string { return r.replacement }

// Redact returns s with every secret replaced. Text without secrets is
// returned unchanged (and not copied). Redacting twice gives the same text
// as redacting once.
func (r *Redactor) Redact(s string) string {
	if len(s) == 0 {
		return s
	}
	sp := r.find(s)
	if len(sp.s) == 0 {
		return s
	}
	return sp.apply(s, r.replacement)
}

// Finding is one secret found in text: the kind of secret and the text
// around it with the secret masked, never the secret itself.
type Finding struct {
	Pattern string
	Context string
}

// findingContext is how many bytes of text a Finding keeps on each side.
const findingContext = 20

// Find returns the secrets Redact would remove from s, in order, each as a
// Finding: for refusing text that must not be stored at all (a user prompt)
// rather than storing it redacted.
func (r *Redactor) Find(s string) []Finding {
	sp := r.find(s)
	sort.Slice(sp.s, func(i, j int) bool { return sp.s[i][0] < sp.s[j][0] })
	var out []Finding
	end := 0
	for i, x := range sp.s {
		a, b := x[0], x[1]
		if a < end {
			continue // inside a secret already found
		}
		// The context stops at the neighbouring secrets, so it shows none
		// of theirs.
		lo, hi := max(end, a-findingContext), min(len(s), b+findingContext)
		for _, y := range sp.s[i+1:] {
			if y[0] >= b {
				hi = min(hi, y[0])
				break
			}
		}
		end = b
		ctx := strings.ToValidUTF8(s[lo:a]+"[***]"+s[b:hi], "")
		out = append(out, Finding{Pattern: spanKinds[x[2]], Context: ctx})
	}
	return out
}

// find collects the spans of every secret in s.
func (r *Redactor) find(s string) spans {
	sp := spans{}
	sp.kind = kindValue
	for _, v := range r.values {
		for i := 0; ; {
			j := strings.Index(s[i:], v)
			if j < 0 {
				break
			}
			sp.add(i+j, i+j+len(v))
			i += j + len(v)
		}
	}
	sp.kind = kindToken
	scanAnchors(s, &sp)
	sp.kind = kindPrivateKey
	scanPrivateKeys(s, &sp)
	sp.kind = kindAssignment
	r.scanSeparators(s, &sp)
	sp.kind = kindPattern
	for _, re := range r.extra {
		for _, m := range re.FindAllStringIndex(s, -1) {
			if m[1] > m[0] {
				sp.add(m[0], m[1])
			}
		}
	}
	return sp
}

// The kinds of secret spans, as Find names them.
const (
	kindValue = iota
	kindToken
	kindPrivateKey
	kindAssignment
	kindPattern
)

var spanKinds = []string{
	kindValue:      "configured_secret",
	kindToken:      "credential_token",
	kindPrivateKey: "private_key",
	kindAssignment: "secret_assignment",
	kindPattern:    "configured_pattern",
}

// spans collects [start, end) ranges to replace, each with the kind of
// secret the scanner that found it looks for.
type spans struct {
	s    [][3]int
	kind int
}

func (sp *spans) add(a, b int) { sp.s = append(sp.s, [3]int{a, b, sp.kind}) }

func (sp *spans) apply(s, repl string) string {
	sort.Slice(sp.s, func(i, j int) bool { return sp.s[i][0] < sp.s[j][0] })
	var b strings.Builder
	b.Grow(len(s))
	pos := 0
	for i := 0; i < len(sp.s); {
		a, e := sp.s[i][0], sp.s[i][1]
		for i++; i < len(sp.s) && sp.s[i][0] <= e; i++ {
			e = max(e, sp.s[i][1])
		}
		b.WriteString(s[pos:a])
		b.WriteString(repl)
		// Keep the line count, so line numbers (grep, read_file) stay right.
		for n := strings.Count(s[a:e], "\n"); n > 0; n-- {
			b.WriteByte('\n')
		}
		pos = e
	}
	b.WriteString(s[pos:])
	return b.String()
}

// byteSet is a set of bytes.
type byteSet [256]bool

func makeSet(chars ...string) *byteSet {
	var t byteSet
	for _, cs := range chars {
		for i := 0; i < len(cs); i++ {
			t[cs[i]] = true
		}
	}
	return &t
}

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
)

var (
	setAlnum    = makeSet(lower, upper, digits)
	setWord     = makeSet(lower, upper, digits, "_")
	setToken    = makeSet(lower, upper, digits, "_-")
	setUpperNum = makeSet(upper, digits)
	setB64URL   = makeSet(lower, upper, digits, "_-")
	setBearer   = makeSet(lower, upper, digits, "-._~+/=")
	setB64      = makeSet(lower, upper, digits, "+/=")
	setKey      = makeSet(lower, upper, digits, "_.-")
	setScheme   = makeSet(lower, upper, digits, "+.-")
)

// prefixRule matches a credential that starts with a fixed prefix followed by
// a run of body characters.
type prefixRule struct {
	prefix string
	body   *byteSet
	// min is the shortest body; exact, when set, the only body length.
	min, exact int
}

var prefixRules = []prefixRule{
	{prefix: "sk-", body: setToken, min: 20}, // OpenAI (sk-proj-...), Anthropic (sk-ant-...)
	{prefix: "sk_live_", body: setAlnum, min: 16},
	{prefix: "sk_test_", body: setAlnum, min: 16},
	{prefix: "rk_live_", body: setAlnum, min: 16},
	{prefix: "rk_test_", body: setAlnum, min: 16},
	{prefix: "ghp_", body: setAlnum, min: 30},
	{prefix: "gho_", body: setAlnum, min: 30},
	{prefix: "ghu_", body: setAlnum, min: 30},
	{prefix: "ghs_", body: setAlnum, min: 30},
	{prefix: "ghr_", body: setAlnum, min: 30},
	{prefix: "github_pat_", body: setWord, min: 40},
	{prefix: "glpat-", body: setToken, min: 20},
	{prefix: "xoxb-", body: setToken, min: 10},
	{prefix: "xoxp-", body: setToken, min: 10},
	{prefix: "xoxa-", body: setToken, min: 10},
	{prefix: "xoxr-", body: setToken, min: 10},
	{prefix: "xoxs-", body: setToken, min: 10},
	{prefix: "xapp-", body: setToken, min: 10},
	{prefix: "AKIA", body: setUpperNum, exact: 16}, // AWS access key id
	{prefix: "ASIA", body: setUpperNum, exact: 16},
	{prefix: "AIza", body: setToken, min: 30}, // Google API key
	{prefix: "npm_", body: setAlnum, min: 30},
	{prefix: "hf_", body: setAlnum, min: 30},
}

// wordBefore reports whether the byte before i continues a word, in which
// case a prefix at i is inside another word ("task-..." is not "sk-...").
func wordBefore(s string, i int) bool { return i > 0 && setWord[s[i-1]] }

// prefixIndex maps a byte to the prefix rules whose prefix starts with it.
var prefixIndex = func() (idx [256][]int) {
	for i, r := range prefixRules {
		idx[r.prefix[0]] = append(idx[r.prefix[0]], i)
	}
	return idx
}()

// anchorPairs holds the first two bytes of every token-shaped secret: a
// prefix's, "eyJ" (JWT) and "bearer" in any case.
var anchorPairs = func() (t pairSet) {
	for _, r := range prefixRules {
		t.add(r.prefix[0], r.prefix[1])
	}
	t.add('e', 'y')
	for _, b := range "bB" {
		for _, e := range "eE" {
			t.add(byte(b), byte(e))
		}
	}
	return t
}()

// pairSet is a set of byte pairs c, d, as bit c<<8|d.
type pairSet [1 << 10]uint64

func (t *pairSet) add(c, d byte) { k := uint(c)<<8 | uint(d); t[k>>6] |= 1 << (k & 63) }

// has returns 1 if the pair c, d is in t, else 0.
func (t *pairSet) has(c, d byte) uint64 { k := uint(c)<<8 | uint(d); return t[k>>6] >> (k & 63) & 1 }

// wordEnd is 1 for the bytes after which a word can start (those of none),
// 0 for the others.
var wordEnd = func() (t [256]uint64) {
	for c := range t {
		if !setWord[c] {
			t[c] = 1
		}
	}
	return t
}()

// scanAnchors finds, in one pass over the word starts of s, the credentials
// with a fixed prefix, JSON web tokens and bearer tokens. A byte costs a
// branch that is rarely taken: only where a word starts with the first two
// bytes of one of them (every one is longer than two bytes).
func scanAnchors(s string, sp *spans) {
	start := uint64(1) // whether a word can start at s[i]
	for i := 0; i+1 < len(s); i++ {
		c := s[i]
		if start&anchorPairs.has(c, s[i+1]) != 0 {
			if end := matchAnchor(s, i, sp); end > 0 {
				// The scan goes on at end.
				i = end - 1
				start = wordEnd[s[i]]
				continue
			}
		}
		start = wordEnd[c]
	}
}

// matchAnchor adds the credential, JSON web token or bearer token that
// starts at the word start s[i] and returns where it ends, or -1.
func matchAnchor(s string, i int, sp *spans) int {
	c, rest := s[i], s[i:]
	for _, ri := range prefixIndex[c] {
		if r := &prefixRules[ri]; strings.HasPrefix(rest, r.prefix) {
			if e := matchPrefix(s, i, r); e > 0 {
				sp.add(i, e)
				return e
			}
		}
	}
	switch {
	case c == 'e' && strings.HasPrefix(rest, "eyJ"):
		if e := matchJWT(s, i); e > 0 {
			sp.add(i, e)
			return e
		}
	case c|0x20 == 'b' && len(rest) > 7 && hasPrefixFold([]byte(rest[:7]), []byte("bearer ")):
		start := i + 7
		for start < len(s) && s[start] == ' ' {
			start++
		}
		if e := runEnd(s, start, setBearer); e-start >= 8 && !isPlaceholder(s[start:e]) {
			sp.add(start, e)
			return e
		}
	}
	return -1
}

// matchPrefix returns the end of the credential r matches at s[start:], or -1.
func matchPrefix(s string, start int, r *prefixRule) int {
	body := start + len(r.prefix)
	end := body
	for end < len(s) && r.body[s[end]] && end-body < 512 {
		end++
	}
	n := end - body
	if r.exact > 0 {
		if n != r.exact {
			return -1
		}
		return end
	}
	// Random bodies of this length almost always hold a digit; a shorter
	// all-letter run is more likely an identifier.
	if n < r.min || (n < 32 && !hasDigit(s[body:end])) {
		return -1
	}
	return end
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// matchJWT returns the end of the JSON web token at s[start:] (base64url
// parts separated by dots, the first two starting with "eyJ"), or -1.
func matchJWT(s string, start int) int {
	p1 := runEnd(s, start, setB64URL)
	if p1-start < 8 || p1 >= len(s) || s[p1] != '.' || !strings.HasPrefix(s[p1+1:], "eyJ") {
		return -1
	}
	p2 := runEnd(s, p1+1, setB64URL)
	if p2-p1-1 < 8 {
		return -1
	}
	if p2 < len(s) && s[p2] == '.' {
		return runEnd(s, p2+1, setB64URL)
	}
	return p2
}

// runEnd returns the end of the run of set bytes starting at i (at most 16 KiB).
func runEnd(s string, i int, set *byteSet) int {
	end := i
	for end < len(s) && set[s[end]] && end-i < 16<<10 {
		end++
	}
	return end
}

// scanPrivateKeys redacts PEM private key blocks. Truncated output may have
// lost either end of a block, so the body is found from whichever marker is
// present: the base64 lines after a BEGIN line or before an END line. A block
// kept on one line (escaped newlines in JSON) is cut from BEGIN to the end of
// the END marker or of the line.
func scanPrivateKeys(s string, sp *spans) {
	for i := 0; ; {
		j := strings.Index(s[i:], "PRIVATE KEY")
		if j < 0 {
			return
		}
		at := i + j
		ls, le := lineBounds(s, at)
		line := s[ls:le]
		i = max(le, at+1)
		if b := strings.Index(line, "-----BEGIN"); b >= 0 {
			begin := ls + b
			if e := strings.Index(s[begin:le], "-----END"); e >= 0 {
				sp.add(begin, markerEnd(s, begin+e, le))
				continue
			}
			if tail := s[begin:le]; len(tail) > len("-----BEGIN PRIVATE KEY-----")+16 {
				sp.add(begin, le) // escaped body on the same line
				continue
			}
			end, body := le, 0
			for end < len(s) {
				ns, ne := lineBounds(s, end+1)
				if ns >= len(s) {
					break
				}
				next := s[ns:ne]
				if e := strings.Index(next, "-----END"); e >= 0 {
					end, body = markerEnd(s, ns+e, ne), body+1
					break
				}
				if !pemBodyLine(next) {
					break
				}
				end, body = ne, body+1
			}
			if body > 0 {
				sp.add(begin, end)
				i = end
			}
			continue
		}
		if e := strings.Index(line, "-----END"); e >= 0 {
			start, body := ls, 0
			for start > 0 {
				ps, pe := lineBounds(s, start-1)
				prev := s[ps:pe]
				if b := strings.Index(prev, "-----BEGIN"); b >= 0 {
					start, body = ps+b, body+1
					break
				}
				if !pemBodyLine(prev) {
					break
				}
				start, body = ps, body+1
			}
			if body > 0 {
				sp.add(start, markerEnd(s, ls+e, le))
			}
		}
	}
}

// markerEnd returns the end of the "-----END ...-----" marker at s[at:], or
// lineEnd when it is not closed on the line.
func markerEnd(s string, at, lineEnd int) int {
	rest := s[at+len("-----END") : lineEnd]
	if k := strings.Index(rest, "-----"); k >= 0 {
		return at + len("-----END") + k + len("-----")
	}
	return lineEnd
}

// lineBounds returns the start and end (excluding the newline) of the line
// holding s[i].
func lineBounds(s string, i int) (int, int) {
	if i >= len(s) {
		return len(s), len(s)
	}
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return start, len(s)
	}
	return start, i + end
}

// pemBodyLine reports whether line can be inside a PEM block: blank, a
// "Header-Name: value" line, or base64, possibly behind a prefix that a tool
// adds ("file:12: ", "+", a tab), as grep -n or a diff would show it.
func pemBodyLine(line string) bool {
	line = strings.TrimSpace(line)
	if line == "" {
		return true
	}
	if name, _, ok := strings.Cut(line, ": "); ok && name != "" && strings.Trim(name, lower+upper+"-") == "" {
		return true
	}
	last := line
	if i := strings.LastIndexAny(line, " \t:"); i >= 0 {
		last = line[i+1:]
		if len(last) < 16 {
			return false
		}
	}
	for i := 0; i < len(last); i++ {
		if !setB64[last[i]] {
			return false
		}
	}
	return true
}

// keyClass classifies the name of a key in a key/value pair.
type keyClass int

const (
	keyPlain    keyClass = iota
	keyPassword          // password-like: short values are secrets too
	keyToken             // token, secret, api key, credential
	keyAuth              // Authorization header: "<scheme> <credentials>"
)

// classifyKey classifies a key name (compared case-insensitively).
func classifyKey(key string) keyClass {
	if len(key) > 64 || len(key) < 3 {
		return keyPlain
	}
	var buf [64]byte
	k := buf[:len(key)]
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
	}
	ks := string(k)
	if !strings.Contains(ks, "pass") && !strings.Contains(ks, "pwd") && !strings.Contains(ks, "secret") &&
		!strings.Contains(ks, "token") && !strings.Contains(ks, "key") && !strings.Contains(ks, "auth") &&
		!strings.Contains(ks, "credential") {
		return keyPlain
	}
	switch {
	case ks == "authorization" || ks == "proxy-authorization" || strings.HasSuffix(ks, "-authorization"):
		return keyAuth
	case strings.Contains(ks, "passw") || strings.Contains(ks, "passphrase") || ks == "pwd" ||
		strings.HasSuffix(ks, "_pwd") || strings.HasSuffix(ks, "_pass") || ks == "pass":
		return keyPassword
	case strings.Contains(ks, "secret") || strings.Contains(ks, "token") || strings.Contains(ks, "credential") ||
		strings.Contains(ks, "api_key") || strings.Contains(ks, "apikey") || strings.Contains(ks, "api-key") ||
		strings.Contains(ks, "access_key") || strings.Contains(ks, "private_key") || strings.Contains(ks, "auth") ||
		strings.HasSuffix(ks, "_key") || strings.HasSuffix(ks, "-key"):
		return keyToken
	}
	return keyPlain
}

// scanSeparators finds every ':' and '=' and checks what surrounds it: a URL
// with a password ("scheme://user:pass@"), or a key/value pair whose key
// looks like a secret.
func (r *Redactor) scanSeparators(s string, sp *spans) {
	for _, sep := range []byte{':', '='} {
		for i := 0; ; {
			j := strings.IndexByte(s[i:], sep)
			if j < 0 {
				break
			}
			at := i + j
			i = at + 1
			if sep == ':' && strings.HasPrefix(s[at:], "://") {
				i = scanURL(s, at, sp)
				continue
			}
			r.keyValue(s, at, sp)
		}
	}
}

// scanURL redacts the password of "scheme://user:password@host" where s[at:]
// starts with "://", and returns where scanning continues.
func scanURL(s string, at int, sp *spans) int {
	if at == 0 || !setScheme[s[at-1]] {
		return at + 3
	}
	start := at + 3
	end := start
	colon, atSign := -1, -1
	for end < len(s) && end-start < 512 {
		c := s[end]
		if c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`' {
			break
		}
		if c == ':' && colon < 0 {
			colon = end
		}
		if c == '@' {
			atSign = end
		}
		end++
	}
	if colon >= 0 && atSign > colon+1 {
		pw := s[colon+1 : atSign]
		if !isPlaceholder(pw) {
			sp.add(colon+1, atSign)
		}
	}
	return at + 3
}

// keyValue handles the separator at s[at].
func (r *Redactor) keyValue(s string, at int, sp *spans) {
	sep := s[at]
	if sep == '=' {
		// Comparisons, not assignments: ==, !=, <=, >=.
		if at+1 < len(s) && s[at+1] == '=' {
			return
		}
		if at > 0 && strings.IndexByte("=!<>", s[at-1]) >= 0 {
			return
		}
	}
	// The key: skip blanks, one closing quote, and (for ":=") the colon.
	k := at
	if sep == '=' && k > 0 && s[k-1] == ':' {
		k--
	}
	for k > 0 && (s[k-1] == ' ' || s[k-1] == '\t') {
		k--
	}
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		k--
	}
	ke := k
	for k > 0 && setKey[s[k-1]] && ke-k < 64 {
		k--
	}
	if ke-k < 3 {
		return
	}
	class := classifyKey(s[k:ke])
	if class == keyPlain || testVerdict(s, k, ke) {
		return
	}
	// The value.
	v := at + 1
	if sep == ':' && v < len(s) && s[v] == '=' {
		v++
	}
	for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	if v >= len(s) {
		return
	}
	if q := s[v]; q == '"' || q == '\'' || q == '`' {
		end := v + 1
		for end < len(s) && s[end] != q && s[end] != '\n' && end-v < 4096 {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end > len(s) {
			end = len(s)
		}
		val := s[v+1 : end]
		if class == keyAuth {
			r.authValue(s, v+1, end, sp)
			return
		}
		if len(val) >= minValueLen(class) && !r.skipValue(val) {
			sp.add(v+1, end)
		}
		return
	}
	end := v
	for end < len(s) && end-v < 4096 {
		c := s[end]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == ',' || c == ';' || c == '&' || c == ')' || c == '<' || c == '>' || c == '}' {
			break
		}
		end++
	}
	if class == keyAuth {
		r.authValue(s, v, lineEnd(s, v), sp)
		return
	}
	val := s[v:end]
	if len(val) < minValueLen(class) || r.skipValue(val) || looksLikeExpression(val) {
		return
	}
	if class == keyToken && len(val) < 20 && !hasDigit(val) {
		return
	}
	sp.add(v, end)
}

// testVerdict reports whether the key s[k:ke] is the verdict of a Go test
// result line, "--- PASS: TestLoad (0.01s)" (go test -v, and the Output of
// go test -json): the test's name is no password.
func testVerdict(s string, k, ke int) bool {
	return s[k:ke] == "PASS" && strings.HasSuffix(s[:k], "--- ") && ke < len(s) && s[ke] == ':'
}

func lineEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// authValue redacts the credentials of an Authorization value in s[v:end]:
// everything after the scheme word.
func (r *Redactor) authValue(s string, v, end int, sp *spans) {
	val := s[v:end]
	start := v
	if sp := strings.IndexByte(val, ' '); sp > 0 && sp < 16 {
		start = v + sp + 1
	}
	for start < end && s[start] == ' ' {
		start++
	}
	stop := start
	for stop < end && setBearer[s[stop]] {
		stop++
	}
	if stop-start >= 8 && !r.skipValue(s[start:stop]) {
		sp.add(start, stop)
	}
}

func minValueLen(c keyClass) int {
	if c == keyPassword {
		return 4
	}
	return 8
}

// skipValue reports values that are not secrets themselves: placeholders,
// references and already-redacted text.
func (r *Redactor) skipValue(v string) bool {
	return isPlaceholder(v) || strings.Contains(v, r.replacement)
}

var placeholderWords = map[string]bool{
	"true": true, "false": true, "null": true, "none": true, "nil": true,
	"undefined": true, "required": true, "optional": true, "string": true,
	"redacted": true, "changeme": true, "password": true, "secret": true,
	"<none>": true, "xxxxxxxx": true, "********": true,
}

// isPlaceholder reports values like "${DB_PASSWORD}", "$TOKEN", "<token>",
// "{{ secrets.X }}", "%s", "****" and a few words.
func isPlaceholder(v string) bool {
	if v == "" {
		return true
	}
	switch v[0] {
	case '$', '<', '{', '%', '*', '[':
		return true
	}
	if len(v) <= 12 && placeholderWords[strings.ToLower(v)] {
		return true
	}
	return false
}

// looksLikeExpression reports unquoted values that are code, not literals:
// calls, indexing and dotted identifier paths (cfg.Secret, os.Args).
func looksLikeExpression(v string) bool {
	if strings.ContainsAny(v, "()[]") {
		return true
	}
	if !strings.Contains(v, ".") {
		return false
	}
	for _, part := range strings.Split(v, ".") {
		if part == "" || !(part[0] == '_' || part[0] >= 'a' && part[0] <= 'z' || part[0] >= 'A' && part[0] <= 'Z') {
			return false
		}
		for i := 0; i < len(part); i++ {
			if !setWord[part[i]] {
				return false
			}
		}
	}
	return true
}
