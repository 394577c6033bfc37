package doctor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane"
)

// HostReader reads the node's links, pod routes and nftables chains from
// the kernel (dumps only) and a few files. It reads the namespace of the
// calling thread.
type HostReader struct {
	// AWSNodeCheckpoint is where the Amazon VPC CNI keeps its ipam.json.
	AWSNodeCheckpoint string
	// KubeletLog is a file with kubelet's log, "" for none.
	KubeletLog string
	// VethPrefix names the agent's host veths (AWS_VPC_K8S_CNI_VETHPREFIX).
	VethPrefix string
}

var _ Host = HostReader{}

// kubeletLogTail bounds what doctor reads of kubelet's log.
const kubeletLogTail = 4 << 20

// Host implements Host.
func (h HostReader) Host(ctx context.Context) (HostFacts, error) {
	var hf HostFacts
	var err error
	if hf.Hostname, err = os.Hostname(); err != nil {
		return hf, fmt.Errorf("host name: %w", err)
	}
	links, err := netlink.LinkList()
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return hf, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		hf.Links = append(hf.Links, Link{Name: a.Name, MAC: a.HardwareAddr.String(), Kind: l.Type()})
	}
	prefix := h.VethPrefix
	if prefix == "" {
		prefix = dataplane.DefaultVethPrefix
	}
	// IPv4 pods' routes, then IPv6 pods' (an IPv6 node's): one host
	// route each through its veth.
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return hf, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			dev := names[r.LinkIndex]
			if r.Dst == nil || !strings.HasPrefix(dev, prefix) {
				continue
			}
			if ones, bits := r.Dst.Mask.Size(); ones != bits {
				continue
			}
			if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
				hf.PodRoutes = append(hf.PodRoutes, PodRoute{Addr: a.Unmap(), Dev: dev})
			}
		}
	}
	if hf.Chains, err = nftChains(); err != nil {
		return hf, err
	}
	if h.AWSNodeCheckpoint != "" {
		if _, err := os.Stat(h.AWSNodeCheckpoint); err == nil {
			hf.AWSNodeCheckpoint = h.AWSNodeCheckpoint
		}
	}
	if h.KubeletLog != "" {
		line, err := lastMatch(h.KubeletLog, "Unauthorized")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return hf, err
		}
		hf.KubeletUnauthorized = line
	}
	return hf, nil
}

func nftChains() ([]NFTChain, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	var out []NFTChain
	for _, ch := range chains {
		out = append(out, NFTChain{Family: family(ch.Table.Family), Table: ch.Table.Name, Chain: ch.Name})
	}
	return out, nil
}

func family(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprint(f)
}

// lastMatch is the last line containing s in the end of file path.
func lastMatch(path, s string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("kubelet log: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > kubeletLogTail {
		if _, err := f.Seek(-kubeletLogTail, io.SeekEnd); err != nil {
			return "", fmt.Errorf("kubelet log: %w", err)
		}
	}
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(s)) {
			last = strings.TrimSpace(sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("kubelet log %s: %w", path, err)
	}
	return last, nil
}
