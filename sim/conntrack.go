package sim

import "fmt"

// connTrack is an ENI's connection-tracking idle timeouts in seconds, 0
// where none was set: EC2 then applies the instance type's default and
// describes no value for it.
type connTrack struct {
	tcpEstablished, udpStream, udp int
}

// connTrackFields are the timeouts as EC2 names them in
// ConnectionTrackingSpecification, with EC2's bounds (EC2 API reference,
// ConnectionTrackingSpecificationRequest).
var connTrackFields = []struct {
	name   string
	lo, hi int
	field  func(*connTrack) *int
}{
	{"TcpEstablishedTimeout", 60, 432000, func(c *connTrack) *int { return &c.tcpEstablished }},
	{"UdpStreamTimeout", 60, 180, func(c *connTrack) *int { return &c.udpStream }},
	{"UdpTimeout", 30, 60, func(c *connTrack) *int { return &c.udp }},
}

// parseConnTrack reads ConnectionTrackingSpecification.* of a request;
// given says whether any timeout was.
func parseConnTrack(p fields) (ct connTrack, given bool, err error) {
	for _, f := range connTrackFields {
		name := "ConnectionTrackingSpecification." + f.name
		n, ok, err := p.intOpt(name)
		if err != nil {
			return connTrack{}, false, err
		}
		if !ok {
			continue
		}
		if n < f.lo || n > f.hi {
			return connTrack{}, false, errorf(codeInvalidParameterValue, "Value (%d) for parameter %s is invalid. Expecting a value from %d to %d seconds.", n, name, f.lo, f.hi)
		}
		*f.field(&ct) = n
		given = true
	}
	return ct, given, nil
}

// merge is c with the timeouts set in o replacing its own, as
// ModifyNetworkInterfaceAttribute changes those it is given.
func (c connTrack) merge(o connTrack) connTrack {
	for _, f := range connTrackFields {
		if v := *f.field(&o); v != 0 {
			*f.field(&c) = v
		}
	}
	return c
}

// xmlConnTrack is NetworkInterface.connectionTrackingConfiguration.
type xmlConnTrack struct {
	TCPEstablished int `xml:"tcpEstablishedTimeout,omitempty"`
	UDPStream      int `xml:"udpStreamTimeout,omitempty"`
	UDP            int `xml:"udpTimeout,omitempty"`
}

// xml is c as EC2 describes it: the timeouts set, and no element at all
// for an ENI with none.
func (c connTrack) xml() *xmlConnTrack {
	if c == (connTrack{}) {
		return nil
	}
	return &xmlConnTrack{TCPEstablished: c.tcpEstablished, UDPStream: c.udpStream, UDP: c.udp}
}

// ConnTrackSpec is an interface's connection-tracking idle timeouts in
// seconds as a topology sets them (a launch template's
// ConnectionTrackingSpecification); 0 leaves one at the default.
type ConnTrackSpec struct {
	TCPEstablishedTimeout int `json:"tcpEstablishedTimeout,omitempty"`
	UDPStreamTimeout      int `json:"udpStreamTimeout,omitempty"`
	UDPTimeout            int `json:"udpTimeout,omitempty"`
}

func (s *ConnTrackSpec) connTrack() connTrack {
	if s == nil {
		return connTrack{}
	}
	return connTrack{tcpEstablished: s.TCPEstablishedTimeout, udpStream: s.UDPStreamTimeout, udp: s.UDPTimeout}
}

// validate checks each timeout set against EC2's bounds.
func (s *ConnTrackSpec) validate() error {
	ct := s.connTrack()
	for _, f := range connTrackFields {
		if v := *f.field(&ct); v != 0 && (v < f.lo || v > f.hi) {
			return fmt.Errorf("connectionTracking: %s %d is outside EC2's %d to %d seconds", f.name, v, f.lo, f.hi)
		}
	}
	return nil
}
