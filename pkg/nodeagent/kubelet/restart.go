package kubelet

import "context"

// Restarter restarts the kubelet. Restart returns once the restart has been
// carried out, or with an error saying why it was not; the agent then retries
// the whole apply with backoff. Whether the kubelet is healthy afterwards is
// for the trial to find out, not for the restarter.
type Restarter interface {
	Restart(ctx context.Context) error
}

// StopStarter stops and starts the kubelet, for a restart that must
// change the kubelet's state files while it is down. A CommandRestarter
// without stop and start commands returns ErrNoStopCommand.
type StopStarter interface {
	Stop(ctx context.Context) error
	Start(ctx context.Context) error
}

var (
	_ Restarter   = (*CommandRestarter)(nil)
	_ Restarter   = (*SystemdRestarter)(nil)
	_ StopStarter = (*CommandRestarter)(nil)
	_ StopStarter = (*SystemdRestarter)(nil)
)
