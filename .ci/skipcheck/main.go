// Command skipcheck reads `go test -json` output and fails when a test was
// skipped: CI runs as root with every tool installed, so a security test
// that skips there is a test that proves nothing. Skips that are part of a
// test's design (a helper process re-running the test binary) are allowed
// by their message.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// allowed are skip messages that are not a missing precondition.
var allowed = []string{"helper process"}

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	output := map[string]string{}
	var bad []string
	failed := false
	var failures []string // tests that failed, with their output below
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			output[key] += e.Output
		case "fail":
			failed = true
			if e.Test != "" {
				failures = append(failures, key)
			}
		case "skip":
			if e.Test == "" || isAllowed(output[key]) {
				continue
			}
			bad = append(bad, key+": "+strings.TrimSpace(lastLine(output[key])))
		}
	}
	for _, b := range bad {
		fmt.Println("skipped:", b)
	}
	for _, f := range failures {
		fmt.Printf("failed: %s\n%s", f, output[f])
	}
	if len(bad) > 0 || failed {
		fmt.Printf("skipcheck: %d skipped tests, failures: %v\n", len(bad), failed)
		os.Exit(1)
	}
	fmt.Println("skipcheck: no test skipped")
}

func isAllowed(out string) bool {
	for _, a := range allowed {
		if strings.Contains(out, a) {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], ".go:") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}
