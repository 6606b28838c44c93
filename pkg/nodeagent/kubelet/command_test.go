package kubelet

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	cases := []struct {
		line    string
		want    []string
		wantErr string
	}{
		{line: "systemctl restart kubelet", want: []string{"systemctl", "restart", "kubelet"}},
		{line: "  spaced\tout  \n", want: []string{"spaced", "out"}},
		{line: `sh -c 'kill -HUP "$(cat /run/kubelet.pid)"'`, want: []string{"sh", "-c", `kill -HUP "$(cat /run/kubelet.pid)"`}},
		{line: `a "b c" d`, want: []string{"a", "b c", "d"}},
		{line: `"say \"hi\" \\ there"`, want: []string{`say "hi" \ there`}},
		{line: `one\ word`, want: []string{"one word"}},
		{line: `empty "" arg`, want: []string{"empty", "", "arg"}},
		{line: `x$HOME*`, want: []string{"x$HOME*"}},
		{line: "", wantErr: "empty"},
		{line: "   ", wantErr: "empty"},
		{line: `'open`, wantErr: "unterminated ' quote"},
		{line: `"open`, wantErr: `unterminated " quote`},
		{line: `trailing\`, wantErr: "lone backslash"},
	}
	for _, tc := range cases {
		got, err := ParseCommand(tc.line)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseCommand(%q) = %q, %v; want error %q", tc.line, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCommand(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}

func TestRestarter(t *testing.T) {
	ctx := context.Background()
	if err := (&CommandRestarter{Argv: []string{"true"}}).Restart(ctx); err != nil {
		t.Fatalf("true: %v", err)
	}
	err := (&CommandRestarter{Argv: []string{"sh", "-c", "echo unit kubelet not found >&2; exit 5"}}).Restart(ctx)
	if err == nil || !strings.Contains(err.Error(), "unit kubelet not found") || !strings.Contains(err.Error(), "exit status 5") {
		t.Fatalf("failing command: %v", err)
	}
	err = (&CommandRestarter{Argv: []string{"/nonexistent/restart"}}).Restart(ctx)
	if err == nil {
		t.Fatal("a missing command succeeded")
	}
	err = (&CommandRestarter{Argv: []string{"sleep", "60"}, Timeout: 100 * time.Millisecond}).Restart(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging command: got %v, want a deadline error", err)
	}
	if err := (&CommandRestarter{}).Restart(ctx); err == nil {
		t.Fatal("an empty command succeeded")
	}
}
