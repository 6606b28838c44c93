package reliability_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// request is one kind of request of the traffic; worker and i make each
// request unique where the apiserver would otherwise answer from a cache.
type request func(ctx context.Context, worker, i int) error

type outcome struct{ ok, failed atomic.Int64 }

// traffic runs every kind of request continuously, each on its own
// workers, until stopped, counting successes and failures by kind.
type traffic struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	outcomes map[string]*outcome

	mu       sync.Mutex
	failures []string
}

func startTraffic(kinds map[string]request, workersPerKind int) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel, outcomes: map[string]*outcome{}}
	for name, send := range kinds {
		o := &outcome{}
		tr.outcomes[name] = o
		for w := range workersPerKind {
			tr.wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					err := send(ctx, w, i)
					if ctx.Err() != nil {
						// Stopping: a request cut short by it is not the server's failure.
						return
					}
					if err != nil {
						o.failed.Add(1)
						tr.mu.Lock()
						if len(tr.failures) < 20 {
							tr.failures = append(tr.failures, fmt.Sprintf("%s: %v", name, err))
						}
						tr.mu.Unlock()
						continue
					}
					o.ok.Add(1)
				}
			})
		}
	}
	return tr
}

func (tr *traffic) stop() {
	tr.cancel()
	tr.wg.Wait()
}

func (tr *traffic) totals() (ok, failed int64) {
	for _, o := range tr.outcomes {
		ok += o.ok.Load()
		failed += o.failed.Load()
	}
	return ok, failed
}

// waitMore returns once every kind has n more successes than now, so that
// a step of a test is known to have run under traffic of every kind.
func (tr *traffic) waitMore(t *testing.T, n int64, during string) {
	t.Helper()
	from := map[string]int64{}
	for name, o := range tr.outcomes {
		from[name] = o.ok.Load()
	}
	err := framework.Eventually(t.Context(), 2*time.Minute, fmt.Sprintf("%d more requests of each kind %s", n, during), func(context.Context) (bool, string, error) {
		var behind []string
		for name, o := range tr.outcomes {
			if got := o.ok.Load() - from[name]; got < n {
				behind = append(behind, fmt.Sprintf("%s +%d", name, got))
			}
		}
		return len(behind) == 0, strings.Join(behind, ", ") + "; " + tr.failureSummary(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (tr *traffic) failureSummary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.failures) == 0 {
		return "no failures"
	}
	return "failures: " + strings.Join(tr.failures, "; ")
}

// table is the traffic's counts as markdown rows.
func (tr *traffic) table() string {
	var names []string
	for name := range tr.outcomes {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| requests | succeeded | failed |\n| --- | --- | --- |\n")
	for _, name := range names {
		o := tr.outcomes[name]
		fmt.Fprintf(&b, "| %s | %d | %d |\n", name, o.ok.Load(), o.failed.Load())
	}
	return b.String()
}
