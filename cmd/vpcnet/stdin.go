package main

import (
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/types"
)

// limitStdin makes sure skel, which reads stdin whole, reads at most
// maxStdin bytes: it reads that much plus one itself and refuses a longer
// configuration before skel sees any of it, else it hands skel the bytes
// through a pipe in place of os.Stdin. parseConf's own check alone would
// come after a 100 MB read. VERSION and the about text read no stdin (a
// person may run the binary at a terminal), so they are left alone.
func limitStdin() *types.Error {
	switch os.Getenv("CNI_COMMAND") {
	case "", "VERSION":
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdin+1))
	if err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("read the network configuration from stdin: %v", err), "")
	}
	if len(data) > maxStdin {
		return stdinTooLong()
	}
	r, w, err := os.Pipe()
	if err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("pass the network configuration on: %v", err), "")
	}
	go func() {
		// skel reads to the end; the pipe's reader lives as long as the
		// process, so the write finishes or the process is gone.
		_, _ = w.Write(data)
		w.Close()
	}()
	os.Stdin = r
	return nil
}
