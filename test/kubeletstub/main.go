// Command kubeletstub stands in for the kubelet in the few agent tests that
// need a fault no real kubelet produces on demand: a health check that
// fails an exact number of times while the kubelet runs, a kubelet that
// serves for a set time between crashes.
// Every other test runs a real kubelet (test/e2e/framework, test/kubeletunit).
//
//	kubeletstub serve --config FILE [--config-dir DIR] --healthz-port PORT --pid-file FILE [--restart-log FILE] [--startup-delay D]
//	kubeletstub restart --pid-file FILE
//
// "serve" reads the kubelet configuration file the agent writes and serves
// /healthz on 127.0.0.1:PORT. SIGHUP is a kubelet restart: the listener
// closes, the file is read again, and after --startup-delay the stub serves
// again, behaving as the new file says. "restart" sends that SIGHUP (it is
// the agent's --kubelet-restart-command in tests) and fails when the stub is
// not running, as `systemctl restart` of a missing unit would.
//
// The configuration's staticPodURL tells the stub how to misbehave, since no
// real field would make a healthy kubelet fail on demand:
//
//	http://kubeletstub.invalid/crash       never serves: connections are refused (a crash loop)
//	http://kubeletstub.invalid/hang        accepts connections and never answers (a hung kubelet)
//	http://kubeletstub.invalid/unhealthy   answers 500 (a kubelet whose health checks fail)
//	http://kubeletstub.invalid/crashloop?up=300ms&down=500ms
//	                                       serves for up, refuses connections for down, and so
//	                                       on (a kubelet that crashes and is restarted by systemd)
//
// Any other value, or none, is healthy. A file that is missing or not a YAML
// mapping behaves as a crash, like a kubelet that cannot start.
//
// GET /configz, on the same port, answers as a kubelet's: the configuration
// the stub read at its last restart, {"kubeletconfig": {...}}, so that the
// agent sees it run what it wrote. (A real kubelet adds its defaults and
// serves it on its HTTPS port; the agent compares only the fields a
// configuration sets.)
//
// POST /stub/fail-next?count=N, on the /healthz port, makes the next N
// /healthz requests answer 500 whatever the configuration: a brief blip
// that has nothing to do with it. GET (or the POST) answers how many are
// still to fail.
//
// Each restart appends a JSON line to --restart-log: the time, the file's
// SHA-256 and the behaviour, so tests and benchmarks can see what the
// "kubelet" runs and when it was restarted.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// Behaviours, chosen by staticPodURL.
const (
	healthy   = "healthy"
	crash     = "crash"
	hang      = "hang"
	unhealthy = "unhealthy"
	crashLoop = "crashloop"

	triggerPrefix = "http://kubeletstub.invalid/"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeletstub serve|restart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serveCommand(os.Args[2:])
	case "restart":
		err = restartCommand(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want serve or restart", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletstub:", err)
		os.Exit(1)
	}
}

func restartCommand(args []string) error {
	fs := flag.NewFlagSet("restart", flag.ContinueOnError)
	pidFile := fs.String("pid-file", "", "PID file written by serve")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := os.ReadFile(*pidFile)
	if err != nil {
		return fmt.Errorf("reading the PID file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("PID file %s: %w", *pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signalling the stub (pid %d): %w", pid, err)
	}
	return nil
}

// stub is the running fake kubelet.
type stub struct {
	configPath   string
	configDir    string
	port         int
	restartLog   string
	startupDelay time.Duration

	// failNext is how many /healthz requests still answer 500, whatever
	// the behaviour: a brief blip, set through /stub/fail-next.
	failNext atomic.Int64

	mu sync.Mutex
	// release ends the current run; done is closed once it has stopped
	// serving.
	release chan struct{}
	done    chan struct{}
	// running is the configuration read at the last restart, as /configz
	// serves it.
	running []byte
}

func serveCommand(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s := &stub{}
	fs.StringVar(&s.configPath, "config", "", "kubelet configuration file to read")
	fs.StringVar(&s.configDir, "config-dir", "", "drop-in directory merged over --config, as the kubelet's --config-dir (configdir.go)")
	fs.IntVar(&s.port, "healthz-port", 0, "port for /healthz on 127.0.0.1")
	pidFile := fs.String("pid-file", "", "where to write this process's PID")
	fs.StringVar(&s.restartLog, "restart-log", "", "file to append one JSON line per restart to")
	fs.DurationVar(&s.startupDelay, "startup-delay", 200*time.Millisecond, "how long a restart keeps /healthz down")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.configPath == "" || s.port == 0 || *pidFile == "" {
		return errors.New("serve needs --config, --healthz-port and --pid-file")
	}
	if err := os.WriteFile(*pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the PID file: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 16)
	signal.Notify(hup, syscall.SIGHUP)

	if err := s.restart(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			s.down()
			return nil
		case <-hup:
			if err := s.restart(); err != nil {
				return err
			}
		}
	}
}

