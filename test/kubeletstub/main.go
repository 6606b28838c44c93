// Command kubeletstub stands in for the kubelet in nodeguard's agent tests,
// where there is no container runtime and no real kubelet.
//
//	kubeletstub serve --config FILE --healthz-port PORT --pid-file FILE [--restart-log FILE] [--startup-delay D]
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
//
// Any other value, or none, is healthy. A file that is missing or not a YAML
// mapping behaves as a crash, like a kubelet that cannot start.
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
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
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
	port         int
	restartLog   string
	startupDelay time.Duration

	mu       sync.Mutex
	server   *http.Server
	behavior string
	// release unblocks hanging handlers at the next restart.
	release chan struct{}
}

func serveCommand(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s := &stub{}
	fs.StringVar(&s.configPath, "config", "", "kubelet configuration file to read")
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
	data, readErr := os.ReadFile(s.configPath)
	behavior := behaviorOf(data, readErr)
	if err := s.logRestart(data, behavior); err != nil {
		return err
	}
	time.Sleep(s.startupDelay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behavior = behavior
	s.release = make(chan struct{})
	if behavior == crash {
		return nil
	}
	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	if err != nil {
		return fmt.Errorf("listening on port %d: %w", s.port, err)
	}
	release := s.release
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		switch behavior {
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
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.server = server
	go func() { _ = server.Serve(listener) }()
	return nil
}

// down stops serving at once, as a killed process would.
func (s *stub) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release != nil {
		close(s.release)
		s.release = nil
	}
	if s.server != nil {
		_ = s.server.Close()
		s.server = nil
	}
}

func behaviorOf(data []byte, readErr error) string {
	if readErr != nil {
		return crash
	}
	var fields map[string]any
	if err := yaml.Unmarshal(data, &fields); err != nil || fields == nil {
		return crash
	}
	url, _ := fields["staticPodURL"].(string)
	switch strings.TrimPrefix(url, triggerPrefix) {
	case crash:
		return crash
	case hang:
		return hang
	case unhealthy:
		return unhealthy
	}
	return healthy
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
