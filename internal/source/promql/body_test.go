package promql

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/iotest"
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
				got, err := readBody(r, length)
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
			if got, e := readBody(r, -1); !errors.Is(e, err) {
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
