package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodeguard/nodeguard/test/scale"
)

// runRollout is --rollout: one rollout benchmark, its report, and an error
// when an outcome the short test asserts does not hold.
func runRollout(o scale.RolloutOptions, workDir string, keep bool, jsonOutput string, stdout, stderr io.Writer) (err error) {
	dir := workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nodeguard-rollout-scale-"); err != nil {
			return fmt.Errorf("creating a work directory: %w", err)
		}
		if !keep {
			defer os.RemoveAll(dir)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.WorkDir, o.Progress = dir, stderr
	r, err := scale.RunRollout(ctx, o)
	if werr := scale.WriteRolloutReport(stdout, o, r); werr != nil {
		err = errors.Join(err, werr)
	}
	if jsonOutput != "" {
		data, jerr := json.MarshalIndent(r, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(jsonOutput, data, 0o644)
		}
		if jerr != nil {
			err = errors.Join(err, fmt.Errorf("writing %s: %w", jsonOutput, jerr))
		}
	}
	if err == nil {
		err = outcomes(o, r)
	}
	if keep || workDir != "" {
		fmt.Fprintln(stderr, "work directory:", dir)
	}
	return err
}

func outcomes(o scale.RolloutOptions, r scale.RolloutResult) error {
	var errs []error
	if !r.Complete || r.Updated != o.Nodes {
		errs = append(errs, fmt.Errorf("the rollout is not complete (%d of %d Nodes updated)", r.Updated, o.Nodes))
	}
	if r.MaxUnavailable > o.Batch() {
		errs = append(errs, fmt.Errorf("%d Nodes were unavailable at once, more than maxUnavailable (%d)", r.MaxUnavailable, o.Batch()))
	}
	if r.Assigned[1] != o.Nodes {
		errs = append(errs, fmt.Errorf("not every Node was assigned exactly once: %v (times: Nodes)", r.Assigned))
	}
	if o.Drain {
		errs = append(errs, scale.DrainOutcomes(o, r))
	}
	return errors.Join(errs...)
}
