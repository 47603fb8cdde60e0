package greeter

import "testing"

func TestGreet(t *testing.T) {
	for in, want := range map[string]string{"sylk": "hello, sylk", "  ": "hello, world", "": "hello, world"} {
		if got := Greet(in); got != want {
			t.Errorf("Greet(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGreetTrims(t *testing.T) {
	if got := Greet("  ada "); got != "hello, ada" {
		t.Errorf("Greet trims: got %q", got)
	}
}
