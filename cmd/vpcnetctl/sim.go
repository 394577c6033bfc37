package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/vpcnet/vpcnet/sim"
)

// simUsage lists the sim subcommands.
const simUsage = `usage: vpcnetctl sim COMMAND [ARGS]; every command takes --help
  vpcnetctl sim demo [--bin DIR] [--state DIR]    run the whole demo and tear it down
  vpcnetctl sim up [--topology FILE] [--bin DIR] [--state DIR] [--prefix PREFIX] [--agent-env NAME=VALUE]...
                                                  start a cluster and keep it up
  vpcnetctl sim pod add NODE NAME | pod del NAME | pod list
  vpcnetctl sim agent stop|start|kill NODE        stop, start or kill one node's vpcnetd
  vpcnetctl sim status                            each agent's readiness and last error, pods, pools
  vpcnetctl sim down                              stop it and remove what its state directory recorded
  vpcnetctl sim serve --topology FILE             only the EC2 API and IMDS, on loopback
Commands act on the cluster whose state is in --state DIR (default ` + defaultStateDir + `);
clusters with different state directories run side by side.`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, simUsage)
	}
	if wantHelp(args) {
		fmt.Fprintln(stdout, simUsage)
		return nil
	}
	sub := simCommands()[args[0]]
	if sub == nil {
		return fmt.Errorf("%w: unknown \"sim %s\"; %s", errUsage, args[0], simUsage)
	}
	err := sub(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed: asking for it is no failure
	}
	return err
}

// simCommands are the subcommands of `vpcnetctl sim`, by name.
func simCommands() map[string]func(context.Context, []string, io.Writer, io.Writer) error {
	return map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"serve": simServe, "demo": simDemo, "up": simUp, "down": simDown,
		"pod": simPod, "status": simStatus, "run": simRun, "agent": simAgent,
	}
}

// simServe runs the local cloud until ctx ends: the EC2 API on one
// listener and each instance's IMDS on its own, then prints the endpoints
// and, per instance, the environment an agent on it needs.
func simServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := simFlags("serve", "--topology FILE [--ec2-listen ADDR] [--imds-listen ADDR] [-v]", stderr)
	topoPath := fs.String("topology", "", "topology file, YAML or JSON (see sim/README.md)")
	ec2Listen := fs.String("ec2-listen", "127.0.0.1:0", "address for the EC2 API; port 0 picks a free one")
	imdsListen := fs.String("imds-listen", "127.0.0.1:0", "address for the first instance's IMDS; with port P the k-th instance gets P+k, with port 0 each a free one")
	verbose := fs.Bool("v", false, "log every API request")
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if *topoPath == "" || len(pos) > 0 {
		return fmt.Errorf("%w: want \"vpcnetctl sim serve --topology FILE [--ec2-listen ADDR] [--imds-listen ADDR]\"", errUsage)
	}
	topo, err := sim.LoadTopology(*topoPath)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cloud, err := sim.NewCloud(topo, sim.Options{Logger: log})
	if err != nil {
		return err
	}
	defer cloud.Close()

	var servers []*http.Server
	errc := make(chan error, 1+len(topo.Instances))
	serve := func(addr string, h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return "", err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		return "http://" + ln.Addr().String(), nil
	}
	defer func() { shutdown(servers, log) }() // servers grows below

	ec2URL, err := serve(*ec2Listen, cloud.EC2Handler())
	if err != nil {
		return fmt.Errorf("ec2 listener: %w", err)
	}
	imdsHost, imdsPort, err := net.SplitHostPort(*imdsListen)
	if err != nil {
		return fmt.Errorf("%w: --imds-listen %q: %v", errUsage, *imdsListen, err)
	}
	firstPort, err := strconv.Atoi(imdsPort)
	if err != nil {
		return fmt.Errorf("%w: --imds-listen %q: port must be a number", errUsage, *imdsListen)
	}
	instances := cloud.Instances()
	imdsURLs := make([]string, len(instances))
	for k, in := range instances {
		port := 0
		if firstPort != 0 {
			port = firstPort + k
		}
		if imdsURLs[k], err = serve(net.JoinHostPort(imdsHost, strconv.Itoa(port)), cloud.IMDSHandler(in.ID)); err != nil {
			return fmt.Errorf("imds listener for %s: %w", in.ID, err)
		}
	}

	fmt.Fprintf(stdout, "ec2  %s\n", ec2URL)
	for k, in := range instances {
		fmt.Fprintf(stdout, "imds %s %s (%s, %s, %s)\n", in.ID, imdsURLs[k], in.Type, in.SubnetID, in.PrivateIP)
	}
	for k, in := range instances {
		// The instance ID as access key: the local cloud applies the
		// instance's role (the topology's roles) to calls signed with it.
		fmt.Fprintf(stdout, "env  %s VPCNET_EC2_ENDPOINT=%s VPCNET_IMDS_ENDPOINT=%s AWS_REGION=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=sim\n",
			in.ID, ec2URL, imdsURLs[k], topo.Region, in.ID)
	}
	fmt.Fprintln(stdout, "ready")

	select {
	case <-ctx.Done():
		log.Info("stopping the local cloud")
		return nil
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
}

// shutdown stops every server, letting requests in flight finish.
func shutdown(servers []*http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}
}
