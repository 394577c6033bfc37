package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
)

// Gather reads every source and never fails: what it cannot read is
// recorded in Facts.Sources.
func Gather(ctx context.Context, r Readers) Facts {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	f := Facts{Now: now(), StartupTaint: r.StartupTaint, ClusterName: r.ClusterName, PathDifferences: r.PathDifferences}
	note := func(name string, err error, ok string) {
		if err != nil {
			f.Sources = append(f.Sources, Source{Name: name, Detail: err.Error()})
			return
		}
		f.Sources = append(f.Sources, Source{Name: name, OK: true, Detail: ok})
	}
	skipped := func(name, why string) {
		if r.Skipped[name] {
			why = "skipped"
		}
		f.Sources = append(f.Sources, Source{Name: name, Detail: notRead + why})
	}

	if r.Agent != nil {
		var policyErr error
		st, err := r.Agent.Status(ctx)
		if err == nil {
			f.Agent = &AgentFacts{Status: st}
			if set, cerr := r.Agent.Config(ctx); cerr == nil {
				f.Agent.Config = map[string]string{}
				for _, s := range set {
					f.Agent.Config[s.Name] = s.Value
				}
			}
			if pol, perr := r.Agent.Policy(ctx, ""); perr == nil {
				f.Agent.Policy = &pol
			} else {
				policyErr = perr
			}
			if v := f.setting("VPCNET_STARTUP_TAINT"); v != "" {
				f.StartupTaint = v
			}
			if v := f.setting("CLUSTER_NAME"); v != "" {
				f.ClusterName = v
			}
		}
		detail := fmt.Sprintf("vpcnetd %s, ready=%t", orDash(st.Version), st.Ready)
		if policyErr != nil {
			// Not a failure of the source: an agent older than
			// NetworkPolicy enforcement has no /v1/policy.
			detail += "; NetworkPolicy status unread: " + policyErr.Error()
		}
		note(SourceAgent, err, detail)
	} else {
		skipped(SourceAgent, "no agent address")
	}

	if r.CheckpointPath != "" {
		cp, err := readCheckpoint(r.CheckpointPath)
		if err == nil {
			f.Checkpoint = &cp
		}
		note(SourceCheckpoint, err, checkpointDetail(cp))
	} else {
		skipped(SourceCheckpoint, "no path")
	}

	if r.Host != nil {
		h, err := r.Host.Host(ctx)
		if err == nil {
			f.Host = &h
		}
		note(SourceHost, err, fmt.Sprintf("%d links, %d pod routes, %d nftables chains", len(h.Links), len(h.PodRoutes), len(h.Chains)))
	} else {
		skipped(SourceHost, "disabled")
	}

	if r.CNI != nil {
		c, err := r.CNI.CNI(ctx)
		if err == nil {
			f.CNI = &c
		}
		note(SourceCNI, err, fmt.Sprintf("%s: %s", c.ConfDir, listOrNone(c.Files)))
	} else {
		skipped(SourceCNI, "disabled")
	}

	if r.Metadata != nil {
		m, err := r.Metadata.Metadata(ctx)
		if err == nil {
			f.IMDS = &m
		}
		detail := fmt.Sprintf("%s %s in %s", m.InstanceID, m.InstanceType, m.Zone)
		if len(m.IPv6s) > 0 {
			detail += fmt.Sprintf(", IPv6 %s", addrsOrNone(m.IPv6s))
		}
		if m.IPv6Err != "" {
			detail += "; IPv6 not read: " + m.IPv6Err
		}
		note(SourceIMDS, err, detail)
	} else {
		skipped(SourceIMDS, "disabled")
	}

	q := cloudQuery(f)
	switch {
	case r.Cloud == nil:
		skipped(SourceEC2, "disabled")
	case q.InstanceID == "":
		skipped(SourceEC2, "instance ID unknown: neither IMDS nor the agent answered")
	default:
		e, err := r.Cloud.Cloud(ctx, q)
		if err == nil {
			f.EC2 = &e
		}
		detail := fmt.Sprintf("%s: %d ENIs, %d subnets, %d DryRun probes", e.InstanceID, len(e.ENIs), len(e.Subnets), len(e.DryRun))
		if len(e.Problems) > 0 {
			detail += "; partly: " + fmt.Sprint(e.Problems)
		}
		note(SourceEC2, err, detail)
	}

	if r.Kube != nil {
		k, err := r.Kube.Kube(ctx, kubeQuery(f))
		if err == nil {
			f.Kube = &k
		}
		detail := "no Node for this instance"
		if k.Node != nil {
			detail = "Node " + k.Node.Name + " (by " + k.FoundBy + ")"
		}
		if k.NetworkPolicies != nil {
			detail += fmt.Sprintf(", %d NetworkPolicies", *k.NetworkPolicies)
		}
		if len(k.Problems) > 0 {
			detail += "; partly: " + strings.Join(k.Problems, "; ")
		}
		note(SourceKube, err, detail)
	} else {
		skipped(SourceKube, "no credentials (--kubeconfig, KUBECONFIG or in-cluster)")
	}
	return f
}

func cloudQuery(f Facts) CloudQuery {
	q := CloudQuery{InstanceID: instanceID(f), ClusterName: f.ClusterName}
	if f.IMDS != nil {
		q.Region, q.InstanceType = f.IMDS.Region, f.IMDS.InstanceType
	}
	if q.InstanceType == "" && f.Agent != nil {
		q.InstanceType = f.Agent.Status.InstanceType
	}
	if f.Agent != nil {
		if s := f.Agent.Status.Kubernetes.ENIConfig.Subnet; s != "" {
			q.ExtraSubnets = append(q.ExtraSubnets, s)
		}
	}
	return q
}

func kubeQuery(f Facts) KubeQuery {
	q := KubeQuery{InstanceID: instanceID(f)}
	add := func(s string) {
		if s != "" {
			q.Names = append(q.Names, s)
		}
	}
	add(f.setting("MY_NODE_NAME"))
	if f.Agent != nil {
		add(f.Agent.Status.Kubernetes.Node)
	}
	if f.Host != nil {
		add(f.Host.Hostname)
	}
	add(privateDNS(f))
	return q
}

// readCheckpoint reads the file without disk.Load, which copies a
// corrupt file aside: doctor never writes on the node.
func readCheckpoint(path string) (CheckpointFacts, error) {
	cp := CheckpointFacts{Path: path}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		cp.Missing = true
		return cp, nil
	}
	if err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	cp.ModTime = info.ModTime()
	data, err := os.ReadFile(path)
	if err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	st, err := checkpoint.Decode(data)
	if err != nil {
		cp.Corrupt = err.Error()
		return cp, nil
	}
	cp.Entries = st.Entries
	return cp, nil
}

func checkpointDetail(cp CheckpointFacts) string {
	switch {
	case cp.Missing:
		return cp.Path + ": no file"
	case cp.Corrupt != "":
		return cp.Path + ": does not decode"
	}
	return fmt.Sprintf("%s: %d entries", cp.Path, len(cp.Entries))
}
