package main

// The deliberate deviations from Kruise: each is one named class, with its line in
// docs/differences.md (the `doc` field quotes that line's subject). A disagreement that no class
// matches fails the run.

import (
	"regexp"
	"strings"
)

type deviation struct {
	name    string
	doc     string // the subject of its line in docs/differences.md
	matches func(c *Case, kruise, ours Outcome) bool
}

var deviations = []deviation{}

// messageRewrites make messages comparable where the difference is wording only. Each is applied to
// both sides' messages; the reason says why the difference is cosmetic.
var messageRewrites = []struct {
	pattern *regexp.Regexp
	replace string
	reason  string
}{}

func normaliseMessage(message string) string {
	for _, r := range messageRewrites {
		message = r.pattern.ReplaceAllString(message, r.replace)
	}
	return strings.TrimSpace(message)
}
