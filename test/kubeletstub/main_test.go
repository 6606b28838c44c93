package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// probe returns "ok", "500", "refused" or "timeout".
func probe(port int) string {
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "timeout"
		}
		return "refused"
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return "ok"
	}
	return strconv.Itoa(resp.StatusCode)
}

func TestStub(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubeletstub")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "config.yaml")
	pidFile := filepath.Join(dir, "pid")
	restartLog := filepath.Join(dir, "restarts.log")
	port := freePort(t)
	writeConfig := func(staticPodURL string) {
		t.Helper()
		content := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
		if staticPodURL != "" {
			content += "staticPodURL: " + staticPodURL + "\n"
		}
		if err := os.WriteFile(config, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restart := func() {
		t.Helper()
		if out, err := exec.Command(bin, "restart", "--pid-file", pidFile).CombinedOutput(); err != nil {
			t.Fatalf("restart: %v\n%s", err, out)
		}
	}
	await := func(want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := probe(port)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("healthz is %q, want %q", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	writeConfig("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := exec.CommandContext(ctx, bin, "serve", "--config", config, "--healthz-port", strconv.Itoa(port),
		"--pid-file", pidFile, "--restart-log", restartLog, "--startup-delay", "10ms")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	await("ok")

	for _, step := range []struct{ url, want string }{
		{"http://kubeletstub.invalid/unhealthy", "500"},
		{"http://kubeletstub.invalid/crash", "refused"},
		{"http://kubeletstub.invalid/hang", "timeout"},
		{"http://example.com/pods", "ok"},
	} {
		writeConfig(step.url)
		restart()
		await(step.want)
	}
	// /configz shows what the stub read at its last restart, as a
	// kubelet's does; an edit of the file not followed by a restart does
	// not show.
	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readConfigz := func() (map[string]any, error) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/configz")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var body map[string]map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return nil, err
		}
		return body["kubeletconfig"], nil
	}
	if got, err := readConfigz(); err != nil || got["staticPodURL"] != "http://example.com/pods" || got["maxPods"] != nil {
		t.Fatalf("/configz before the restart: %v, %v", got, err)
	}
	// The restart command returns once it has signalled the stub, which
	// may still answer as it was for a moment: wait for the new process.
	restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := readConfigz()
		if err == nil && got["maxPods"] == float64(77) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/configz after the restart: %v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	await("ok")

	// A brief blip: the next two probes fail, whatever the configuration.
	resp, err := http.Post("http://127.0.0.1:"+strconv.Itoa(port)+"/stub/fail-next?count=2", "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("fail-next: %v %v", resp, err)
	}
	resp.Body.Close()
	for i, want := range []string{"500", "500", "ok"} {
		if got := probe(port); got != want {
			t.Fatalf("probe %d after fail-next: %q, want %q", i, got, want)
		}
	}

	// A crash loop: up, down, up again, without a restart in between.
	writeConfig("http://kubeletstub.invalid/crashloop?up=400ms&down=400ms")
	restart()
	await("ok")
	await("refused")
	await("ok")

	if err := os.WriteFile(config, []byte("- not a mapping"), 0o644); err != nil {
		t.Fatal(err)
	}
	restart()
	await("refused")

	want := []string{healthy, unhealthy, crash, hang, healthy, healthy, crashLoop, crash}
	// The crash loop may have been refusing connections already when the
	// last restart was sent: wait for its record rather than for a probe.
	var behaviors []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		behaviors = readBehaviors(t, restartLog)
		if len(behaviors) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if len(behaviors) != len(want) {
		t.Fatalf("restart log %v, want %v", behaviors, want)
	}
	for i := range want {
		if behaviors[i] != want[i] {
			t.Fatalf("restart log %v, want %v", behaviors, want)
		}
	}

	// Restarting a stub that is gone fails, like restarting a missing unit.
	_ = serve.Process.Kill()
	_ = serve.Wait()
	if err := exec.Command(bin, "restart", "--pid-file", pidFile).Run(); err == nil {
		t.Fatal("restarting a dead stub succeeded")
	}
}

// readBehaviors reads the behaviours of the restart log's records.
func readBehaviors(t *testing.T, restartLog string) []string {
	t.Helper()
	f, err := os.Open(restartLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var behaviors []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var r restartRecord
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		behaviors = append(behaviors, r.Behavior)
	}
	return behaviors
}
