// Command etcd is a build of the upstream etcd server from the Go module
// proxy, used only by nodeguard's local and test control planes.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
