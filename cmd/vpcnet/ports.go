package main

import (
	"fmt"
	"log/slog"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/hostport"
)

// portMappings checks the pod's hostPorts the runtime passed
// (runtimeConfig.portMappings) before anything is asked of the agent.
func portMappings(conf *netConf, log *slog.Logger) ([]agentapi.PortMapping, error) {
	if conf.plugin.RuntimeConfig == nil {
		return nil, nil
	}
	var out []agentapi.PortMapping
	for i, p := range conf.plugin.RuntimeConfig.PortMappings {
		m, skip, err := hostport.Parse(p.HostPort, p.ContainerPort, p.Protocol, p.HostIP, conf.plugin.IPv6)
		if err != nil {
			return nil, invalidConf(fmt.Sprintf("field runtimeConfig.portMappings[%d]: %v", i, err))
		}
		if skip {
			log.Info("hostPort skipped: its hostIP is not of the pod's address family", "hostIP", p.HostIP, "hostPort", p.HostPort, "ipv6Pod", conf.plugin.IPv6)
			continue
		}
		host := ""
		if m.HostIP.IsValid() {
			host = m.HostIP.String()
		}
		out = append(out, agentapi.PortMapping{
			HostPort: int32(m.HostPort), ContainerPort: int32(m.ContainerPort), Protocol: string(m.Protocol), HostIp: host,
		})
	}
	return out, nil
}
