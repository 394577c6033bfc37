package bundle

import (
	"strings"
	"testing"
)

func TestRedactHidesSecretsAndKeepsTheRest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		gone []string // must not survive
		kept []string // must survive
	}{
		{"bearer token in a log line", `{"msg":"GET /api","header":"Authorization: Bearer eyJhbGciOi.abc-def_123"}`,
			[]string{"eyJhbGciOi.abc-def_123"}, []string{"Authorization: " + Redacted, `"msg":"GET /api"`}},
		{"bearer token outside a named field", "curl -H \"X: Bearer abc123tok\" https://api", []string{"abc123tok"}, []string{"Bearer " + Redacted}},
		{"AWS access key id and secret in env form", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nREGION=us-east-1",
			[]string{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, []string{"REGION=us-east-1"}},
		{"session token in JSON", `{"AccessKeyId":"ASIAIOSFODNN7EXAMPLE","SessionToken":"IQoJb3JpZ2luX2VjE...","Expiration":"2026-11-25T00:00:00Z"}`,
			[]string{"ASIAIOSFODNN7EXAMPLE", "IQoJb3JpZ2luX2VjE"}, []string{`"Expiration":"2026-11-25T00:00:00Z"`}},
		{"kubeconfig client key and token", "users:\n- name: u\n  user:\n    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZREFUQQ==\n    token: abc.def.ghi\n",
			[]string{"S0VZREFUQQ==", "abc.def.ghi"}, []string{"client-certificate-data: Q0VSVA==", "name: u"}},
		{"password and secret fields", `{"password":"hunter2","db_secret":"s3cr3t","user":"admin"}`,
			[]string{"hunter2", "s3cr3t"}, []string{`"user":"admin"`}},
		{"a setting named like a secret in /v1/config", `[{"name":"AWS_SESSION_TOKEN","value":"FwoGZXIvYXdz","default":""},{"name":"WARM_IP_TARGET","value":"5","default":"0"}]`,
			[]string{"FwoGZXIvYXdz"}, []string{`"name":"WARM_IP_TARGET","value":"5"`}},
		{"PEM private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nafter",
			[]string{"MIIEow", "IBAAK"}, []string{"after"}},
		{"nothing secret: addresses, ENIs and metrics stay", `{"address":"10.0.0.11","id":"eni-0aaa"}` + "\nvpcnet_ec2_calls_total{action=\"AssignPrivateIpAddresses\"} 3\n",
			nil, []string{`"address":"10.0.0.11"`, `"id":"eni-0aaa"`, `vpcnet_ec2_calls_total{action="AssignPrivateIpAddresses"} 3`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Redact([]byte(tt.in)))
			for _, g := range tt.gone {
				if strings.Contains(got, g) {
					t.Errorf("%q survived redaction:\n%s", g, got)
				}
			}
			for _, k := range tt.kept {
				if !strings.Contains(got, k) {
					t.Errorf("%q was lost:\n%s", k, got)
				}
			}
		})
	}
}
