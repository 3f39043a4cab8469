package main

// Our side of a case: the kruise-admission binary's `dry-run`, the same decisions `serve` makes
// (the README's promise, and tests/sidecarset_dry_run.rs holds serve and dry-run to it), over a
// cluster folder that holds the case's objects.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

type ours struct {
	binary string
	work   string // a scratch folder, rewritten per case
}

// dryRunLine is the part of `dry-run -o json`'s line the comparison reads.
type dryRunLine struct {
	Allowed bool `json:"allowed"`
	Status  struct {
		Code    int32  `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	Patch  json.RawMessage `json:"patch"`
	Writes []oursWrite     `json:"writes"`
}

func (o ours) decide(c *Case, now time.Time) (Outcome, error) {
	dir := filepath.Join(o.work, "case")
	if err := os.RemoveAll(dir); err != nil {
		return Outcome{}, err
	}
	cluster := filepath.Join(dir, "cluster")
	if err := os.MkdirAll(cluster, 0o755); err != nil {
		return Outcome{}, err
	}
	for i, obj := range c.Cluster {
		if err := writeJSON(filepath.Join(cluster, fmt.Sprintf("%03d.json", i)), obj); err != nil {
			return Outcome{}, err
		}
	}
	req := c.Request
	if c.OursRequest != nil {
		req = *c.OursRequest
	}
	review := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
	reviewPath := filepath.Join(dir, "review.json")
	if err := writeJSON(reviewPath, review); err != nil {
		return Outcome{}, err
	}
	args := []string{"dry-run", "--cluster-dir", cluster, "--now", now.UTC().Format(time.RFC3339), "-o", "json"}
	if gates := oursGateFlag(c.Gates); gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	args = append(args, reviewPath)
	cmd := exec.Command(o.binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 1 {
		err = nil // 1 is "denied", a decision
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("kruise-admission %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var line dryRunLine
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &line); err != nil {
		return Outcome{}, fmt.Errorf("dry-run printed %q: %v", stdout.String(), err)
	}
	out := Outcome{Allowed: line.Allowed, Code: line.Status.Code, Message: line.Status.Message}
	if out.Writes, err = oursWrites(line.Writes); err != nil {
		return Outcome{}, err
	}
	out.Writes = normaliseWrites(out.Writes, now)
	if !out.Allowed {
		return out, nil
	}
	out.Object, err = applyPatch(objectOf(req), line.Patch)
	return out, err
}

// oursGateFlag spells the case's gates as a --feature-gates value (kruise-admission takes every
// gate name Kruise has, with Kruise's defaults).
func oursGateFlag(gates map[string]bool) string {
	var parts []string
	for name, value := range gates {
		parts = append(parts, fmt.Sprintf("%s=%t", name, value))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// objectOf is the object a request's patch applies to: the new object, or on DELETE none.
func objectOf(req admissionv1.AdmissionRequest) []byte {
	return req.Object.Raw
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
