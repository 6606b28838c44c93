package loadtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol is the HTTP version a client speaks.
type Protocol int

const (
	// HTTP2 is what the kube-apiserver speaks to webhooks when the server
	// offers it: all requests multiplexed on one connection.
	HTTP2 Protocol = iota
	// HTTP1 is HTTP/1.1 with keep-alive, one connection per worker.
	HTTP1
)

func (p Protocol) String() string {
	if p == HTTP1 {
		return "http/1.1"
	}
	return "h2"
}

// ProtoMajor is the major version responses carry.
func (p Protocol) ProtoMajor() int {
	if p == HTTP1 {
		return 1
	}
	return 2
}

// NewClient returns a keep-alive client that speaks only p, so that a
// server failing to negotiate it fails the run instead of falling back.
func NewClient(p Protocol, roots *x509.CertPool, conns int) *http.Client {
	t := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		Protocols:           new(http.Protocols),
	}
	if p == HTTP1 {
		t.Protocols.SetHTTP1(true)
	} else {
		t.Protocols.SetHTTP2(true)
	}
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// Load is one run against one URL.
type Load struct {
	Client *http.Client
	URL    string
	// Bodies are posted in turn, request i sending Bodies[i%len(Bodies)].
	Bodies      [][]byte
	Concurrency int
	Requests    int
	// Rate, when positive, schedules request i at i/Rate seconds after the
	// start (open loop) and measures its latency from that moment, so that
	// time spent waiting for a free worker counts. Zero sends as fast as
	// the workers can (closed loop), each worker waiting for its answer.
	Rate float64
	// Check, when set, is given every response; an error ends the run.
	Check func(i int, resp *http.Response, body []byte) error
}

// Result is what a run measured.
type Result struct {
	Requests int
	Elapsed  time.Duration
	// Latencies are sorted.
	Latencies []time.Duration
}

// Throughput is requests per second over the whole run.
func (r Result) Throughput() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Percentile is the nearest-rank percentile, p in [0, 1].
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	rank := int(p*float64(len(r.Latencies))+0.5) - 1
	return r.Latencies[max(0, min(rank, len(r.Latencies)-1))]
}

type job struct {
	index int
	due   time.Time
}

// Run sends the requests and returns once every one is answered, or at the
// first error.
func (l Load) Run(ctx context.Context) (Result, error) {
	if l.Client == nil || l.URL == "" || len(l.Bodies) == 0 || l.Concurrency < 1 || l.Requests < 0 {
		return Result{}, errors.New("load: client, URL, bodies and a positive concurrency are required")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	jobs := make(chan job, min(l.Requests, 1<<16))
	latencies := make([][]time.Duration, l.Concurrency)
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	for w := range l.Concurrency {
		wg.Go(func() {
			own := make([]time.Duration, 0, l.Requests/l.Concurrency+1)
			for {
				var j job
				if l.Rate > 0 {
					var ok bool
					if j, ok = <-jobs; !ok {
						break
					}
				} else {
					j.index = int(next.Add(1) - 1)
					if j.index >= l.Requests {
						break
					}
					j.due = time.Now()
				}
				if err := l.send(ctx, j.index); err != nil {
					cancel(err)
					break
				}
				own = append(own, time.Since(j.due))
			}
			latencies[w] = own
		})
	}
	if l.Rate > 0 {
		l.dispatch(ctx, start, jobs)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return Result{Requests: len(all), Elapsed: elapsed, Latencies: all}, nil
}

// dispatch releases request i at start + i/Rate; it never sleeps past a
// due time it has already missed, so lateness does not accumulate.
func (l Load) dispatch(ctx context.Context, start time.Time, jobs chan<- job) {
	defer close(jobs)
	interval := time.Duration(float64(time.Second) / l.Rate)
	for i := range l.Requests {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-ctx.Done():
			return
		case jobs <- job{index: i, due: due}:
		}
	}
}

func (l Load) send(ctx context.Context, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, bytes.NewReader(l.Bodies[i%len(l.Bodies)]))
	if err != nil {
		return fmt.Errorf("request %d: %w", i, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := l.Client.Do(req)
	if err != nil {
		return fmt.Errorf("request %d: %w", i, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("request %d: reading response: %w", i, err)
	}
	if l.Check != nil {
		if err := l.Check(i, resp, body); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	} else if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("request %d: status %s: %s", i, resp.Status, body)
	}
	return nil
}

// Stalls are the times a busy goroutine saw the clock jump: the machine
// (on a shared VM, its host) took the CPU away. They bound from below what
// any latency percentile on this machine can show.
type Stalls struct {
	Probed time.Duration
	// Count of jumps longer than StallThreshold, their total and the
	// longest.
	Count int
	Total time.Duration
	Max   time.Duration
}

// StallThreshold is the shortest clock jump counted as a stall.
const StallThreshold = time.Millisecond

// MeasureStalls spins on one goroutine for d and records clock jumps. Run
// it while nothing else runs: it takes a whole CPU.
func MeasureStalls(d time.Duration) Stalls {
	s := Stalls{Probed: d}
	last := time.Now()
	for end := last.Add(d); last.Before(end); {
		now := time.Now()
		if gap := now.Sub(last); gap > StallThreshold {
			s.Count++
			s.Total += gap
			s.Max = max(s.Max, gap)
		}
		last = now
	}
	return s
}

// LoadAverage is the first three fields of /proc/loadavg, or "unknown"
// where there is none: with other work on a two-core machine, the figures
// of a run mean little, and this says so.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