// restart is what a kubelet restart looks like from outside: down, read the
// file, up after a delay.
func (s *stub) restart() error {
	s.down()
	data, readErr := s.readConfig()
	b := behaviorOf(data, readErr)
	s.mu.Lock()
	s.running = data
	s.mu.Unlock()
	if err := s.logRestart(data, b.name); err != nil {
		return err
	}
	time.Sleep(s.startupDelay)
	var listener net.Listener
	if b.name != crash {
		var err error
		if listener, err = s.listen(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release, s.done = make(chan struct{}), make(chan struct{})
	go s.run(b, listener, s.release, s.done)
	return nil
}

func (s *stub) listen() (net.Listener, error) {
	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	if err != nil {
		return nil, fmt.Errorf("listening on port %d: %w", s.port, err)
	}
	return listener, nil
}

// run serves as b says until release is closed, then closes done. A
// crash loop serves for b.up, stops for b.down, and starts again.
func (s *stub) run(b behavior, listener net.Listener, release, done chan struct{}) {
	defer close(done)
	if listener == nil {
		<-release
		return
	}
	for {
		server := s.server(b.name, release)
		go func() { _ = server.Serve(listener) }()
		if b.name != crashLoop {
			<-release
			_ = server.Close()
			return
		}
		select {
		case <-release:
			_ = server.Close()
			return
		case <-time.After(b.up):
		}
		_ = server.Close()
		select {
		case <-release:
			return
		case <-time.After(b.down):
		}
		var err error
		for listener, err = s.listen(); err != nil; listener, err = s.listen() {
			fmt.Fprintln(os.Stderr, "kubeletstub: crash loop:", err)
			select {
			case <-release:
				return
			case <-time.After(b.down):
			}
		}
	}
}

func (s *stub) server(name string, release chan struct{}) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.takeFailure() {
			http.Error(w, "[-]syncloop failed: kubeletstub told to fail this probe", http.StatusInternalServerError)
			return
		}
		switch name {
		case hang:
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case unhealthy:
			http.Error(w, "[-]syncloop failed: kubeletstub told to be unhealthy", http.StatusInternalServerError)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		data := s.running
		s.mu.Unlock()
		var fields map[string]any
		if err := yaml.Unmarshal(data, &fields); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kubeletconfig": fields})
	})
	mux.HandleFunc("/stub/fail-next", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			count, err := strconv.ParseInt(r.URL.Query().Get("count"), 10, 64)
			if err != nil || count < 0 {
				http.Error(w, "want ?count=N, N >= 0", http.StatusBadRequest)
				return
			}
			s.failNext.Store(count)
		}
		_, _ = fmt.Fprintln(w, s.failNext.Load())
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// takeFailure reports whether this probe is one of the failNext to fail,
// counting it. A compare-and-swap lost to a concurrent probe is retried:
// giving up would answer healthy while failures are still owed.
func (s *stub) takeFailure() bool {
	for {
		n := s.failNext.Load()
		if n <= 0 {
			return false
		}
		if s.failNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// down stops serving at once, as a killed process would.
func (s *stub) down() {
	s.mu.Lock()
	release, done := s.release, s.done
	s.release, s.done = nil, nil
	s.mu.Unlock()
	if release != nil {
		close(release)
		<-done
	}
}

// behavior is what a configuration makes the stub do.
type behavior struct {
	name string
	// up and down time a crash loop.
	up, down time.Duration
}

func behaviorOf(data []byte, readErr error) behavior {
	if readErr != nil {
		return behavior{name: crash}
	}
	var fields map[string]any
	if err := yaml.Unmarshal(data, &fields); err != nil || fields == nil {
		return behavior{name: crash}
	}
	raw, _ := fields["staticPodURL"].(string)
	if !strings.HasPrefix(raw, triggerPrefix) {
		return behavior{name: healthy}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return behavior{name: healthy}
	}
	switch name := strings.TrimPrefix(u.Path, "/"); name {
	case crash, hang, unhealthy:
		return behavior{name: name}
	case crashLoop:
		b := behavior{name: crashLoop, up: 300 * time.Millisecond, down: 500 * time.Millisecond}
		if d, err := time.ParseDuration(u.Query().Get("up")); err == nil && d > 0 {
			b.up = d
		}
		if d, err := time.ParseDuration(u.Query().Get("down")); err == nil && d > 0 {
			b.down = d
		}
		return b
	}
	return behavior{name: healthy}
}

// restartRecord is one line of the restart log.
type restartRecord struct {
	Time     time.Time `json:"time"`
	SHA256   string    `json:"sha256"`
	Behavior string    `json:"behavior"`
}

func (s *stub) logRestart(data []byte, behavior string) error {
	if s.restartLog == "" {
		return nil
	}
	sum := sha256.Sum256(data)
	line, err := json.Marshal(restartRecord{Time: time.Now(), SHA256: hex.EncodeToString(sum[:]), Behavior: behavior})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.restartLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening the restart log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing the restart log: %w", err)
	}
	return f.Close()
}
