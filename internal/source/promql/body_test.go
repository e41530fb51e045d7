package promql

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestReadBody: every length, around the pieces' size too, read in reads
// of any size, comes back byte for byte, at exactly its length; a reader's
// error, a truncated body's included, is returned, never a short body.
func TestReadBody(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 511, bodyPiece - 1, bodyPiece, bodyPiece + 1, 3*bodyPiece + 17, 5 << 20} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rng.IntN(256))
		}
		for name, r := range map[string]io.Reader{
			"whole":    bytes.NewReader(want),
			"byte":     iotest.OneByteReader(bytes.NewReader(want)),
			"half":     iotest.HalfReader(bytes.NewReader(want)),
			"data+EOF": iotest.DataErrReader(bytes.NewReader(want)),
		} {
			if name == "byte" && n > bodyPiece+1 {
				continue // slow, and the same path as half
			}
			for _, length := range []int64{-1, int64(n)} {
				got, err := readBody(r, length, DefaultMaxAnswer)
				if err != nil {
					t.Fatalf("%d bytes, %s, length %d: %v", n, name, length, err)
				}
				if !bytes.Equal(got, want) || len(got) != cap(got) {
					t.Fatalf("%d bytes, %s, length %d: got %d bytes (cap %d), want the same %d", n, name, length, len(got), cap(got), n)
				}
				r = bytes.NewReader(want)
			}
		}
	}
	broken := errors.New("connection reset")
	for _, n := range []int{10, bodyPiece + 10} {
		data := make([]byte, n)
		for _, err := range []error{broken, io.ErrUnexpectedEOF} {
			r := io.MultiReader(bytes.NewReader(data), iotest.ErrReader(err))
			if got, e := readBody(r, -1, DefaultMaxAnswer); !errors.Is(e, err) {
				t.Errorf("%d bytes then %v: got %d bytes and error %v, want the error", n, err, len(got), e)
			}
		}
	}
}

// TestDoTruncated: an answer that ends before the length its server gave
// is an error, whether the length fits one piece or not.
func TestDoTruncated(t *testing.T) {
	for _, n := range []int{100, 2 * bodyPiece} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.Write(make([]byte, n/2))
			// The handler returns short: net/http closes the connection.
		}))
		s, err := New(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if _, body, err := s.do(t.Context(), req); err == nil {
			t.Errorf("a body of %d bytes said to be %d: read %d bytes and no error", n/2, n, len(body))
		}
		srv.Close()
	}
}

// TestAnswerCap: an answer over Source.MaxAnswer fails its query with an
// *AnswerTooLargeError that says the cap and what to do, whether sent
// plain (with or without its length) or gzipped (the cap counts the
// decompressed bytes: a small gzip of a large answer is refused too); an
// answer of exactly the cap, or under it, is read.
func TestAnswerCap(t *testing.T) {
	const maxBytes = 64 << 10
	// answer is a matrix answer of exactly n bytes.
	answer := func(n int) []byte {
		head := `{"status":"success","data":{"resultType":"matrix","result":[]}}`
		return append([]byte(head), bytes.Repeat([]byte(" "), n-len(head))...)
	}
	cases := map[string]struct {
		size       int
		gzipped    bool
		sayLength  bool
		wantTooBig bool
	}{
		"under the cap":                  {size: maxBytes / 2},
		"exactly the cap":                {size: maxBytes},
		"exactly the cap, gzipped":       {size: maxBytes, gzipped: true},
		"a byte over the cap":            {size: maxBytes + 1, wantTooBig: true},
		"over the cap, its length said":  {size: 4 * maxBytes, sayLength: true, wantTooBig: true},
		"over the cap, unsaid":           {size: 4 * maxBytes, wantTooBig: true},
		"over the cap, gzipped":          {size: 64 * maxBytes, gzipped: true, wantTooBig: true},
		"a byte over the cap, gzipped":   {size: maxBytes + 1, gzipped: true, wantTooBig: true},
		"over a piece, under a long cap": {size: 3*bodyPiece + 1, sayLength: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			body := answer(c.size)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if c.gzipped {
					w.Header().Set("Content-Encoding", "gzip")
					gz := gzip.NewWriter(w)
					gz.Write(body)
					gz.Close()
					return
				}
				if c.sayLength {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				} else {
					w.(http.Flusher).Flush() // chunked: no length said
				}
				w.Write(body)
			}))
			defer srv.Close()
			s, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			s.MaxAnswer = maxBytes
			if c.size > maxBytes && !c.wantTooBig {
				s.MaxAnswer = int64(c.size)
			}
			_, err = s.queryRange(t.Context(), "up", v1.Range{Start: time.Unix(0, 0), End: time.Unix(3600, 0), Step: time.Minute})
			var tooBig *AnswerTooLargeError
			if got := errors.As(err, &tooBig); got != c.wantTooBig {
				t.Fatalf("an answer of %d bytes, cap %d: error %v, want an AnswerTooLargeError: %v", c.size, s.MaxAnswer, err, c.wantTooBig)
			}
			if !c.wantTooBig {
				return
			}
			for _, want := range []string{strconv.Itoa(maxBytes), "raise --prometheus-max-answer or shorten the window"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
