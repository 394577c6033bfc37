package checkpoint

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/vpcnet/vpcnet"

// banned are the packages the codec must not import, directly or through
// another package of this module, each with the reason.
var banned = map[string]string{
	"os":                             "file handling belongs to checkpoint/disk",
	"os/exec":                        "the codec runs nothing",
	"io/ioutil":                      "file handling belongs to checkpoint/disk",
	"path/filepath":                  "file handling belongs to checkpoint/disk",
	"net":                            "addresses are net/netip values; the codec does no networking",
	"net/http":                       "the codec does no networking",
	"syscall":                        "the codec makes no system calls",
	"golang.org/x/sys/unix":          "the codec makes no system calls",
	"github.com/vishvananda/netlink": "kernel work belongs to the agent",
	"github.com/google/nftables":     "kernel work belongs to the agent",
	"github.com/aws/aws-sdk-go-v2/service/ec2": "cloud calls belong to the agent",
}

// TestDeps keeps the codec pure: no I/O, so it can be fuzzed and replayed
// anywhere, and no clock, so time is always the caller's.
func TestDeps(t *testing.T) {
	seen := map[string]bool{}
	var walk func(dir, path string)
	walk = func(dir, path string) {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("read package %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if why, bad := banned[imp]; bad {
				t.Errorf("%s imports %s: %s", path, imp, why)
			}
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok && !seen[imp] {
				seen[imp] = true
				walk(filepath.Join("..", filepath.FromSlash(rel)), imp)
			}
		}
	}
	walk(".", module+"/checkpoint")
}

// TestNoClock checks that the codec never reads the time itself.
func TestNoClock(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && clock[sel.Sel.Name] {
				t.Errorf("%s: time.%s: the codec reads no clock; take the time as a parameter", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
