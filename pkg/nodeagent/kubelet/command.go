package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ParseCommand splits a command line into arguments without a shell: words
// are separated by blanks; single quotes keep everything literally; double
// quotes keep blanks and honour \" and \\; a backslash outside quotes escapes
// the next character. No variables, globs, pipes or redirections: to have
// them, say so explicitly with `sh -c '...'`.
func ParseCommand(line string) ([]string, error) {
	var (
		args    []string
		word    strings.Builder
		inWord  bool
		quote   rune
		escaped bool
	)
	for _, c := range line {
		switch {
		case escaped:
			word.WriteRune(c)
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				word.WriteRune(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				word.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\':
			escaped, inWord = true, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				args = append(args, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	switch {
	case escaped:
		return nil, fmt.Errorf("command %q ends with a lone backslash", line)
	case quote != 0:
		return nil, fmt.Errorf("command %q: unterminated %c quote", line, quote)
	}
	if inWord {
		args = append(args, word.String())
	}
	if len(args) == 0 {
		return nil, errors.New("the command is empty")
	}
	return args, nil
}

// CommandRestarter restarts the kubelet by running a command: for hosts
// whose kubelet is not a systemd unit, and for tests that stand in for one.
// StopArgv and StartArgv, when given, stop and start it, for a restart
// that must change the kubelet's state files while it is down.
type CommandRestarter struct {
	Argv      []string
	StopArgv  []string
	StartArgv []string
	Timeout   time.Duration
}

// ErrNoStopCommand is returned by Stop and Start when no such command was
// given.
var ErrNoStopCommand = errors.New("no command to stop and start the kubelet was given")

// NewCommandRestarter runs argv, killing it after timeout (none when 0).
func NewCommandRestarter(argv []string, timeout time.Duration) *CommandRestarter {
	return &CommandRestarter{Argv: argv, Timeout: timeout}
}

// maxCommandOutput bounds the output quoted in an error.
const maxCommandOutput = 2048

// Restart runs the command and waits for it. A non-zero exit, a timeout or a
// command that cannot start is an error quoting the command's output.
func (r *CommandRestarter) Restart(ctx context.Context) error {
	if len(r.Argv) == 0 {
		return errors.New("no restart command configured")
	}
	return r.run(ctx, "restarting", r.Argv)
}

// Stop runs the stop command; ErrNoStopCommand when there is none.
func (r *CommandRestarter) Stop(ctx context.Context) error {
	if len(r.StopArgv) == 0 || len(r.StartArgv) == 0 {
		return ErrNoStopCommand
	}
	return r.run(ctx, "stopping", r.StopArgv)
}

// Start runs the start command; ErrNoStopCommand when there is none.
func (r *CommandRestarter) Start(ctx context.Context) error {
	if len(r.StopArgv) == 0 || len(r.StartArgv) == 0 {
		return ErrNoStopCommand
	}
	return r.run(ctx, "starting", r.StartArgv)
}

func (r *CommandRestarter) run(ctx context.Context, doing string, argv []string) error {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	// A command that leaves a child holding its output open (a daemon
	// started without redirection) must not hang the agent.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	out := strings.TrimSpace(output.String())
	if len(out) > maxCommandOutput {
		out = out[len(out)-maxCommandOutput:]
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	if out == "" {
		return fmt.Errorf("%s the kubelet with %q: %w", doing, strings.Join(argv, " "), err)
	}
	return fmt.Errorf("%s the kubelet with %q: %w: %s", doing, strings.Join(argv, " "), err, out)
}
