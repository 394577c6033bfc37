package cloud

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// The hand-built credential chain (credentials.go) must find each source
// a node uses, in the SDK's order. Each test starts from an environment
// with no AWS settings and shared files that do not exist.
func isolateAWSEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY",
		"AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_STS", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	return dir
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// retrieveKey builds the config as cloud.New does and returns the
// access key its credentials resolve to.
func retrieveKey(t *testing.T, o Options) string {
	t.Helper()
	cfg, _, err := awsConfig(withDefaults(o), awshttp.NewBuildableClient())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.AccessKeyID
}

func TestCredentialsFromTheEnvironment(t *testing.T) {
	dir := isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	writeFile(t, filepath.Join(dir, "credentials"), "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n")
	if got := retrieveKey(t, Options{Region: "us-west-2"}); got != "AKIDENV" {
		t.Fatalf("access key %q; want the environment's over the default profile's", got)
	}
}

// The local cloud's tests and cmd/vpcnet-scale write static keys to the
// shared files and point AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE
// at them.
func TestCredentialsAndRegionFromTheSharedFiles(t *testing.T) {
	dir := isolateAWSEnv(t)
	writeFile(t, filepath.Join(dir, "config"), "# comment\n[default]\nregion = eu-west-1\n\n[profile other]\nregion = ap-south-1\naws_access_key_id = AKIDOTHERCONFIG\naws_secret_access_key = s\n")
	writeFile(t, filepath.Join(dir, "credentials"), "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s\n[other]\naws_access_key_id=AKIDOTHER\naws_secret_access_key=s\n")
	cfg, _, err := awsConfig(withDefaults(Options{}), awshttp.NewBuildableClient())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" {
		t.Fatalf("region %q; want the default profile's eu-west-1", cfg.Region)
	}
	if got := retrieveKey(t, Options{}); got != "AKIDDEFAULT" {
		t.Fatalf("access key %q; want the default profile's", got)
	}
	// AWS_PROFILE wins over keys in the environment; the credentials
	// file's keys over the config file's.
	t.Setenv("AWS_PROFILE", "other")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if got := retrieveKey(t, Options{}); got != "AKIDOTHER" {
		t.Fatalf("access key %q; want profile other's from the credentials file", got)
	}
	t.Setenv("AWS_PROFILE", "missing")
	if _, _, err := awsConfig(withDefaults(Options{}), awshttp.NewBuildableClient()); err == nil || !strings.Contains(err.Error(), "no such profile") {
		t.Fatalf("AWS_PROFILE naming no profile: err %v", err)
	}
}

func TestAProfileOfAnUnsupportedSourceStopsTheAgent(t *testing.T) {
	dir := isolateAWSEnv(t)
	writeFile(t, filepath.Join(dir, "config"), "[default]\nsso_start_url = https://example.awsapps.com/start\n")
	_, _, err := awsConfig(withDefaults(Options{Region: "us-west-2"}), awshttp.NewBuildableClient())
	if err == nil || !strings.Contains(err.Error(), "sso_start_url is not supported") {
		t.Fatalf("err %v; want one naming sso_start_url", err)
	}
}

// IRSA: the pod's service account token in a file, exchanged for the
// role's credentials by STS AssumeRoleWithWebIdentity.
func TestCredentialsFromIRSAWebIdentity(t *testing.T) {
	dir := isolateAWSEnv(t)
	var form string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		form = r.Form.Encode()
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>AKIDIRSA</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>
</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`))
	}))
	defer sts.Close()
	writeFile(t, filepath.Join(dir, "token"), "the-token\n")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(dir, "token"))
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/vpcnet")
	t.Setenv("AWS_ROLE_SESSION_NAME", "node-1")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	if got := retrieveKey(t, Options{Region: "us-west-2"}); got != "AKIDIRSA" {
		t.Fatalf("access key %q; want STS's", got)
	}
	for _, want := range []string{"Action=AssumeRoleWithWebIdentity", "RoleArn=arn%3Aaws%3Aiam%3A%3A111122223333%3Arole%2Fvpcnet", "WebIdentityToken=the-token", "RoleSessionName=node-1"} {
		if !strings.Contains(form, want) {
			t.Fatalf("STS request %s; want %s in it", form, want)
		}
	}
	t.Setenv("AWS_ROLE_ARN", "")
	if _, _, err := awsConfig(withDefaults(Options{Region: "us-west-2"}), awshttp.NewBuildableClient()); err == nil || !strings.Contains(err.Error(), "AWS_ROLE_ARN") {
		t.Fatalf("a token file without a role: err %v", err)
	}
}

// EKS Pod Identity: an agent on the node at FULL_URI, the token in a file
// it rotates.
func TestCredentialsFromPodIdentity(t *testing.T) {
	dir := isolateAWSEnv(t)
	var auth string
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"AccessKeyId":"AKIDPOD","SecretAccessKey":"s","Token":"t","Expiration":"2099-01-01T00:00:00Z"}`))
	}))
	defer agent.Close()
	writeFile(t, filepath.Join(dir, "token"), "pod-token\n")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", filepath.Join(dir, "token"))
	if got := retrieveKey(t, Options{Region: "us-west-2"}); got != "AKIDPOD" {
		t.Fatalf("access key %q; want the pod identity agent's", got)
	}
	if auth != "pod-token" {
		t.Fatalf("Authorization %q; want the token file's", auth)
	}
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds")
	if _, _, err := awsConfig(withDefaults(Options{Region: "us-west-2"}), awshttp.NewBuildableClient()); err == nil {
		t.Fatal("plain http to a host that is neither loopback nor the ECS/EKS address was accepted")
	}
}

