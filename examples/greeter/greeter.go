// Package greeter is the small Go module the example plans build, vet and test.
package greeter

import "strings"

// Greet greets name, or the world when name is blank.
func Greet(name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "world"
	}
	return "hello, " + name
}
