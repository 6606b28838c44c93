package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// warningHandler routes the apiserver's warnings (admission webhooks answer
// with them, for instance when a ConfigMap assigned is not eligible). A
// request whose context carries a warningSink gets them attached to its own
// outcome, so each is printed next to the node it concerns; any other
// request's warnings go to stderr as kubectl prints them.
type warningHandler struct{ out io.Writer }

type warningSinkKey struct{}

// warningSink collects the warnings of the requests made with its context.
type warningSink struct {
	mu       sync.Mutex
	warnings []string
}

func withWarningSink(ctx context.Context) (context.Context, *warningSink) {
	sink := &warningSink{}
	return context.WithValue(ctx, warningSinkKey{}, sink), sink
}

func (s *warningSink) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.warnings...)
}

// httpWarningCode is the only warn-code the apiserver sends (RFC 7234 299,
// "miscellaneous persistent warning").
const httpWarningCode = 299

func (h warningHandler) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != httpWarningCode || text == "" {
		return
	}
	if sink, ok := ctx.Value(warningSinkKey{}).(*warningSink); ok {
		sink.mu.Lock()
		sink.warnings = append(sink.warnings, text)
		sink.mu.Unlock()
		return
	}
	fmt.Fprintf(h.out, "Warning: %s\n", text)
}
