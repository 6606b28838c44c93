package kubeclient

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// Status says why the agent is not connected to the apiserver yet. Its
// Check is for a readiness check that passes only once the watches run:
// an agent waiting for TLS bootstrap is alive (it runs from its
// checkpoints) but not connected, and /readyz says what it waits for.
type Status struct {
	// waiting is why the credentials are not loaded; nil once they are.
	waiting atomic.Pointer[string]
	loaded  atomic.Bool
}

// Check says what the agent is waiting for; it never passes, since
// loaded credentials are not yet a connection: the caller's check passes
// once the watches run.
func (s *Status) Check(*http.Request) error {
	if s.loaded.Load() {
		return errors.New("the kubelet's credentials are loaded; connecting to the apiserver")
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
		s.waiting.Store(nil)
		s.loaded.Store(true)
	}
}
