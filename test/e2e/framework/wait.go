package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually looks again.
const PollInterval = 100 * time.Millisecond

// Eventually polls cond until it reports done, returns an error, ctx ends,
// or timeout passes. The error for a timeout carries what and cond's last
// detail, so that a failure says what was seen instead of only "timed out".
func Eventually(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (done bool, detail string, err error)) error {
	var last string
	var condErr error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		done, detail, err := cond(ctx)
		last, condErr = detail, err
		return done, err
	})
	switch {
	case err == nil:
		return nil
	case condErr != nil:
		return fmt.Errorf("waiting for %s: %w", what, condErr)
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for %s: %w (last: %s)", what, ctx.Err(), last)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("waiting for %s: gave up after %v; last: %s", what, timeout, last)
	default:
		return fmt.Errorf("waiting for %s: %w (last: %s)", what, err, last)
	}
}
