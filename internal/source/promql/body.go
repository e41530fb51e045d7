package promql

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// bodyPiece is the size of the pieces an answer's body is read in.
const bodyPiece = 256 << 10

// bodyPieces are the pieces, reused from one answer to the next (the pool
// lets the collector take them back).
var bodyPieces = sync.Pool{New: func() any { b := make([]byte, bodyPiece); return &b }}

// DefaultMaxAnswer is the most bytes of one answer that a Source reads
// unless told otherwise (Source.MaxAnswer): 256 MiB, a quarter of the
// chart's 1 GiB memory limit. An answer is held whole while it is
// decoded, its series beside it, so a runaway answer fails its query
// instead of taking the process past its limit.
const DefaultMaxAnswer = 256 << 20

// AnswerTooLargeError is an answer longer than the cap on what is read
// of one (Source.MaxAnswer), counted after any decompression.
type AnswerTooLargeError struct {
	// MaxBytes is the cap.
	MaxBytes int64
}

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("answer over %d bytes (--prometheus-max-answer); raise --prometheus-max-answer or shorten the window", e.MaxBytes)
}

// do sends req and reads its answer's body whole, as client_golang's
// Client.Do does, but into one slice of the body's length. Do reads into
// a buffer that doubles as it fills, each time a new one, zeroed whole:
// several times the body's size allocated, zeroed and copied, and a month
// of a fleet's answers run to gigabytes. Here the body is read into
// reused pieces, then copied once into a slice of its length (or read
// straight into one where the server said a length of one piece or less).
// An answer longer than s.MaxAnswer bytes (decompressed) is an
// *AnswerTooLargeError.
func (s *Source) do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	resp, err := s.http.Do(req.WithContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	maxBytes := s.MaxAnswer
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAnswer
	}
	body, err := readBody(resp.Body, resp.ContentLength, maxBytes)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, err
	}
	return resp, body, nil
}

// readBody reads r to its end into a slice of exactly its length; length
// is the length the server gave, or -1. A body that is longer or shorter
// than the length it was given is an error (as net/http reports it), and
// one longer than maxBytes is an *AnswerTooLargeError: no more than
// maxBytes+1 bytes of it are read, so a body of exactly maxBytes is read
// whole and one a byte longer is not.
func readBody(r io.Reader, length, maxBytes int64) ([]byte, error) {
	if length > maxBytes {
		return nil, &AnswerTooLargeError{MaxBytes: maxBytes}
	}
	r = io.LimitReader(r, maxBytes+1)
	if length >= 0 && length <= bodyPiece {
		// Small, or said: read at once. A larger said length is not
		// trusted for an allocation before its bytes come.
		b := make([]byte, length)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var pieces []*[]byte
	defer func() {
		for _, p := range pieces {
			bodyPieces.Put(p)
		}
	}()
	total := 0
	for done := false; !done; {
		p := bodyPieces.Get().(*[]byte)
		pieces = append(pieces, p)
		// Fill the piece; only io.EOF is the body's end. (io.ReadFull
		// would pass on a truncated body's io.ErrUnexpectedEOF as if
		// the piece had merely not filled.)
		buf, n := *p, 0
		var err error
		for n < len(buf) && err == nil {
			var k int
			k, err = r.Read(buf[n:])
			n += k
		}
		total += n
		if int64(total) > maxBytes {
			return nil, &AnswerTooLargeError{MaxBytes: maxBytes}
		}
		switch {
		case err == io.EOF:
			done = true
		case err != nil:
			return nil, err
		}
	}
	body := make([]byte, total)
	at := 0
	for _, p := range pieces {
		at += copy(body[at:], *p)
	}
	return body, nil
}
