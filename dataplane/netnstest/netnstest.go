// Package netnstest gives kernel tests throwaway network namespaces: each
// is removed when the test ends, also when it fails, and tests skip with a
// reason where they cannot create one (not root, no CAP_NET_ADMIN).
package netnstest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Require skips t unless the process is root with CAP_NET_ADMIN and
// CAP_SYS_ADMIN (needed to create and bind-mount namespaces).
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates network namespaces")
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Skipf("cannot read capabilities: %v", err)
	}
	if data[0].Effective&(1<<unix.CAP_NET_ADMIN) == 0 {
		t.Skip("needs CAP_NET_ADMIN")
	}
	if data[0].Effective&(1<<unix.CAP_SYS_ADMIN) == 0 {
		t.Skip("needs CAP_SYS_ADMIN to create network namespaces")
	}
}

// NewNS creates a network namespace that is deleted when t ends.
func NewNS(t testing.TB) ns.NetNS {
	t.Helper()
	Require(t)
	n, err := testutils.NewNS()
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot create a network namespace: %v", err)
		}
		t.Fatalf("create network namespace: %v", err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(n.Path()); errors.Is(err, os.ErrNotExist) {
			return // the test removed it already
		}
		Remove(t, n)
	})
	return n
}

// Remove deletes n now, as a runtime does before or after CNI DEL. The
// kernel destroys the namespace, and the veths in it, once nothing holds it.
func Remove(t testing.TB, n ns.NetNS) {
	t.Helper()
	_ = n.Close()
	if err := testutils.UnmountNS(n); err != nil {
		t.Errorf("remove network namespace %s: %v", n.Path(), err)
	}
}

// Do runs f inside n and fails t on error.
func Do(t testing.TB, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// Ping sends one ICMP echo from inside n to dst and waits up to timeout for
// the reply.
func Ping(n ns.NetNS, dst netip.Addr, timeout time.Duration) error {
	var conn *icmp.PacketConn
	// The socket belongs to the namespace it was created in.
	if err := n.Do(func(ns.NetNS) error {
		var err error
		conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return fmt.Errorf("open ICMP socket in %s: %w", n.Path(), err)
	}
	defer conn.Close()
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: 1, Data: []byte("vpcnet")}}
	wire, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	if _, err := conn.WriteTo(wire, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for {
		_ = conn.SetReadDeadline(deadline)
		nr, from, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("ping %s: no reply: %w", dst, err)
		}
		reply, err := icmp.ParseMessage(1, buf[:nr])
		if err != nil || reply.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if echo, ok := reply.Body.(*icmp.Echo); ok && echo.ID == id && from.String() == dst.String() {
			return nil
		}
	}
}
