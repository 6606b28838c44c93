package framework

import (
	"context"
	"slices"
)

// RestartWebhookWith stops the webhook and starts it again with extra flags
// after its own (for a flag given twice, the last value wins), returning
// StartWebhook's error: a webhook that refuses its flags exits, and the
// error carries its log. The webhook's own flags are kept for the next
// start; call RestartWebhookWith(ctx) to go back to them.
func (e *Env) RestartWebhookWith(ctx context.Context, extra ...string) error {
	e.StopWebhook()
	e.mu.Lock()
	own := e.args
	e.args = append(slices.Clone(own), extra...)
	e.mu.Unlock()
	err := e.StartWebhook(ctx)
	e.mu.Lock()
	e.args = own
	e.mu.Unlock()
	if err != nil {
		// The process may have exited: forget it, so that the next start
		// is not refused as "already running".
		e.StopWebhook()
	}
	return err
}
