package cloud

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// The aws.Config is built here by hand rather than by the SDK's
// config.LoadDefaultConfig. That function links every credential source
// the SDK knows (SSO and its OIDC client, sign-in sessions, credential
// processes), whatever a program uses: 2.4 MB of vpcnetd's 34.8, about
// 1 MiB of its resident memory, and SSO's schemas built on the heap at
// start (issue 16). A node agent gets its credentials from the sources
// below, in the SDK's order of precedence (config/resolve_credentials.go):
//
//  1. AWS_PROFILE (or AWS_DEFAULT_PROFILE) names a profile of the shared
//     files: that profile, and nothing else;
//  2. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN);
//  3. IRSA: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, through STS
//     AssumeRoleWithWebIdentity;
//  4. the default profile of AWS_SHARED_CREDENTIALS_FILE and
//     AWS_CONFIG_FILE (~/.aws/credentials, ~/.aws/config): static keys,
//     or role_arn with web_identity_token_file;
//  5. EKS Pod Identity and ECS: AWS_CONTAINER_CREDENTIALS_FULL_URI or
//     _RELATIVE_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE);
//  6. the instance role, from IMDS.
//
// A profile that asks for anything else (SSO, credential_process,
// source_profile) stops the agent with an error naming the key, rather
// than falling through to another identity. The environment settings of
// the endpoints the SDK reads through its config sources are honoured by
// envSource: AWS_ENDPOINT_URL(_EC2, _STS), AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT, AWS_EC2_METADATA_SERVICE_ENDPOINT; and
// AWS_CA_BUNDLE by the HTTP client.

