package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

type request struct {
	command string
	reply   chan string
}

// listen serves the control socket: one command per connection, one line
// each way.
func listen(path string, requests chan<- request) (net.Listener, error) {
	// A socket left behind by a killed unit would make Listen fail.
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("removing a stale control socket: %w", err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("serving the control socket: %w", err)
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go serveConn(conn, requests)
		}
	}()
	return listener, nil
}

func serveConn(conn net.Conn, requests chan<- request) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return
	}
	req := request{command: strings.TrimSpace(line), reply: make(chan string, 1)}
	requests <- req
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(conn, <-req.reply)
}

// ask sends command to the unit and returns its answer without the "ok "
// prefix; an "error" answer is an error.
func ask(path, command string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return "", fmt.Errorf("no kubelet unit answers on %s: %w", path, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintln(conn, command); err != nil {
		return "", fmt.Errorf("sending %s: %w", command, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("waiting for the answer to %s: %w", command, err)
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok "); ok {
		return rest, nil
	}
	return "", fmt.Errorf("%s failed: %s", command, strings.TrimPrefix(line, "error "))
}
