// The Go floor of benches/load.sh: the cheapest thing a Go admission webhook (such as
// kruise-manager) can do. Standard library only: net/http over TLS (HTTP/1.1 and HTTP/2),
// encoding/json decoding the whole review into a struct, answering allowed.
//
// Build: GO111MODULE=off /usr/lib/go-1.19/bin/go build -o go-floor main.go
// Run:   go-floor CERT KEY 127.0.0.1:PORT
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
)

type groupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type groupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type admissionRequest struct {
	UID       string               `json:"uid"`
	Kind      groupVersionKind     `json:"kind"`
	Resource  groupVersionResource `json:"resource"`
	Name      string               `json:"name"`
	Namespace string               `json:"namespace"`
	Operation string               `json:"operation"`
	UserInfo  json.RawMessage      `json:"userInfo"`
	// Decoded like controller-runtime's webhooks do before the handler sees the object.
	Object    map[string]interface{} `json:"object"`
	OldObject map[string]interface{} `json:"oldObject"`
}

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionResponse struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

func handle(w http.ResponseWriter, r *http.Request) {
	var review admissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	out := admissionReview{APIVersion: review.APIVersion, Kind: "AdmissionReview", Response: &admissionResponse{UID: review.Request.UID, Allowed: true}}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Print(err)
	}
}

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: go-floor CERT KEY ADDR")
	}
	http.HandleFunc("/floor", handle)
	log.Fatal(http.ListenAndServeTLS(os.Args[3], os.Args[1], os.Args[2], nil))
}