// awsConfig builds the SDK configuration: region (empty when neither the
// options, the environment nor the profile name one: IMDS is asked
// later), HTTP client, retryer, config sources and credentials. It also
// says which identity the credentials are (see Client.Identity).
func awsConfig(o Options, hc aws.HTTPClient) (aws.Config, string, error) {
	cfg := aws.Config{
		Region:        o.Region,
		HTTPClient:    hc,
		Retryer:       func() aws.Retryer { return newRetryer(o.MaxAttempts, o.MaxBackoff) },
		ConfigSources: []any{envSource{}},
	}
	if b := os.Getenv("AWS_CA_BUNDLE"); b != "" && o.HTTPClient == nil {
		bc, ok := hc.(*awshttp.BuildableClient)
		if !ok {
			return cfg, "", errors.New("AWS_CA_BUNDLE: the HTTP client cannot take a CA bundle")
		}
		pem, err := os.ReadFile(b)
		if err != nil {
			return cfg, "", fmt.Errorf("AWS_CA_BUNDLE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, "", fmt.Errorf("AWS_CA_BUNDLE=%s: no PEM certificate in it", b)
		}
		cfg.HTTPClient = bc.WithTransportOptions(func(t *http.Transport) {
			if t.TLSClientConfig == nil {
				t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			t.TLSClientConfig.RootCAs = pool
		})
	}
	profName, profSet := lookupAny("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
	if !profSet {
		profName = "default"
	}
	prof, found, err := loadProfile(profName)
	if err != nil {
		return cfg, "", err
	}
	if profSet && !found {
		return cfg, "", fmt.Errorf("AWS_PROFILE=%s: no such profile in %s or %s", profName, credentialsFile(), configFile())
	}
	if cfg.Region == "" {
		cfg.Region, _ = lookupAny("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if cfg.Region == "" {
		cfg.Region = prof.values["region"]
	}
	p, identity, err := credentialChain(&cfg, prof, profSet, o)
	if err != nil {
		return cfg, "", err
	}
	cfg.Credentials = aws.NewCredentialsCache(p)
	return cfg, identity, nil
}

// credentialChain picks the source, in the order the comment above gives,
// and names the identity it gives: the source and what in it says whose
// credentials they are (a role ARN, a profile, a hash of an access key
// id), never a secret.
func credentialChain(cfg *aws.Config, prof profile, profSet bool, o Options) (aws.CredentialsProvider, string, error) {
	if o.Credentials != nil {
		return o.Credentials, "credentials given by the program", nil
	}
	if profSet {
		p, err := fromProfile(cfg, prof)
		return p, "profile " + prof.name + profileIdentity(prof), err
	}
	id, _ := lookupAny("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret, _ := lookupAny("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if id != "" && secret != "" {
		return credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN")), "access key " + keyHash(id), nil
	}
	if tf := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"); tf != "" {
		p, err := webIdentity(cfg, os.Getenv("AWS_ROLE_ARN"), tf, os.Getenv("AWS_ROLE_SESSION_NAME"), "AWS_ROLE_ARN")
		return p, "web identity, role " + os.Getenv("AWS_ROLE_ARN"), err
	}
	if len(prof.values) > 0 {
		if p, err := fromProfile(cfg, prof); p != nil || err != nil {
			return p, "profile " + prof.name + profileIdentity(prof), err
		}
	}
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		return containerCredentials(cfg, "http://169.254.170.2"+rel), "container credentials " + rel, nil
	}
	if full := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"); full != "" {
		if err := checkContainerURI(full); err != nil {
			return nil, "", fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI=%s: %w", full, err)
		}
		return containerCredentials(cfg, full), "container credentials " + full, nil
	}
	return ec2rolecreds.New(func(ro *ec2rolecreds.Options) {
		ro.Client = imds.NewFromConfig(*cfg, func(io *imds.Options) {
			if o.IMDSEndpoint != "" {
				io.Endpoint = o.IMDSEndpoint
			}
		})
	}), "the instance's role (IMDS)", nil
}

// profileIdentity is what in a profile says whose credentials it gives.
func profileIdentity(prof profile) string {
	if id := prof.values["aws_access_key_id"]; id != "" {
		return ", access key " + keyHash(id)
	}
	if r := prof.values["role_arn"]; r != "" {
		return ", role " + r
	}
	return ""
}

// keyHash names an access key id without writing it down.
func keyHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// fromProfile is the profile's static keys or web identity; nil when it
// names no credentials at all (a profile that only sets the region).
func fromProfile(cfg *aws.Config, prof profile) (aws.CredentialsProvider, error) {
	for _, k := range []string{"sso_session", "sso_start_url", "sso_account_id", "credential_process", "source_profile", "credential_source", "login_session"} {
		if _, ok := prof.values[k]; ok {
			return nil, fmt.Errorf("profile %s (%s): %s is not supported by vpcnet's agent; use static keys, role_arn with web_identity_token_file, IRSA, EKS Pod Identity or the instance role", prof.name, prof.file, k)
		}
	}
	v := prof.values
	switch {
	case v["aws_access_key_id"] != "" && v["aws_secret_access_key"] != "":
		return credentials.NewStaticCredentialsProvider(v["aws_access_key_id"], v["aws_secret_access_key"], v["aws_session_token"]), nil
	case v["web_identity_token_file"] != "":
		return webIdentity(cfg, v["role_arn"], v["web_identity_token_file"], v["role_session_name"], "role_arn in profile "+prof.name)
	case v["role_arn"] != "":
		return nil, fmt.Errorf("profile %s (%s): role_arn without web_identity_token_file is not supported by vpcnet's agent", prof.name, prof.file)
	}
	return nil, nil
}

func webIdentity(cfg *aws.Config, roleARN, tokenFile, session, what string) (aws.CredentialsProvider, error) {
	if roleARN == "" {
		return nil, fmt.Errorf("web identity token file %s given without a role: set %s", tokenFile, what)
	}
	return stscreds.NewWebIdentityRoleProvider(sts.NewFromConfig(*cfg), roleARN, stscreds.IdentityTokenFile(tokenFile),
		func(wo *stscreds.WebIdentityRoleOptions) { wo.RoleSessionName = session }), nil
}

func containerCredentials(cfg *aws.Config, endpoint string) aws.CredentialsProvider {
	return endpointcreds.New(endpoint, func(eo *endpointcreds.Options) {
		eo.HTTPClient = cfg.HTTPClient
		eo.AuthorizationToken = os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		if f := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); f != "" {
			// Read at each refresh: EKS rotates the token in the file.
			eo.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(f)
				if err != nil {
					return "", fmt.Errorf("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: %w", err)
				}
				return strings.TrimSpace(string(b)), nil
			})
		}
	})
}

