package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// EgressV4VethsByContainer finds the host veths of the IPv4 egress
// attachments already wired on the node, by sandbox (CNI container ID):
// host-local's files in dataDir (one directory per network, a file per
// address holding the container ID on its first line) say which pod holds
// which 169.254.172.x address, and the node's /32 route to the address
// names its veth. vpcnet-egress-v4 names its veths by attachment
// (EgressV4VethName), but aws-node's egress-cni names them at random: a
// pod it wired before a switch-over is found here, so that its IPv4
// egress is judged too. A missing dataDir means none.
func (d *Dataplane) EgressV4VethsByContainer(ctx context.Context, dataDir string) (map[string]string, error) {
	held := map[netip.Addr]string{}
	nets, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read host-local's directory: %w", err)
	}
	for _, n := range nets {
		if !n.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dataDir, n.Name()))
		if err != nil {
			return nil, fmt.Errorf("read host-local's directory: %w", err)
		}
		for _, f := range files {
			addr, err := netip.ParseAddr(f.Name())
			if err != nil || !addr.Is4() {
				continue // last_reserved_ip.0, lock
			}
			b, err := os.ReadFile(filepath.Join(dataDir, n.Name(), f.Name()))
			if err != nil {
				return nil, fmt.Errorf("read host-local's allocation: %w", err)
			}
			id, _, _ := strings.Cut(string(b), "\n")
			if id = strings.TrimSpace(id); id != "" {
				held[addr] = id
			}
		}
	}
	out := map[string]string{}
	if len(held) == 0 {
		return out, nil
	}
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	routes, err := s.nl.routes(mainTable)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		dst := prefixOf(r.Dst)
		id, ok := held[dst.Addr()]
		if !ok || dst.Bits() != 32 || r.LinkIndex == 0 {
			continue
		}
		l, err := s.nl.linkByIndex(r.LinkIndex)
		if err != nil {
			return nil, err
		}
		if l != nil {
			out[id] = l.Attrs().Name
		}
	}
	return out, nil
}
