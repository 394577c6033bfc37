package kubecluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// process is one program the cluster runs, with its log in a file. It is
// started in a network namespace when nsPath is set, killed if this process
// dies (Pdeathsig), and stopped by its PID.
type process struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startProcess(nsPath, logPath string, env []string, bin string, args ...string) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	start := cmd.Start
	if nsPath != "" {
		err = fabric.Do(nsPath, start)
	} else {
		err = start()
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &process{name: filepath.Base(bin), log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process's ID.
func (p *process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *process) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and, after grace, SIGKILL, and waits for the end.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// tail is the end of the process's log, for error messages.
func (p *process) tail(lines int) string { return tailFile(p.log, lines) }

func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// exitError says how the process ended, with the end of its log.
func (p *process) exitError() error {
	_, err := p.Exited()
	if err == nil {
		err = errors.New("exited")
	}
	return fmt.Errorf("%s %w; last lines of %s:\n%s", p.name, err, p.log, p.tail(30))
}