// checkContainerURI allows what the SDK allows: https anywhere, plain
// http only to loopback, ECS's 169.254.170.2 and EKS's 169.254.170.23 or
// fd00:ec2::23.
func checkContainerURI(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme != "http" {
		return errors.New("not an http or https URL")
	}
	addrs := []string{u.Hostname()}
	if net.ParseIP(u.Hostname()) == nil {
		if addrs, err = net.LookupHost(u.Hostname()); err != nil {
			return err
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !(ip.IsLoopback() || ip.Equal(net.IPv4(169, 254, 170, 2)) || ip.Equal(net.IPv4(169, 254, 170, 23)) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return fmt.Errorf("plain http only to loopback or the ECS and EKS credential addresses, not %s", a)
		}
	}
	return nil
}

func lookupAny(names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

func credentialsFile() string {
	if f := os.Getenv("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		return f
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".aws", "credentials")
}

func configFile() string {
	if f := os.Getenv("AWS_CONFIG_FILE"); f != "" {
		return f
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".aws", "config")
}

// envSource answers the SDK clients' questions about endpoints from the
// environment, as config.LoadDefaultConfig's EnvConfig does.
type envSource struct{}

func (envSource) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	v, ok := envBool("AWS_USE_FIPS_ENDPOINT")
	if !ok {
		return aws.FIPSEndpointStateUnset, false, nil
	}
	if v {
		return aws.FIPSEndpointStateEnabled, true, nil
	}
	return aws.FIPSEndpointStateDisabled, true, nil
}

func (envSource) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	v, ok := envBool("AWS_USE_DUALSTACK_ENDPOINT")
	if !ok {
		return aws.DualStackEndpointStateUnset, false, nil
	}
	if v {
		return aws.DualStackEndpointStateEnabled, true, nil
	}
	return aws.DualStackEndpointStateDisabled, true, nil
}

// GetServiceBaseEndpoint reads AWS_ENDPOINT_URL_<SERVICE> (the SDK ID in
// upper case, spaces as underscores), then AWS_ENDPOINT_URL.
func (envSource) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	if v, _ := os.LookupEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"); strings.EqualFold(v, "true") {
		return "", false, nil
	}
	name := "AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(sdkID, " ", "_"))
	v, ok := lookupAny(name, "AWS_ENDPOINT_URL")
	return v, ok, nil
}

func (envSource) GetEC2IMDSEndpoint() (string, bool, error) {
	v, ok := lookupAny("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	return v, ok, nil
}

// GetEC2IMDSEndpointMode reads AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE:
// IPv6 makes IMDS fd00:ec2::254 (an IPv6-only instance).
func (envSource) GetEC2IMDSEndpointMode() (imds.EndpointModeState, bool, error) {
	v, ok := os.LookupEnv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")
	if !ok || v == "" {
		return imds.EndpointModeStateUnset, false, nil
	}
	var m imds.EndpointModeState
	if err := m.SetFromString(v); err != nil {
		return imds.EndpointModeStateUnset, false, fmt.Errorf("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=%s: %w", v, err)
	}
	return m, true, nil
}

// GetEC2IMDSClientEnableState reads AWS_EC2_METADATA_DISABLED.
func (envSource) GetEC2IMDSClientEnableState() (imds.ClientEnableState, bool, error) {
	v, ok := envBool("AWS_EC2_METADATA_DISABLED")
	if !ok {
		return imds.ClientDefaultEnableState, false, nil
	}
	if v {
		return imds.ClientDisabled, true, nil
	}
	return imds.ClientEnabled, true, nil
}

func envBool(name string) (value, ok bool) {
	switch strings.ToLower(os.Getenv(name)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
