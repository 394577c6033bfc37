// Package deploy holds what installs vpcnet on a cluster: the plain
// manifests (vpcnet.yaml), the least-privilege EC2 policy
// (iam-policy.json) and, in its tests, the proof that both match the code:
// every environment variable is a setting config reads, the probes hit the
// agent's health endpoints, the host paths are the ones the agent uses, the
// policy grants exactly the EC2 actions cloud/ calls, and the Helm chart in
// charts/vpcnet renders these same manifests from its default values.
//
// The chart's settings (its values.yaml env section and the defaults it
// compares values against) are generated from config's table:
// go generate ./deploy.
package deploy

import _ "embed"

//go:generate go test -run ^TestChartSettingsAreUpToDate$ -update

//go:embed vpcnet.yaml
var manifests []byte

//go:embed iam-policy.json
var iamPolicy []byte

// Manifests returns deploy/vpcnet.yaml, the objects `kubectl apply` installs
// (multi-document YAML), for tests that apply them to an API server.
func Manifests() []byte { return append([]byte(nil), manifests...) }

// IAMPolicy returns deploy/iam-policy.json, the EC2 policy the agent needs.
func IAMPolicy() []byte { return append([]byte(nil), iamPolicy...) }
