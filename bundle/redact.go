package bundle

import (
	"regexp"
)

// Redacted replaces every secret the bundle finds.
const Redacted = "REDACTED"

// secretKey is a field name whose value is a secret, in JSON, YAML, env
// files and key=value logs: tokens, secrets, passwords, private and client
// keys, AWS secret keys and session tokens, authorization headers.
const secretKey = `[A-Za-z0-9_.\-]*(?i:token|secret|password|passwd|client-key|client_key|private[-_]?key|authorization|credentials?)[A-Za-z0-9_.\-]*`

var redactions = []struct {
	re   *regexp.Regexp
	repl string
}{
	// PEM private keys, whole.
	{regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----`), "-----" + Redacted + " PRIVATE KEY-----"},
	// {"name": "AWS_SECRET_ACCESS_KEY", "value": "..."}: the agent's
	// /v1/config and Kubernetes env lists name the secret in one field
	// and hold it in the next.
	{regexp.MustCompile(`("name"\s*:\s*"` + secretKey + `"\s*,\s*"value"\s*:\s*)"(?:[^"\\]|\\.)*"`), `$1"` + Redacted + `"`},
	// "secretKey": "value" in JSON.
	{regexp.MustCompile(`("` + secretKey + `"\s*:\s*)"(?:[^"\\]|\\.)*"`), `$1"` + Redacted + `"`},
	// Authorization: Bearer TOKEN, anywhere.
	{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9\-._~+/]+=*`), "${1}" + Redacted},
	// key: value, key=value (YAML, env, logfmt, INI).
	{regexp.MustCompile(`(?m)(\b` + secretKey + `\s*[:=]\s*)["']?[^\s"',}]+["']?`), "${1}" + Redacted},
	// AWS access key ids (long-lived AKIA, temporary ASIA).
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`), Redacted},
}

// Redact returns data with secrets replaced by REDACTED. It errs towards
// hiding: a support case can ask for a value again, but a leaked token
// cannot be taken back.
func Redact(data []byte) []byte {
	for _, r := range redactions {
		data = r.re.ReplaceAll(data, []byte(r.repl))
	}
	return data
}
