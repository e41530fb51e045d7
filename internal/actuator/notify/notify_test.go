package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPost(t *testing.T) {
	var got map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		if r.URL.Query().Get("fail") != "" {
			http.Error(w, "refused", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	w, err := New(srv.URL + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Post(context.Background(), map[string]string{"id": "abc"}); err != nil || got["id"] != "abc" {
		t.Fatalf("post: %v, received %v", err, got)
	}
	w, _ = New(srv.URL + "/hook?fail=1&token=secret")
	err = w.Post(context.Background(), map[string]string{"id": "abc"})
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "secret") {
		t.Errorf("a refusal must fail without the URL's token: %v", err)
	}
	for _, bad := range []string{"", "ftp://x", "hooks.example.com", "http://"} {
		if _, err := New(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
