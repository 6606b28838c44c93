package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ephemeralRangeFile says where the kernel picks the local ports of
// outgoing connections (and of binds to port 0).
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// defaultEphemeralLow is Linux's default start of that range, assumed when
// the file cannot be read.
const defaultEphemeralLow = 32768

// minWindow is the fewest ports below the ephemeral range worth choosing
// from; with fewer, Get falls back to the kernel's choice.
const minWindow = 1024

// handedOut remembers every port Get returned in this process: a
// process under test that has not bound its port yet, or that is
// restarting, leaves it free, and a second caller must not get it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Get returns a loopback port that is free now and that nothing else
// in this test process was given. It is chosen below the kernel's ephemeral
// range: a port from there (what binding port 0 gives) can be taken by any
// outgoing connection between this call and the bind of the process under
// test, or while that process restarts, whereas a port below the range is
// taken only by an explicit bind. The start is random, so that test
// processes running side by side rarely probe the same ports.
func Get() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	low, high, ok := portWindow(readEphemeralRange())
	if !ok {
		return kernelPort()
	}
	width := high - low
	start := rand.IntN(width)
	for i := range width {
		port := low + (start+i)%width
		if handedOut.ports[port] || !bindable(port) {
			continue
		}
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port: none of %d-%d is free", low, high-1)
}

// kernelPort is the fallback: the kernel's choice (ephemeral), still never
// handed out twice. Called with handedOut locked.
func kernelPort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("finding a free port: the kernel kept offering ports already handed out")
}

func bindable(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// readEphemeralRange returns the file's content, or "" when it cannot be
// read (not Linux, a sandbox without /proc).
func readEphemeralRange() string {
	data, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return ""
	}
	return string(data)
}

// portWindow is where Get chooses, [low, high): the upper half of the
// unprivileged ports below the ephemeral range, which starts at the first
// number of rangeFile's content ("32768\t60999\n"); the default start when
// it does not parse. ok is false when the window would be too small.
func portWindow(rangeFile string) (low, high int, ok bool) {
	high = defaultEphemeralLow
	if fields := strings.Fields(rangeFile); len(fields) == 2 {
		if n, err := strconv.Atoi(fields[0]); err == nil && n > 0 && n <= 65535 {
			high = n
		}
	}
	low = max(high/2, 1024)
	return low, high, high-low >= minWindow
}
