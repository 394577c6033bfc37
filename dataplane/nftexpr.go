package dataplane

import (
	"net/netip"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/hostport"
)

// Expression builders for the few matches and statements the host rules
// use. Each returns what `nft` itself would generate for the same text, so
// `nft list table ip vpcnet` reads back as the rule comments say.

// rtnLocal is the kernel's RTN_LOCAL address type.
const rtnLocal = 2

// iifname matches the input interface: exactly name, or any interface
// whose name starts with name when wildcard is set (`iifname "eni*"`).
func iifname(name string, wildcard bool) []expr.Any {
	data := []byte(name)
	if !wildcard {
		data = make([]byte, unix.IFNAMSIZ)
		copy(data, name)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}

// daddrLocal matches packets to one of the node's own addresses; withIif
// limits it to addresses of the input interface (`fib daddr . iif type
// local`, iptables' --limit-iface-in).
func daddrLocal(withIif bool) []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, FlagIIF: withIif, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)},
	}
}

// daddrIn matches IPv4 destinations within p (`ip daddr p`).
func daddrIn(p netip.Prefix) []expr.Any {
	p = p.Masked()
	network := p.Addr().As4()
	out := []expr.Any{&expr.Payload{
		OperationType: expr.PayloadLoad, DestRegister: 1,
		Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4,
	}}
	if p.Bits() < 32 {
		m := prefixMask(p.Bits())
		out = append(out, &expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: m[:], Xor: []byte{0, 0, 0, 0},
		})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: network[:]})
}

// daddr6Is matches one IPv6 destination (`ip6 daddr a`).
func daddr6Is(a netip.Addr) []expr.Any {
	b := a.As16()
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]},
	}
}

// drop is the drop verdict.
func drop() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}} }

func prefixMask(bits int) [4]byte {
	var m [4]byte
	for i := range bits {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// ctMarkHas matches connections whose ct mark has all of bits set, or,
// when set is false, none of them (`ct mark & bits == bits|0`).
func ctMarkHas(bits uint32, set bool) []expr.Any {
	want := uint32(0)
	if set {
		want = bits
	}
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeyMARK, Register: 1},
		&expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits),
			Xor:  binaryutil.NativeEndian.PutUint32(0),
		},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(want)},
	}
}

// setCtMarkBits ORs bits into the connection's mark (`ct mark set ct mark
// | bits`), keeping bits other components own.
func setCtMarkBits(bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeyMARK, Register: 1},
		orBits(bits),
		&expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true},
	}
}

// setMetaMarkBit sets (or clears) bit in the packet mark (`meta mark set
// meta mark | bit` / `& ~bit`).
func setMetaMarkBit(bit uint32, set bool) []expr.Any {
	op := andNotBits(bit)
	if set {
		op = orBits(bit)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		op,
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true},
	}
}

// orBits is reg1 = reg1 | bits, written as (reg1 & ^bits) ^ bits.
func orBits(bits uint32) *expr.Bitwise {
	return &expr.Bitwise{
		SourceRegister: 1, DestRegister: 1, Len: 4,
		Mask: binaryutil.NativeEndian.PutUint32(^bits),
		Xor:  binaryutil.NativeEndian.PutUint32(bits),
	}
}

// andNotBits is reg1 = reg1 & ^bits.
func andNotBits(bits uint32) *expr.Bitwise {
	return &expr.Bitwise{
		SourceRegister: 1, DestRegister: 1, Len: 4,
		Mask: binaryutil.NativeEndian.PutUint32(^bits),
		Xor:  binaryutil.NativeEndian.PutUint32(0),
	}
}

// snatTo rewrites the source to addr, picking ports as ports says
// (`snat ip to addr fully-random` by default, iptables' --random-fully).
func snatTo(addr netip.Addr, ports SNATPorts) []expr.Any {
	a := addr.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.NAT{
			Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4,
			// The kernel reports max = min for a single address;
			// writing it too keeps what we write equal to what we read.
			RegAddrMin: 1, RegAddrMax: 1,
			FullyRandom: ports == "" || ports == SNATPortsFullyRandom,
			Random:      ports == SNATPortsRandom,
		},
	}
}

func verdictReturn() []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
}

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

// bitsOf splits mark into its single bits, lowest first.
func bitsOf(mark uint32) []uint32 {
	var out []uint32
	for b := uint32(1); b != 0; b <<= 1 {
		if mark&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// l4proto matches the transport protocol (`meta l4proto tcp`).
func l4proto(p hostport.Protocol) []expr.Any {
	var n byte
	switch p {
	case hostport.TCP:
		n = unix.IPPROTO_TCP
	case hostport.UDP:
		n = unix.IPPROTO_UDP
	case hostport.SCTP:
		n = unix.IPPROTO_SCTP
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{n}},
	}
}

// dport matches the transport destination port (`th dport port`); TCP,
// UDP and SCTP all carry it at offset 2.
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// dnatTo rewrites the destination (`dnat ip to addr:port`).
func dnatTo(addr netip.Addr, port uint16) []expr.Any {
	fam := uint32(unix.NFPROTO_IPV4)
	if addr.Is6() {
		fam = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: addr.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{
			Type: expr.NATTypeDestNAT, Family: fam,
			// As the kernel reports a single address and port.
			RegAddrMin: 1, RegAddrMax: 1, RegProtoMin: 2, RegProtoMax: 2, Specified: true,
		},
	}
}

// daddrOf matches one destination of either family (`ip daddr a`, `ip6
// daddr a`).
func daddrOf(a netip.Addr) []expr.Any {
	if a.Is6() {
		return daddr6Is(a)
	}
	return daddrIn(netip.PrefixFrom(a, 32))
}

// saddr6Is matches one IPv6 source (`ip6 saddr a`).
func saddr6Is(a netip.Addr) []expr.Any {
	b := a.As16()
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]},
	}
}

// saddrIs matches one IPv4 source (`ip saddr addr`).
func saddrIs(addr [4]byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
	}
}

// ctStatusHas matches connections with status bits set (`ct status dnat`).
func ctStatusHas(bits uint32) []expr.Any { return ctBitsSet(expr.CtKeySTATUS, bits) }

// ctBitsSet matches connections whose conntrack field key has one of
// bits set.
func ctBitsSet(key expr.CtKey, bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// ipCTDirReply is the kernel's IP_CT_DIR_REPLY.
const ipCTDirReply = 1

// ctDirectionReply matches packets of a connection's reply direction.
func ctDirectionReply() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ipCTDirReply}},
	}
}

// ctStateHas matches connections in one of the states bits (`ct state
// new`).
func ctStateHas(bits uint32) []expr.Any { return ctBitsSet(expr.CtKeySTATE, bits) }

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

func masquerade() []expr.Any { return []expr.Any{&expr.Masq{}} }
