package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errBodyTooLarge is readBody's answer to a body over the limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads a request body of at most maxBytes. A declared length over
// the limit is refused before anything is read, and a body is never read
// past the limit.
func readBody(r *http.Request, maxBytes int64) ([]byte, error) {
	if r.ContentLength > maxBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
		return nil, fmt.Errorf("reading request body: got %d bytes of the %d declared", len(body), r.ContentLength)
	}
	return body, nil
}
