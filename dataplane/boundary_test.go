package dataplane

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Kernel work goes through nlHandle (netlink.go) and nftConn (nftables.go):
// only there may the package call netlink or nftables functions and
// methods, so retries and namespace binding cannot be bypassed.
func TestOnlyTheWrappersCallTheKernelLibraries(t *testing.T) {
	wrappers := map[string]string{"netlink": "netlink.go", "nftables": "nftables.go"}
	// Constructors of plain values, not kernel calls.
	allowed := map[string]bool{"netlink.NewRule": true, "netlink.NsFd": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			name := pkg.Name + "." + sel.Sel.Name
			if home, isLib := wrappers[pkg.Name]; isLib && file != home && !allowed[name] {
				t.Errorf("%s: %s calls the kernel library directly; go through %s", fset.Position(call.Pos()), name, home)
			}
			return true
		})
	}
}
