package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progressEvery is how often a slow step says it is still at it.
const progressEvery = 10 * time.Second

// console prints the story. Progress lines may come from a ticker while a
// step runs, so every write is serialised.
type console struct {
	mu  sync.Mutex
	out io.Writer
}

func newConsole(out io.Writer) *console { return &console{out: out} }

// Write lets commands run in-process (kubectl nodeguard) print through the
// console.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *console) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(c, format, args...)
}

// chapter starts a part of the story.
func (c *console) chapter(title string) { c.printf("\n=== %s\n", title) }

// step says what happens next.
func (c *console) step(format string, args ...any) { c.printf("==> "+format+"\n", args...) }

// detail is an indented line under a step.
func (c *console) detail(format string, args ...any) {
	for _, line := range strings.Split(fmt.Sprintf(format, args...), "\n") {
		c.printf("    %s\n", line)
	}
}

// slow runs fn after announcing it as a step and, while it runs, says every
// progressEvery that it still is, so a long build or wait never looks hung.
func (c *console) slow(ctx context.Context, what string, fn func(context.Context) error) error {
	c.step("%s", what)
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(progressEvery)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				c.detail("... still at it (%s)", time.Since(start).Round(time.Second))
			}
		}
	})
	err := fn(ctx)
	close(done)
	// No line may follow the step's end, nor outlive run.
	wg.Wait()
	if elapsed := time.Since(start); err == nil && elapsed >= progressEvery {
		c.detail("done in %s", elapsed.Round(time.Second))
	}
	return err
}
