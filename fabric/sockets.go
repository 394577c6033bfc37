package fabric

import (
	"context"
	"net"
)

// Listen opens a listener inside the namespace at nsPath. A socket belongs
// to the namespace it was created in, so it can then be served from any
// goroutine.
func Listen(nsPath, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := Do(nsPath, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// Dial connects from inside the namespace at nsPath.
func Dial(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := Do(nsPath, func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
