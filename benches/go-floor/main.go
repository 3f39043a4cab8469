// The Go floor: the least a Go admission webhook (such as kruise-manager) can do, run beside
// kruise-admission in the same measurement by benches/load.sh (h2load, `allow`) and by the
// end-to-end latency check tests/e2e/latency.sh (through kube-apiserver, `allow` and `patch`).
// Standard library only: net/http over TLS (HTTP/2 and HTTP/1.1), the whole review decoded into
// a struct (as controller-runtime does before a handler runs), then one of:
//
//	allow         answer allowed
//	patch FILE    answer allowed with the JSON Patch in FILE, the same bytes for every request
//
// It answers on every path.
// Build: benches/go-floor/build.sh OUT (the machine's Go)
// Run:   go-floor CERT KEY 127.0.0.1:PORT allow|patch [FILE]
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
)

type admissionRequest struct {
	UID       string                 `json:"uid"`
	Kind      map[string]string      `json:"kind"`
	Resource  map[string]string      `json:"resource"`
	Name      string                 `json:"name"`
	Namespace string                 `json:"namespace"`
	Operation string                 `json:"operation"`
	UserInfo  json.RawMessage        `json:"userInfo"`
	Object    map[string]interface{} `json:"object"`
	OldObject map[string]interface{} `json:"oldObject"`
}

type admissionResponse struct {
	UID       string `json:"uid"`
	Allowed   bool   `json:"allowed"`
	PatchType string `json:"patchType,omitempty"`
	Patch     []byte `json:"patch,omitempty"` // encoding/json writes []byte as base64, as the API expects
}

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

func main() {
	if len(os.Args) < 5 || (os.Args[4] == "patch") != (len(os.Args) == 6) {
		log.Fatal("usage: go-floor CERT KEY ADDR allow|patch [FILE]")
	}
	var patch []byte
	if os.Args[4] == "patch" {
		var err error
		if patch, err = os.ReadFile(os.Args[5]); err != nil {
			log.Fatal(err)
		}
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var review admissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &admissionResponse{UID: review.Request.UID, Allowed: true}
		if patch != nil {
			resp.PatchType, resp.Patch = "JSONPatch", patch
		}
		w.Header().Set("Content-Type", "application/json")
		out := admissionReview{APIVersion: review.APIVersion, Kind: "AdmissionReview", Response: resp}
		if err := json.NewEncoder(w).Encode(out); err != nil {
			log.Print(err)
		}
	})
	log.Fatal(http.ListenAndServeTLS(os.Args[3], os.Args[1], os.Args[2], nil))
}
