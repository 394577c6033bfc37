package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/sim"
)

const (
	// IMDSAddress is where each node's instance metadata answers, as on
	// EC2, so the agent needs no IMDS setting.
	IMDSAddress = "169.254.169.254:80"
	// EC2Address is where each node reaches the EC2 API, on its own
	// loopback: the agent's VPCNET_EC2_ENDPOINT is http://EC2Address.
	EC2Address = "127.0.0.1:8780"
	// DefaultMTU is the MTU of every ENI link, EC2's jumbo frame size.
	DefaultMTU = 9001
)

// Options tune a Fabric.
type Options struct {
	// Prefix starts the name of every namespace the fabric creates; Sweep
	// with the same prefix removes leftovers. Required.
	Prefix string
	// Logger receives one line per change mirrored. Nil discards.
	Logger *slog.Logger
	// MTU of the ENI links; zero means DefaultMTU.
	MTU int
	// Created, if set, is called with the name of each namespace right
	// after it is created, so the caller can write it down and remove
	// exactly it later even if this process is killed before Close. An
	// error deletes the namespace again and fails Start.
	Created func(name string) error
}

// Fabric mirrors one emulated VPC into network namespaces.
type Fabric struct {
	cloud   *sim.Cloud
	prefix  string
	log     *slog.Logger
	mtu     int
	created func(name string) error

	router   *space
	internet *space
	nodes    map[string]*node // by instance ID, fixed after Start

	hooks        mirrorHooks
	cancelEvents func()
	done         chan struct{}
	servers      []*http.Server

	// mu6 guards vpc6, the VPC IPv6 blocks routed on the router and from
	// the internet; it is held across the netlink calls that route a new
	// block, so that two lanes never route one twice.
	mu6  sync.Mutex
	vpc6 map[netip.Prefix]bool

	// mu guards everything below.
	mu    sync.Mutex
	enis  map[string]*wiredENI // by ENI ID
	lanes map[slot]*lane
	errs  []error
	// initialApplied counts the ENIs attached when mirroring began that
	// are wired (or failed to be).
	initialApplied int
	changed        chan struct{}
}

// space is one namespace the fabric owns.
type space struct {
	name string
	path string
	nl   *netlink.Handle
}

type node struct {
	*space
	id    string
	index int
}

// wiredENI is an attached ENI as the router sees it.
type wiredENI struct {
	node       *node
	routerLink string
	mac        net.HardwareAddr
}

// Start builds the namespaces for every running instance of c, wires the
// ENIs attached now, and keeps mirroring EC2's changes until Close.
func Start(ctx context.Context, c *sim.Cloud, opts Options) (*Fabric, error) {
	return start(ctx, c, opts, mirrorHooks{})
}

// mirrorHooks let a test hold the mirroring at a point; nil ones do nothing.
type mirrorHooks struct {
	beforeApply  func(sim.Event) // before any work on an event
	beforeRoutes func(sim.Event) // an attach, after the wire exists, before its routes
}

