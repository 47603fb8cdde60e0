package tools

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// nonInteractiveEnv is set in every child: there is no terminal, so pagers
// and credential prompts would only hang until the timeout.
var nonInteractiveEnv = []string{"PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}

// envScrubber decides which variables never reach a child.
type envScrubber struct {
	block []string // upper-cased glob patterns
	allow map[string]bool
}

func newEnvScrubber(o EnvOptions) envScrubber {
	s := envScrubber{allow: map[string]bool{}}
	for _, p := range o.Block {
		s.block = append(s.block, strings.ToUpper(p))
	}
	for _, a := range o.Allow {
		s.allow[a] = true
	}
	return s
}

// blocked reports whether the variable name is a credential to strip.
func (s envScrubber) blocked(name string) bool {
	if s.allow[name] {
		return false
	}
	up := strings.ToUpper(name)
	for _, p := range s.block {
		if ok, _ := path.Match(p, up); ok {
			return true
		}
	}
	return false
}

// baseEnv builds the environment every child of an executor starts from:
// base without blocked variables, then the non-interactive settings, then
// set. It also returns the values of the blocked variables (and of blocked
// names in set) at least minLen bytes long, so the redactor can remove them
// if a child finds them some other way (a dotfile, a config file).
func (s envScrubber) baseEnv(base []string, set map[string]string, minLen int) (env, secrets []string) {
	for _, kv := range base {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if s.blocked(name) {
			if len(val) >= minLen {
				secrets = append(secrets, val)
			}
			continue
		}
		env = append(env, kv)
	}
	env = append(env, nonInteractiveEnv...)
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		val := set[name]
		if s.blocked(name) && len(val) >= minLen {
			secrets = append(secrets, val)
		}
		env = append(env, name+"="+val)
	}
	return env, secrets
}

// checkCallEnv validates the env argument of an exec call: names must be
// valid and must not be credentials. A call never passes credentials to a
// child; tools receive them, if ever, from the operator's environment.
func (s envScrubber) checkCallEnv(env map[string]string) error {
	for name := range env {
		if !validEnvName(name) {
			return fmt.Errorf("%w: env: %q is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)", ErrInvalidArgs, truncForMsg(name))
		}
		if s.blocked(name) {
			return fmt.Errorf("%w: env: %q is a credential variable; tool calls cannot set credentials", ErrInvalidArgs, name)
		}
	}
	return nil
}

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// appendCallEnv appends the call's variables in a stable order; os/exec
// uses the last value of a duplicated name.
func appendCallEnv(env []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return env
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(env), len(env)+len(names))
	copy(out, env)
	for _, n := range names {
		out = append(out, n+"="+extra[n])
	}
	return out
}
