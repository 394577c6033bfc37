//go:build !linux

package doctor

import (
	"context"
	"errors"
)

// HostReader reads the node's kernel state; vpcnet nodes are Linux, so
// elsewhere it says it cannot.
type HostReader struct {
	AWSNodeCheckpoint string
	KubeletLog        string
	VethPrefix        string
}

// Host implements Host.
func (HostReader) Host(context.Context) (HostFacts, error) {
	return HostFacts{}, errors.New("host: vpcnet nodes run Linux; doctor reads the host only there")
}
