package images

import (
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Program is one command of the repository that ships as an image.
type Program struct {
	// Name is the command's directory under cmd/, the binary's name and the
	// last element of its image's repository.
	Name string
	// KustomizeName is the symbolic image name the manifests use, which the
	// component maps to the built image.
	KustomizeName string
	// ValuesKey is the program's key under images: in the Helm chart's
	// values (charts/nodeguard).
	ValuesKey string
	// User is the image's "uid:gid".
	User string
	// Description becomes org.opencontainers.image.description.
	Description string
}

// nonroot is the uid and gid of the unprivileged user, the one distroless
// images call nonroot, so that policies written for those images fit.
const nonroot = 65532

// nonrootUser is nonroot as an image config's "uid:gid".
var nonrootUser = strconv.Itoa(nonroot) + ":" + strconv.Itoa(nonroot)

// Programs are the images Build makes, in the order it reports them.
func Programs() []Program {
	return []Program{
		{
			Name:          "webhook",
			KustomizeName: "nodeguard-webhook",
			ValuesKey:     "webhook",
			User:          nonrootUser,
			Description:   "nodeguard's authorization (/authorize) and admission (/validate) webhook for Dynamic Kubelet Config",
		},
		{
			Name:          "agent",
			KustomizeName: "nodeguard-agent",
			ValuesKey:     "agent",
			// The agent runs as root: it writes the kubelet's configuration
			// file and state, which are root-owned on the host, and restarts
			// kubelet.service through systemd on the system D-Bus, which only
			// root may do without a polkit rule.
			User:        "0:0",
			Description: "nodeguard's node agent: applies, tries and rolls back the kubelet configuration assigned to its Node",
		},
		{
			Name:          "rollout-controller",
			KustomizeName: "nodeguard-rollout-controller",
			ValuesKey:     "rolloutController",
			User:          nonrootUser,
			Description:   "nodeguard's KubeletConfigRollout controller: rolls kubelet configurations across pools of Nodes, canary first",
		},
	}
}

// Platforms are the platforms of every index, in index order.
func Platforms() []v1.Platform {
	return []v1.Platform{
		{OS: "linux", Architecture: "amd64"},
		// Variant v8 is what containerd and docker report for arm64 hosts;
		// the binary is built with GOARM64=v8.0 to match.
		{OS: "linux", Architecture: "arm64", Variant: "v8"},
	}
}

// goarchEnv is the environment that pins a platform's instruction set, so
// that a GOAMD64 or GOARM64 in the builder's environment cannot change the
// binaries (and the digests).
func goarchEnv(p v1.Platform) []string {
	env := []string{"GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	switch p.Architecture {
	case "amd64":
		env = append(env, "GOAMD64=v1")
	case "arm64":
		env = append(env, "GOARM64=v8.0")
	}
	return env
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}
