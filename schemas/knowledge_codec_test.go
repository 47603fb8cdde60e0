package schemas

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectedFile is IndexedFile without its codec methods: what the
// reflection encoder and decoder make of it.
type reflectedFile IndexedFile

func reflectionCodec() (*bytes.Buffer, *msgpack.Encoder) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag(structTag)
	enc.UseCompactInts(true)
	return &buf, enc
}

func randomFile(rng *rand.Rand) IndexedFile {
	str := func(s string) string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return fmt.Sprintf("%s%d", s, rng.IntN(1<<uint(rng.IntN(40))))
	}
	num := func() int { return []int{0, 1, -1, 127, 128, -33, 1 << 20, -(1 << 40)}[rng.IntN(8)] }
	f := IndexedFile{
		Path: str("p/"), Hash: str("h"), Size: int64(num()), Lang: str("go"), Lines: num(), Package: str("pkg"),
		Terms: str("term 3 "), Debt: num(), Test: rng.IntN(2) == 0, Stubbed: rng.IntN(2) == 0, Redactions: num(),
		EmbedHash: str("e"), ParseError: str("1:2: bad"),
	}
	// Strings long enough for each of msgpack's string headers (str8, 16, 32).
	if long := []int{0, 40, 300, 70000}[rng.IntN(4)]; long > 0 {
		f.ParseError += strings.Repeat("x", long)
	}
	for range rng.IntN(3) {
		f.Imports = append(f.Imports, str("fmt"))
	}
	for range rng.IntN(4) {
		f.TermRefs = binary.AppendUvarint(binary.AppendUvarint(f.TermRefs, uint64(rng.IntN(1<<14))), uint64(rng.IntN(300)))
	}
	for range rng.IntN(4) {
		f.Symbols = append(f.Symbols, Symbol{Name: str("F"), Kind: str("func"), Recv: str("T"), Line: num(), EndLine: num(), Signature: str("func F()"), Doc: rng.IntN(2) == 0})
	}
	for range rng.IntN(4) {
		f.Calls = append(f.Calls, Call{From: str("F"), To: str("fmt.Println"), Line: num()})
	}
	return f
}

// The IndexedFile codec writes byte for byte what the reflection encoder
// writes, and reads back what either wrote.
func TestIndexedFileCodecMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		f := randomFile(rng)
		want, enc := reflectionCodec()
		if err := enc.Encode((*reflectedFile)(&f)); err != nil {
			t.Fatal(err)
		}
		got, enc := reflectionCodec()
		if err := enc.Encode(&f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("file %d: %+v\nthe codec wrote    %x\nreflection wrote  %x", i, f, got.Bytes(), want.Bytes())
		}
		var back IndexedFile
		dec := msgpack.NewDecoder(bytes.NewReader(want.Bytes()))
		dec.SetCustomStructTag(structTag)
		if err := dec.Decode(&back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, f) {
			t.Fatalf("file %d read back as %+v, want %+v", i, back, f)
		}
	}
}

// Keys the codec does not know are skipped, and a key too long to be
// read without an allocation is read all the same.
func TestIndexedFileCodecSkipsUnknownKeys(t *testing.T) {
	buf, enc := reflectionCodec()
	long := "a_key_longer_than_thirty_two_bytes_of_the_buffer"
	if err := enc.Encode(map[string]any{"path": "a.go", long: []any{1, "x"}, "future": map[string]int{"n": 1}, "lines": 3}); err != nil {
		t.Fatal(err)
	}
	var f IndexedFile
	dec := msgpack.NewDecoder(buf)
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.Path != "a.go" || f.Lines != 3 {
		t.Fatalf("decoded %+v", f)
	}
}

// A term's count reads as strconv.Atoi reads it, malformed ones included.
func TestTermCountIsAtoi(t *testing.T) {
	for _, c := range []string{"0", "7", "42", "000", "123456789", "1234567890", "99999999999999999999", "", "+5", "-0", "-3", "1a", "a", " 1", "１"} {
		got, gotErr := termCount(c)
		want, wantErr := strconv.Atoi(c)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("termCount(%q) = %d, %v; strconv.Atoi: %d, %v", c, got, gotErr, want, wantErr)
		}
	}
}