func TestCredentialsFromTheInstanceRole(t *testing.T) {
	isolateAWSEnv(t)
	imdsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			_, _ = w.Write([]byte("tok"))
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			_, _ = w.Write([]byte("node-role"))
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/node-role":
			_, _ = w.Write([]byte(`{"Code":"Success","AccessKeyId":"AKIDROLE","SecretAccessKey":"s","Token":"t","Expiration":"2099-01-01T00:00:00Z"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer imdsSrv.Close()
	if got := retrieveKey(t, Options{Region: "us-west-2", IMDSEndpoint: imdsSrv.URL}); got != "AKIDROLE" {
		t.Fatalf("access key %q; want the instance role's", got)
	}
}

func TestEndpointSettingsFromTheEnvironment(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", "https://all.example")
	t.Setenv("AWS_ENDPOINT_URL_EC2", "https://ec2.example")
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
	var e envSource
	if v, ok, _ := e.GetServiceBaseEndpoint(context.Background(), "EC2"); !ok || v != "https://ec2.example" {
		t.Fatalf("EC2 endpoint %q %v", v, ok)
	}
	if v, ok, _ := e.GetServiceBaseEndpoint(context.Background(), "STS"); !ok || v != "https://all.example" {
		t.Fatalf("STS endpoint %q %v; want AWS_ENDPOINT_URL's", v, ok)
	}
	if v, ok, _ := e.GetUseFIPSEndpoint(context.Background()); !ok || v != aws.FIPSEndpointStateEnabled {
		t.Fatalf("FIPS %v %v", v, ok)
	}
}

// TestNoSSOInTheAgent keeps the SDK's config loader out: it links every
// credential source the SDK has (see credentials.go).
func TestNoSSOInTheAgent(t *testing.T) {
	const why = "config.LoadDefaultConfig links SSO, sign-in and credential_process sources no node uses (2.4 MB, ~1 MiB resident); cloud builds its chain by hand"
	depcheck.Check(t, "github.com/vpcnet/vpcnet/cloud", depcheck.Rules{Deps: map[string]string{
		"github.com/aws/aws-sdk-go-v2/config":          why,
		"github.com/aws/aws-sdk-go-v2/service/sso":     why,
		"github.com/aws/aws-sdk-go-v2/service/ssooidc": why,
	}})
}

// The IMDS settings the SDK's own config reads are read here too: an
// IPv6-only instance reaches IMDS at fd00:ec2::254.
func TestTheIMDSEnvironmentSettingsAreHonoured(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if m, ok, err := (envSource{}).GetEC2IMDSEndpointMode(); err != nil || !ok || m != imds.EndpointModeStateIPv6 {
		t.Errorf("endpoint mode %v, %v, %v; want IPv6", m, ok, err)
	}
	if s, ok, err := (envSource{}).GetEC2IMDSClientEnableState(); err != nil || !ok || s != imds.ClientDisabled {
		t.Errorf("enable state %v, %v, %v; want disabled", s, ok, err)
	}
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv7")
	if _, _, err := (envSource{}).GetEC2IMDSEndpointMode(); err == nil || !strings.Contains(err.Error(), "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv7") {
		t.Errorf("a bad mode gave %v; want an error naming the variable", err)
	}
}
