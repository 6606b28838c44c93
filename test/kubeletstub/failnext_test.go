package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFailNextUnderRacingProbes: told to fail N probes, the stub fails each
// of N probes made at once, and the count ends at zero; a probe that lost a
// race for the counter must try again, not answer healthy while failures
// are owed. The counter is hammered directly (a tight loop makes the races
// frequent on any machine with two cores), then once through the handler.
func TestFailNextUnderRacingProbes(t *testing.T) {
	const probers, probesEach = 4, 200_000
	const toFail = probers * probesEach
	s := &stub{}
	s.failNext.Store(toFail)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range probers {
		wg.Go(func() {
			<-start
			for range probesEach {
				if s.takeFailure() {
					failed.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got, left := failed.Load(), s.failNext.Load(); got != toFail || left != 0 {
		t.Fatalf("%d of %d probes failed with %d told to fail; %d left on the counter", got, probers*probesEach, toFail, left)
	}

	handler := s.server(healthy, make(chan struct{})).Handler
	s.failNext.Store(1)
	for i, want := range []int{http.StatusInternalServerError, http.StatusOK} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != want {
			t.Fatalf("probe %d after fail-next=1: %d, want %d", i, rec.Code, want)
		}
	}
}
