package opacompare

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/test/loadtest"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// TargetSpeedup is the target: nodeguard with policies answers at
// least 3x the stock OPA server's throughput on the same rules.
const TargetSpeedup = 3.0

// Config says what to run.
type Config struct {
	// Shape is the cluster the graph (and the stock server's data) holds.
	Shape cluster.Shape
	// Concurrency is the number of requests in flight, as in test/loadtest.
	Concurrency int
	// Rounds alternate the two servers.
	Rounds int
	// RoundDuration is roughly how long each round of each server lasts.
	RoundDuration time.Duration
	// Protocols to load with.
	Protocols []loadtest.Protocol
	// CacheDir holds the opa binary (CacheDir/opa/<version>/opa).
	CacheDir string
	// WorkDir holds certificates and the stock server's policies; empty
	// means a temporary directory, removed afterwards.
	WorkDir string
	// Progress, when set, gets progress lines.
	Progress io.Writer
	// NodeguardGC are the collector settings (NAME=value) nodeguard's
	// process runs with, for the report; the spawner applies them.
	NodeguardGC []string
}

// DefaultConfig is the documented run: the load test's cluster and load.
func DefaultConfig() Config {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return Config{
		Shape:         cluster.Shape{Nodes: 5000, PodsPerNode: 30, Namespaces: 100, EligibleConfigMaps: 10000},
		Concurrency:   64,
		Rounds:        3,
		RoundDuration: 2 * time.Second,
		Protocols:     []loadtest.Protocol{loadtest.HTTP2, loadtest.HTTP1},
		CacheDir:      filepath.Join(cache, "nodeguard"),
	}
}

// Row is one measurement: one kind of request over one protocol.
type Row struct {
	Endpoint, Request string
	Protocol          loadtest.Protocol
	Requests          int
	// Ours and OPA are every round's result, in order; Floor too, for
	// the rows of a whole review (nil for the policies-only rows).
	Ours, OPA, Floor []loadtest.Result
	// OursCPU, OPACPU and FloorCPU are the CPU time each server's process
	// used in each round; nil where process CPU times cannot be read.
	OursCPU, OPACPU, FloorCPU []time.Duration
}

