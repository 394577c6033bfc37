package main

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// reflectMethod is why a package that calls reflect's Method or
// MethodByName with a computed name is banned: once one such call is
// reachable the linker keeps every exported method of every reachable
// type (go build -ldflags=-dumpdep marks it <ReflectMethod>), which put
// all 812 EC2 SDK operations in vpcnetd and doubled its resident memory.
const reflectMethod = "reaches a reflective method call (text/template's evaluator), which makes the linker keep every exported method, all of the EC2 SDK's operations among them"

// allGroups is why the packages that register every Kubernetes API group
// at start-up are banned: kube builds a scheme of core/v1 alone.
const allGroups = "registers every Kubernetes API group at start-up; kube's client uses a scheme of core/v1 alone"

// TestDeps keeps out of vpcnetd what made it 113 MB and 55 MiB resident.
func TestDeps(t *testing.T) {
	depcheck.Check(t, "github.com/vpcnet/vpcnet/cmd/vpcnetd", depcheck.Rules{Deps: map[string]string{
		"text/template":                               reflectMethod,
		"html/template":                               reflectMethod,
		"golang.org/x/net/trace":                      reflectMethod + " (through html/template, from its init)",
		"google.golang.org/grpc":                      "the plugin API is agentapi's; gRPC imports golang.org/x/net/trace",
		"k8s.io/client-go/kubernetes/scheme":          allGroups,
		"k8s.io/client-go/informers":                  allGroups,
		"k8s.io/client-go/discovery":                  "links client-go's OpenAPI packages; nothing in the agent discovers",
		"k8s.io/client-go/gentype":                    "imports client-go's fakes (k8s.io/client-go/testing) and with them managed fields; kube's typed.go makes the same requests",
		"k8s.io/client-go/testing":                    "client-go's fakes, for tests only",
		"k8s.io/client-go/tools/record":               "links strategic merge patch and with it kube-openapi and gnostic; kube's recorder.go writes Events the same way",
		"k8s.io/apimachinery/pkg/util/strategicpatch": "links kube-openapi's OpenAPI models and gnostic, whose init builds OpenAPI and protobuf descriptor tables",
	}, Prefixes: map[string]string{
		"github.com/google/gnostic-models/":          "builds OpenAPI v2 and v3 models and protobuf descriptors at start-up (200 KB); nothing in the agent reads OpenAPI",
		"sigs.k8s.io/structured-merge-diff/v6/typed": "parses a YAML schema at start-up (100 KB, 1,800 allocations, and the pages of the YAML parser); only server-side apply needs it",
	}})
}