func start(ctx context.Context, c *sim.Cloud, opts Options, hooks mirrorHooks) (_ *Fabric, err error) {
	if opts.Prefix == "" {
		return nil, errors.New("fabric: Options.Prefix is required so leftovers can be found")
	}
	f := &Fabric{
		cloud: c, prefix: opts.Prefix, log: opts.Logger, mtu: opts.MTU, created: opts.Created,
		nodes: map[string]*node{}, enis: map[string]*wiredENI{}, lanes: map[slot]*lane{}, changed: make(chan struct{}),
		vpc6: map[netip.Prefix]bool{},
		done: make(chan struct{}), hooks: hooks,
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.mtu == 0 {
		f.mtu = DefaultMTU
	}
	defer func() {
		if err != nil {
			f.teardown()
		}
	}()
	if f.router, err = f.newSpace("router"); err != nil {
		return nil, err
	}
	if err := setSysctls(f.router.path, routerSysctls()); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	if err := sourceCheck6(f.router.path); err != nil {
		return nil, err
	}
	if f.internet, err = f.newSpace("internet"); err != nil {
		return nil, err
	}
	// The internet's IPv6 address is the fabric's to give, like EC2's, so
	// it skips DAD too (see ipv6.go).
	if err := setSysctls(f.internet.path, map[string]string{
		"net.ipv6.conf.all.accept_dad": "0", "net.ipv6.conf.default.accept_dad": "0",
	}); err != nil {
		return nil, fmt.Errorf("internet: %w", err)
	}
	if err := f.wireInternet(); err != nil {
		return nil, err
	}
	want := 0
	for i, in := range c.Instances() {
		if in.State != "running" {
			continue
		}
		if err := f.newNode(in.ID, i); err != nil {
			return nil, err
		}
		ifs, err := c.Interfaces(in.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range ifs {
			if e.Status == "in-use" || e.Status == "detaching" {
				want++
			}
		}
	}
	events, cancel := c.Subscribe()
	f.cancelEvents = cancel
	go f.mirror(events)
	if err := f.waitApplied(ctx, want); err != nil {
		return nil, fmt.Errorf("fabric: wire the ENIs attached at start: %w", err)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

// newSpace creates a namespace named prefix+suffix with loopback up. It
// returns the space whenever the namespace exists, also with an error, so
// the caller can record it for teardown.
func (f *Fabric) newSpace(suffix string) (*space, error) {
	s := &space{name: f.prefix + suffix}
	path, err := CreateNS(s.name)
	if err != nil {
		return nil, err
	}
	if f.created != nil {
		if err := f.created(s.name); err != nil {
			return nil, errors.Join(fmt.Errorf("record namespace %s: %w", s.name, err), DeleteNS(s.name))
		}
	}
	s.path = path
	h, err := nsHandle(path)
	if err != nil {
		return s, err
	}
	defer h.Close()
	if s.nl, err = netlink.NewHandleAt(h); err != nil {
		return s, fmt.Errorf("netlink in %s: %w", s.name, err)
	}
	lo, err := s.nl.LinkByName("lo")
	if err == nil {
		err = s.nl.LinkSetUp(lo)
	}
	if err != nil {
		return s, fmt.Errorf("loopback up in %s: %w", s.name, err)
	}
	return s, nil
}

// newNode creates an instance's namespace and serves its IMDS and the EC2
// API inside it.
func (f *Fabric) newNode(id string, index int) error {
	s, err := f.newSpace(id)
	if s != nil {
		f.nodes[id] = &node{space: s, id: id, index: index}
	}
	if err != nil {
		return err
	}
	if err := setSysctl(s.path, "net.ipv4.ip_forward", "1"); err != nil {
		return fmt.Errorf("node %s: %w", id, err)
	}
	lo, err := s.nl.LinkByName("lo")
	if err != nil {
		return err
	}
	imds := netip.MustParseAddrPort(IMDSAddress).Addr()
	if err := s.nl.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(imds, 32))}); err != nil {
		return fmt.Errorf("node %s: IMDS address: %w", id, err)
	}
	if err := f.serve(s.path, IMDSAddress, f.cloud.IMDSHandler(id)); err != nil {
		return fmt.Errorf("node %s: IMDS: %w", id, err)
	}
	if err := f.serve(s.path, EC2Address, f.cloud.EC2HandlerFor(id)); err != nil {
		return fmt.Errorf("node %s: EC2 API: %w", id, err)
	}
	return nil
}

func (f *Fabric) serve(nsPath, addr string, h http.Handler) error {
	ln, err := Listen(nsPath, "tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	f.servers = append(f.servers, srv)
	go srv.Serve(ln)
	return nil
}

// NodeNS is the path of the instance's namespace.
func (f *Fabric) NodeNS(instanceID string) (string, bool) {
	n, ok := f.nodes[instanceID]
	if !ok {
		return "", false
	}
	return n.path, true
}

// RouterNS is the path of the VPC router's namespace.
func (f *Fabric) RouterNS() string { return f.router.path }

// Err reports every change the fabric failed to mirror; nil means the
// namespaces match what EC2 said.
func (f *Fabric) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// Close stops mirroring and deletes every namespace the fabric made; the
// veths in them go with them.
func (f *Fabric) Close() error {
	return f.teardown()
}

func (f *Fabric) teardown() error {
	if f.cancelEvents != nil {
		f.cancelEvents()
		<-f.done
		f.cancelEvents = nil
	}
	for _, s := range f.servers {
		s.Close()
	}
	f.servers = nil
	var errs []error
	for _, n := range f.nodes {
		errs = append(errs, f.drop(n.space))
	}
	f.nodes = map[string]*node{}
	errs = append(errs, f.drop(f.internet), f.drop(f.router))
	f.internet, f.router = nil, nil
	return errors.Join(errs...)
}

func (f *Fabric) drop(s *space) error {
	if s == nil {
		return nil
	}
	if s.nl != nil {
		s.nl.Close()
	}
	return DeleteNS(s.name)
}