func median(rs []loadtest.Result) loadtest.Result {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b loadtest.Result) int {
		switch ta, tb := a.Throughput(), b.Throughput(); {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	return sorted[len(sorted)/2]
}

// Speedup is the median round's throughput ratio.
func (r Row) Speedup() float64 { return median(r.Ours).Throughput() / median(r.OPA).Throughput() }

// Ceiling is the floor's throughput over the stock server's: the most any
// decision, however cheap, could reach on this machine; 0 without a floor.
func (r Row) Ceiling() float64 {
	if len(r.Floor) == 0 {
		return 0
	}
	return median(r.Floor).Throughput() / median(r.OPA).Throughput()
}

// CPUSpeedup is the median round's ratio of the stock server's CPU time to
// nodeguard's for the same requests: how many more requests nodeguard
// answers per CPU-second, which is what its throughput becomes on cores
// the load generator does not share. 0 when CPU times were not read.
func (r Row) CPUSpeedup() float64 { return medianCPURatio(r.OPACPU, r.OursCPU) }

// CPUCeiling is CPUSpeedup for the floor: the most any decision could
// reach per server CPU-second; 0 without a floor or CPU times.
func (r Row) CPUCeiling() float64 { return medianCPURatio(r.OPACPU, r.FloorCPU) }

// medianCPURatio is the median over rounds of opa[i] / ours[i], rounds
// whose denominator is 0 left out; 0 when nothing is left.
func medianCPURatio(opa, ours []time.Duration) float64 {
	if len(ours) == 0 || len(ours) != len(opa) {
		return 0
	}
	ratios := make([]float64, 0, len(ours))
	for i, o := range ours {
		if o > 0 {
			ratios = append(ratios, float64(opa[i])/float64(o))
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// cpuPerRequest is a server's median round's CPU time per request.
func cpuPerRequest(cpu []time.Duration, requests int) time.Duration {
	if len(cpu) == 0 || requests == 0 {
		return 0
	}
	sorted := slices.Clone(cpu)
	slices.Sort(sorted)
	return sorted[len(sorted)/2] / time.Duration(requests)
}

// Report is a whole run.
type Report struct {
	Config      Config
	OPAVersion  string
	Rows        []Row
	LoadBefore  string
	LoadAfter   string
	StallBefore loadtest.Stalls
	Took        time.Duration
}

// AllPass reports whether every row met the target.
func (r *Report) AllPass() bool {
	for _, row := range r.Rows {
		if row.Speedup() < TargetSpeedup {
			return false
		}
	}
	return true
}

// target is one server's endpoint for one kind of request.
type target struct {
	url    string
	bodies [][]byte
	check  func(i int, resp *http.Response, body []byte) error
	// pid is the serving process, whose CPU time each round measures.
	pid int
}

// Run builds the graph, starts nodeguard (in a child process running
// Serve, started through spawn) and the stock server, checks that they
// decide alike, and loads them in alternating rounds.
func Run(ctx context.Context, cfg Config, spawn func(ctx context.Context, dir string) (*exec.Cmd, error)) (*Report, error) {
	began := time.Now()
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep := &Report{Config: cfg}
	var err error
	if rep.OPAVersion, err = OPAVersion(); err != nil {
		return nil, err
	}
	binary, err := EnsureOPA(ctx, cfg.CacheDir, rep.OPAVersion, progress)
	if err != nil {
		return nil, err
	}
	dir := cfg.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nodeguard-opacompare-"); err != nil {
			return nil, fmt.Errorf("creating a work directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.Background().V(100)))
	defer cancel()

	fmt.Fprintf(progress, "building a %s graph\n", cfg.Shape)
	w, err := buildWorld(ctx, cfg.Shape)
	if err != nil {
		return nil, err
	}
	facts, err := graphFacts(w.cluster, w.graph, validateNamespace, validateName)
	if err != nil {
		return nil, err
	}

	fmt.Fprintln(progress, "starting nodeguard in a process of its own")
	ep, stopNodeguard, err := startNodeguard(ctx, spawn, dir, progress)
	if err != nil {
		return nil, err
	}
	defer stopNodeguard()

	fmt.Fprintf(progress, "starting opa %s with the shipped policies and the graph facts\n", rep.OPAVersion)
	if err := writePolicies(dir, facts); err != nil {
		return nil, err
	}
	roots, err := rootsFrom(ep.CertFile)
	if err != nil {
		return nil, err
	}
	probe := loadtest.NewClient(loadtest.HTTP1, roots, 1)
	opa, err := startOPA(ctx, binary, dir, ep.CertFile, ep.KeyFile, probe, progress)
	if err != nil {
		return nil, err
	}
	defer opa.stop()

	targets, err := buildTargets(ctx, cfg, w, ep, opa, probe)
	if err != nil {
		return nil, err
	}

	rep.LoadBefore = loadtest.LoadAverage()
	rep.StallBefore = loadtest.MeasureStalls(time.Second)
	for _, p := range cfg.Protocols {
		client := loadtest.NewClient(p, roots, cfg.Concurrency)
		for _, t := range targets {
			fmt.Fprintf(progress, "loading %s %s over %s\n", t.endpoint, t.request, p)
			row, err := loadPair(ctx, cfg, client, p, t)
			if err != nil {
				client.CloseIdleConnections()
				return nil, fmt.Errorf("%s %s over %s: %w", t.endpoint, t.request, p, err)
			}
			rep.Rows = append(rep.Rows, row)
		}
		client.CloseIdleConnections()
	}
	rep.LoadAfter = loadtest.LoadAverage()
	rep.Took = time.Since(began)
	return rep, nil
}

// startNodeguard starts the child and reads its endpoints.
func startNodeguard(ctx context.Context, spawn func(ctx context.Context, dir string) (*exec.Cmd, error), dir string, logTo io.Writer) (*Endpoints, func(), error) {
	cmd, err := spawn(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("nodeguard's output: %w", err)
	}
	cmd.Stderr = logTo
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting nodeguard: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	var ep Endpoints
	if err := json.NewDecoder(stdout).Decode(&ep); err != nil {
		stop()
		return nil, nil, fmt.Errorf("reading nodeguard's endpoints: %w", err)
	}
	ep.PID = cmd.Process.Pid
	return &ep, stop, nil
}

func rootsFrom(certFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the serving certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	return roots, nil
}

// pair is one kind of request on both servers.
type pair struct {
	endpoint, request string
	ours, opa         target
	// floor is nil for rows that compare the policies alone.
	floor *target
}

// loadPair calibrates a request count from a short warm-up of each server,
// then runs the rounds, alternating which server goes first.
func loadPair(ctx context.Context, cfg Config, client *http.Client, p loadtest.Protocol, t pair) (Row, error) {
	row := Row{Endpoint: t.endpoint, Request: t.request, Protocol: p}
	fastest := 0.0
	for _, tg := range []target{t.ours, t.opa} {
		res, err := loadtest.Load{Client: client, URL: tg.url, Bodies: tg.bodies, Concurrency: cfg.Concurrency,
			Requests: 20 * cfg.Concurrency, Check: tg.check}.Run(ctx)
		if err != nil {
			return row, fmt.Errorf("warm-up: %w", err)
		}
		fastest = max(fastest, res.Throughput())
	}
	// Each round of the faster server lasts about RoundDuration; the other
	// takes longer, and both answer the same requests.
	row.Requests = max(4*cfg.Concurrency, int(fastest*cfg.RoundDuration.Seconds()))
	for round := range cfg.Rounds {
		// Rotate who goes first, so that no server always follows the
		// same one.
		order := []*target{&t.ours, &t.opa}
		if t.floor != nil {
			order = append(order, t.floor)
		}
		for i := range order {
			tg := order[(i+round)%len(order)]
			cpuBefore, cpuErr := processCPU(tg.pid)
			if cpuErr != nil && !errors.Is(cpuErr, errNoProcessCPU) {
				return row, cpuErr
			}
			res, err := loadtest.Load{Client: client, URL: tg.url, Bodies: tg.bodies, Concurrency: cfg.Concurrency,
				Requests: row.Requests, Check: tg.check}.Run(ctx)
			if err != nil {
				return row, err
			}
			var cpu []time.Duration
			if cpuErr == nil {
				cpuAfter, err := processCPU(tg.pid)
				if err != nil {
					return row, err
				}
				cpu = []time.Duration{cpuAfter - cpuBefore}
			}
			switch tg {
			case &t.ours:
				row.Ours, row.OursCPU = append(row.Ours, res), append(row.OursCPU, cpu...)
			case &t.opa:
				row.OPA, row.OPACPU = append(row.OPA, res), append(row.OPACPU, cpu...)
			default:
				row.Floor, row.FloorCPU = append(row.Floor, res), append(row.FloorCPU, cpu...)
			}
		}
	}
	return row, nil
}

// opaAnswer is the stock server's answer to either query.
type opaAnswer struct {
	Result *struct {
		Deny  []policyMessage `json:"deny"`
		Warn  []policyMessage `json:"warn"`
		Allow bool            `json:"allow"`
	} `json:"result"`
}

type policyMessage struct {
	Rule string `json:"rule"`
	Msg  string `json:"msg"`
}

func messages(vs []policy.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Rule+": "+v.Message)
	}
	slices.Sort(out)
	return out
}

func opaMessages(ms []policyMessage) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Rule+": "+m.Msg)
	}
	slices.Sort(out)
	return out
}

