// Command fakecri serves the kubelet's own in-memory fake container runtime
// (k8s.io/cri-client/pkg/fake) on a unix socket, so that a real kubelet runs
// on a machine without a container runtime. Pods bound to the node go
// Running; nothing executes.
//
//	fakecri --endpoint unix:///path/to/cri.sock --image-fs-dir DIR
//
// It lives in this tools module because the fake comes with the Kubernetes
// staging modules, which the product's go.mod never depends on;
// hack/testbin.sh builds it beside kube-apiserver and the kubelet.
//
// Three settings make the kubelet accept the fake: a Linux runtime
// configuration naming the cgroupfs driver, an image filesystem usage naming
// a directory the kubelet can stat, and an image size above zero (the
// kubelet refuses images of size 0).
//
// It serves until SIGTERM or SIGINT, then removes the socket. Like a real
// container runtime it outlives kubelet restarts, so pods keep their
// sandboxes across them.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fakecri:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("fakecri", flag.ContinueOnError)
	endpoint := flags.String("endpoint", "", "where to serve the CRI, as unix:///absolute/path.sock (the kubelet's containerRuntimeEndpoint)")
	imageFSDir := flags.String("image-fs-dir", "", "an existing directory reported as the image filesystem; the kubelet's image garbage collector stats it")
	imageSize := flags.Uint64("image-size", 1<<20, "size in bytes reported for every pulled image; must be above 0, as the kubelet refuses images of size 0")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	socket, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok || !filepath.IsAbs(socket) {
		return fmt.Errorf("--endpoint must be unix:///absolute/path, got %q", *endpoint)
	}
	if *imageFSDir == "" {
		return fmt.Errorf("--image-fs-dir is required")
	}
	if info, err := os.Stat(*imageFSDir); err != nil {
		return fmt.Errorf("--image-fs-dir: %w", err)
	} else if !info.IsDir() {
		return fmt.Errorf("--image-fs-dir: %s is not a directory", *imageFSDir)
	}
	if *imageSize == 0 {
		return fmt.Errorf("--image-size must be above 0")
	}
	// A socket left by a killed run would make the listener fail.
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing a stale socket: %w", err)
	}

	runtime := fake.NewFakeRemoteRuntime()
	runtime.RuntimeService.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS,
	}
	runtime.ImageService.SetFakeImageSize(*imageSize)
	runtime.ImageService.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: *imageFSDir},
		UsedBytes:  &runtimeapi.UInt64Value{Value: 0},
		InodesUsed: &runtimeapi.UInt64Value{Value: 0},
	}})
	if err := runtime.Start(*endpoint); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fakecri: serving on %s\n", *endpoint)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	runtime.Stop()
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the socket: %w", err)
	}
	return nil
}
