// Applies JSON patches with evanphx/json-patch, the library kube-apiserver applies admission
// webhook patches with. Reads one JSON object per line on stdin, {"object": ..., "patch": [...]},
// and writes one line per input: {"object": <patched>} or {"error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"os"

	jsonpatch "github.com/evanphx/json-patch"
)

type input struct {
	Object json.RawMessage `json:"object"`
	Patch  json.RawMessage `json:"patch"`
}

func apply(line []byte) map[string]interface{} {
	var in input
	if err := json.Unmarshal(line, &in); err != nil {
		return map[string]interface{}{"error": "input: " + err.Error()}
	}
	patch, err := jsonpatch.DecodePatch(in.Patch)
	if err != nil {
		return map[string]interface{}{"error": "decode: " + err.Error()}
	}
	patched, err := patch.Apply(in.Object)
	if err != nil {
		return map[string]interface{}{"error": "apply: " + err.Error()}
	}
	return map[string]interface{}{"object": json.RawMessage(patched)}
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 64<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		if err := out.Encode(apply(scanner.Bytes())); err != nil {
			os.Exit(2)
		}
	}
	if scanner.Err() != nil {
		os.Exit(2)
	}
}