// askOPA posts body to url and decodes the answer.
func askOPA(ctx context.Context, client *http.Client, url string, body []byte) (*opaAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("opa answered %s: %s", resp.Status, raw)
	}
	var ans opaAnswer
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Result == nil {
		return nil, fmt.Errorf("opa answered something else than a result (%v): %s", err, raw)
	}
	return &ans, nil
}

// statusOK checks that a server answered 200 with a body that carries
// marker: cheap enough not to weigh on the client, and enough to tell an
// error page from an answer (the verdicts are compared before the load).
func statusOK(marker string) func(int, *http.Response, []byte) error {
	return func(_ int, resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(marker)) {
			return fmt.Errorf("status %s: %.300s", resp.Status, body)
		}
		return nil
	}
}

var errDisagree = errors.New("nodeguard and the stock OPA server decide differently")

// buildTargets prepares the request bodies of both servers, and checks
// once per distinct request that the stock server's policy verdict equals
// nodeguard's engine's and its policy endpoint's.
func buildTargets(ctx context.Context, cfg Config, w *world, ep *Endpoints, opa *opaServer, client *http.Client) ([]pair, error) {
	opaURL := opa.url
	reqs := cfg.Shape.Mixed([]cluster.Kind{cluster.AllowedRead, cluster.RefusedRead, cluster.OwnNodeGet}, 4096, 42)
	reviews, inputs, ins, err := authzBodies(reqs, w.graph)
	if err != nil {
		return nil, err
	}
	for i, in := range ins {
		ours, err := w.engine.EvalAuthz(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("nodeguard's engine on request %d: %w", i, err)
		}
		for _, url := range []string{opaURL + opaAuthzPath, ep.PolicyAuthz} {
			theirs, err := askOPA(ctx, client, url, inputs[i])
			if err != nil {
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
			if !slices.Equal(messages(ours.Deny), opaMessages(theirs.Result.Deny)) || ours.Allow != theirs.Result.Allow {
				return nil, fmt.Errorf("%w on authorization request %d at %s: nodeguard %+v, answer %+v", errDisagree, i, url, ours, *theirs.Result)
			}
		}
	}
	opaAuthz := target{url: opaURL + opaAuthzPath, bodies: inputs, check: statusOK(`"result":`), pid: opa.cmd.Process.Pid}
	pairs := []pair{{
		endpoint: "/authorize", request: "node reads: allowed, refused, own Node (mixed)",
		ours:  target{url: ep.Authorize, bodies: reviews, check: statusOK(`"status":{`), pid: ep.PID},
		opa:   opaAuthz,
		floor: &target{url: ep.FloorAuthorize, bodies: reviews, check: statusOK(`"status":{`), pid: ep.PID},
	}}
	policyPairs := []pair{{
		endpoint: "policies only, authorization", request: "node reads: allowed, refused, own Node (mixed)",
		ours: target{url: ep.PolicyAuthz, bodies: inputs, check: statusOK(`"result":`), pid: ep.PID},
		opa:  opaAuthz,
	}}

	cases, err := validateCases(cfg.Shape, w.graph)
	if err != nil {
		return nil, err
	}
	for _, vc := range cases {
		ours, err := w.engine.EvalAdmission(ctx, vc.in)
		if err != nil {
			return nil, fmt.Errorf("nodeguard's engine on %s: %w", vc.name, err)
		}
		for _, url := range []string{opaURL + opaAdmissionPath, ep.PolicyAdmission} {
			theirs, err := askOPA(ctx, client, url, vc.input)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", vc.name, err)
			}
			if !slices.Equal(messages(ours.Deny), opaMessages(theirs.Result.Deny)) || !slices.Equal(messages(ours.Warn), opaMessages(theirs.Result.Warn)) {
				return nil, fmt.Errorf("%w on %s at %s: nodeguard %+v, answer %+v", errDisagree, vc.name, url, ours, *theirs.Result)
			}
		}
		opaAdmission := target{url: opaURL + opaAdmissionPath, bodies: [][]byte{vc.input}, check: statusOK(`"result":`), pid: opa.cmd.Process.Pid}
		pairs = append(pairs, pair{
			endpoint: "/validate", request: vc.name,
			ours:  target{url: ep.Validate, bodies: [][]byte{vc.review}, check: statusOK(`"allowed":true`), pid: ep.PID},
			opa:   opaAdmission,
			floor: &target{url: ep.FloorValidate, bodies: [][]byte{vc.review}, check: statusOK(`"allowed":true`), pid: ep.PID},
		})
		policyPairs = append(policyPairs, pair{
			endpoint: "policies only, admission", request: vc.name,
			ours: target{url: ep.PolicyAdmission, bodies: [][]byte{vc.input}, check: statusOK(`"result":`), pid: ep.PID},
			opa:  opaAdmission,
		})
	}
	return append(pairs, policyPairs...), nil
}
