package policy

import "encoding/json"

// RunsWithoutAsking reports whether a call decided s reaches effect with
// nobody asked: allowed, with or without constraints.
func (s State) RunsWithoutAsking() bool {
	return s == StateAllowed || s == StateAllowedWithConstraints
}

// Redecide decides a recorded call again: once on the inputs it was decided
// on (input is the Call as JSON, kept with the call), and once more after
// change has altered them. Both decisions are Decide's, on the same
// registry, so they differ only by what change did. The shadow preview
// (a setting) and the policy replay (a policy file) both ask it.
func Redecide(input []byte, classes *ClassRegistry, change func(*Call)) (before, after Decision, err error) {
	var c Call
	if err := json.Unmarshal(input, &c); err != nil {
		return Decision{}, Decision{}, err
	}
	before = Decide(c, classes)
	change(&c)
	return before, Decide(c, classes), nil
}
