//go:build !unix

package statelock

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("the agent runs on Linux nodes; file locks are not implemented here")

func tryLock(*os.File) error { return errUnsupported }

func unlock(*os.File) error { return errUnsupported }
