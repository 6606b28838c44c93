package kubeclient

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// Status says whether the kubelet's credentials have been loaded and, while
// not, why. Its Check is a readiness check: an agent waiting for TLS
// bootstrap is alive (it runs from its checkpoints) but not connected, and
// /readyz says what it waits for. The zero value is "not loaded yet".
type Status struct {
	// waiting is the reason the credentials are not loaded; nil once they
	// are.
	waiting atomic.Pointer[string]
	loaded  atomic.Bool
}

// Check returns nil once the credentials are loaded, else why not.
func (s *Status) Check(*http.Request) error {
	if s.loaded.Load() {
		return nil
	}
	if reason := s.waiting.Load(); reason != nil {
		return errors.New(*reason)
	}
	return errors.New("the kubelet's credentials have not been read yet")
}

func (s *Status) setWaiting(err error) {
	if s == nil {
		return
	}
	reason := "waiting for the kubelet's credentials (TLS bootstrap not finished?): " + err.Error()
	s.waiting.Store(&reason)
}

func (s *Status) setLoaded() {
	if s != nil {
		s.loaded.Store(true)
	}
}
