// Command kubeletunit plays systemd for a real kubelet in nodeguard's tests
// and in `make run`: it is what kubelet.service and `systemctl` are on a
// real node, so the agent's restart command restarts a real kubelet and a
// kubelet that exits is started again, with the delays operators see.
//
//	kubeletunit serve --control SOCKET --journal FILE [--restart-sec D] [--restart-steps N]
//	                  [--restart-max-delay D] [--config-file F] [--config-dir D]
//	                  [--private-mounts] [--sysctl K=V]... [--overlay DIR=UPPER]...
//	                  -- KUBELET [ARGS...]
//	kubeletunit restart --control SOCKET    # systemctl restart kubelet
//	kubeletunit stop|start|status --control SOCKET
//
// "serve" runs KUBELET with Restart=always semantics: when it exits on its
// own it is started again after --restart-sec, and, as systemd's
// RestartSteps= and RestartMaxDelaySec= do, each further consecutive exit
// within a short run waits longer, up to --restart-max-delay. A run that
// stays up resets the delay. "restart" stops the kubelet (SIGTERM to its process group, then
// SIGKILL after a grace period) and starts it at once, answering when the
// new process has been started, like `systemctl restart` of a Type=simple
// unit. It fails when no unit answers on the socket.
//
// With --private-mounts every start of the kubelet happens in a mount
// namespace of its own (unshare(CLONE_NEWNS), every mount private), where
// tmpfs covers /var/log and /var/lib and a plain file holding each
// --sysctl value is bind-mounted over its /proc/sys entry: the kubelet's
// writes to the host (sysctls, shared mounts of its root directory,
// /var/log/containers, /var/lib/kubelet/device-plugins) land in that
// namespace and the host is left as it was. Each --overlay DIR=UPPER mounts
// an overlay on DIR whose upper layer is the node's directory UPPER: the
// kubelet reads the host's files there, and what it creates (the
// DirectoryOrCreate hostPath volumes of pods, such as nodeguard's agent's
// /etc/nodeguard) lands in UPPER. Files put into UPPER beforehand make the
// node's layout, such as a kubeadm node's /etc/kubernetes/kubelet.conf.
//
// --journal gets a JSON line per start and per exit: the time, the PID, the
// SHA-256 of --config-file and of the files of --config-dir as they were at
// the start, why it started (start, restart, auto-restart), and on exit the
// exit status and whether the exit was asked for. Tests read it to see what
// the kubelet ran and whether it crashed.
package main
