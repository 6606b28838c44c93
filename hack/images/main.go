// Command images builds nodeguard's container images (`make images`) and
// pushes them (`make push`). It only turns flags into pkg/images options;
// docs/images.md describes what it makes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeguard/nodeguard/pkg/images"
)

const usage = `hack/images: nodeguard's container images, from scratch, for linux/amd64 and linux/arm64.

Usage:
  images build [flags]   compile cmd/webhook, cmd/agent and cmd/rollout-controller and write,
                         into --output: <program>.oci.tar (an OCI image layout tarball holding
                         the multi-platform index), digests.txt and kustomization.yaml (a
                         kustomize Component pinning the manifests' images by digest)
  images push [flags]    push the indexes in --output to the registry they were built for,
                         tagged with their version, with the credentials of docker's config
                         (~/.docker/config.json, $DOCKER_CONFIG, credential helpers)

Run "images build --help" or "images push --help" for the flags. See docs/images.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = build(ctx, args[1:], stdout, stderr)
	case "push":
		err = push(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// errUsage is a flag error pflag has already reported.
var errUsage = errors.New("usage")

func parse(fs *pflag.FlagSet, args []string, stderr io.Writer, what string) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: images %s [flags]\n\nFlags:\n%s", what, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "images %s takes no arguments, got %q\n", what, fs.Args())
		return errUsage
	}
	return nil
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		o     = images.BuildOptions{Log: stdout}
		epoch int64
	)
	fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
	fs.StringVar(&o.Registry, "registry", images.DefaultRegistry,
		"registry and path the images are named under: REGISTRY/webhook, REGISTRY/agent, REGISTRY/rollout-controller")
	fs.StringVar(&o.Source.Version, "version", "",
		"the images' tag and org.opencontainers.image.version; empty means what 'git describe --tags --always --dirty' says, or "+images.FallbackVersion+" outside git")
	fs.StringVar(&o.Source.Revision, "revision", "",
		"org.opencontainers.image.revision; empty means the commit checked out, or "+images.UnknownRevision+" outside git")
	fs.Int64Var(&epoch, "source-date-epoch", 0,
		"seconds since 1970 for every timestamp in the images when git cannot give HEAD's commit time (a checkout without .git); with git the commit time wins")
	fs.StringVar(&o.OutputDir, "output", "_output/images", "directory the archives, digests.txt and kustomization.yaml are written to")
	fs.IntVar(&o.Jobs, "jobs", 2, "how many go builds (one per architecture), then how many images, are made at once")
	fs.StringVar(&o.Go, "go", "go", "the go command that compiles the programs")
	fs.StringVar(&o.ModuleDir, "module-dir", "", "root of the nodeguard module, where go build runs; empty means the module of the working directory")
	if err := parse(fs, args, stderr, "build"); err != nil {
		return err
	}
	source, err := images.DetectSource(ctx, moduleDirOrCwd(o.ModuleDir), o.Source, time.Unix(epoch, 0))
	if err != nil {
		return err
	}
	o.Source = source
	start := time.Now()
	if _, err := images.Build(ctx, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s for %s in %s into %s\n", o.Source.Version, o.Registry, time.Since(start).Round(time.Second), o.OutputDir)
	return nil
}

func push(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := images.PushOptions{Log: stdout}
	fs := pflag.NewFlagSet("push", pflag.ContinueOnError)
	fs.StringVar(&o.Registry, "registry", images.DefaultRegistry,
		"registry and path to push to; it must be the --registry the archives were built with, or nothing is pushed")
	fs.StringVar(&o.Version, "version", "",
		"when set, the version the archives must have been built for (the tag pushed is always the built one)")
	fs.StringVar(&o.OutputDir, "output", "_output/images", "directory 'images build' wrote to")
	fs.BoolVar(&o.Insecure, "insecure", false,
		"let the registry answer over plain HTTP when HTTPS fails (a registry without TLS); TLS is still verified when used. localhost, loopback and private addresses get this without the flag")
	if err := parse(fs, args, stderr, "push"); err != nil {
		return err
	}
	_, err := images.Push(ctx, o)
	return err
}

func moduleDirOrCwd(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
