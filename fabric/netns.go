package fabric

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named namespaces live, as `ip netns` keeps them.
const netnsDir = "/var/run/netns"

// CreateNS makes a named network namespace, bind-mounted under netnsDir
// so that `ip netns exec` and other processes can enter it, and returns
// its path. Names should carry a prefix Sweep can find.
func CreateNS(name string) (string, error) {
	errc := make(chan error, 1)
	// The thread that unshares is left in the new namespace unless it can
	// return; a dedicated, locked goroutine keeps that from leaking into
	// anything else.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err != nil {
			_ = netns.Set(orig)
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		h.Close()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- fmt.Errorf("return to the original namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return "", fmt.Errorf("create network namespace %s: %w", name, err)
	}
	return filepath.Join(netnsDir, name), nil
}

// DeleteNS removes a named namespace; the kernel frees it, and the veths
// in it, once no process or open handle holds it. A missing one is fine.
func DeleteNS(name string) error {
	p := filepath.Join(netnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount network namespace %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %s: %w", name, err)
	}
	return nil
}

// Names lists the named namespaces whose names start with prefix, to check
// that a run left nothing behind.
func Names(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network namespaces: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Sweep deletes every named namespace whose name starts with prefix: what a
// run that was killed before it could clean up left behind. It returns the
// names it removed. Use it only with a prefix no other run can hold (a
// random one, as the benchmark driver makes): a shared prefix deletes the
// namespaces of clusters that are still running. simcluster removes
// exactly what a cluster recorded instead.
func Sweep(prefix string) ([]string, error) {
	if prefix == "" {
		return nil, errors.New("sweep: empty prefix would remove every namespace")
	}
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := DeleteNS(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// Do runs f on a thread inside the namespace at path; a socket f opens or
// a process it starts belongs to that namespace.
func Do(path string, f func() error) error {
	n, err := ns.GetNS(path)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Do(func(ns.NetNS) error { return f() })
}

// setSysctl writes a net.* sysctl inside the namespace at path; /proc/sys/net
// shows the namespace of the thread that opens it.
func setSysctl(path, key, value string) error {
	return setSysctls(path, map[string]string{key: value})
}

// setSysctls writes several from one visit to the namespace.
func setSysctls(path string, kv map[string]string) error {
	return Do(path, func() error {
		for key, value := range kv {
			file := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
			if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
			}
		}
		return nil
	})
}
